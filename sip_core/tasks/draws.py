"""Few-shot train/test draws exactly as the original ``RandomSplit`` makes them.

The original seeds Python's global ``random`` with the run seed, draws one throw-away
``random.randint(0, 100_000_000)`` (printed "to verify seed"), shuffles the full example list and
takes the first ``num_train`` as train and *all* the rest as test. Reproducing the throw-away draw
keeps our draw for seed s identical to the original's for seed s. Nothing is de-duplicated: WikiPron
lists some words with several pronunciations, and those can land in both train and test, as in the paper.
"""
from __future__ import annotations

import random
from typing import Sequence

from sip_core.errors import SipError

Pair = tuple[str, str]
Row = tuple[str, str, int, str, str, str]  # task_id, group, draw, split, input, output


def random_split(pairs: Sequence[Pair], seed: int, n_train: int, max_test: int | None = None
                 ) -> tuple[list[Pair], list[Pair]]:
    """Shuffle like the original; ``max_test`` (small scales) keeps only the first test items of the shuffle."""
    rng = random.Random(seed)  # same stream as random.seed(seed) on the module-level generator
    rng.randint(0, 100_000_000)
    data = list(pairs)
    rng.shuffle(data)
    train, test = data[:n_train], data[n_train:]
    if max_test is not None:
        test = test[:max_test]
    return train, test


def task_rows(prefix: str, group: str, pairs: Sequence[Pair], draws: int, seed: int, n_train: int,
              max_test: int | None = None) -> list[Row]:
    """Rows of ``draws`` tasks ``<prefix>-d<k>``; draw k uses seed ``seed + k``. Train rows first, shuffle order kept."""
    if n_train < 1 or draws < 1:
        raise SipError(f"{prefix}: --n-train and --draws must be at least 1")
    if max_test is not None and max_test < 1:
        raise SipError(f"{prefix}: --max-test must be at least 1")
    if len(pairs) <= n_train:
        raise SipError(f"{prefix}: only {len(pairs)} examples, need more than --n-train {n_train} "
                       "to leave a test set")
    rows: list[Row] = []
    for k in range(draws):
        task_id = f"{prefix}-d{k}"
        train, test = random_split(pairs, seed + k, n_train, max_test)
        rows += [(task_id, group, k, "train", x, y) for x, y in train]
        rows += [(task_id, group, k, "test", x, y) for x, y in test]
    return rows
