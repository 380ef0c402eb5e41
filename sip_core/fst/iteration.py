"""Iteration generalisation split (REFERENCE §3.2): train strings visit no state more than 3 times,
test strings some state 4..30 times."""
from __future__ import annotations

import random

from sip_core.fst.machine import Machine
from sip_core.fst.walk import Walker

TRAIN_MAX_COUNT = 3
TEST_MIN_COUNT = 4
TEST_MAX_COUNT = 30
LENGTHS = (2, 30)


def visit_count(states: list[int]) -> int:
    counts: dict[int, int] = {}
    for q in states:
        counts[q] = counts.get(q, 0) + 1
    return max(counts.values())


def iteration_split(m: Machine, rng: random.Random, n_train: int, n_test: int, draws_per_length: int,
                    lengths: tuple[int, int] = LENGTHS, train_max: int = TRAIN_MAX_COUNT,
                    test_min: int = TEST_MIN_COUNT, test_max: int = TEST_MAX_COUNT):
    """(train pairs, test pairs) or None if the pools are too small for this machine.

    For every length l, draw `draws_per_length` strings of exactly length l (uniform-arc walk);
    a pair goes to the train pool if its iteration count is <= train_max, to the test pool if it is in
    test_min..test_max; both pools are shuffled and cut (no de-duplication, as the original).
    """
    train, test = [], []
    for length in range(lengths[0], lengths[1] + 1):
        w = Walker(m, length, length)
        if w.empty:
            continue
        for _ in range(draws_per_length):
            x, y, states = w.sample(rng, with_states=True)
            c = visit_count(states)
            if c <= train_max:
                train.append((x, y))
            elif test_min <= c <= test_max:
                test.append((x, y))
    if len(train) < n_train or len(test) < n_test:
        return None
    rng.shuffle(train)
    rng.shuffle(test)
    return train[:n_train], test[:n_test]
