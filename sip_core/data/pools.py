"""Pre-training pools (d4, d4plus, d4long, nd7, probe): FSTs + example strings → Parquet.

One candidate = one FST draw with its own RNG; it is kept if it is non-empty, cyclic, has strings in
the length range and is not isomorphic to an FST kept before (or to one of the `exclude` pools).
Kept FSTs are assigned in order to train, dev, test (the original shuffled the collection first;
candidates are i.i.d., so taking them in order is the same distribution). easy_dev = the first
min(1000, n_train) train FSTs with `per_fst` new inputs not among that FST's train inputs.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from pathlib import Path

from sip_core.errors import SipError
from sip_core.fst import vocab as V
from sip_core.fst.iso import IsoIndex, key
from sip_core.fst.machine import Machine
from sip_core.fst.walk import Walker
from sip_core.io import write_parquet
from sip_core.data.parallel import CandidateStream, candidate_rng
from sip_core.data.tables import examples_table, fst_table, read_machines

PRETRAIN_LENGTHS = (1, 35)
LONG_LENGTHS = (1, 110)
EASY_DEV_MAX = 1000
MAX_REJECTS = 200  # bounded retries for a new easy-dev input / a feasible target length


@dataclass(frozen=True)
class PoolSpec:
    name: str
    machine: str          # "det" | "bimachine"
    symbols: str          # "V" | "ascii"
    lengths: str          # "range" (uniform-arc walk over 1..35) | "long" (target length then exact walk)
    states: bool = False  # store state sequences (probing data)


POOLS = {
    "d4": PoolSpec("d4", "det", "V", "range"),
    "d4plus": PoolSpec("d4plus", "det", "V", "range"),
    "d4long": PoolSpec("d4long", "det", "V", "long"),
    "nd7": PoolSpec("nd7", "bimachine", "V", "range"),
    "probe": PoolSpec("probe", "det", "ascii", "range", states=True),
}


def _symbols(spec: PoolSpec) -> tuple[str, ...]:
    return V.V if spec.symbols == "V" else V.ASCII_V


def sample_examples(m: Machine, rng: random.Random, spec: PoolSpec, count: int, walkers: dict,
                    avoid: frozenset[str] = frozenset()) -> list[tuple] | None:
    """`count` example tuples (input, output[, states]); None if the machine cannot produce them."""
    out = []
    for _ in range(count):
        for _attempt in range(MAX_REJECTS):
            if spec.lengths == "long":  # SIP-d4-long: target length uniform in 1..110, exact-length walk
                lo = hi = rng.randint(*LONG_LENGTHS)
            else:
                lo, hi = PRETRAIN_LENGTHS
            w = walkers.get((lo, hi))
            if w is None:
                w = walkers[(lo, hi)] = Walker(m, lo, hi)
            if w.empty:
                if spec.lengths == "long":
                    continue
                return None
            ex = w.sample(rng, with_states=spec.states)
            if ex[0] in avoid:
                continue
            break
        else:
            return None
        out.append(ex)
    return out


def pool_candidate(rng: random.Random, opts: dict):
    """Worker job: one FST draw → (machine, iso key, examples) or None."""
    spec: PoolSpec = opts["spec"]
    if spec.machine == "det":
        from sip_core.fst.sample import pretrain_fst

        m = pretrain_fst(rng, _symbols(spec))
    else:
        from sip_core.fst.bimachine import pretrain_bimachine

        m = pretrain_bimachine(rng, _symbols(spec))
    if m is None:
        return None
    ex = sample_examples(m, rng, spec, opts["per_fst"], {})
    if ex is None:
        return None
    return m, key(m), ex


def collect_machines(func, tag: str, seed: int, opts: dict, need: int, workers: int, index: IsoIndex,
                     progress: str | None = None, max_factor: int = 50):
    """Accept candidates in order until `need` new (non-isomorphic) ones; bounded, never hangs."""
    from tqdm import tqdm

    accepted = []
    next_idx = 0
    limit = max_factor * need + 10_000
    bar = tqdm(total=need, desc=progress, unit="fst", disable=progress is None, leave=False)
    with CandidateStream(func, tag, seed, opts, workers) as stream:
        while len(accepted) < need:
            if next_idx >= limit:
                raise SipError(f"found only {len(accepted)} of {need} distinct FSTs after {next_idx} "
                               f"candidates; ask for fewer FSTs")
            wave = min(limit - next_idx, int((need - len(accepted)) * 1.3) + 64 * workers)
            for _, res in stream.run(next_idx, wave):
                next_idx += 1
                if res is None:
                    continue
                m, k, payload = res
                if not index.add(m, k):
                    continue
                accepted.append((m, payload))
                bar.update(1)
                if len(accepted) == need:
                    break
    bar.close()
    return accepted, next_idx


def build_pool(name: str, out: str | Path, n_train: int, n_dev: int, n_test: int, per_fst: int = 5,
               seed: int = 55, workers: int = 1, exclude: tuple[str, ...] = (), progress: bool = True,
               with_states: bool = False) -> dict:
    """``with_states``: also store each example's state sequence (auxiliary state supervision). Recording
    states draws no randomness, so inputs and outputs are the same as without it."""
    if name not in POOLS:
        raise SipError(f"unknown pool {name!r} (choose from {', '.join(POOLS)})")
    spec = POOLS[name]
    if with_states:
        if spec.machine != "det":
            raise SipError(f"--with-states needs a deterministic pool, not {name!r}")
        spec = replace(spec, states=True)
    for label, value in (("--n-train", n_train), ("--n-dev", n_dev), ("--n-test", n_test)):
        if value < 0:
            raise SipError(f"{label} must be >= 0, got {value}")
    if n_train + n_dev + n_test == 0:
        raise SipError("nothing to build: --n-train, --n-dev and --n-test are all 0")
    if per_fst < 1:
        raise SipError(f"--per-fst must be >= 1, got {per_fst}")
    t0 = time.time()
    index = IsoIndex()
    for path in exclude:
        for m in read_machines(path):
            index.add(m)
    n_excluded = len(index)
    need = n_train + n_dev + n_test
    accepted, n_cand = collect_machines(pool_candidate, f"pool-{name}", seed, {"spec": spec, "per_fst": per_fst},
                                        need, workers, index, progress=f"sip data {name}" if progress else None)
    splits = ["train"] * n_train + ["dev"] * n_dev + ["test"] * n_test
    fst_rows, ex_rows = [], []
    for i, ((m, exs), split) in enumerate(zip(accepted, splits)):
        fid = i + 1  # ids from 1 like the original's task ids (row 0 of a TE table stays unused)
        fst_rows.append({"fst_id": fid, "split": split, "machine": m})
        ex_rows.extend((fid, split) + tuple(ex) for ex in exs)
    # easy_dev: seen FSTs, unseen strings (rejection: an input equal to a train input is redrawn)
    for i in range(min(EASY_DEV_MAX, n_train)):
        m, exs = accepted[i]
        rng = candidate_rng(f"pool-{name}-easy", seed, i)
        new = sample_examples(m, rng, spec, per_fst, {}, avoid=frozenset(e[0] for e in exs))
        for ex in new or ():  # an FST with (almost) no other strings contributes none
            ex_rows.append((i + 1, "easy_dev") + tuple(ex))
    out = Path(out)
    write_parquet(fst_table(fst_rows), out / "fsts.parquet")
    write_parquet(examples_table(ex_rows, states=spec.states), out / "examples.parquet")
    return {"pool": name, "fsts": len(fst_rows), "examples": len(ex_rows), "candidates": n_cand,
            "excluded": n_excluded, "seconds": round(time.time() - t0, 2), "out": str(out)}
