"""``sip finetune --restarts K``: choose where fine-tuning starts by a length dev set, then train on everything.

Why (docs/EXPERIMENTS.md, sweep 15): from the same pre-trained model, one fine-tuning run of one iteration task
lands 10 points (sd) above or below another, only through the seed and the GPU's kernels; and the accuracy on
the longest training inputs, held out, predicts the test accuracy of a run closely (within-task r = 0.86). The
real run still trains on them: they are most of the long strings the task has (held out for good, they cost 1.4
points at the same seeds, not significant: session 12).

So: K short runs (``--restart-epochs``), each from a fresh prefix init (seeds seed, seed+1, ...), on the training
pairs without the longest fraction ``--restart-holdout``; the run best on those held-out pairs is the start of the
real run, which trains on all the training pairs with its LRs scaled by ``--continue-lr-scale``. No test data
takes part in the choice (each restart's test accuracy is recorded beside it, for analysis only).

Layout under a task's output directory (a staging directory until the task completes): ``restarts/rN/`` is the
ordinary run directory of restart N plus its final weights (``state.safetensors``), so that a killed selection
resumes after the restarts it finished; ``restarts/selection.json`` is the log that ends in metrics.json.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from safetensors.torch import load_model, save_model

from sip_core.errors import SipError
from sip_core.io import atomic_path, write_json

STATE_FILE = "state.safetensors"
LOG_FILE = "selection.json"


def enabled(args) -> bool:
    return getattr(args, "restarts", 1) > 1


def check_args(args) -> None:
    if getattr(args, "restarts", 1) < 1:
        raise SipError("--restarts must be at least 1")
    if not enabled(args):
        return
    if getattr(args, "restart_epochs", 1) < 1:
        raise SipError("--restart-epochs must be at least 1")
    if not 0 < getattr(args, "restart_holdout", 0.05) < 1:
        raise SipError("--restart-holdout must be in (0, 1)")
    if getattr(args, "continue_lr_scale", 0.1) < 0:
        raise SipError("--continue-lr-scale must be at least 0")
    if getattr(args, "holdout_longest", 0.0) > 0:
        raise SipError("--restarts chooses by its own length dev set (--restart-holdout); drop --holdout-longest")


def _restart_args(args, r: int) -> argparse.Namespace:
    """A restart is an ordinary run: its own seed, --restart-epochs long, the longest inputs held out, one test
    evaluation at the end (for the record), no restarts of its own."""
    return argparse.Namespace(**{**vars(args), "restarts": 1, "seed": args.seed + r, "epochs": args.restart_epochs,
                                 "holdout_longest": args.restart_holdout, "eval_last": 1, "report_last": 1,
                                 "prefix_only_epochs": 0})


def select_start(tuner, task_id: str, train_pairs, test_pairs, out_dir: Path) -> dict:
    """Run the restarts that are not finished yet, load the weights of the one best on the held-out longest
    inputs into ``tuner.model`` and return the selection log."""
    args, root = tuner.args, out_dir / "restarts"
    done = read_log(out_dir)
    if done is not None and (root / f"r{done['chosen']}" / STATE_FILE).is_file():  # chosen before an interruption
        _load(tuner, root / f"r{done['chosen']}" / STATE_FILE)
        return done
    entries = []
    for r in range(args.restarts):
        run_dir = root / f"r{r}"
        metrics_file, state_file = run_dir / "metrics.json", run_dir / STATE_FILE
        if metrics_file.is_file() and state_file.is_file():  # finished before an interruption
            metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
        else:
            metrics_file.unlink(missing_ok=True)  # finished, but its weights were not saved: run it again
            tuner.args = _restart_args(args, r)
            try:
                metrics = tuner.run(f"{task_id}/r{r}", train_pairs, test_pairs, run_dir)
            finally:
                tuner.args = args
            with atomic_path(state_file) as tmp:
                save_model(tuner.model, str(tmp))  # tied embeddings saved once
        entries.append({"restart": r, "seed": metrics["seed"], "holdout_acc": metrics["holdout"]["acc"],
                        "test_acc": metrics["reported"]["acc"], "steps": metrics["steps"],
                        "wall_seconds": metrics["wall_seconds"]})
    chosen = max(entries, key=lambda e: (e["holdout_acc"], -e["restart"]))  # ties: the earliest
    _load(tuner, root / f"r{chosen['restart']}" / STATE_FILE)
    first = json.loads((root / f"r{chosen['restart']}" / "metrics.json").read_text(encoding="utf-8"))
    log = {"restarts": entries, "chosen": chosen["restart"], "epochs_each": args.restart_epochs,
           "holdout_fraction": args.restart_holdout, "holdout_n": first["holdout"]["n"],
           "holdout_min_input_length": first["holdout"]["min_input_length"],
           "continue_lr_scale": args.continue_lr_scale}
    write_json(log, root / LOG_FILE)
    for e in entries:  # only the chosen start's weights are needed again (on a resume of the real run)
        if e["restart"] != chosen["restart"]:
            (root / f"r{e['restart']}" / STATE_FILE).unlink(missing_ok=True)
    return log


def _load(tuner, state_file: Path) -> None:
    load_model(tuner.model, str(state_file), device=str(next(tuner.model.parameters()).device))


def drop_weights(out_dir: Path) -> None:
    for state in (out_dir / "restarts").glob(f"r*/{STATE_FILE}"):
        state.unlink()


def read_log(out_dir: Path) -> dict | None:
    """The selection log of a task whose real run resumed from a checkpoint (the restarts are behind it)."""
    path = out_dir / "restarts" / LOG_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
