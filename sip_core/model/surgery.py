"""Vocabulary surgery: a sentencepiece T5 (e.g. T5-Base, 32,128 pieces) onto our byte vocabulary
(paper Appendix B.3, "Additional results with T5-Base"; REFERENCE §7.1 "T5-SIP").

The paper re-purposes the first n rows of the T5 input-embedding matrix for the n ByT5 token ids and
replaces the output layer by a freshly initialised one of the byte vocabulary's size. Ids 0, 1, 2 are
pad, EOS and unk in both vocabularies, so those rows keep their meaning; byte rows inherit arbitrary
pieces' embeddings (a starting point for further pre-training, not a mapping of meaning).

The original's new head is a Linear with a bias and T5 v1.0 keeps rescaling decoder outputs by
d_model^-0.5 while tied; ours is the ByT5 layout: a bias-free untied head, no rescaling (docs/DEVIATIONS.md).
"""
from __future__ import annotations

import torch
from torch import nn

from sip_core.model import tokenizer


def byte_vocab_surgery(t5, n: int = tokenizer.VOCAB_SIZE, seed: int = 0):
    """In place: keep the first ``n`` input-embedding rows, a new N(0, d_model^-1/2) LM head of ``n`` rows."""
    old = t5.get_input_embeddings().weight
    if old.shape[0] < n:
        raise ValueError(f"the T5 vocabulary has {old.shape[0]} rows, fewer than the {n} byte ids")
    d_model = t5.config.d_model
    shared = nn.Embedding(n, d_model, padding_idx=None)
    with torch.no_grad():
        shared.weight.copy_(old[:n])
    t5.set_input_embeddings(shared)  # encoder and decoder embed_tokens follow `shared`
    head = nn.Linear(d_model, n, bias=False)
    with torch.no_grad():
        head.weight.normal_(0.0, d_model ** -0.5, generator=torch.Generator().manual_seed(seed))
    t5.lm_head = head
    t5.config.vocab_size = n
    t5.config.pad_token_id = tokenizer.PAD_ID
    t5.config.eos_token_id = tokenizer.EOS_ID
    t5.config.decoder_start_token_id = tokenizer.PAD_ID
    t5.config.scale_decoder_outputs = False
    t5.config.vocab_surgery = f"first-{n}-rows"
    return t5
