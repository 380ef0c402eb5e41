"""Non-deterministic functional FSTs built from bimachines (REFERENCE §3.5, Mihov & Schulz 6.2.1)."""
from __future__ import annotations

import random

from sip_core.errors import SipError
from sip_core.fst.graph import closure
from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine
from sip_core.fst.minimize import minimize_or_keep
from sip_core.fst.sample import can_accept, gen_raw

AUTOMATON_ID_PROB = 0.25  # the generator's default, used for the left/right automata
PSI_ID_PROB = 0.2


def automaton(rng: random.Random, k: int, vocab: str, p_drop: float) -> Machine:
    """A left/right automaton: all states final, no shorthands, minimised as a transducer.

    Its input projection (arcs src -σ-> dst) is what the product uses; it is deterministic.
    """
    raw = gen_raw(rng, k, k, vocab, id_prob=AUTOMATON_ID_PROB, p_drop=p_drop, p_special=0.0,
                  make_initial_final=True)
    if not can_accept(raw):
        return Machine(0, (), (), vocab)
    return minimize_or_keep(raw)


def product(left: Machine, right: Machine, vocab: str, rng: random.Random, psi_id_prob: float = PSI_ID_PROB) -> Machine:
    """Product FST of a bimachine (left, right, ψ); ψ is drawn here per (left state, σ, right state)."""
    outputs = list(vocab) + [V.EPS]
    psi = {}
    for l in range(left.n_states):
        for c in vocab:
            for r in range(right.n_states):
                psi[(l, c, r)] = c if rng.random() < psi_id_prob else outputs[int(rng.random() * len(outputs))]
    l_arcs = [(s, i, d) for s, i, _, d in left.transitions]
    r_by_sym: dict[str, list[tuple[int, int]]] = {}
    for s, i, _, d in right.transitions:
        r_by_sym.setdefault(i, []).append((s, d))
    ids: dict[tuple[int, int], int] = {}

    def sid(pair):
        if pair not in ids:
            ids[pair] = len(ids) + 1  # 0 is the new start state
        return ids[pair]

    arcs: dict[int, list[tuple[int, str, str, int]]] = {}
    for l, c, l2 in l_arcs:
        for r2, r in r_by_sym.get(c, ()):
            src, dst = sid((l, r)), sid((l2, r2))
            arcs.setdefault(src, []).append((src, c, psi[(l, c, r2)], dst))
    n = len(ids) + 1
    finals = {q for (l, r), q in ids.items() if r == right.start}
    # rmepsilon of start -ε-> (left start, r): the start gets those pairs' arcs and finality.
    starts = [q for (l, r), q in sorted(ids.items(), key=lambda kv: kv[1]) if l == left.start]
    start_arcs = [(0, c, o, d) for q in starts for (_, c, o, d) in arcs.get(q, [])]
    if any(q in finals for q in starts):
        finals.add(0)
    trans = start_arcs + [t for q in range(1, n) for t in arcs.get(q, [])]
    m = Machine(n, tuple(sorted(finals)), tuple(trans), vocab, "bimachine")
    return _connect(m)


def _connect(m: Machine) -> Machine:
    """Trim (reachable and co-reachable states only), then canonical BFS numbering."""
    succ = [set() for _ in range(m.n_states)]
    pred = [set() for _ in range(m.n_states)]
    for s, _, _, d in m.transitions:
        succ[s].add(d)
        pred[d].add(s)

    keep = closure([0], succ) & closure(m.finals, pred)
    if 0 not in keep:
        return Machine(0, (), (), m.vocab, m.kind)
    trans = tuple(t for t in m.transitions if t[0] in keep and t[3] in keep)
    finals = tuple(q for q in m.finals if q in keep)
    return Machine(m.n_states, finals, trans, m.vocab, m.kind).renumbered_bfs()


def pretrain_bimachine(rng: random.Random, symbols: tuple[str, ...] = V.V) -> Machine | None:
    """SIP-nd7 candidate: |V_T| ~ U{5..25}, (n_L, n_R) ∈ {(2,2), (2,3), (3,2)}, p_drop 0.6."""
    k = rng.randint(5, 25)
    vocab = "".join(rng.sample(symbols, k))
    n_l = rng.randint(2, 3)
    n_r = rng.randint(2, 6 // n_l)
    if rng.random() < 0.5:
        n_l, n_r = n_r, n_l
    left = automaton(rng, n_l, vocab, 0.6)
    right = automaton(rng, n_r, vocab, 0.6)
    if not left.n_states or not right.n_states:
        return None
    m = product(left, right, vocab, rng)
    if m.n_states == 0 or not m.is_cyclic():
        return None
    return m


def eval_bimachine(rng: random.Random, n_left: int = 5, n_right: int = 4, vocab_size: int = 25,
                   symbols: tuple[str, ...] = V.ASCII_V, p_drop: float = 0.4) -> Machine:
    """Evaluation bimachine: left/right automata with exactly n_left / n_right states (checked on the
    minimised transducers, as the original), product with <= n_left * n_right + 1 states."""
    for _ in range(200):
        vocab = "".join(rng.sample(symbols, vocab_size))
        parts = []
        for k in (n_left, n_right):
            for _ in range(50):
                a = automaton(rng, k, vocab, p_drop)
                if a.n_states == k:
                    parts.append(a)
                    break
        if len(parts) < 2:
            continue
        m = product(parts[0], parts[1], vocab, rng)
        if m.n_states and m.is_cyclic():
            return m
    raise SipError(f"no cyclic bimachine with {n_left}x{n_right} states found")
