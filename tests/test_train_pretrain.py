"""Pre-training: resume after a kill gives the same weights; a kill mid-checkpoint keeps the old one."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sip_core.train import checkpoint as ckpt
from tests.fixtures.tiny_fsts import write_pool

ROOT = Path(__file__).resolve().parents[1]
SHAPE = ["--d-model", "32", "--d-ff", "64", "--layers", "1", "--heads", "2", "--d-kv", "16"]


def _pretrain(pool, out, *extra, env_extra=None, variant="sip"):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIP_THREADS": "1", **(env_extra or {})}
    cmd = [sys.executable, "-m", "sip_core.cli", "pretrain", "--variant", variant, "--data", str(pool),
           "--out", str(out), *SHAPE, "--batch-size", "16", "--epochs", "2", "--checkpoint-every", "3",
           "--log-every", "2", "--eval-max", "20", "--no-progress", "--seed", "5", *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    return write_pool(tmp_path_factory.mktemp("pool"), n_train_fsts=10, n_dev_fsts=2, n_test_fsts=2, per_fst=8)


# te: the task table's SparseAdam state is checkpointed beside the body's AdamW (and clipping sees both)
@pytest.mark.parametrize("variant, extra", [("sip", []), ("te", ["--clip", "0.5"])])
def test_killed_run_resumes_to_identical_weights(pool, tmp_path, variant, extra):
    full = _pretrain(pool, tmp_path / "full", *extra, variant=variant)
    assert full.returncode == 0, full.stderr
    killed = _pretrain(pool, tmp_path / "resumed", *extra, variant=variant, env_extra={"SIP_TEST_KILL_AFTER_STEP": "4"})
    assert killed.returncode == 137
    assert ckpt.latest_checkpoint(tmp_path / "resumed").name == "step-000000006"
    assert not (tmp_path / "resumed" / "model.safetensors").exists()
    resumed = _pretrain(pool, tmp_path / "resumed", *extra, variant=variant)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from step 6" in resumed.stdout  # resumed, not restarted
    a = load_file(tmp_path / "full" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    outputs = ["config.json", "pretrain_metrics.json", "pretrain_log.csv"]
    for name in outputs + (["prefix_init.safetensors"] if variant == "sip" else []):
        assert (tmp_path / "resumed" / name).exists()


def test_kill_during_checkpoint_write_keeps_previous(tmp_path, monkeypatch):
    ckpt.save_checkpoint(tmp_path, 3, {"x": torch.tensor([3])}, "{}")
    real_save = torch.save

    def dying_save(obj, fh, *a, **k):
        fh.write(b"partial")  # half a file, then the process 'dies'
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(tmp_path, 6, {"x": torch.tensor([6])}, "{}")
    monkeypatch.setattr(ckpt.torch, "save", real_save)
    latest = ckpt.latest_checkpoint(tmp_path)
    assert latest.name == "step-000000003"
    payload, _ = ckpt.load_checkpoint(latest)
    assert payload["x"].item() == 3
    # the next successful save replaces it and cleans the debris
    ckpt.save_checkpoint(tmp_path, 9, {"x": torch.tensor([9])}, "{}")
    assert ckpt.latest_checkpoint(tmp_path).name == "step-000000009"
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


def test_profile_steps_writes_a_summary_of_the_window_and_rejects_a_bad_one(pool, tmp_path):
    run = _pretrain(pool, tmp_path / "run", "--profile-steps", "2:4")
    assert run.returncode == 0, run.stderr
    summary = (tmp_path / "run" / "profile-rank0.txt").read_text()
    first = summary.splitlines()[0]
    assert first.startswith("steps 2, wall ") and float(first.split()[3]) > 0  # ms per step of the window
    assert "aten::" in summary  # the operator table
    bad = _pretrain(pool, tmp_path / "bad", "--profile-steps", "4:2")
    assert bad.returncode != 0 and bad.stderr.strip().splitlines() == ["sip: error: --profile-steps 4:2: needs 0 <= A < B"]
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("flag, value, message", [
    ("--ddp-bucket-mb", "0", "sip: error: --batch-size, --grad-accum, --clock-sync-every and --ddp-bucket-mb must be positive"),
    ("--nccl-channels", "-1", "sip: error: --nccl-channels must be 0 (NCCL's choice) or positive, not -1"),
    ("--ddp-grads", "fp16", None)])  # argparse's choices: its usage line, then the error
def test_bad_data_parallel_options_end_in_one_error_and_no_output(pool, tmp_path, flag, value, message):
    bad = _pretrain(pool, tmp_path / "bad", flag, value)
    assert bad.returncode == 2, bad.stderr
    last = bad.stderr.strip().splitlines()[-1]
    assert last == message if message else ("--ddp-grads: invalid choice: 'fp16'" in last)
    assert not (tmp_path / "bad").exists()


def _weights_equal(a: Path, b: Path) -> bool:
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_more_epochs_under_a_decay_start_over_not_resume(pool, tmp_path):
    """A finished cosine run rerun with more epochs (Snakemake after a params change) must not continue it: its
    steps were taken at another LR. Session 21 found the ci TE resumed from its 3-epoch run this way."""
    cosine = ["--schedule", "cosine", "--warmup", "2"]
    assert _pretrain(pool, tmp_path / "run", *cosine).returncode == 0
    rerun = _pretrain(pool, tmp_path / "run", *cosine, "--epochs", "3")
    assert rerun.returncode == 0, rerun.stderr
    assert "starting over" in rerun.stdout and "epochs: 2.0 -> 3.0" in rerun.stdout, rerun.stdout
    assert "resuming" not in rerun.stdout
    fresh = _pretrain(pool, tmp_path / "fresh", *cosine, "--epochs", "3")
    assert fresh.returncode == 0, fresh.stderr
    assert _weights_equal(tmp_path / "run", tmp_path / "fresh")


def test_a_constant_lr_run_continued_for_more_epochs_resumes(pool, tmp_path):
    """Under a constant LR the steps already taken are the same in the longer run: it continues them."""
    assert _pretrain(pool, tmp_path / "run").returncode == 0
    rerun = _pretrain(pool, tmp_path / "run", "--epochs", "3")
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming from step" in rerun.stdout and "starting over" not in rerun.stdout, rerun.stdout
    fresh = _pretrain(pool, tmp_path / "fresh", "--epochs", "3")
    assert _weights_equal(tmp_path / "run", tmp_path / "fresh")


def test_exact_match_by_length_covers_the_long_pool_band_by_band(monkeypatch):
    """Per-length exact match (what showed SIP-d4-long's simulation at 91-110 characters): every input length of
    the d4-long pool falls in exactly one band, each band scores only its own examples, empty bands are left out."""
    import numpy as np
    from types import SimpleNamespace

    from sip_core.data.pools import LONG_LENGTHS
    from sip_core.eval import decode
    from sip_core.train.data import make_split
    from sip_core.train.pretrain import LENGTH_BANDS, exact_match

    lengths = np.arange(LONG_LENGTHS[0], LONG_LENGTHS[1] + 1)
    in_bands = sum(((lengths >= lo) & (lengths <= hi)).astype(int) for lo, hi in LENGTH_BANDS)
    assert (in_bands == 1).all()

    inputs = ["a" * 5, "b" * 40, "c" * 45, "d" * 100]
    split = make_split(inputs, ["x", "y", "z", "w"])
    monkeypatch.setattr(decode, "predict_split", lambda *a, **k: ["x", "y", "wrong", "w"])
    scores = exact_match(None, SimpleNamespace(split=split), 8, None, by_length=True)
    assert scores["acc"] == 75.0
    assert (scores["acc_len1-10"], scores["acc_len36-50"], scores["acc_len91-110"]) == (100.0, 50.0, 100.0)
    assert "acc_len11-20" not in scores and "acc_len51-70" not in scores
