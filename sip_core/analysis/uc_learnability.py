"""What a UC task's training data can determine, and where fine-tuned runs go wrong on it (Table 1, UC).

A UC task withholds pairs of transitions (left, right): every training string's path avoids all the withheld lefts or
all the withheld rights, every test string's path uses at least one of each (sip_core/fst/uc.py, as the original,
REFERENCE §3.3). Two facts about a task and a run:
- `trainable`: the transitions some training string can take. A left that leads only into rights is in neither
  training language, so the output it writes cannot be learned from the data by any model, yet test strings take it.
- `divergence_step` / `first_unseen_step`: the input step that wrote a wrong prediction's first wrong character, and
  the first step where the string combines what training kept apart.
`experiments/uc_errors.py` runs both over a model's runs (`errors`) and over many generated tasks (`survey`).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from sip_core.fst.machine import Machine
from sip_core.fst.ostia import Ostia
from sip_core.fst.uc import LENGTHS, without
from sip_core.fst.walk import Walker


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


def trainable(m: Machine, lefts: set[int], rights: set[int]) -> set[int]:
    """Transitions on some accepting path (within the UC lengths) of f without the lefts or f without the rights."""
    usable: set[int] = set()
    for dropped in (lefts, rights):
        g = without(m, dropped)
        walker = Walker(g, *LENGTHS)
        kept = [i for i in range(len(m.transitions)) if i not in dropped]  # `without` keeps the others in order
        usable |= {kept[j] for j in _accepting_transitions(walker, g)}
    return usable


def _accepting_transitions(walker: Walker, g: Machine) -> set[int]:
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


def run_errors(eval_dir: Path, runs_dir: Path) -> pd.DataFrame:
    """`task_errors` for every task of a UC eval set that ``runs_dir`` has a run of."""
    fsts = pd.read_parquet(eval_dir / "fsts.parquet")
    examples = pd.read_parquet(eval_dir / "examples.parquet")
    rows = []
    for _, fst in fsts.sort_values("task_id").iterrows():
        run = runs_dir / fst["task_id"] / "predictions.parquet"
        if run.exists():
            train = examples[(examples["task_id"] == fst["task_id"]) & (examples["split"] == "train")]
            rows.append(task_errors(fst.to_dict(), list(zip(train["input"], train["output"])), pd.read_parquet(run)))
    return pd.DataFrame(rows)


def _pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def task_errors(fst: dict, train: list[tuple[str, str]], preds: pd.DataFrame) -> dict:
    """One run of one UC task (its fsts.parquet row, training pairs, predictions): accuracy; where wrong outputs
    first go wrong against the first unseen combination; OSTIA's accuracy and agreement; the transitions no training
    string takes and the accuracy on the test strings that take one and on the rest."""
    machine = Machine.from_row(fst)
    lefts, rights = {int(p["left"]) for p in fst["withheld"]}, {int(p["right"]) for p in fst["withheld"]}
    ostia = Ostia(train).learn()
    trained = {idx for x, _ in train for idx in machine.path(x)[1]}  # transitions some training string takes
    count = dict.fromkeys(("wrong", "at", "before", "ostia_right", "same_as_ostia", "untrained", "untrained_right",
                           "rest_right"), 0)
    for x, gold, pred in zip(preds["input"], preds["gold"], preds["prediction"]):
        induced = ostia.apply(x)
        count["ostia_right"] += induced == gold
        count["same_as_ostia"] += induced == pred
        if not set(machine.path(x)[1]) <= trained:
            count["untrained"] += 1
            count["untrained_right"] += pred == gold
        else:
            count["rest_right"] += pred == gold
        if pred == gold:
            continue
        count["wrong"] += 1
        step, used = divergence_step(machine, x, pred)
        unseen = first_unseen_step(used, lefts, rights)
        if step is not None and unseen is not None:
            count["at"] += step == unseen
            count["before"] += step < unseen
    n, rest = len(preds), len(preds) - count["untrained"]
    return {"task": fst["task_id"], "n_test": n, "acc": _pct(n - count["wrong"], n), "wrong": count["wrong"],
            "first_error_at_first_unseen_combination": count["at"], "first_error_before_it": count["before"],
            "ostia_acc": _pct(count["ostia_right"], n), "same_output_as_ostia": _pct(count["same_as_ostia"], n),
            "withheld_pairs": len(fst["withheld"]),
            "untrained_transitions": len(set(range(len(machine.transitions))) - trained),
            "test_via_untrained": count["untrained"],
            "acc_via_untrained": _pct(count["untrained_right"], count["untrained"]),
            "acc_rest": _pct(count["rest_right"], rest)}


def survey(setting: str, tasks: int, seed: int, n_test: int) -> dict:
    """The pipeline's own task draw (`_task_job`: same seeds, same redraws), tasks 0..tasks-1: at the params' seed the
    first five are the tasks of the gpu tables (their test strings are drawn after one training string, not 5,000)."""
    from sip_core.data.evaltasks import _task_job

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
