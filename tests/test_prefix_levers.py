"""Fine-tuning levers of the from-scratch research (docs/EXPERIMENTS.md): `--prefix-init-fsts K` (how many
pre-training FSTs the prefix init averages; 1 = one real FST's encoding), `--prefix-only-epochs N` (the prefix
trains alone first), `--prefix-dropout/--prefix-noise` (training-time perturbations of the prefix),
`--holdout-longest F` (a length dev set) and `--length-weighting A` (long inputs drawn more often). Checked
against the FST encoder's own output, the checkpoint a killed run leaves, an independent count of lengths and
the empirical frequency of draws."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sip_core import cli
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import save_model, save_prefix_init
from sip_core.train import checkpoint as ckpt
from sip_core.train.finetune import FineTuner
from tests.test_finetune_own_task import EXAMPLE
from tests.test_soft_prefix import SAMPLE

ROOT = Path(__file__).resolve().parents[1]


def _base(tmp_path: Path) -> tuple[SIPForConditionalGeneration, Path]:
    torch.manual_seed(0)
    tiny = t5_kwargs(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, dropout_rate=0.0)
    base = SIPForConditionalGeneration(SIPConfig(t5=tiny, prefix_mode="fst", num_states=4))
    save_model(base, tmp_path / "sip")
    save_prefix_init(tmp_path / "sip", SAMPLE)
    return base, tmp_path / "sip"


def _args(model: Path, out: Path, *extra: str):
    return cli.build_parser().parse_args(
        ["finetune", "--model", str(model), "--train", str(EXAMPLE / "train.tsv"), "--test", str(EXAMPLE / "test.tsv"),
         "--out", str(out), "--epochs", "2", "--batch-size", "8", "--no-progress", "--seed", "3", *extra])


def test_one_init_fst_gives_that_fsts_own_encoding(tmp_path):
    base, model = _base(tmp_path)
    tuner = FineTuner(_args(model, tmp_path / "run", "--prefix", "mean", "--prefix-length", "6", "--prefix-init-fsts", "1"))
    tuner._reset(3)
    prefix = tuner.model.prefix.detach()
    with torch.no_grad():
        encodings, _ = base.fst_encoder(SAMPLE, base.t5.shared)  # each sample FST fills 4 slots
    matches = [i for i in range(len(SAMPLE)) if torch.allclose(prefix[:4], encodings[i], atol=1e-6)]
    assert len(matches) == 1, "the init must be exactly one of the sample FSTs' encodings"
    # slots past the FST's transitions get the mean of its transitions
    assert torch.allclose(prefix[4:], encodings[matches[0]].mean(0).expand(2, -1), atol=1e-6)
    # the paper's 32 (here: all 3 FSTs) average them instead: not any single one
    tuner = FineTuner(_args(model, tmp_path / "run", "--prefix", "mean", "--prefix-length", "6"))
    tuner._reset(3)
    assert torch.allclose(tuner.model.prefix.detach()[:4], encodings.mean(0), atol=1e-6)


def test_the_prefix_init_seed_fixes_the_init_whatever_the_run_seed(tmp_path):
    """--prefix-init-seed S: the init's FST draw follows S alone; the run's --seed still varies the rest."""
    _, model = _base(tmp_path)

    def init(*flags, seed=3):
        tuner = FineTuner(_args(model, tmp_path / "run", "--prefix", "mean", "--prefix-length", "6",
                                "--prefix-init-fsts", "1", *flags))
        tuner._reset(seed)
        return tuner.model.prefix.detach().clone()

    by_seed = {s: init(seed=s) for s in range(6)}
    assert len({tuple(v[0].tolist()) for v in by_seed.values()}) > 1, "one-FST inits must differ between seeds"
    for s in range(6):
        torch.testing.assert_close(init("--prefix-init-seed", "2", seed=s), by_seed[2])


def test_prefix_only_epochs_keep_the_body_still_then_train_it(tmp_path):
    base, model = _base(tmp_path)
    before = base.state_dict()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIP_THREADS": "1", "SIP_TEST_KILL_AFTER_EPOCH": "1"}
    argv = [sys.executable, "-m", "sip_core.cli", "finetune", "--model", str(model), "--prefix", "mean",
            "--prefix-length", "6", "--prefix-only-epochs", "1", "--checkpoint-every", "1", "--prefix-lr", "0.5",
            "--train", str(EXAMPLE / "train.tsv"), "--test", str(EXAMPLE / "test.tsv"), "--out", str(tmp_path / "run"),
            "--epochs", "2", "--batch-size", "8", "--no-progress", "--seed", "3"]
    killed = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT)
    assert killed.returncode == 137, killed.stderr
    # an interrupted run lives in its staging directory until it completes
    payload, _ = ckpt.load_checkpoint(ckpt.latest_checkpoint(tmp_path / ".run.partial"))
    after_one = payload["model"]
    body = [k for k in after_one if k != "prefix" and k in before]
    assert body and all(torch.equal(after_one[k], before[k]) for k in body), "the body must wait one epoch"
    tuner = FineTuner(_args(model, tmp_path / "x", "--prefix", "mean", "--prefix-length", "6"))
    tuner._reset(3)
    assert not torch.allclose(after_one["prefix"], tuner.model.prefix.detach()), "the prefix must have trained"
    # resumed without the kill: epoch 2 trains the body too
    env.pop("SIP_TEST_KILL_AFTER_EPOCH")
    done = subprocess.run(argv + ["--save-model"], env=env, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "resuming from epoch 1" in done.stdout + done.stderr
    from safetensors.torch import load_file
    final = load_file(str(tmp_path / "run" / "model.safetensors"))
    assert any(not torch.equal(final[k], before[k]) for k in body), "after the prefix-only epoch the body trains"


@pytest.mark.parametrize("flags, message", [(["--prefix-init-fsts", "0"], "--prefix-init-fsts must be at least 1"),
                                            (["--prefix-only-epochs", "2"], "--prefix-only-epochs must be between"),
                                            (["--prefix-dropout", "1"], "--prefix-dropout must be in [0, 1)"),
                                            (["--prefix-noise", "-0.1"], "--prefix-noise at least 0"),
                                            (["--length-weighting", "-1"], "--length-weighting must be at least 0"),
                                            (["--holdout-longest", "1"], "--holdout-longest must be in [0, 1)"),
                                            (["--eval-every=-5"], "--eval-last and --eval-every must be at least 0"),
                                            (["--lr=-1e-5"], "--lr must be at least 0"),
                                            (["--prefix-lr", "nan"], "--prefix-lr must be at least 0"),
                                            (["--induced-prefix-lr=-0.01"], "--induced-prefix-lr must be at least 0"),
                                            (["--batch-size", "0"], "--batch-size and --eval-batch-size must be")])
def test_bad_lever_values_are_one_line_errors(tmp_path, capsys, flags, message):
    _, model = _base(tmp_path)
    argv = ["finetune", "--model", str(model), "--train", str(EXAMPLE / "train.tsv"), "--test", str(EXAMPLE / "test.tsv"),
            "--out", str(tmp_path / "run"), "--epochs", "2", "--no-progress", *flags]
    assert cli.main(argv) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
def test_schedule_sets_the_lr_of_prefix_and_body_at_every_step(tmp_path, monkeypatch, schedule):
    from sip_core.train.optim import decay_factor
    _, model = _base(tmp_path)
    seen = []
    step = torch.optim.Adam.step

    def recording_step(self, *a, **k):
        seen.append({g["name"]: g["lr"] for g in self.param_groups})
        return step(self, *a, **k)

    monkeypatch.setattr(torch.optim.Adam, "step", recording_step)
    argv = ["finetune", "--model", str(model), "--train", str(EXAMPLE / "train.tsv"), "--test", str(EXAMPLE / "test.tsv"),
            "--out", str(tmp_path / "run"), "--epochs", "2", "--batch-size", "8", "--no-progress", "--prefix", "mean",
            "--prefix-length", "6", "--lr", "0.01", "--prefix-lr", "0.5", "--schedule", schedule]
    assert cli.main(argv) == 0
    n_train = sum(1 for line in (EXAMPLE / "train.tsv").read_text().splitlines() if line.strip()) - 1  # header
    total = 2 * -(-n_train // 8)
    assert len(seen) == total
    for i, lrs in enumerate(seen):  # by an independent path: the formulas themselves
        progress = i / total
        want = {"constant": 1.0, "linear": 1 - progress, "cosine": 0.5 * (1 + math.cos(math.pi * progress))}[schedule]
        assert lrs["prefix"] == pytest.approx(0.5 * want) and lrs["body"] == pytest.approx(0.01 * want)
        assert decay_factor(schedule, i, total) == pytest.approx(want)
    if schedule != "constant":
        assert seen[-1]["prefix"] < 0.5 * 0.2, "the last steps run at a small fraction of the LR"


def test_prefix_dropout_and_noise_act_in_training_only_and_per_row(tmp_path):
    """Training: each row drops about P of the slots (masked out of attention, positions kept) and reads a
    noisy prefix of the given std; evaluation: the whole, exact prefix. Set by the fine-tuner from its flags."""
    _, model = _base(tmp_path)
    tuner = FineTuner(_args(model, tmp_path / "run", "--prefix", "mean", "--prefix-length", "40",
                            "--prefix-dropout", "0.25", "--prefix-noise", "0.5"))
    m = tuner.model
    assert (m.prefix_dropout, m.prefix_noise) == (0.25, 0.5)
    torch.manual_seed(0)
    m.train()
    vec, keep = m.prefix_vectors(200)
    assert keep.shape == (200, 40) and abs((~keep).float().mean().item() - 0.25) < 0.02
    assert not torch.equal(keep[0], keep[1])  # per row
    noise = vec - m.prefix.unsqueeze(0)
    assert abs(noise.std().item() - 0.5) < 0.01 and not torch.allclose(noise[0], noise[1])
    ids = torch.ones(2, 5, dtype=torch.long)
    embeds, mask = m.encoder_inputs(ids, torch.ones_like(ids))
    assert mask.shape == (2, 45) and embeds.shape[1] == 45  # dropped slots keep their positions
    m.eval()
    vec, keep = m.prefix_vectors(3)
    assert keep.all() and torch.equal(vec, m.prefix.unsqueeze(0).expand(3, -1, -1))


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40), st.floats(0.0, 0.95))
def test_split_longest_holds_out_the_longest_inputs_and_keeps_the_rest_in_order(inputs, fraction):
    from sip_core.train.data import split_longest
    pairs = [(x, str(i)) for i, x in enumerate(inputs)]
    rest, held = split_longest(pairs, fraction)
    assert len(held) == round(len(pairs) * fraction)
    assert sorted(rest + held, key=lambda p: int(p[1])) == pairs  # a partition
    assert rest == [p for p in pairs if p not in held]  # original order
    if rest and held:
        assert min(len(x) for x, _ in held) >= max(len(x) for x, _ in rest)


def test_holdout_longest_trains_on_the_shorter_inputs_and_scores_the_longest(tmp_path):
    import json
    from sip_core.train.data import read_tsv_pairs
    import pandas as pd
    _, model = _base(tmp_path)

    def finetune(out: str, *evaluation: str) -> dict:
        assert cli.main(["finetune", "--model", str(model), "--train", str(EXAMPLE / "train.tsv"), "--test",
                         str(EXAMPLE / "test.tsv"), "--out", str(tmp_path / out), "--epochs", "3", *evaluation,
                         "--no-progress", "--holdout-longest", "0.25"]) == 0
        return json.loads((tmp_path / out / "metrics.json").read_text())

    metrics = finetune("run", "--eval-last", "1", "--eval-every", "2")  # epochs 2 (every 2nd) and 3 (the last)
    train = read_tsv_pairs(EXAMPLE / "train.tsv")
    held = round(len(train) * 0.25)
    assert metrics["n_train"] == len(train) - held and metrics["holdout"]["n"] == held
    assert metrics["holdout"]["min_input_length"] == sorted(len(x) for x, _ in train)[len(train) - held]
    assert 0 <= metrics["holdout"]["acc"] <= 100
    # every evaluation scores the held-out strings too; the last one saw the final weights, as the end-of-run score did
    assert [e["epoch"] for e in metrics["epochs"]] == [2, 3]
    assert all(0 <= e["holdout_acc"] <= 100 for e in metrics["epochs"])
    last = metrics["epochs"][-1]
    assert (last["holdout_acc"], last["holdout_ed"]) == (metrics["holdout"]["acc"], metrics["holdout"]["ed"])
    # ... and scoring them along the way leaves training as it was: one evaluation at the end gives the same run
    once = finetune("run-once", "--eval-last", "1")
    assert once["holdout"] == metrics["holdout"] and once["epochs"] == metrics["epochs"][-1:]
    assert pd.read_parquet(tmp_path / "run-once" / "predictions.parquet").equals(
        pd.read_parquet(tmp_path / "run" / "predictions.parquet"))


def test_length_weighting_draws_examples_in_proportion_to_their_weight():
    """An epoch of n draws with replacement: an example with 100x the weight of each of 9 others is drawn
    about 100/109 of the time; without weights, a permutation (every example once)."""
    import numpy as np
    from sip_core.train.batching import random_batches
    weights = np.array([1.0] * 9 + [100.0])
    drawn = np.concatenate([np.concatenate(random_batches(10, 4, seed=0, epoch=e, weights=weights)) for e in range(2000)])
    assert len(drawn) == 20000 and abs((drawn == 9).mean() - 100 / 109) < 0.01
    assert sorted(np.concatenate(random_batches(10, 4, seed=0, epoch=0)).tolist()) == list(range(10))
