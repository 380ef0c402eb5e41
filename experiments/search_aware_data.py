"""Data of search-aware continued pre-training (experiments/search_aware.py, session 41): pre-training FSTs with
short and long strings each.

For every FST of the d4 pool's train split (in file order, none an evaluation FST: those are redrawn while isomorphic
to one), ``--short`` strings of length 2..``--short-max`` and ``--long`` strings of length ``--short-max``+1..30,
each drawn as the pool's strings are (a uniform-arc walk, `sip_core.fst.walk`) with the length uniform in its range.
A length split, not Table 1's visit-count split: the objective is "a prefix tuned on short strings must carry the
machine to long ones", whatever the task. FSTs that cannot make strings of every length are skipped.

    python experiments/search_aware_data.py --pool data/gpu/pretrain/d4 --fsts 3000 --out data/gpu/search-aware
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sip_core.data.tables import examples_table, fst_table  # noqa: E402
from sip_core.fst.machine import Machine  # noqa: E402
from sip_core.fst.walk import Walker  # noqa: E402
from sip_core.io import write_parquet  # noqa: E402

LONGEST = 30  # Table 1's longest test string; the pool's own strings reach 35


def strings(m: Machine, rng: random.Random, lo: int, hi: int, n: int) -> list[tuple[str, str]] | None:
    walkers = {length: Walker(m, length, length) for length in range(lo, hi + 1)}
    if any(w.empty for w in walkers.values()):
        return None
    return [walkers[rng.randint(lo, hi)].sample(rng) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool", default="data/gpu/pretrain/d4")
    ap.add_argument("--fsts", type=int, default=3000)
    ap.add_argument("--short", type=int, default=64)
    ap.add_argument("--long", type=int, default=64)
    ap.add_argument("--short-max", type=int, default=10)
    ap.add_argument("--min-states", type=int, default=2)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    table = pq.read_table(Path(args.pool) / "fsts.parquet")
    rows, examples, skipped = [], [], 0
    for batch in table.to_batches(max_chunksize=4096):
        for row in batch.to_pylist():
            if row["split"] != "train" or row["n_states"] < args.min_states:
                continue
            m = Machine.from_row(row)
            short = strings(m, rng, 2, args.short_max, args.short)
            long = strings(m, rng, args.short_max + 1, LONGEST, args.long) if short else None
            if long is None:
                skipped += 1
                continue
            i = len(rows)
            rows.append({"fst_id": i, "split": "train", "machine": m})
            examples += [(i, "short", x, y) for x, y in short] + [(i, "long", x, y) for x, y in long]
            if len(rows) == args.fsts:
                break
        if len(rows) == args.fsts:
            break
    out = Path(args.out)
    write_parquet(fst_table(rows), out / "fsts.parquet")
    write_parquet(examples_table(examples), out / "examples.parquet")
    print(f"{len(rows)} FSTs ({skipped} skipped: some length unreachable), {len(examples)} strings -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
