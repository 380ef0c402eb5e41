"""Iteration and UC splits, bimachines, Set task — each checked by an independent path, plus mutation
tests showing the checkers catch a corrupted output or a flipped split."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from sip_core.errors import SipError
from sip_core.fst import vocab as V
from sip_core.fst.bimachine import eval_bimachine, pretrain_bimachine
from sip_core.fst.evalfst import eval_fst
from sip_core.fst.iteration import iteration_split
from sip_core.fst.settask import set_input, set_output
from sip_core.fst.uc import crucial_edges, uc_split
from test_fst_oracle import pynini_outputs, transitions_used

SEEDS = st.integers(min_value=0, max_value=10**9)


# ------------------------------------------------------------------ checkers (independent paths)
def check_iteration(m, train, test, train_max=3, test_min=4):
    """Counts recomputed from the independent transition search; outputs from pynini."""
    for split, pairs in (("train", train), ("test", test)):
        for x, y in pairs:
            (used,) = transitions_used(m, x)
            states = [m.start] + [m.transitions[i][3] for i in used]
            count = max(states.count(q) for q in set(states))
            ok = count <= train_max if split == "train" else test_min <= count <= 30
            assert ok, f"{split} string {x!r} has iteration count {count}"
            assert pynini_outputs(m, x) == {y}, f"wrong output for {x!r}"


def check_uc(m, pairs, train, test, lo=5, hi=20):
    lefts = {a for a, _ in pairs}
    rights = {b for _, b in pairs}
    crucial = crucial_edges(m)
    for a, b in pairs:
        assert m.transitions[a][3] == m.transitions[b][0], "a pair is adjacent through one state"
        for t in (a, b):
            assert t not in crucial and m.transitions[t][0] != m.transitions[t][3]
    for split, strings in (("train", train), ("test", test)):
        for x, y in strings:
            assert lo <= len(x) <= hi
            (used,) = transitions_used(m, x)
            u = set(used)
            if split == "train":
                assert not (u & lefts) or not (u & rights), f"train string {x!r} uses a left and a right"
            else:
                assert u & lefts and u & rights, f"test string {x!r} misses a withheld side"
            assert pynini_outputs(m, x) == {y}, f"wrong output for {x!r}"


# ------------------------------------------------------------------ iteration
@settings(max_examples=6, deadline=None)
@given(SEEDS, st.sampled_from([4, 5]))
def test_iteration_split(seed, n):
    rng = random.Random(seed)
    m = eval_fst(rng, n)
    assert m.n_states == n and len(m.vocab) == 25 and set(m.vocab) <= set(V.ASCII_V)
    res = iteration_split(m, rng, 60, 20, 40)
    if res is None:
        return
    train, test = res
    check_iteration(m, train, test)
    assert all(len(x) <= 3 * n - 1 for x, _ in train)  # longest string with count <= 3


def test_iteration_mutations_are_caught():
    rng = random.Random(3)
    m = eval_fst(rng, 4)
    res = None
    while res is None:
        res = iteration_split(m, rng, 30, 10, 40)
    train, test = res
    check_iteration(m, train, test)
    with pytest.raises(AssertionError):  # a test string labelled train
        check_iteration(m, train + [test[0]], test)
    x, y = train[0]
    with pytest.raises(AssertionError):  # a corrupted output
        check_iteration(m, [(x, y + "!")] + train[1:], test)


# ------------------------------------------------------------------ UC
@settings(max_examples=8, deadline=None)
@given(SEEDS)
def test_uc_split(seed):
    rng = random.Random(seed)
    m = eval_fst(rng, 4)
    res = uc_split(m, rng, 40, 15)
    if res is None:
        return
    pairs, train, test = res
    assert 1 <= len(pairs) <= 20
    check_uc(m, pairs, train, test)


def test_uc_mutations_are_caught():
    rng = random.Random(5)
    res = None
    while res is None:
        m = eval_fst(rng, 4)
        res = uc_split(m, rng, 40, 15)
    pairs, train, test = res
    check_uc(m, pairs, train, test)
    with pytest.raises(AssertionError):
        check_uc(m, pairs, train + [test[0]], test)  # flipped split
    with pytest.raises(AssertionError):
        check_uc(m, pairs, train, test[1:] + [train[0]])
    x, y = test[0]
    with pytest.raises(AssertionError):
        check_uc(m, pairs, train, [(x, "#" + y)] + test[1:])


def test_crucial_edges_explore_identity_first():
    from sip_core.fst.machine import Machine

    # two arcs 0 -> 1: the identity arc becomes the tree edge
    m = Machine(2, (1,), ((0, "a", "b", 1), (0, "c", "c", 1), (1, "a", "a", 0)), "abc")
    assert crucial_edges(m) == {1}


# ------------------------------------------------------------------ bimachines
@settings(max_examples=10, deadline=None)
@given(SEEDS)
def test_nd7_bimachines_functional_and_small(seed):
    rng = random.Random(seed)
    m = None
    while m is None:
        m = pretrain_bimachine(rng)
    assert m.n_states <= 7 and m.kind == "bimachine" and m.is_cyclic()
    from sip_core.fst.walk import Walker

    w = Walker(m, 1, 12)
    for _ in range(5):
        x, y = w.sample(rng)
        assert pynini_outputs(m, x) == {y}  # functional: composition gives exactly this output
        assert len(transitions_used(m, x)) == 1  # unambiguous
        assert m.apply(x) == y


def test_eval_bimachine_iteration():
    rng = random.Random(11)
    m = eval_bimachine(rng)
    assert m.n_states <= 21
    res = None
    while res is None:
        res = iteration_split(m, rng, 40, 10, 30)
    check_iteration(m, *res)


# ------------------------------------------------------------------ bad parameters, Set task
def test_eval_fst_bad_params():
    with pytest.raises(SipError):
        eval_fst(random.Random(0), 1)
    with pytest.raises(SipError):
        eval_fst(random.Random(0), 4, vocab_size=0)


@settings(max_examples=100, deadline=None)
@given(SEEDS)
def test_set_task(seed):
    x = set_input(random.Random(seed))
    assert 1 <= len(x) <= 35
    y = set_output(x)
    assert len(set(y)) == len(y) == len(set(x)) and [c for c in x if c in y][: len(y)] != []
    assert y == "".join(c for i, c in enumerate(x) if c not in x[:i])
