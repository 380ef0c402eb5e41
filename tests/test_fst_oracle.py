"""Independent checking paths (pynini composition, a separate transition walk) used by the FST and
data tests, plus tests of the oracle itself. Nothing here uses Machine.path / Walker."""
from __future__ import annotations

import pynini
import pytest

from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine, label_to_int

ONE = pynini.Weight.one("tropical")


def pynini_expanded(m: Machine) -> pynini.Fst:
    """Shorthand expansion done here again (not Machine.expanded), as a pynini FST."""
    fst = pynini.Fst()
    fst.add_states(m.n_states)
    fst.set_start(m.start)
    for q in m.finals:
        fst.set_final(q, ONE)
    for s, il, ol, d in m.transitions:
        if il == V.ID:
            pairs = [(a, a) for a in m.vocab]
        elif il == V.UPPER:
            pairs = [(a, a.upper()) for a in m.vocab if a.upper() != a and a.upper() in V.V]
        elif il == V.LOWER:
            pairs = [(a, a.lower()) for a in m.vocab if a.lower() != a and a.lower() in V.V]
        else:
            pairs = [(il, ol)]
        for a, b in pairs:
            fst.add_arc(s, pynini.Arc(label_to_int(a), label_to_int(b), ONE, d))
    return fst.arcsort("ilabel")


def linear(x: str) -> pynini.Fst:
    fst = pynini.Fst()
    fst.add_states(len(x) + 1)
    fst.set_start(0)
    fst.set_final(len(x), ONE)
    for i, c in enumerate(x):
        fst.add_arc(i, pynini.Arc(ord(c), ord(c), ONE, i + 1))
    return fst


def pynini_outputs(m_or_fst, x: str) -> set[str]:
    """All outputs of x by composition (empty set: rejected)."""
    fst = pynini_expanded(m_or_fst) if isinstance(m_or_fst, Machine) else m_or_fst
    comp = pynini.compose(linear(x), fst).connect().project("output").rmepsilon()
    outs = set()
    if comp.num_states() == 0:
        return outs
    # enumerate output strings of the (finite) result by DFS over labels
    zero = pynini.Weight.zero("tropical")
    stack = [(comp.start(), "")]
    while stack:
        q, acc = stack.pop()
        if comp.final(q) != zero:
            outs.add(acc)
        for arc in comp.arcs(q):
            stack.append((arc.nextstate, acc + (chr(arc.olabel) if arc.olabel else "")))
    return outs


def sigma_range(symbols, lo: int, hi: int) -> pynini.Fst:
    """Acceptor of Σ^{lo..hi}."""
    fst = pynini.Fst()
    fst.add_states(hi + 1)
    fst.set_start(0)
    for i in range(lo, hi + 1):
        fst.set_final(i, ONE)
    for i in range(hi):
        for c in symbols:
            fst.add_arc(i, pynini.Arc(ord(c), ord(c), ONE, i + 1))
    return fst


def transitions_used(m: Machine, x: str) -> list[list[int]]:
    """Every accepting path of x as its list of transition indices (shorthand level), by a plain
    search over `transitions` written independently of Machine.path."""
    def matches(il, ol, c):
        if il == V.ID:
            return c in m.vocab
        if il == V.UPPER:
            return c in m.vocab and c.upper() != c and c.upper() in V.V
        if il == V.LOWER:
            return c in m.vocab and c.lower() != c and c.lower() in V.V
        return il == c

    paths = [(m.start, [])]
    for c in x:
        paths = [(d, used + [i]) for q, used in paths for i, (s, il, ol, d) in enumerate(m.transitions)
                 if s == q and matches(il, ol, c)]
    return [used for q, used in paths if q in m.final_set]


def states_of(m: Machine, x: str) -> list[int]:
    (used,) = transitions_used(m, x)
    return [m.start] + [m.transitions[i][3] for i in used]


# ------------------------------------------------------------------------------- oracle self-tests
def _toy() -> Machine:
    # 0 -a:b-> 1, 1 -<id>-> 1 over vocab "ab"; accepts a(a|b)*, outputs b + copy
    return Machine(2, (1,), ((0, "a", "b", 1), (1, V.ID, V.ID, 1)), "ab")


def test_oracle_outputs():
    m = _toy()
    assert pynini_outputs(m, "aab") == {"bab"}
    assert pynini_outputs(m, "b") == set()
    assert transitions_used(m, "aab") == [[0, 1, 1]]
    assert states_of(m, "ab") == [0, 1, 1]


def test_oracle_upper_lower():
    m = Machine(2, (1,), ((0, V.UPPER, V.UPPER, 1), (1, V.LOWER, V.LOWER, 1)), "aB1")
    assert pynini_outputs(m, "aB") == {"Ab"}
    assert pynini_outputs(m, "1") == set()


@pytest.mark.parametrize("x", ["", "a", "ab"])
def test_sigma_range(x):
    acc = pynini.compose(sigma_range("ab", 1, 2), linear(x)).connect()
    assert (acc.num_states() > 0) == (1 <= len(x) <= 2)
