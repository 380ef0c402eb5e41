"""Machine, sampler, minimisation and walk, checked against pynini composition."""
from __future__ import annotations

import random
from collections import Counter

import pynini
import pytest
from hypothesis import given, settings, strategies as st

from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine
from sip_core.fst.minimize import minimize_or_keep
from sip_core.fst.sample import can_accept, gen_raw, pretrain_fst
from sip_core.fst.walk import Walker
from test_fst_oracle import linear, pynini_expanded, pynini_outputs, sigma_range, states_of

SEEDS = st.integers(min_value=0, max_value=10**9)
FAST = settings(max_examples=100, deadline=None)


def _pretrain(seed: int) -> Machine:
    rng = random.Random(seed)
    for _ in range(100):
        m = pretrain_fst(rng)
        if m is not None and not Walker(m, 1, 35).empty:
            return m
    raise AssertionError("no machine")


@FAST
@given(SEEDS)
def test_pretrain_fst_shape(seed):
    m = _pretrain(seed)
    assert 1 <= m.n_states <= 4 and 5 <= len(m.vocab) <= 25
    assert len(set(m.vocab)) == len(m.vocab) and set(m.vocab) <= set(V.V)
    assert 0 not in m.finals and m.start == 0
    assert m.is_cyclic()
    # input-deterministic after expansion, checked by OpenFst's own property computation
    fst = pynini_expanded(m)
    assert fst.properties(pynini.I_DETERMINISTIC, True) == pynini.I_DETERMINISTIC
    for s, il, ol, d in m.transitions:  # the minimisation rejection rules hold
        assert il != V.EPS
        assert (il in V.SHORTHANDS) == (ol in V.SHORTHANDS) and (il not in V.SHORTHANDS or il == ol)
        assert V.symbol_id(il) and V.symbol_id(ol) is not None


@FAST
@given(SEEDS)
def test_walk_agrees_with_pynini_composition(seed):
    m = _pretrain(seed)
    rng = random.Random(seed + 1)
    lo, hi = sorted((rng.randint(1, 12), rng.randint(1, 12)))
    w = Walker(m, lo, hi)
    comp = pynini.compose(sigma_range(m.vocab, lo, hi), pynini_expanded(m)).connect()
    assert w.empty == (comp.num_states() == 0)
    if w.empty:
        return
    for _ in range(5):
        x, y, states = w.sample(rng, with_states=True)
        assert lo <= len(x) <= hi
        assert pynini_outputs(m, x) == {y}
        assert states == states_of(m, x)
        assert m.apply(x) == y and m.state_sequence(x) == states


@FAST
@given(SEEDS)
def test_minimised_equivalent_to_unminimised(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 4)
    vocab = "".join(rng.sample(V.V, rng.randint(5, 12)))
    raw = gen_raw(rng, n, rng.randint(1, n), vocab)
    if not can_accept(raw):
        return
    mini = minimize_or_keep(raw)
    assert mini.n_states <= raw.n_states
    a, b = pynini_expanded(raw), pynini_expanded(mini)
    # strings of the domain (OpenFst randgen on the raw machine) and random strings over V_T
    strings = set()
    for i in range(10):
        path = pynini.randgen(pynini.compose(sigma_range(vocab, 1, 8), a), npath=1, seed=seed % 10**6 + i,
                              select="uniform")
        strings.add("".join(chr(arc.ilabel) for q in path.states() for arc in path.arcs(q) if arc.ilabel))
    strings |= {"".join(rng.choice(vocab) for _ in range(rng.randint(1, 6))) for _ in range(20)}
    for x in strings:
        assert pynini_outputs(a, x) == pynini_outputs(b, x)


def test_walk_distribution_matches_randgen():
    """Same distribution as OpenFst randgen (uniform selector) on compose(Σ^{lo..hi}, FST)."""
    m = Machine(2, (1,), ((0, "a", "x", 1), (0, "b", "", 0), (1, "a", "a", 0), (1, "b", "b", 1)), "ab")
    lo, hi, n = 1, 3, 6000
    comp = pynini.compose(sigma_range("ab", lo, hi), pynini_expanded(m)).connect()
    w, rng = Walker(m, lo, hi), random.Random(7)
    ours = Counter(w.sample(rng)[0] for _ in range(n))
    theirs = Counter()
    for i in range(n):
        path = pynini.randgen(comp, npath=1, seed=i + 1, select="uniform")
        theirs["".join(chr(a.ilabel) for q in path.states() for a in path.arcs(q) if a.ilabel)] += 1
    tv = 0.5 * sum(abs(ours[k] - theirs[k]) for k in set(ours) | set(theirs)) / n
    assert tv < 0.04, (ours, theirs)


def test_exact_length_walk_and_empty_range():
    m = Machine(2, (1,), ((0, "a", "a", 1), (1, "a", "a", 0)), "a")  # odd lengths only
    w = Walker(m, 4, 4)
    assert w.empty and w.sample(random.Random(0)) is None
    w = Walker(m, 5, 5)
    assert w.sample(random.Random(0)) == ("aaaaa", "aaaaa")


def test_iteration_count_and_rows_roundtrip():
    m = Machine(3, (2,), ((0, "a", "b", 1), (1, V.ID, V.ID, 1), (1, "c", "", 2)), "ab")
    assert m.iteration_count("aaac") == 3  # state 1 after a, a, a
    assert m.apply("ac") == "b" and m.apply("ca") is None
    assert Machine.from_row(m.to_row()) == m
    assert Machine.from_pynini(m.to_pynini(), m.vocab) == m.renumbered_bfs() == m


def test_nondeterministic_path_matches_composition():
    # two paths read 'a' but only one reaches a final state
    m = Machine(3, (2,), ((0, "a", "x", 1), (0, "a", "y", 2), (2, "a", "z", 2), (1, "b", "b", 2)), "ab",
                "bimachine")
    for x in ("a", "aa", "ab", "b", "aba"):
        outs = pynini_outputs(m, x)
        assert (m.apply(x) in outs) if outs else m.apply(x) is None
