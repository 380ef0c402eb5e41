"""A pynini-free, endless stream of fresh pre-training examples (for training on GPU hosts).

A fixed pool is memorised when trained on long enough; this draws new FSTs instead, in data-loader
worker processes, with the generator of the pools (same draws as `sip_core.fst.sample.pretrain_fst`)
but the pure-Python minimiser (`sip_core.fst.minimize_py`, equal to the pynini result), the Walker
and the pool's candidate filters (non-empty, cyclic, strings in the length range).

Reproducibility: candidates come in chunks of `chunk_size`; chunk c of worker w draws from one
``random.Random(f"stream-{pool}/{seed}/{w}/{c}")``, so a (seed, worker, chunk) always yields the
same items whatever ran before, and a stream can resume at any chunk. Give every data-loader worker
(and every rank) its own worker id. Items of one FST come consecutively (`per_fst` of them); the
training engine shuffles. No torch here: the engine wraps this in an IterableDataset.
"""
from __future__ import annotations

import random
from typing import Iterable, Iterator

from sip_core.errors import SipError
from sip_core.fst import vocab as V
from sip_core.fst.iso import key as iso_key
from sip_core.fst.machine import Machine
from sip_core.fst.minimize_py import minimize_or_keep
from sip_core.fst.sample import can_accept, gen_raw
from sip_core.data.pools import POOLS, sample_examples

CHUNK = 64  # candidates per RNG seed


def fresh_fst(rng: random.Random, symbols: tuple[str, ...]) -> Machine | None:
    """`sample.pretrain_fst` with the pure-Python minimiser (same draws, same machine)."""
    n = rng.choice((2, 3, 4))
    k = rng.randint(5, 25)
    f = rng.randint(1, n)
    vocab = "".join(rng.sample(symbols, k))
    raw = gen_raw(rng, n, f, vocab)
    if not can_accept(raw):
        return None
    m = minimize_or_keep(raw)
    if m.n_states == 0 or not m.is_cyclic():
        return None
    return m


def chunk_rng(pool: str, seed: int, worker: int, chunk: int) -> random.Random:
    return random.Random(f"stream-{pool}/{seed}/{worker}/{chunk}")


def exclusion_keys(paths: Iterable, splits: tuple[str, ...] | None = ("dev", "test")) -> frozenset:
    """Isomorphism keys of the FSTs of some `fsts.parquet` files (default: their dev and test
    splits), so that a stream never yields an FST isomorphic to an evaluation FST."""
    from sip_core.data.tables import read_machines  # pyarrow only when asked

    return frozenset(iso_key(m) for p in paths for m in read_machines(p, splits))


class ExampleStream:
    """Iterate to get (machine, input, output) items — (…, states) for the probe pool — forever.

    `rows=True` gives the machine as its Parquet row dict (DESIGN §5 layout, one dict shared by the
    items of an FST) instead of a `Machine`. `exclude`: iso keys (see `exclusion_keys`) to skip.
    """

    def __init__(self, pool: str = "d4", seed: int = 0, worker: int = 0, per_fst: int = 5,
                 exclude: frozenset = frozenset(), start_chunk: int = 0, chunk_size: int = CHUNK,
                 rows: bool = False):
        spec = POOLS.get(pool)
        if spec is None or spec.machine != "det":
            names = ", ".join(n for n, s in POOLS.items() if s.machine == "det")
            raise SipError(f"no fresh-FST stream for pool {pool!r} (choose from {names})")
        if per_fst < 1 or chunk_size < 1:
            raise SipError("per_fst and chunk_size must be >= 1")
        self.pool, self.spec, self.seed, self.worker = pool, spec, seed, worker
        self.per_fst, self.exclude, self.start_chunk = per_fst, exclude, start_chunk
        self.chunk_size, self.rows = chunk_size, rows
        self.stats = {"candidates": 0, "fsts": 0, "excluded": 0}

    def chunk(self, c: int) -> list[tuple[Machine, list[tuple]]]:
        """The accepted FSTs of chunk c with their examples (a pure function of the stream's
        settings and c)."""
        rng = chunk_rng(self.pool, self.seed, self.worker, c)
        symbols = V.V if self.spec.symbols == "V" else V.ASCII_V
        out = []
        for _ in range(self.chunk_size):
            self.stats["candidates"] += 1
            m = fresh_fst(rng, symbols)
            if m is None:
                continue
            ex = sample_examples(m, rng, self.spec, self.per_fst, {})
            if ex is None:
                continue
            # exclusion after sampling, so that excluding never changes the other FSTs' draws
            if self.exclude and iso_key(m) in self.exclude:
                self.stats["excluded"] += 1
                continue
            self.stats["fsts"] += 1
            out.append((m, ex))
        return out

    def fsts(self) -> Iterator[tuple[Machine, list[tuple]]]:
        c = self.start_chunk
        while True:
            yield from self.chunk(c)
            c += 1

    def __iter__(self) -> Iterator[tuple]:
        for m, exs in self.fsts():
            machine = m.to_row() if self.rows else m
            for ex in exs:
                yield (machine,) + tuple(ex)
