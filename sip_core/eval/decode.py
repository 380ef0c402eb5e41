"""Greedy decoding with a per-example cap of ``2 × input bytes + 16`` new tokens (DESIGN §7).

The cap never looks at the gold output (the original capped at the batch's gold length + 2). We decode
with our own loop over the T5 decoder and its key/value cache: one encoder pass, one decoder step per
token, stopping when every row has produced EOS or reached its cap.
"""
from __future__ import annotations

import contextlib
import inspect

import numpy as np
import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from sip_core.model import tokenizer
from sip_core.train.batching import DeviceSplit, eval_batches

# transformers 5.24 renamed `past_key_values` to `cache` (5.17 knows only the old name).
_CACHE_KW = "cache" if "cache" in inspect.signature(__import__("transformers").T5ForConditionalGeneration.forward).parameters \
    else "past_key_values"


def decode_cap(input_bytes: np.ndarray | int) -> np.ndarray | int:
    """Most new tokens for an input of ``input_bytes`` UTF-8 bytes (EOS not counted in the input)."""
    return 2 * input_bytes + 16


@torch.no_grad()
def greedy_ids(model, batch: dict, caps: torch.Tensor) -> torch.Tensor:
    """Generated ids (B, ≤ max cap + 1) for one batch; rows pad with 0 after their EOS or cap."""
    encoder_outputs, enc_mask = model.encode(batch["input_ids"], batch["attention_mask"],
                                             batch.get("fst"), batch.get("task_ids"), batch.get("encoder_width"))
    bsz = enc_mask.shape[0]
    device = enc_mask.device
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    token = torch.zeros(bsz, 1, dtype=torch.long, device=device)  # decoder start = pad (0)
    done = torch.zeros(bsz, dtype=torch.bool, device=device)
    caps = caps.to(device)
    out = []
    for step in range(int(caps.max())):
        # enc_mask is ready for sdpa: from a (B, K) mask transformers would check `mask.all()` on the host at every
        # step, a GPU synchronisation per token beside the `done` check's
        result = model.t5(encoder_outputs=encoder_outputs, attention_mask=enc_mask, decoder_input_ids=token,
                          use_cache=True, **{_CACHE_KW: cache})  # the cache object is updated in place
        nxt = result.logits[:, -1].argmax(-1)
        nxt = torch.where(done, torch.zeros_like(nxt), nxt)
        out.append(nxt)
        done = done | (nxt == tokenizer.EOS_ID) | (step + 1 >= caps)
        if bool(done.all()):
            break
        token = nxt.unsqueeze(1)
    return torch.stack(out, 1) if out else torch.zeros(bsz, 0, dtype=torch.long, device=device)


def predict_split(model, data: DeviceSplit, batch_size: int = 64, autocast=None, progress: bool = False) -> list[str]:
    """Greedy predictions for every example of ``data``, in the split's order."""
    was_training = model.training
    model.eval()
    caps_all = decode_cap(data.input_lengths - 1)  # input lengths include EOS
    predictions: list[str | None] = [None] * len(data)
    plan = eval_batches(data.encoder_lengths, batch_size)
    if progress:
        from tqdm.auto import tqdm
        plan = tqdm(plan, desc="decode", leave=False)
    ctx = autocast if autocast is not None else contextlib.nullcontext
    for idx in plan:
        batch = data.batch(idx, with_labels=False)
        with ctx():
            ids = greedy_ids(model, batch, torch.from_numpy(caps_all[idx]))
        for i, row in zip(idx, ids.cpu().numpy()):
            predictions[i] = tokenizer.decode(row)
    model.train(was_training)
    return predictions
