"""Where SIP-d4's errors on the iteration tasks start, read against the gold FSTs (session 21).

    python experiments/iteration_errors.py [--runs data/gpu/runs/sip-d4/iteration-s4] [--eval data/gpu/eval/iteration-s4]

Prints: the visit count (most visits of one state so far) where each wrong output first departs from the gold
output; accuracy by the input's visit count (training strings have at most 3); and how many wrong outputs are
exactly one jump to another state (the gold output up to some input position, then the gold FST's run of the rest
from another state).
"""
from __future__ import annotations

import argparse
import collections
from pathlib import Path

import pandas as pd


def transitions(fst) -> dict:
    return {(int(t["src"]), t["ilabel"]): (t["olabel"], int(t["dst"])) for t in fst.transitions}


def step(trans: dict, q: int, ch: str):
    """(output, next state), or None where the state has no transition for ``ch`` ('<id>' copies any symbol)."""
    if (q, ch) in trans:
        return trans[(q, ch)]
    if (q, "<id>") in trans:
        return ch, trans[(q, "<id>")][1]
    return None


def run(trans: dict, q: int, text: str) -> tuple[str, list[int]] | None:
    out, states = "", [q]
    for ch in text:
        move = step(trans, q, ch)
        if move is None:
            return None
        o, q = move
        out += o
        states.append(q)
    return out, states


def analyse(fst, predictions: pd.DataFrame) -> list[dict]:
    trans, start = transitions(fst), int(fst.start)
    rows = []
    for x, gold, pred in predictions[["input", "gold", "prediction"]].itertuples(index=False):
        out, states = run(trans, start, x)
        assert out == gold, (x, out, gold)
        visits, most, first = collections.Counter(), [], None
        for i, q in enumerate(states):
            visits[q] += 1
            most.append(max(visits.values()))
            if i and first is None and not pred.startswith(run(trans, start, x[:i])[0]):
                first = i
        jump = pred != gold and any(
            (rest := run(trans, q, x[i:])) is not None and pred == run(trans, start, x[:i])[0] + rest[0]
            for i in range(len(x)) for q in range(int(fst.n_states)))
        rows.append(dict(ok=pred == gold, visits=most[-1], visits_at_error=None if first is None else most[first],
                         jump=jump))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="data/gpu/runs/sip-d4/iteration-s4")
    ap.add_argument("--eval", default="data/gpu/eval/iteration-s4")
    a = ap.parse_args()
    fsts = pd.read_parquet(Path(a.eval) / "fsts.parquet").set_index("task_id")
    # a sweep cut off by its time limit leaves some tasks without predictions: read the ones that finished
    done = [task for task in fsts.index if (Path(a.runs) / task / "predictions.parquet").is_file()]
    if not done:
        raise SystemExit(f"iteration_errors: no <task>/predictions.parquet under {a.runs}")
    if len(done) < len(fsts):
        print(f"tasks with predictions: {' '.join(done)} ({len(fsts) - len(done)} without)")
    d = pd.DataFrame([row for task in done
                      for row in analyse(fsts.loc[task], pd.read_parquet(Path(a.runs) / task / "predictions.parquet"))])
    wrong = d[~d.ok]
    print(f"{len(wrong)} wrong of {len(d)}")
    print("visit count where the output first goes wrong (10 = 10 or more):")
    print(wrong.visits_at_error.dropna().astype(int).clip(upper=10).value_counts().sort_index().to_string())
    print(f"first wrong before any state's 4th visit: {100 * (wrong.visits_at_error <= 3).mean():.1f}%")
    print("accuracy by the input's visit count (12 = 12 or more):")
    print(d.groupby(d.visits.clip(upper=12)).ok.agg(["mean", "size"]).round(3).T.to_string())
    print(f"wrong outputs that are one jump to another state: {int(wrong.jump.sum())} of {len(wrong)} "
          f"({100 * wrong.jump.mean():.1f}%)")


if __name__ == "__main__":
    main()
