"""Deterministic parallel candidate generation.

Candidate i gets its own ``random.Random`` seeded from (tag, seed, i), so its result does not depend
on which process ran it or on what ran before; the caller consumes results strictly in candidate
order. Hence the same files with 1 or 2 workers.
"""
from __future__ import annotations

import multiprocessing as mp
import random
from typing import Any, Callable, Iterator

CHUNK = 256


def candidate_rng(tag: str, seed: int, index: int) -> random.Random:
    return random.Random(f"{tag}/{seed}/{index}")


def _run_chunk(args) -> list[tuple[int, Any]]:
    func, tag, seed, opts, start, stop = args
    return [(i, func(candidate_rng(tag, seed, i), opts)) for i in range(start, stop)]


class CandidateStream:
    """Yields (index, result) for candidates 0, 1, 2, ... in order, computed in waves by a pool."""

    def __init__(self, func: Callable, tag: str, seed: int, opts: dict, workers: int = 1, chunk: int = CHUNK):
        self.func, self.tag, self.seed, self.opts = func, tag, seed, opts
        self.workers = max(1, int(workers))
        self.chunk = chunk
        self._pool = None

    def __enter__(self):
        if self.workers > 1:
            self._pool = mp.get_context("fork").Pool(self.workers)
        return self

    def __exit__(self, exc_type, *exc):
        if self._pool is not None:
            if exc_type is None:
                # close + join lets the wave still in flight finish (bounded waste). Pool.terminate() can
                # hang for ever when a worker blocked reading the task queue holds its lock: a 500k-FST
                # build on a 16-core host stalled for > 8 minutes after its last FST that way.
                self._pool.close()
            else:
                self._pool.terminate()
            self._pool.join()
            self._pool = None

    def run(self, start: int, count: int) -> Iterator[tuple[int, Any]]:
        """Candidates start .. start+count-1, in order (lazily; stop consuming whenever you like)."""
        chunk = max(1, min(self.chunk, -(-count // (4 * self.workers))))
        jobs = [(self.func, self.tag, self.seed, self.opts, a, min(a + chunk, start + count))
                for a in range(start, start + count, chunk)]
        if self._pool is None:
            for job in jobs:
                yield from _run_chunk(job)
        else:
            for part in self._pool.imap(_run_chunk, jobs):
                yield from part


def map_ordered(func: Callable, items: list, workers: int = 1) -> list:
    """`[func(x) for x in items]`, with a process pool when workers > 1 (order kept)."""
    if workers <= 1 or len(items) <= 1:
        return [func(x) for x in items]
    with mp.get_context("fork").Pool(min(workers, len(items))) as pool:
        return pool.map(func, items, chunksize=1)
