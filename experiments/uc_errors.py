"""Where fine-tuned runs go wrong on the UC tasks (Table 1, unseen combinations).

A UC task withholds pairs of transitions (left, right): every training string's path avoids all the withheld lefts or
all the withheld rights, every test string's path uses at least one of each (sip_core/fst/uc.py). For each wrong
prediction this script finds the first output character that differs from the gold output, maps it to the input step
(the transition of the gold FST's path) that wrote it, and asks whether that step is a withheld right transition that
comes after a withheld left one, i.e. the first place where the test string leaves what training showed. It also
compares the predictions with the outputs of the FST OSTIA learns from the same training pairs (a learner that only
generalises as far as the data force it to).

It also counts the test strings whose gold path takes a transition that no training string takes. The generator
(faithful to the original, REFERENCE §3.3) trains on f without the lefts or f without the rights; where a left
transition leads only into rights (a state whose every way on is withheld), no training string can take it, and the
output it writes cannot be learned from the data by anyone.

    python experiments/uc_errors.py data/gpu/eval/uc-s4 data/gpu/runs/sip-d4/uc-s4 [--out FILE.csv]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from sip_core.fst.machine import Machine
from sip_core.fst.ostia import Ostia


def first_unseen_step(path: list[int], lefts: set[int], rights: set[int]) -> int | None:
    """Index of the first transition on ``path`` that is a withheld right after some withheld left (or a withheld
    left after some withheld right): where the string first combines what training kept apart."""
    seen_left = seen_right = False
    for step, idx in enumerate(path):
        if (idx in rights and seen_left) or (idx in lefts and seen_right):
            return step
        seen_left |= idx in lefts
        seen_right |= idx in rights
    return None


def divergence_step(machine: Machine, x: str, predicted: str) -> tuple[int | None, list[int]]:
    """(input step whose output holds the first wrong character of ``predicted``, the gold path's transitions);
    step None if ``predicted`` is right, the last step if it only runs on past the gold output."""
    states, used, gold = machine.path(x)
    if predicted == gold:
        return None, used
    written = 0
    for step, a in enumerate(x):
        for ch in machine.table[(states[step], a)][0]:
            if written >= len(predicted) or predicted[written] != ch:
                return step, used
            written += 1
    return len(x) - 1, used


def analyse(eval_dir: Path, runs_dir: Path) -> pd.DataFrame:
    fsts = pd.read_parquet(eval_dir / "fsts.parquet")
    examples = pd.read_parquet(eval_dir / "examples.parquet")
    rows = []
    for _, fst in fsts.sort_values("task_id").iterrows():
        task = fst["task_id"]
        run = runs_dir / task / "predictions.parquet"
        if not run.exists():
            continue
        machine = Machine.from_row(fst.to_dict())
        lefts = {int(p["left"]) for p in fst["withheld"]}
        rights = {int(p["right"]) for p in fst["withheld"]}
        train = examples[(examples["task_id"] == task) & (examples["split"] == "train")]
        ostia = Ostia(zip(train["input"], train["output"])).learn()
        trained = set()  # transitions some training string takes
        for x in train["input"]:
            trained.update(machine.path(x)[1])
        preds = pd.read_parquet(run)
        wrong = at_unseen = before_unseen = 0
        untrained_strings = untrained_right = trained_right = 0
        same_as_ostia = ostia_right = 0
        for x, gold, pred in zip(preds["input"], preds["gold"], preds["prediction"]):
            induced = ostia.apply(x)
            ostia_right += induced == gold
            same_as_ostia += induced == pred
            if not set(machine.path(x)[1]) <= trained:
                untrained_strings += 1
                untrained_right += pred == gold
            else:
                trained_right += pred == gold
            if pred == gold:
                continue
            wrong += 1
            step, used = divergence_step(machine, x, pred)
            unseen = first_unseen_step(used, lefts, rights)
            if step is not None and unseen is not None:
                at_unseen += step == unseen
                before_unseen += step < unseen
        n = len(preds)
        rows.append({"task": task, "n_test": n, "acc": round(100 * (n - wrong) / n, 1),
                     "wrong": wrong, "first_error_at_first_unseen_combination": at_unseen,
                     "first_error_before_it": before_unseen,
                     "ostia_acc": round(100 * ostia_right / n, 1), "same_output_as_ostia": round(100 * same_as_ostia / n, 1),
                     "withheld_pairs": len(fst["withheld"]),
                     "untrained_transitions": len(set(range(len(machine.transitions))) - trained),
                     "test_via_untrained": untrained_strings,
                     "acc_via_untrained": round(100 * untrained_right / untrained_strings, 1) if untrained_strings else None,
                     "acc_rest": round(100 * trained_right / (n - untrained_strings), 1) if n > untrained_strings else None})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path, help="the UC eval set (examples.parquet, fsts.parquet)")
    ap.add_argument("runs_dir", type=Path, help="one model's runs of it (<task>/predictions.parquet)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    table = analyse(args.eval_dir, args.runs_dir)
    print(table.to_string(index=False))
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
