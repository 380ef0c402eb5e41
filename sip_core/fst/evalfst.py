"""Evaluation FSTs (REFERENCE §3.1): ASCII symbols, |V_T| = 25, exactly n states."""
from __future__ import annotations

import random

from sip_core.errors import SipError
from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine
from sip_core.fst.sample import random_fst

TRIES_PER_VOCAB = 50   # the original's limit for one (f, V_T) draw
MAX_VOCAB_DRAWS = 200  # ours: the original raised; we redraw f and V_T, within a bound


def eval_fst(rng: random.Random, n: int, vocab_size: int = 25, symbols: tuple[str, ...] = V.ASCII_V) -> Machine:
    """A deterministic FST with exactly n states (after minimisation, or its fallback copy)."""
    if n < 2:
        raise SipError(f"an evaluation FST needs at least 2 states (the start state is never final), got {n}")
    if not 1 <= vocab_size <= len(symbols):
        raise SipError(f"vocabulary size must be in 1..{len(symbols)}, got {vocab_size}")
    for _ in range(MAX_VOCAB_DRAWS):
        f = rng.randint(1, n)
        vocab = "".join(rng.sample(symbols, vocab_size))
        for _ in range(TRIES_PER_VOCAB):
            m = random_fst(rng, n, f, vocab)
            if m.n_states == n:
                return m
    raise SipError(f"no FST with exactly {n} states found in {MAX_VOCAB_DRAWS * TRIES_PER_VOCAB} draws")
