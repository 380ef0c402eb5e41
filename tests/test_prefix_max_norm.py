"""`sip finetune --prefix-max-norm R|fst`: tuned prefix slots capped at an L2 radius after every step (sweep 30)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sip_core import cli, pipeline
from sip_core.model.loading import load_prefix_init, load_sip, load_tuned_prefix
from sip_core.errors import SipError
from sip_core.train.prefix_norm import cap_slot_norms, encoding_slot_norm, parse_max_norm

SMALL = Path(__file__).resolve().parents[1] / "models" / "sip-d4-small"
EXAMPLE = Path(__file__).parent / "data" / "example_task"


@pytest.mark.parametrize("text, value", [(None, None), ("fst", "fst"), ("57", 57.0), ("0.5", 0.5)])
def test_the_flag_reads_a_positive_radius_or_fst(text, value):
    assert parse_max_norm(text) == value


@pytest.mark.parametrize("text", ["0", "-3", "inf", "nan", "abc", ""])
def test_the_flag_refuses_what_is_no_radius(text):
    with pytest.raises(SipError, match="positive number or 'fst'"):
        parse_max_norm(text)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.floats(-50, 50, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=8),
       radius=st.floats(0.1, 40))
@example(rows=[[0.0, 0.0, 9.486328125]], radius=9.486328125)  # CI, session 55: the two norms differ in the last bit
def test_capping_leaves_short_rows_alone_and_puts_long_ones_on_the_sphere_in_their_direction(rows, radius):
    before = torch.tensor(rows, dtype=torch.float64)
    after = before.clone()
    cap_slot_norms(after, radius)
    for old, new in zip(before, after):
        norm = old.norm().item()
        if norm < radius * (1 - 1e-12):
            assert torch.equal(old, new)
        elif norm <= radius * (1 + 1e-12):  # on the sphere: the row-wise and the batched norm may differ by an ulp
            assert torch.allclose(new, old, rtol=1e-12, atol=0)
        else:  # checked row by row against the plain formula, not the vectorised one
            assert new.norm().item() == pytest.approx(radius, rel=1e-9)
            assert torch.allclose(new, old * (radius / norm), rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(not (SMALL / "model.safetensors").exists(), reason="models/sip-d4-small is not checked out")
def test_the_fst_radius_is_the_mean_norm_of_the_checkpoints_encodings_however_batched():
    model, sample = load_sip(SMALL).eval(), load_prefix_init(SMALL)[:40]
    one_by_one = []
    with torch.no_grad():
        for fst in sample:
            vectors, mask = model.fst_encoder(fst[None], model.t5.shared)
            one_by_one += [v.float().norm().item() for v, real in zip(vectors[0], mask[0]) if real]
    expected = sum(one_by_one) / len(one_by_one)
    for batch in (1, 7, 40):
        assert encoding_slot_norm(model.fst_encoder, sample, model.t5.shared, batch) == pytest.approx(expected, rel=1e-5)


def _finetune(tmp_path, name, *flags):
    out = tmp_path / name
    code = cli.main(["finetune", "--model", str(SMALL), "--train", str(EXAMPLE / "train.tsv"), "--test",
                     str(EXAMPLE / "test.tsv"), "--out", str(out), "--prefix", "mean", "--prefix-length", "16",
                     "--epochs", "1", "--no-progress", "--save-prefix", *flags])
    assert code == 0
    return json.loads((out / "metrics.json").read_text())["hyperparameters"]["prefix_max_norm"], load_tuned_prefix(out)


@pytest.mark.skipif(not (SMALL / "model.safetensors").exists(), reason="models/sip-d4-small is not checked out")
def test_a_capped_run_keeps_every_tuned_slot_inside_the_radius_it_records(tmp_path):
    cap, uncapped = _finetune(tmp_path, "plain")
    assert cap is None
    radius = 0.5 * uncapped.norm(dim=-1).min().item()  # below every slot of the uncapped run: the cap must bind
    cap, capped = _finetune(tmp_path, "capped", "--prefix-max-norm", f"{radius}")
    assert cap == pytest.approx(radius)
    assert capped.norm(dim=-1).max().item() <= radius * (1 + 1e-5)
    cap, from_fsts = _finetune(tmp_path, "fst", "--prefix-max-norm", "fst")
    model = load_sip(SMALL)
    assert cap == pytest.approx(encoding_slot_norm(model.fst_encoder, load_prefix_init(SMALL), model.t5.shared), rel=1e-3)
    assert from_fsts.norm(dim=-1).max().item() <= cap * (1 + 1e-5)


def test_the_capped_pipeline_model_passes_the_flag_and_no_other_model_does():
    assert pipeline.max_norm_flag("sip-d4-capped") == " --prefix-max-norm fst"
    assert all(pipeline.max_norm_flag(m) == "" for m in pipeline.MODELS if m not in ("sip-d4-capped", "sip-d4-readout"))
    assert pipeline.MODELS["sip-d4-capped"].extension
