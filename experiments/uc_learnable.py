"""How much of a UC test set its training data can determine, over many generated tasks.

A UC task trains on f without its withheld lefts or f without its withheld rights (sip_core/fst/uc.py, as the
original). A transition on no accepting path of either is in no training string, and a test string that takes it
has an output no learner can infer (experiments/uc_errors.py found two such tasks of five in the gpu Table 1). This
script draws tasks with the pipeline's own generator and reports, per setting, how many have such transitions and
the share of test strings that need one: one minus that share bounds the exact match any model can be sure of.

    python experiments/uc_learnable.py uc-s4 uc-s5 uc-s7 uc-s10 --tasks 200 [--seed S] [--n-test 200]
"""
from __future__ import annotations

import argparse
import sys

import pandas as pd

from sip_core.data.evaltasks import _task_job
from sip_core.fst.machine import Machine
from sip_core.fst.uc import LENGTHS, without
from sip_core.fst.walk import Walker


def trainable(m: Machine, lefts: set[int], rights: set[int]) -> set[int]:
    """Transitions on some accepting path (within the UC lengths) of f without the lefts or f without the rights."""
    usable: set[int] = set()
    for dropped in (lefts, rights):
        g = without(m, dropped)
        walker = Walker(g, *LENGTHS)
        kept = [i for i in range(len(m.transitions)) if i not in dropped]  # `without` keeps the others in order
        usable |= {kept[j] for j in walker_transitions(walker, g)}
    return usable


def walker_transitions(walker: Walker, g: Machine) -> set[int]:
    """Indices (in ``g``) of the transitions on some accepting path whose length the walker allows: a search of the
    trimmed composition the walker samples from, state (q, symbols read)."""
    if walker.empty:
        return set()
    hits: set[int] = set()
    frontier, seen = [(g.start, 0)], {(g.start, 0)}
    while frontier:
        q, k = frontier.pop()
        for _, _, dst, idx in g.expanded[q]:
            if walker.alive[k + 1] >> dst & 1:
                hits.add(idx)
                if (dst, k + 1) not in seen:
                    seen.add((dst, k + 1))
                    frontier.append((dst, k + 1))
    return hits


def survey(setting: str, tasks: int, seed: int, n_test: int) -> dict:
    """The pipeline's own task draw (`_task_job`: same seeds, same redraws), tasks 0..tasks-1: at the params' seed the
    first five are the tasks of the gpu tables (their test strings are drawn after one training string, not 5,000)."""
    rows = []
    for i in range(tasks):
        row, examples = _task_job((setting, seed, i, 1, n_test, 1))
        m = row["machine"]
        usable = trainable(m, {p["left"] for p in row["withheld"]}, {p["right"] for p in row["withheld"]})
        test = [x for *_, split, x, _ in examples if split == "test"]
        needing = sum(not set(m.path(x)[1]) <= usable for x in test)
        rows.append({"untrained": len(set(range(len(m.transitions))) - usable), "share": needing / len(test)})
    frame = pd.DataFrame(rows)
    return {"setting": setting, "tasks": tasks,
            "tasks_with_untrained_transitions_pct": round(100 * (frame["untrained"] > 0).mean(), 1),
            "test_strings_needing_one_pct": round(100 * frame["share"].mean(), 1),
            "learnable_ceiling_mean_pct": round(100 * (1 - frame["share"]).mean(), 1),
            "learnable_ceiling_median_pct": round(100 * (1 - frame["share"]).median(), 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("settings", nargs="+")
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1432347623, help="default: params' data.eval.seeds.uc")
    ap.add_argument("--n-test", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    table = pd.DataFrame([survey(s, args.tasks, args.seed, args.n_test) for s in args.settings])
    print(table.to_string(index=False))
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
