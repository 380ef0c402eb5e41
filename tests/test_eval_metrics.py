"""Metrics on hand-made examples, the pure-Python fallback, and the decoding cap."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sip_core.eval import metrics
from sip_core.eval.decode import decode_cap, greedy_ids
from sip_core.model import SIPConfig, SIPForConditionalGeneration, tokenizer
from sip_core.model.config import t5_kwargs


def test_scores_on_hand_examples():
    got = metrics.score(["abc", "abd", "", "xyz"], ["abc", "abc", "ab", "x"])
    assert got["acc"] == pytest.approx(25.0)
    assert got["ed"] == pytest.approx((0 + 1 + 2 + 2) / 4)
    assert got["per"] == pytest.approx((0 + 1 / 3 + 2 / 2 + 2 / 1) / 4)
    empty_gold = metrics.score(["ab"], [""])
    assert empty_gold["per"] == pytest.approx(2.0)  # ed / max(1, len(gold))


def test_python_levenshtein_matches_rapidfuzz():
    pairs = [("kitten", "sitting"), ("", "abc"), ("ɐʂ", "ʂɐ"), ("flaw", "lawn"), ("same", "same")]
    want = [3, 3, 2, 2, 0]
    assert [metrics._python_levenshtein(a, b) for a, b in pairs] == want
    assert [metrics.edit_distance(a, b) for a, b in pairs] == want


def test_decoding_cap_is_two_input_bytes_plus_16():
    assert decode_cap(0) == 16 and decode_cap(5) == 26
    torch.manual_seed(0)
    model = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8),
                                                  prefix_mode="none")).eval()
    head = torch.nn.Linear(16, tokenizer.VOCAB_SIZE, bias=True)
    with torch.no_grad():  # make EOS and pad impossible so that every row runs to its cap
        head.weight.copy_(model.t5.lm_head.weight)
        head.bias.zero_()
        head.bias[[tokenizer.EOS_ID, tokenizer.PAD_ID]] = -1e9
    model.t5.lm_head = head
    texts = ["a", "abcd"]
    ids = [tokenizer.encode(t) for t in texts]
    width = max(map(len, ids))
    batch = {"input_ids": torch.tensor([r + [0] * (width - len(r)) for r in ids]),
             "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in ids])}
    caps = torch.tensor([decode_cap(1), decode_cap(4)])
    out = greedy_ids(model, batch, caps)
    assert out.shape[1] == 24
    assert [(row != 0).sum().item() for row in out] == [18, 24]


@pytest.mark.parametrize("prefix_mode", ["none", "tuned"])
def test_greedy_predictions_do_not_depend_on_the_eval_batch_size(prefix_mode):
    """The eval batch is a speed setting (the gpu scale decodes g2p test sets 256 at a time, the paper 16):
    padding a word into a batch of longer ones must not change its prediction, with a tuned prefix in front
    of it or without. Batch size 1 has no padding."""
    from sip_core.eval.decode import predict_split
    from sip_core.train.batching import DeviceSplit
    from sip_core.train.data import make_split
    torch.manual_seed(1)
    model = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16),
                                                  prefix_mode=prefix_mode, prefix_length=6))
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdéfg"), size=rng.integers(1, 15))) for _ in range(23)]
    data = DeviceSplit(make_split(words, words), "cpu")
    alone = predict_split(model, data, batch_size=1)
    assert len(set(alone)) > 5  # varied outputs, so agreement is not trivial
    for size in (5, 64):
        assert predict_split(model, data, batch_size=size) == alone


def test_decoding_with_the_masks_built_here_matches_transformers_own_and_never_waits_on_them(monkeypatch):
    """Greedy decoding hands T5's sdpa attention ready (B, 1, 1, K) masks, for the encoder and for every step's
    cross-attention: the encoder states and the generated ids are exactly those of the (B, K) masks transformers
    expands itself, and no step runs transformers' `mask.all()` host check (a GPU synchronisation per token)."""
    import traceback

    from sip_core.model import sip_model
    torch.manual_seed(3)
    model = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16),
                                                  prefix_mode="tuned", prefix_length=4)).eval()
    assert model.t5.config._attn_implementation == "sdpa"
    ids = [tokenizer.encode(t) for t in ("a", "abcdefg", "cab")]
    width = max(map(len, ids))  # padded rows: a mask with zeros, so the two paths could differ
    batch = {"input_ids": torch.tensor([r + [0] * (width - len(r)) for r in ids]),
             "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in ids])}
    caps = torch.tensor([decode_cap(len(r) - 1) for r in ids])
    checks, real_bool = [], torch.Tensor.__bool__

    def counting_bool(self):
        checks.extend(f.filename for f in traceback.extract_stack()[:-1] if f.filename.endswith("masking_utils.py"))
        return real_bool(self)

    with monkeypatch.context() as m:
        m.setattr(torch.Tensor, "__bool__", counting_bool)
        here = greedy_ids(model, batch, caps)
        states_here = model.encode(batch["input_ids"], batch["attention_mask"])[0].last_hidden_state
    assert checks == [] and len(set(map(tuple, here.tolist()))) == 3
    monkeypatch.setattr(sip_model, "ready_mask", lambda mask, implementation: mask)
    assert torch.equal(greedy_ids(model, batch, caps), here)
    states_hf = model.encode(batch["input_ids"], batch["attention_mask"])[0].last_hidden_state
    torch.testing.assert_close(states_here, states_hf, rtol=0, atol=0)
