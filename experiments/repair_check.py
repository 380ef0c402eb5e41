"""Simulate the heads `--readout-repair` is for, on the gpu iteration tasks' gold FSTs (sessions 62-63): the gold
states of each training input with some arcs made systematically wrong (every pass through the arc names another
state) and a share of the states random, then the machine read with and without repair, scored on the task's train
and test pairs. Usage:
    .venv/bin/python experiments/repair_check.py [--eval data/gpu/eval/iteration-s4] [--arcs start|other|any]
        [--wrong 1] [--noise 0.005] [--cases 3] [--seed 0]
"""
import argparse
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sip_core.fst.machine import Machine
from sip_core.train.readout import read_machine


def wrong_head(machine: Machine, inputs, wrong: dict, noise: float, rng: random.Random) -> list[np.ndarray]:
    """Per input, the state after each character: the gold one, else ``wrong[arc]`` after a wrong arc, and with
    probability ``noise`` a random state."""
    out = []
    for x in inputs:
        seq = machine.state_sequence(x)
        head = [wrong.get((seq[i], ch), seq[i + 1]) for i, ch in enumerate(x)]
        out.append(np.array([rng.randrange(machine.n_states) if rng.random() < noise else q for q in head]))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--eval", type=Path, default=Path("data/gpu/eval/iteration-s4"))
    p.add_argument("--arcs", choices=["start", "other", "any"], default="any", help="where the wrong arcs are")
    p.add_argument("--wrong", type=int, default=1, help="wrong arcs per case")
    p.add_argument("--noise", type=float, default=0.0, help="share of the states that are random")
    p.add_argument("--cases", type=int, default=3, help="cases per task")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = random.Random(a.seed)
    examples = pd.read_parquet(a.eval / "examples.parquet")
    print("task,case,wrong_arcs,plain_train,plain_test,repaired_train,repaired_test,changes,seconds")
    fixed = total = 0
    for row in pd.read_parquet(a.eval / "fsts.parquet").itertuples():
        gold = Machine.from_row(row._asdict())
        pairs = {s: list(zip(g.input, g.output)) for s, g in examples[examples.task_id == row.task_id].groupby("split")}
        train, test = pairs["train"], pairs["test"]
        used = sorted({(q, ch) for x, _ in train for q, ch in zip(gold.state_sequence(x), x)
                       if a.arcs == "any" or (q == gold.start) == (a.arcs == "start")})
        for case in range(a.cases):
            arcs = rng.sample(used, min(a.wrong, len(used)))
            wrong = {arc: rng.choice([q for q in range(gold.n_states) if q != gold.table[arc][1]]) for arc in arcs}
            states = wrong_head(gold, [x for x, _ in train], wrong, a.noise, rng)

            def acc(m, split):
                return 100 * sum(m is not None and m.apply(x) == y for x, y in split) / len(split)

            plain = read_machine(train, states, gold.vocab)
            started = time.monotonic()
            repaired = read_machine(train, states, gold.vocab, repair=True)
            seconds = time.monotonic() - started
            total += plain.train_acc < 1
            fixed += plain.train_acc < 1 and repaired.train_acc == 1 and acc(repaired.machine, test) == 100
            print(f"{row.task_id},{case},{' '.join(f'{q}{ch}->{d}' for (q, ch), d in wrong.items())},"
                  f"{acc(plain.machine, train):.1f},{acc(plain.machine, test):.1f},"
                  f"{acc(repaired.machine, train):.1f},{acc(repaired.machine, test):.1f},"
                  f"{len(repaired.repairs)},{seconds:.1f}", flush=True)
    print(f"# repaired to 100% train and test: {fixed} of the {total} cases the plain reading got wrong")


if __name__ == "__main__":
    main()
