"""What a symbolic learner gets from the same training pairs: OSTIA on Table 1's iteration tasks.

OSTIA (Oncina, García & Vidal 1993) learns a subsequential transducer from input/output pairs: build the prefix-tree
transducer of the training set, make it onward (every output as early as possible), then merge its states in
breadth-first order (red-blue), each merge kept if the folded outputs stay consistent. It identifies a subsequential
function in the limit, so on a task whose FST is deterministic, its test accuracy says whether the training pairs
determine the FST at all. The learner is `sip_core.fst.ostia` (also `sip finetune --prefix induced`).

    python experiments/ostia_ceiling.py data/gpu/eval/iteration-s4/examples.parquet [--fsts-out DIR]

prints, per task, the induced state count and exact match on the test split (an input that leaves the induced
transducer's domain counts as wrong).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from sip_core.fst.ostia import Ostia


def write_task_files(pool: pd.DataFrame, fsts: pd.DataFrame, learned: dict, out: Path) -> None:
    """Test examples and the learned FSTs beside them, in the layout ``sip evaluate --tasks`` reads."""
    out.mkdir(parents=True, exist_ok=True)
    rows = fsts[fsts["task_id"].isin(learned)].copy()
    for col in ("n_states", "start", "transitions", "finals"):
        rows[col] = [learned[t][col] for t in rows["task_id"]]
    pool[pool["task_id"].isin(learned) & (pool["split"] == "test")].to_parquet(out / "examples.parquet", index=False)
    rows.to_parquet(out / "fsts.parquet", index=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", help="an eval pool's examples.parquet (task_id, split, input, output)")
    ap.add_argument("--train-limit", type=int, default=None, help="use only the first N training pairs per task")
    ap.add_argument("--fsts-out", type=Path, default=None,
                    help="write the test examples and the learned FSTs here (examples.parquet + fsts.parquet), for "
                         "sip evaluate with a pre-trained checkpoint")
    args = ap.parse_args(argv)
    pool = pd.read_parquet(args.examples)
    fsts = pd.read_parquet(Path(args.examples).with_name("fsts.parquet"))
    vocab = dict(zip(fsts["task_id"], fsts["vocab"]))
    rows, learned = [], {}
    for task, frame in pool.groupby("task_id", sort=True):
        train = frame[frame["split"] == "train"]
        if args.train_limit:
            train = train.head(args.train_limit)
        test = frame[frame["split"] == "test"]
        started = time.perf_counter()
        model = Ostia(zip(train["input"], train["output"])).learn()
        predictions = [model.apply(x) for x in test["input"]]
        right = sum(p == y for p, y in zip(predictions, test["output"]))
        rows.append({"task": task, "train": len(train), "states": len(model.states),
                     "acc": round(100 * right / len(test), 1),
                     "outside_domain": sum(p is None for p in predictions),
                     "seconds": round(time.perf_counter() - started, 1)})
        if (machine := model.to_machine(vocab[task])) is not None:
            learned[task] = machine.to_row()
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    print(f"mean exact match {table['acc'].mean():.1f}")
    if args.fsts_out:
        write_task_files(pool, fsts, learned, args.fsts_out)
        print(f"{len(learned)} learned FSTs -> {args.fsts_out}/fsts.parquet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
