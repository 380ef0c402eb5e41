"""``sip vote RUN... --out DIR``: the majority vote of several runs' predictions on the same test set.

Why (docs/EXPERIMENTS.md, session 11): fine-tuning runs of the same model on the same iteration task err on
*different* long inputs. Five runs averaging 80.4% vote to 93.2%; at least one of six runs is right on 89-99% of
the inputs. A vote measures how much of a run's error is its own (variance) rather than the model's (bias), and
is the ensemble a user can deploy. It is not the paper's protocol: tables report single runs.

Per input the most frequent prediction wins; ties go to the run named first. The result is an ordinary run
directory (predictions.parquet, metrics.json with the runs it came from and their own accuracies).
``sip predict --model A B C`` applies the same ``majority`` to new inputs.
"""
from __future__ import annotations

import collections
from pathlib import Path

from sip_core.errors import SipError
from sip_core.eval.metrics import score
from sip_core.eval.outputs import write_run
from sip_core.train.data import read_parquet


def majority(columns: list[list[str]]) -> list[str]:
    """Per position, the most frequent value across ``columns``; ties: the earliest column's value."""
    voted = []
    for values in zip(*columns):
        counts = collections.Counter(values)
        top = max(counts.values())
        voted.append(next(v for v in values if counts[v] == top))
    return voted


def _predictions(run: Path) -> tuple[list[str], list[str], list[str]]:
    path = run / "predictions.parquet"
    if not path.is_file():
        raise SipError(f"{run} is not a run directory (no predictions.parquet)")
    table = read_parquet(path)
    missing = {"input", "gold", "prediction"} - set(table.column_names)
    if missing:
        raise SipError(f"{path} lacks the column(s) {sorted(missing)}")
    return tuple(table.column(c).to_pylist() for c in ("input", "gold", "prediction"))


def vote_runs(runs: list[Path]) -> dict:
    """The vote of ``runs`` (each with predictions.parquet on the same inputs, in the same order)."""
    if len(runs) < 2:
        raise SipError("sip vote needs at least two runs")
    inputs, golds, first = _predictions(runs[0])
    columns, singles = [first], [score(first, golds)["acc"]]
    for run in runs[1:]:
        other_inputs, other_golds, predictions = _predictions(run)
        if other_inputs != inputs or other_golds != golds:
            raise SipError(f"{run} was tested on other inputs than {runs[0]}: a vote needs the same test set")
        columns.append(predictions)
        singles.append(score(predictions, golds)["acc"])
    voted = majority(columns)
    row = score(voted, golds)
    any_right = 100.0 * sum(any(c[i] == g for c in columns) for i, g in enumerate(golds)) / max(1, len(golds))
    metrics = {"vote_of": [str(r) for r in runs], "run_acc": singles, "acc": row["acc"], "ed": row["ed"],
               "per": row["per"], "n_test": row["n"], "any_run_right": any_right,
               "reported": {"acc": row["acc"], "ed": row["ed"], "per": row["per"], "n_evaluations": 1}}
    return {"metrics": metrics, "inputs": inputs, "golds": golds, "predictions": voted}


def vote_main(args) -> int:
    result = vote_runs([Path(r) for r in args.runs])
    write_run(args.out, result["metrics"], result["inputs"], result["golds"], result["predictions"])
    m = result["metrics"]
    singles = " / ".join(f"{a:.1f}" for a in m["run_acc"])
    print(f"vote of {len(m['run_acc'])} runs: acc {m['acc']:.1f}% (runs {singles}; at least one right: "
          f"{m['any_run_right']:.1f}%) → {args.out}")
    return 0
