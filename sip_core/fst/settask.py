"""The Set task (Wu et al. 2022) as the original generates it (REFERENCE §3.6)."""
from __future__ import annotations

import random

from sip_core.fst import vocab as V


def set_input(rng: random.Random, max_len: int = 35, symbols: tuple[str, ...] = V.V) -> str:
    """Length L ~ U{1..max_len}, k ~ U{1..L} distinct types; every type occurs at least once."""
    length = rng.randint(1, max_len)
    k = rng.randint(1, length)
    types = rng.sample(symbols, k)
    counts = []
    used = 0
    for j in range(k - 1):
        remaining_types = k - 1 - j  # types after this one, each needs >= 1 symbol
        counts.append(rng.randint(1, length - used - remaining_types))
        used += counts[-1]
    counts.append(length - used)
    chars = [t for t, c in zip(types, counts) for _ in range(c)]
    rng.shuffle(chars)
    return "".join(chars)


def set_output(x: str) -> str:
    """Duplicates removed, first occurrences kept in order (dabacd -> dabc)."""
    return "".join(dict.fromkeys(x))
