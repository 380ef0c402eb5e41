"""Random deterministic FSTs as the original generator draws them (REFERENCE §2.1).

Every function takes an explicit ``random.Random``; the global RNG is never used, so a candidate's
result depends only on its own seed (that is what makes 1 and 2 worker processes byte-identical).
"""
from __future__ import annotations

import random

from sip_core.fst import vocab as V
from sip_core.fst.graph import closure
from sip_core.fst.machine import Machine
from sip_core.fst.minimize import minimize_or_keep

P_SPECIAL = 0.15
P_DROP = 0.4
P_ID = 0.2


def gen_raw(rng: random.Random, n: int, f: int, vocab: str, *, id_prob: float = P_ID, p_drop: float = P_DROP,
            p_special: float = P_SPECIAL, make_initial_final: bool = False) -> Machine:
    """Steps 1–4 of the original `my_gen_random_fst`: draw arcs, trim, choose final states.

    The result is not minimised; it is the copy the original falls back to (trimmed *before* the final
    states were chosen, so it may contain dead states).
    """
    outputs = list(vocab) + [V.EPS]  # ε is one of |V_T|+1 equally likely outputs
    n_out = len(outputs)
    rand = rng.random  # int(random() * n): uniform up to 2^-53, much faster than randrange/choice
    trans: list[tuple[int, str, str, int]] = []
    for s in range(n):
        if rand() < p_special:
            kind = V.SHORTHANDS[int(rand() * 3)]
            trans.append((s, kind, kind, int(rand() * n)))
            continue
        for c in vocab:
            dst = int(rand() * n)  # drawn per (state, symbol), before the drop decision (the code)
            if rand() < p_drop:
                continue
            out = c if rand() < id_prob else outputs[int(rand() * n_out)]
            trans.append((s, c, out, dst))
    finals = set(range(n)) if make_initial_final else set(range(1, n))
    # connect(): keep states reachable from 0 and co-reachable to a final state.
    succ: list[set[int]] = [set() for _ in range(n)]
    pred: list[set[int]] = [set() for _ in range(n)]
    for s, _, _, d in trans:
        succ[s].add(d)
        pred[d].add(s)
    reach = closure([0], succ)
    coreach = closure(finals, pred)
    keep = sorted(reach & coreach)
    if 0 not in keep:
        return Machine(0, (), (), vocab)
    new = {q: i for i, q in enumerate(keep)}  # OpenFst's Connect keeps the relative state order
    trans = [(new[s], i, o, new[d]) for s, i, o, d in trans if s in new and d in new]
    states = list(range(len(keep)))
    finals_new = {new[q] for q in finals if q in new}
    # Shuffle the remaining states and make the first max(0, |Q|-f) non-final (start stays non-final).
    rng.shuffle(states)
    for q in states[: max(0, len(states) - f)]:
        finals_new.discard(q)
    return Machine(len(keep), tuple(sorted(finals_new)), tuple(trans), vocab)


def can_accept(m: Machine) -> bool:
    """Whether some final state is reachable from the start (else minimisation would empty it)."""
    if m.n_states == 0 or not m.finals:
        return False
    succ: list[set[int]] = [set() for _ in range(m.n_states)]
    for s, _, _, d in m.transitions:
        succ[s].add(d)
    return bool(closure([m.start], succ) & m.final_set)


def random_fst(rng: random.Random, n: int, f: int, vocab: str, **kw) -> Machine:
    """Generate, then minimise with the original's three rejection rules; empty machines have 0 states."""
    raw = gen_raw(rng, n, f, vocab, **kw)
    if not can_accept(raw):
        return Machine(0, (), (), vocab)
    return minimize_or_keep(raw)


def pretrain_fst(rng: random.Random, symbols: tuple[str, ...] = V.V, n_choices=(2, 3, 4),
                 vocab_sizes=(5, 25)) -> Machine | None:
    """One pre-training candidate (draw order of the code: n, |V_T|, f, shuffle(V), generator).

    Returns None unless the machine is non-empty and cyclic (infinite domain).
    """
    n = rng.choice(n_choices)
    k = rng.randint(*vocab_sizes)
    f = rng.randint(1, n)
    vocab = "".join(rng.sample(symbols, k))  # = the first k of a shuffled copy, in shuffled order
    m = random_fst(rng, n, f, vocab)
    if m.n_states == 0 or not m.is_cyclic():
        return None
    return m
