"""Would stopping a fine-tuning run where its held-out longest training strings score best beat the protocol's
end-of-run report (session 39: 100 epochs lose to 50 on the long inputs)? Reads the runs of a sweep made with
`--holdout-longest F --eval-every N` (sweep 25), whose every evaluation also scores the held-out strings, and prints
per run: the reported test accuracy (mean of the last evaluations), the test accuracy at the evaluation best on the
holdout (the latest of ties: no test data takes part in the choice), and the best test accuracy on the curve (an
oracle, for scale); then their means per variant.

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=Path, help="a directory of <variant>--<task>/metrics.json")
    a = ap.parse_args()
    rows = collections.defaultdict(list)
    for metrics_file in sorted(a.sweep.glob("*--*/metrics.json")):
        metrics = json.loads(metrics_file.read_text())
        curve = metrics["epochs"]
        if not curve or "holdout_acc" not in curve[0]:
            raise SystemExit(f"{metrics_file}: no holdout on its curve (run with --holdout-longest and --eval-every)")
        best = stopped(curve)
        row = (metrics["reported"]["acc"], best["acc"], max(e["acc"] for e in curve))
        rows[metrics_file.parent.name.split("--", 1)[0]].append(row)
        print(f"{metrics_file.parent.name:40s} reported {row[0]:5.1f}  stopped at epoch {best['epoch']:3d} "
              f"(holdout {best['holdout_acc']:5.1f}) {row[1]:5.1f}  oracle {row[2]:5.1f}")
    if not rows:
        raise SystemExit(f"stop_by_holdout: no <variant>--<task>/metrics.json under {a.sweep}")
    for variant, runs in rows.items():
        means = [sum(col) / len(runs) for col in zip(*runs)]
        print(f"{variant}: {len(runs)} runs, reported {means[0]:.1f}, stopped by holdout {means[1]:.1f}, "
              f"oracle {means[2]:.1f}")


if __name__ == "__main__":
    main()
