"""How many fine-tuning runs does the from-scratch SIP-d4 need to pass the Table 1 gate, if a run is chosen by
its held-out longest training strings (`--holdout-longest`)? From a sweep of seeds per task (sweep 22, or sweep 15's
s1-s4), for each K: the expected test accuracy of one run, of the run best on the holdout among K seeds, of the best
run by its test accuracy (an oracle, for scale), and of the vote of the K runs and of the 3 best by holdout.

"Expected": the mean over every K-subset of the seeds (at most SUBSETS random ones), per task, then over tasks.
Single runs are scored as the protocol reports them (mean of the last evaluations); votes use each run's last-epoch
predictions. No test data takes part in the choice.

    python experiments/best_of_k.py experiments/results/ft-sweep15 --variants s1 s2 s3 s4
"""
from __future__ import annotations

import argparse
import collections
import itertools
import json
import random
from pathlib import Path

from sip_core.eval.metrics import score
from sip_core.eval.vote import _predictions, majority

SUBSETS = 2000


def load(sweep: Path, variants: list[str]) -> dict[str, list[dict]]:
    """Per task, one record per finished run: holdout accuracy, reported test accuracy, last-epoch predictions."""
    runs = collections.defaultdict(list)
    for variant in variants:
        for metrics_file in sorted(sweep.glob(f"{variant}--*/metrics.json")):
            metrics = json.loads(metrics_file.read_text())
            if "holdout" not in metrics:
                raise SystemExit(f"{metrics_file}: no holdout (run with --holdout-longest)")
            _, golds, predictions = _predictions(metrics_file.parent)
            runs[metrics_file.parent.name.split("--", 1)[1]].append(
                {"variant": variant, "holdout": metrics["holdout"]["acc"], "acc": metrics["reported"]["acc"],
                 "golds": golds, "predictions": predictions})
    return runs


def subsets(n: int, k: int, rng: random.Random) -> list[tuple[int, ...]]:
    every = list(itertools.combinations(range(n), k))
    return every if len(every) <= SUBSETS else rng.sample(every, SUBSETS)


def expected(runs: list[dict], k: int, rng: random.Random) -> dict[str, float]:
    rows = collections.defaultdict(list)
    for pick in subsets(len(runs), k, rng):
        chosen = [runs[i] for i in pick]
        by_holdout = sorted(chosen, key=lambda r: -r["holdout"])
        rows["one run"].append(sum(r["acc"] for r in chosen) / k)
        rows["best by holdout"].append(by_holdout[0]["acc"])
        rows["best by test (oracle)"].append(max(r["acc"] for r in chosen))
        if k >= 2:
            golds = chosen[0]["golds"]
            rows["vote of all"].append(score(majority([r["predictions"] for r in chosen]), golds)["acc"])
        if k >= 3:
            rows["vote of 3 best by holdout"].append(
                score(majority([r["predictions"] for r in by_holdout[:3]]), golds)["acc"])
    return {name: sum(v) / len(v) for name, v in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", type=Path, help="a finetune_sweep.sh work directory (unpacked finetune-sweep.tgz)")
    parser.add_argument("--variants", nargs="+", required=True, help="run-name prefixes, one per seed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    runs = load(args.sweep, args.variants)
    n = min(len(r) for r in runs.values())
    print(f"{len(runs)} tasks, {n}-{max(len(r) for r in runs.values())} runs each")
    table = {}
    for k in range(1, n + 1):
        per_task = [expected(task_runs, k, rng) for task_runs in runs.values()]
        table[k] = {name: sum(t[name] for t in per_task) / len(per_task) for name in per_task[0]}
    names = list(table[n])
    print("| K | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for k, row in table.items():
        print(f"| {k} | " + " | ".join(f"{row[name]:.1f}" if name in row else "" for name in names) + " |")


if __name__ == "__main__":
    main()
