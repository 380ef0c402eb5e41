"""The pure-Python minimiser gives exactly the pynini path's machine (sip_core.fst.minimize)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from sip_core.fst import vocab as V
from sip_core.fst.iso import det_key
from sip_core.fst.machine import Machine
from sip_core.fst.minimize_py import minimize_or_keep as mini_py
from sip_core.fst.sample import can_accept, gen_raw

pynini = pytest.importorskip("pynini")
from sip_core.fst.minimize import minimize_or_keep as mini_pn  # noqa: E402  (needs pynini)


def _candidates(kind: str, count: int, seed: int):
    """Raw machines as the generators draw them (pre-training, evaluation, bimachine automata)."""
    rng = random.Random(seed)
    for _ in range(count):
        if kind == "pretrain":  # the draws of sample.pretrain_fst
            n = rng.choice((2, 3, 4))
            k = rng.randint(5, 25)
            f = rng.randint(1, n)
            raw = gen_raw(rng, n, f, "".join(rng.sample(V.V, k)))
        elif kind == "eval":
            n = rng.choice((4, 5, 7, 10))
            raw = gen_raw(rng, n, rng.randint(1, n), "".join(rng.sample(V.ASCII_V, 25)))
        else:  # left/right automata of bimachines: start final, no shorthands
            k = rng.randint(2, 5)
            raw = gen_raw(rng, k, k, "".join(rng.sample(V.V, rng.randint(5, 25))), id_prob=0.25,
                          p_drop=0.6, p_special=0.0, make_initial_final=True)
        if can_accept(raw):
            yield raw


@pytest.mark.parametrize("kind,count", [("pretrain", 2500), ("eval", 300), ("automaton", 300)])
def test_agrees_with_pynini_on_generator_candidates(kind, count):
    n = bad = 0
    for raw in _candidates(kind, count, seed=20240811):
        a, b = mini_pn(raw), mini_py(raw)
        n += 1
        bad += a != b  # exact: states, finals, transitions in order
        assert det_key(a) == det_key(b), raw
    assert n > 0.7 * count and bad == 0


# Arbitrary small deterministic machines: wider than the generator (start may be final, unreachable
# states, cased letters for <upper>/<lower>, outputs that pushing moves across several arcs).
ALPHA = "abAB"


@st.composite
def machines(draw):
    n = draw(st.integers(1, 5))
    trans = []
    for s in range(n):
        if draw(st.integers(0, 5)) == 0:  # a shorthand state has only its shorthand arc
            sh = draw(st.sampled_from(V.SHORTHANDS))
            trans.append((s, sh, sh, draw(st.integers(0, n - 1))))
            continue
        for c in ALPHA:
            if draw(st.booleans()):
                out = draw(st.sampled_from(ALPHA + V.EPS)) if draw(st.booleans()) else c
                trans.append((s, c, out, draw(st.integers(0, n - 1))))
    finals = tuple(sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))))
    return Machine(n, finals, tuple(trans), ALPHA)


@settings(max_examples=300, deadline=None)
@given(machines())
def test_agrees_with_pynini_on_arbitrary_machines(m):
    ours = mini_py(m)
    theirs = mini_pn(m)
    assert ours == theirs
    if ours.n_states:  # (det_key needs a start state)
        assert det_key(ours) == det_key(theirs)


def _strings(vocab: str, rng: random.Random, count: int = 40, hi: int = 7):
    return {"".join(rng.choice(vocab) for _ in range(rng.randint(0, hi))) for _ in range(count)}


@settings(max_examples=200, deadline=None)
@given(machines(), st.integers(0, 10**6))
def test_minimised_machine_computes_the_same_function(m, seed):
    """Same output (or rejection) as the raw machine on random strings, by Machine.apply and by
    pynini composition of the shorthand-expanded machines."""
    ours = mini_py(m)
    assert ours.n_states <= m.n_states
    a, b = m.expanded_pynini(), ours.expanded_pynini()
    for x in _strings(m.vocab, random.Random(seed)):
        assert ours.apply(x) == m.apply(x)
        assert _outputs(a, x) == _outputs(b, x)


def _outputs(fst, x: str) -> set[str]:
    acc = pynini.accep(x) if x else pynini.accep("")
    comp = pynini.compose(acc, fst).project("output").rmepsilon().optimize()
    return set(comp.paths().ostrings()) if comp.num_states() else set()


def test_known_cases():
    # outputs pushed toward the start and handed back by FactorWeight: same machine, accepted
    m = Machine(3, (2,), ((0, "a", "x", 1), (1, "b", "y", 2), (2, "a", "a", 2)), "abxy")
    assert mini_py(m) == m
    # start on a cycle with a non-empty common prefix: ε-input start arc -> keep the input
    cyc = Machine(3, (2,), ((0, "a", "x", 1), (1, "b", "y", 2), (2, "a", "a", 0)), "abxy")
    assert mini_py(cyc) == cyc.renumbered_bfs() == mini_pn(cyc)
    # a shorthand arc would lose its output to pushing -> keep the input
    sh = Machine(3, (2,), ((0, "a", "x", 1), (1, V.ID, V.ID, 2), (2, "a", "a", 2)), "ab")
    assert mini_py(sh) == sh.renumbered_bfs() == mini_pn(sh)
    # acceptor input: plain minimisation, arcs by label number
    acc = Machine(3, (1, 2), ((0, "b", "b", 1), (0, "a", "a", 2), (1, "a", "a", 1), (2, "a", "a", 2)), "ab")
    assert mini_py(acc) == Machine(2, (1,), ((0, "a", "a", 1), (0, "b", "b", 1), (1, "a", "a", 1)), "ab")
    assert mini_py(Machine(0, (), (), "ab")).n_states == 0
    assert mini_py(Machine(2, (), ((0, "a", "a", 1),), "ab")).n_states == 0  # empty language
