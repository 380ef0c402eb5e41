"""Would stopping a fine-tuning run where its held-out longest training strings score best beat the protocol's
end-of-run report (session 39: 100 epochs lose to 50 on the long inputs)? Reads the runs of a sweep made with
`--holdout-longest F --eval-every N` (sweep 25), whose every evaluation also scores the held-out strings, and prints
per run: the reported test accuracy (mean of the last evaluations), the test accuracy at the evaluation best on the
holdout (the latest of ties: no test data takes part in the choice), and the best test accuracy on the curve (an
oracle, for scale); then their means per variant. A run a time limit stopped (`.<run>.partial/progress.json`) counts
with the evaluations it reached, its reported number the mean of those within its last `report_last` epochs.

    python experiments/stop_by_holdout.py /tmp/s25            (an unpacked finetune-sweep.tgz)
"""
from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path


def stopped(curve: list[dict]) -> dict:
    """The evaluation with the best holdout accuracy, ties to the latest."""
    return max(reversed(curve), key=lambda e: e["holdout_acc"])


def sweep_runs(sweep: Path) -> list[tuple[str, list[dict], float, str]]:
    """(run name, curve, reported accuracy, note) of every finished run and every run a time limit stopped."""
    found = []
    for metrics_file in sorted(sweep.glob("*--*/metrics.json")):
        metrics = json.loads(metrics_file.read_text())
        found.append((metrics_file.parent.name, metrics["epochs"], metrics["reported"]["acc"], ""))
    for progress_file in sorted(sweep.glob(".*--*.partial/progress.json")):
        curve = json.loads(progress_file.read_text())["epochs"]
        settings = json.loads((progress_file.parent / "settings.json").read_text())
        last = [e["acc"] for e in curve if e["epoch"] > settings["epochs"] - settings["report_last"]]
        if curve and last:  # a run stopped before its reporting window has no reported number
            name = progress_file.parent.name.removeprefix(".").removesuffix(".partial")
            found.append((name, curve, sum(last) / len(last), f"  (stopped at epoch {curve[-1]['epoch']})"))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=Path, help="a directory of <variant>--<task>/metrics.json")
    a = ap.parse_args()
    rows = collections.defaultdict(list)
    for name, curve, reported, note in sweep_runs(a.sweep):
        if not curve or "holdout_acc" not in curve[0]:
            raise SystemExit(f"{name}: no holdout on its curve (run with --holdout-longest and --eval-every)")
        best = stopped(curve)
        row = (reported, best["acc"], max(e["acc"] for e in curve))
        rows[name.split("--", 1)[0]].append(row)
        print(f"{name:40s} reported {row[0]:5.1f}  stopped at epoch {best['epoch']:3d} "
              f"(holdout {best['holdout_acc']:5.1f}) {row[1]:5.1f}  oracle {row[2]:5.1f}{note}")
    if not rows:
        raise SystemExit(f"stop_by_holdout: no <variant>--<task>/metrics.json under {a.sweep}")
    for variant, runs in rows.items():
        means = [sum(col) / len(runs) for col in zip(*runs)]
        print(f"{variant}: {len(runs)} runs, reported {means[0]:.1f}, stopped by holdout {means[1]:.1f}, "
              f"oracle {means[2]:.1f}")


if __name__ == "__main__":
    main()
