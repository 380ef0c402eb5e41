"""`sip finetune --restarts K`: K short runs, the one best on the held-out longest training inputs is where the
real run starts. Checked with a stand-in tuner whose runs have known held-out accuracies (the choice and the
weights loaded), with a real tiny model whose real run cannot move (LR scale 0: its predictions must be the
chosen restart's), and by killing a selection half-way (the resumed run must match an uninterrupted one)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from sip_core import cli
from sip_core.errors import SipError
from sip_core.train import restarts
from tests.test_finetune_own_task import EXAMPLE, _same_outputs, _sip
from tests.test_prefix_levers import _base

RESTARTS = ["--restarts", "2", "--restart-epochs", "2", "--restart-holdout", "0.1"]


class _StandInTuner:
    """Runs that only set the model's one weight to the restart's number and report a chosen holdout accuracy."""

    def __init__(self, args, holdout_by_seed: dict[int, float]):
        self.args, self.holdout_by_seed, self.calls = args, holdout_by_seed, []
        self.model = torch.nn.Linear(1, 1, bias=False)

    def run(self, task_id, train_pairs, test_pairs, out_dir: Path, save=False):
        seed = self.args.seed
        self.calls.append((task_id, seed, self.args.epochs, self.args.holdout_longest))
        with torch.no_grad():
            self.model.weight.fill_(float(seed))
        metrics = {"seed": seed, "holdout": {"acc": self.holdout_by_seed[seed], "n": 2, "min_input_length": 9},
                   "reported": {"acc": 50.0}, "steps": 7, "wall_seconds": 1.0}
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "metrics.json").write_text(json.dumps(metrics))
        return metrics


def _args(**kw):
    base = dict(restarts=3, restart_epochs=4, restart_holdout=0.05, continue_lr_scale=0.1, seed=10, epochs=20,
                holdout_longest=0.0, eval_last=10, report_last=10, prefix_only_epochs=0)
    return argparse.Namespace(**{**base, **kw})


def test_the_restart_best_on_the_longest_inputs_is_loaded(tmp_path):
    tuner = _StandInTuner(_args(), {10: 80.0, 11: 95.0, 12: 90.0})
    log = restarts.select_start(tuner, "t", [], [], tmp_path)
    assert [c[1:] for c in tuner.calls] == [(10, 4, 0.05), (11, 4, 0.05), (12, 4, 0.05)]
    assert log["chosen"] == 1 and [e["holdout_acc"] for e in log["restarts"]] == [80.0, 95.0, 90.0]
    assert tuner.model.weight.item() == 11.0, "the chosen restart's weights must be loaded"
    assert tuner.args.restarts == 3 and tuner.args.seed == 10, "the real run's settings must come back"
    # only the chosen start's weights are kept; a second call (a resumed real run) runs nothing again
    assert sorted(p.parent.name for p in tmp_path.glob("restarts/r*/state.safetensors")) == ["r1"]
    with torch.no_grad():
        tuner.model.weight.fill_(0.0)
    assert restarts.select_start(tuner, "t", [], [], tmp_path) == log and len(tuner.calls) == 3
    assert tuner.model.weight.item() == 11.0


def test_ties_go_to_the_earliest_restart(tmp_path):
    tuner = _StandInTuner(_args(restarts=2), {10: 75.0, 11: 75.0})
    assert restarts.select_start(tuner, "t", [], [], tmp_path)["chosen"] == 0


def test_a_real_run_with_lr_scale_zero_predicts_what_the_chosen_restart_predicted(tmp_path):
    _, model = _base(tmp_path)
    out = tmp_path / "run"
    argv = ["finetune", "--model", str(model), "--train", str(EXAMPLE / "train.tsv"), "--test", str(EXAMPLE / "test.tsv"),
            "--out", str(out), "--epochs", "1", "--batch-size", "8", "--prefix-lr", "0.5", "--lr", "3e-3",
            "--no-progress", "--seed", "3", *RESTARTS, "--continue-lr-scale", "0"]
    assert cli.main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    sel = metrics["selection"]
    assert [e["seed"] for e in sel["restarts"]] == [3, 4] and sel["holdout_n"] == 4
    chosen = out / "restarts" / f"r{sel['chosen']}"
    assert metrics["reported"]["acc"] == sel["restarts"][sel["chosen"]]["test_acc"]
    assert (pq.read_table(out / "predictions.parquet").column("prediction").to_pylist()
            == pq.read_table(chosen / "predictions.parquet").column("prediction").to_pylist())
    assert not list(out.glob("restarts/*/state.safetensors")), "spent restart weights must not stay in the run"
    assert metrics["wall_seconds"] >= sum(e["wall_seconds"] for e in sel["restarts"]), "the cost includes the restarts"


def test_a_selection_killed_half_way_resumes_to_the_uninterrupted_result(tmp_path):
    _, model = _base(tmp_path)
    args = ["finetune", "--model", model, "--train", EXAMPLE / "train.tsv", "--test", EXAMPLE / "test.tsv",
            "--epochs", "2", "--batch-size", "8", "--prefix-lr", "0.5", "--lr", "3e-3", "--checkpoint-every", "1",
            "--no-progress", "--seed", "3", *RESTARTS]
    assert cli.main([*map(str, args), "--out", str(tmp_path / "full")]) == 0
    killed = _sip(*args, "--out", tmp_path / "run", kill_after="train/r1:1")  # restart 0 done, restart 1 at epoch 1
    assert killed.returncode == 137, killed.stderr
    partial = tmp_path / ".run.partial"
    assert (partial / "restarts" / "r0" / "metrics.json").is_file() and not (partial / "metrics.json").exists()
    first = json.loads((partial / "restarts" / "r0" / "metrics.json").read_text())
    resumed = _sip(*args, "--out", tmp_path / "run")
    assert resumed.returncode == 0, resumed.stderr
    assert "train/r1: resuming from epoch 1" in resumed.stdout and "train/r0: resuming" not in resumed.stdout
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["selection"]["restarts"][0]["wall_seconds"] == first["wall_seconds"], "restart 0 must not rerun"
    for run in ("full", "run"):  # the restarts' times differ, nothing else may
        path = tmp_path / run / "metrics.json"
        m = json.loads(path.read_text())
        for entry in m["selection"]["restarts"]:
            entry.pop("wall_seconds")
        path.write_text(json.dumps(m))
    _same_outputs(tmp_path / "full", tmp_path / "run")


@pytest.mark.parametrize("flags, message", [
    (["--restarts", "0"], "--restarts must be at least 1"),
    (["--restarts", "2", "--restart-holdout", "0"], "--restart-holdout must be in (0, 1)"),
    (["--restarts", "2", "--restart-epochs", "0"], "--restart-epochs must be at least 1"),
    (["--restarts", "2", "--continue-lr-scale", "-1"], "--continue-lr-scale must be at least 0"),
    (["--restarts", "2", "--holdout-longest", "0.1"], "drop --holdout-longest"),
])
def test_bad_restart_flags_are_one_line_errors(tmp_path, flags, message):
    argv = ["finetune", "--model", "scratch", "--train", str(EXAMPLE / "train.tsv"), "--test",
            str(EXAMPLE / "test.tsv"), "--out", str(tmp_path / "run"), *flags]
    with pytest.raises(SipError, match=message.replace("(", r"\(").replace(")", r"\)")):
        restarts.check_args(cli.build_parser().parse_args(argv))
