"""SIP model: ByT5 layout (untied head), Auto registration, padding invariance, prefix init, tokenizer."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sip_core.fst import vocab
from sip_core.model import SIPConfig, SIPForConditionalGeneration, tokenizer
from sip_core.model.config import t5_kwargs
from sip_core.model.encoder import TransitionEncoder
from sip_core.model.loading import mean_prefix

TINY = t5_kwargs(d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16, dropout_rate=0.0)


def tiny_model(mode="fst", **kw):
    torch.manual_seed(0)
    return SIPForConditionalGeneration(SIPConfig(t5=TINY, prefix_mode=mode, **kw)).eval()


def test_lm_head_untied_and_survives_save_load(tmp_path):
    from transformers import AutoModelForSeq2SeqLM
    model = tiny_model()
    t5 = model.t5
    assert t5.lm_head.weight.data_ptr() != t5.shared.weight.data_ptr()
    assert t5.encoder.embed_tokens.weight is t5.shared.weight and t5.decoder.embed_tokens.weight is t5.shared.weight
    assert model.config.tie_word_embeddings is False and t5.config.scale_decoder_outputs is False
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    assert isinstance(loaded, SIPForConditionalGeneration)
    lt5 = loaded.t5
    assert lt5.lm_head.weight.data_ptr() != lt5.shared.weight.data_ptr()
    assert lt5.decoder.embed_tokens.weight is lt5.shared.weight
    assert torch.equal(lt5.lm_head.weight, t5.lm_head.weight)
    assert not torch.equal(lt5.lm_head.weight, lt5.shared.weight)
    for (n, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), n


def _example(model):
    fst = torch.tensor([[[0, 10, 11, 1, 1], [1, 11, 12, 0, 2], [0, 12, 1, 0, 1]]])
    ids = torch.tensor([tokenizer.encode("abca")])
    labels = torch.tensor([tokenizer.encode("bcc")])
    return fst, ids, labels


def test_padding_transitions_and_batch_mates_do_not_change_logits():
    model = tiny_model()
    fst, ids, labels = _example(model)
    mask = torch.ones_like(ids)
    ref = model(input_ids=ids, attention_mask=mask, labels=labels, fst=fst).logits
    padded_fst = torch.cat([fst, torch.zeros(1, 7, 5, dtype=torch.long)], 1)
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fst=padded_fst).logits
    assert (out - ref).abs().max().item() < 1e-5
    # the same example next to a longer one (more transitions, longer input): identical logits
    other_fst = torch.tensor([[[0, 13, 14, 1, 1]] * 10])
    fst2 = torch.cat([padded_fst, other_fst], 0)
    ids2 = torch.cat([torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], 1),
                      torch.tensor([tokenizer.encode("xyzwvuut")])], 0)
    mask2 = (ids2 != 0).long()
    labels2 = torch.cat([labels, torch.tensor([tokenizer.encode("abc")])], 0)
    out2 = model(input_ids=ids2, attention_mask=mask2, labels=labels2, fst=fst2).logits[:1]
    assert (out2 - ref).abs().max().item() < 1e-5


def test_prefix_init_is_hand_computed_mean():
    torch.manual_seed(1)
    enc = TransitionEncoder(num_states=4, n_symbols=vocab.N_SYMBOLS, d_model=8)
    sample = torch.zeros(3, 4, 5, dtype=torch.long)
    sample[0, :3] = torch.tensor([[0, 5, 6, 1, 1], [1, 6, 7, 2, 2], [2, 7, 5, 0, 1]])
    sample[1, :1] = torch.tensor([[0, 8, 9, 1, 2]])
    sample[2, :2] = torch.tensor([[0, 9, 5, 3, 1], [3, 5, 5, 0, 2]])
    got = mean_prefix(enc, sample, n_examples=3, prefix_length=5, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        vec, _ = enc(sample)
    real = {(i, p) for i, n in enumerate([3, 1, 2]) for p in range(n)}
    overall = torch.stack([vec[i, p] for i, p in sorted(real)]).mean(0)
    for pos in range(5):
        rows = [vec[i, pos] for i in range(3) if (i, pos) in real]
        want = torch.stack(rows).mean(0) if rows else overall
        assert torch.allclose(got[pos], want, atol=1e-6), pos
    assert got.shape == (5, 8)


def test_tuned_and_te_and_none_modes_run_and_generate():
    ids = torch.tensor([tokenizer.encode("abc"), tokenizer.encode("cba")])
    mask = torch.ones_like(ids)
    for mode, extra in (("tuned", {}), ("te", {"task_ids": torch.tensor([1, 0])}), ("none", {})):
        model = tiny_model(mode, te_num_tasks=3, prefix_length=5)
        out = model(input_ids=ids, attention_mask=mask, labels=ids, **extra)
        assert torch.isfinite(out.loss)
        gen = model.generate(ids, mask, max_new_tokens=4, **extra)
        assert gen.shape[0] == 2


def test_vectorised_tokenizer_matches_per_string_encoding():
    texts = ["", "abc", "ɐʂ x", "tab\tend", "ü"]
    flat, offsets = tokenizer.encode_many(texts)
    for i, t in enumerate(texts):
        assert flat[offsets[i]:offsets[i + 1]].tolist() == tokenizer.encode(t)
        assert tokenizer.decode(flat[offsets[i]:offsets[i + 1]]) == t
    assert tokenizer.decode([tokenizer.PAD_ID, 100, tokenizer.EOS_ID, 101]) == "a"


def test_fused_gelu_and_rms_norm_compute_what_transformers_t5_computes(tmp_path):
    """The fused drop-ins (sip_core.model.fused) against transformers' own modules on the same weights:
    same logits and gradients in fp32, nothing added to the saved weights, fused again after loading."""
    import copy

    from transformers.activations import NewGELUActivation
    from transformers.models.t5.modeling_t5 import T5LayerNorm

    from sip_core.model.fused import FusedT5LayerNorm, fuse_elementwise

    model = tiny_model().train()
    norms = [m for m in model.modules() if isinstance(m, T5LayerNorm)]
    assert norms and all(type(m) is FusedT5LayerNorm for m in norms)
    assert not any(isinstance(m, NewGELUActivation) for m in model.modules())
    reference = fuse_elementwise(copy.deepcopy(model), fused=False)
    assert not any(type(m) is FusedT5LayerNorm for m in reference.modules())
    assert sum(isinstance(m, NewGELUActivation) for m in reference.modules()) == 2 * TINY["num_layers"]
    fst, ids, labels = _example(model)
    outs = [m(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels, fst=fst) for m in (model, reference)]
    for out in outs:
        out.loss.backward()
    torch.testing.assert_close(outs[0].logits, outs[1].logits, rtol=1e-5, atol=1e-5)
    for (name, a), b in zip(model.named_parameters(), reference.parameters()):
        if a.grad is not None:
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name)
    assert set(model.state_dict()) == set(reference.state_dict())
    model.save_pretrained(tmp_path)
    loaded = SIPForConditionalGeneration.from_pretrained(tmp_path)
    assert all(type(m) is FusedT5LayerNorm for m in loaded.modules() if isinstance(m, T5LayerNorm))


def test_the_mask_built_here_trains_exactly_as_transformers_own(monkeypatch):
    """forward hands T5's sdpa attention a ready (B, 1, 1, K) mask, which spares transformers' `mask.all()` check
    (a GPU synchronisation per call); the loss and every gradient are those of the (B, K) mask transformers expands."""
    from sip_core.model import sip_model
    fst = torch.tensor([[[0, 10, 11, 1, 1], [1, 11, 12, 0, 2]], [[0, 12, 1, 0, 1], [0, 0, 0, 0, 0]]])
    ids = torch.tensor([tokenizer.encode("abca"), tokenizer.encode("ab") + [0, 0]])
    mask = (ids != 0).long()
    labels = torch.tensor([tokenizer.encode("bcc"), tokenizer.encode("b") + [-100, -100]])
    results = []
    for build_here in (True, False):
        if not build_here:  # transformers' own path: the (B, K) mask goes through unchanged
            monkeypatch.setattr(sip_model, "ready_mask", lambda m, implementation: m)
        model = tiny_model()
        assert model.t5.config._attn_implementation == "sdpa"  # transformers' default, the one we train with
        loss = model(input_ids=ids, attention_mask=mask, labels=labels, fst=fst).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (loss_here, grads_here), (loss_hf, grads_hf) = results
    assert loss_here.item() == loss_hf.item() and grads_here.keys() == grads_hf.keys()
    for name, grad in grads_here.items():
        torch.testing.assert_close(grad, grads_hf[name], rtol=0, atol=0, msg=name)
    assert sip_model.ready_mask(mask, "eager") is mask  # another format: left to transformers


def test_no_host_check_of_the_masks_in_a_training_forward(monkeypatch):
    """transformers' masking_utils tests `mask.all()` as a Python bool (a device-to-host wait on a GPU); with the
    mask built here a training forward never does (session 25's probe found two per step before)."""
    import traceback
    calls = []
    real_bool = torch.Tensor.__bool__

    def counting_bool(self):
        calls.extend(f.filename for f in traceback.extract_stack()[:-1] if f.filename.endswith("masking_utils.py"))
        return real_bool(self)

    model = tiny_model()
    fst, ids, labels = _example(model)
    monkeypatch.setattr(torch.Tensor, "__bool__", counting_bool)
    model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels, fst=fst).loss.backward()
    assert calls == []
