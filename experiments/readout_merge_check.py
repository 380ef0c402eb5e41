"""Score the machines a `--prefix readout` sweep read (each task's readout/readout.json) as transducers on their own,
before and after `merge_states`, against the task's gold FST (session 59). Usage, on an unpacked sweep archive:
    .venv/bin/python experiments/readout_merge_check.py DIR [data/gpu/eval/iteration-s4]
"""
import json
import sys
from pathlib import Path

import pandas as pd

from sip_core.fst.machine import Machine
from sip_core.train.readout import identity_shorthands, merge_states


def concrete(m: Machine) -> Machine:
    """``m`` with its shorthand arcs spelled out, so that the merge sees one arc per symbol."""
    arcs = tuple((q, a, b, dst) for q, out in enumerate(m.expanded) for a, b, dst, _ in out)
    return Machine(m.n_states, m.finals, arcs, m.vocab, start=m.start)


def main(runs: Path, eval_dir: Path) -> None:
    examples = pd.read_parquet(eval_dir / "examples.parquet")
    gold = {r.task_id: Machine.from_row(r._asdict()) for r in pd.read_parquet(eval_dir / "fsts.parquet").itertuples()}
    print("run,task,gold,read,read_test_acc,merged,merged_test_acc")
    for log in sorted(runs.glob("*/readout/readout.json")):
        row = json.loads(log.read_text())["machine"]
        if row is None:  # the first pass read no machine that maps every training pair
            continue
        run, task = log.parent.parent.name, log.parent.parent.name.split("--")[1]
        pairs = {s: list(zip(g.input, g.output)) for s, g in examples[examples.task_id == task].groupby("split")}
        read = Machine.from_row(row)
        merged = identity_shorthands(merge_states(concrete(read), pairs["train"]))

        def acc(m: Machine) -> str:
            return f"{100 * sum(m.apply(x) == y for x, y in pairs['test']) / len(pairs['test']):.1f}"

        shape = lambda m: f"{m.n_states}s/{len(m.transitions)}t"  # noqa: E731
        print(",".join([run, task, shape(gold[task]), shape(read), acc(read), shape(merged), acc(merged)]))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "data/gpu/eval/iteration-s4"))
