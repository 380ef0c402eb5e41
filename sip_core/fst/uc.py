"""Unseen combinations of transitions (REFERENCE §3.3, DESIGN §7).

Works on the shorthand-level machine: a withheld transition may be a shorthand standing for many
concrete arcs. A training string's path avoids all withheld left transitions or all withheld right
ones; a test string's path uses at least one of each.
"""
from __future__ import annotations

import random

from sip_core.fst.machine import Machine
from sip_core.fst.walk import Walker

MAX_PAIRS = 20
LENGTHS = (5, 20)


def crucial_edges(m: Machine) -> set[int]:
    """Tree edges of a DFS from the start; identity arcs (il == ol) are explored first."""
    by_src: list[list[int]] = [[] for _ in range(m.n_states)]
    for i, (s, _, _, _) in enumerate(m.transitions):
        by_src[s].append(i)
    visited: set[int] = set()
    crucial: set[int] = set()
    stack: list[tuple[int, int | None]] = [(m.start, None)]
    while stack:
        q, via = stack.pop()
        if q in visited:
            continue
        visited.add(q)
        if via is not None:
            crucial.add(via)
        outs = by_src[q]
        non_id = [i for i in outs if m.transitions[i][1] != m.transitions[i][2]]
        ident = [i for i in outs if m.transitions[i][1] == m.transitions[i][2]]
        for i in non_id + ident:  # pushed last = popped first
            stack.append((m.transitions[i][3], i))
    return crucial


def random_edge_pairs(m: Machine, rng: random.Random, max_pairs: int = MAX_PAIRS) -> list[tuple[int, int]]:
    """The original's `random_edge_pairs`: adjacent (incoming, outgoing) candidate pairs through a node.

    Candidates = non-crucial, non-self-loop transitions. Passes over nodes in ascending id until
    max_pairs were emitted or a pass emits nothing; repeats are possible (as in the code).
    """
    crucial = crucial_edges(m)
    cand = [i for i, (s, _, _, d) in enumerate(m.transitions) if i not in crucial and s != d]
    used_left: set[int] = set()
    used_right: set[int] = set()
    pairs: list[tuple[int, int]] = []
    while len(pairs) < max_pairs:
        changed = False
        for v in range(m.n_states):
            inc = [i for i in cand if m.transitions[i][3] == v and i not in used_right]
            out = [i for i in cand if m.transitions[i][0] == v and i not in used_left]
            if inc and out:
                rng.shuffle(inc)
                rng.shuffle(out)
                pairs.append((inc[0], out[0]))
                used_left.add(inc[0])
                used_right.add(out[0])
                changed = True
                if len(pairs) >= max_pairs:
                    break
        if not changed:
            break
    return pairs


def without(m: Machine, drop: set[int]) -> Machine:
    """m without some transitions (state numbering kept, so it is not canonical; sampling only)."""
    return Machine(m.n_states, m.finals, tuple(t for i, t in enumerate(m.transitions) if i not in drop),
                   m.vocab, m.kind)


def flagged(m: Machine, lefts: set[int], rights: set[int]) -> Machine:
    """Product of m with the flags (used a left?, used a right?); final iff final and both flags set.

    Its language is dom(f) minus dom(f_train), with f's outputs: the test machine.
    """
    trans = []
    for i, (s, il, ol, d) in enumerate(m.transitions):
        for a in (0, 1):
            for b in (0, 1):
                a2 = a | (i in lefts)
                b2 = b | (i in rights)
                trans.append((4 * s + 2 * a + b, il, ol, 4 * d + 2 * a2 + b2))
    finals = tuple(4 * q + 3 for q in m.finals)
    return Machine(4 * m.n_states, finals, tuple(trans), m.vocab, m.kind)


def uc_split(m: Machine, rng: random.Random, n_train: int, n_test: int, lengths: tuple[int, int] = LENGTHS):
    """(withheld pairs, train pairs, test pairs) or None if this machine admits no UC split."""
    pairs = random_edge_pairs(m, rng)
    if not pairs:
        return None
    lefts = {a for a, _ in pairs}
    rights = {b for _, b in pairs}
    lo, hi = lengths
    w1 = Walker(without(m, lefts), lo, hi)
    w2 = Walker(without(m, rights), lo, hi)
    wt = Walker(flagged(m, lefts, rights), lo, hi)
    if wt.empty or (w1.empty and w2.empty):
        return None
    # f_train = union(f1, f2): a new start with an ε arc into each copy, so randgen picks a copy
    # uniformly (among the non-empty ones), then walks in it.
    copies = [w for w in (w1, w2) if not w.empty]
    train = [copies[int(rng.random() * len(copies))].sample(rng) for _ in range(n_train)]
    test = [wt.sample(rng) for _ in range(n_test)]
    return pairs, train, test
