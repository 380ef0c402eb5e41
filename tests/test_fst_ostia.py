"""OSTIA learns the function of a random deterministic FST from a characteristic sample; checked on longer inputs
through `Machine.apply` (the gold machine's own path search), not through the learner.

OSTIA identifies *total* subsequential functions (Oncina et al. 1993); without knowing the domain it may generalise a
partial one differently, so the identification test draws total machines (every state final, no dropped arcs), and
partial ones are only held to agreeing with their training pairs."""
from __future__ import annotations

import itertools
import random

from hypothesis import given, settings, strategies as st

from sip_core.fst import vocab as V
from sip_core.fst.iso import det_key
from sip_core.fst.machine import Machine
from sip_core.fst.ostia import Ostia, induce_machine
from sip_core.fst.sample import random_fst

SEEDS = st.integers(min_value=0, max_value=10**9)
VOCAB = "abc"


def _gold(seed: int, total: bool = True) -> Machine:
    rng = random.Random(seed)
    while True:
        n = rng.choice((2, 3, 4))
        extra = {"p_drop": 0.0, "p_special": 0.0, "make_initial_final": True} if total else {}  # shorthands may match nothing in "abc"
        m = random_fst(rng, n=n, f=n if total else rng.choice((1, 2)), vocab=VOCAB, **extra)
        if m.n_states:
            return m


def _pairs(m: Machine, lengths) -> list[tuple[str, str]]:
    pairs = []
    for n in lengths:
        for x in map("".join, itertools.product(VOCAB, repeat=n)):
            if (y := m.apply(x)) is not None:
                pairs.append((x, y))
    return pairs


@settings(max_examples=25, deadline=None)
@given(SEEDS)
def test_ostia_learns_the_function_of_a_random_fst(seed):
    gold = _gold(seed)
    learned = Ostia(_pairs(gold, range(0, 8))).learn()
    rng = random.Random(seed)
    longer = ["".join(rng.choice(VOCAB) for _ in range(rng.randint(8, 16))) for _ in range(300)]
    accepted = [x for x in longer if gold.apply(x) is not None]
    assert all(learned.apply(x) == gold.apply(x) for x in accepted)
    assert len(learned.states) <= gold.n_states  # the onward normal form is minimal
    machine = learned.to_machine(VOCAB)
    if machine is not None:  # as a Machine (what a SIP prefix encodes) it computes the same function
        assert all(machine.apply(x) == gold.apply(x) for x in accepted)


def test_ostia_returns_an_iteration_like_fst_exactly_with_its_id_shorthand():
    # start copies any symbol to 1; 1 and 2 swap on 'a' and write b/c; 1 is final
    gold = Machine(3, (1,), ((0, V.ID, V.ID, 1), (1, "a", "b", 2), (1, "b", "b", 1), (1, "c", "a", 1),
                             (2, "a", "c", 1), (2, "b", "a", 2), (2, "c", "c", 2)), VOCAB)
    learned = induce_machine(_pairs(gold, range(0, 7)))
    assert learned is not None
    assert det_key(learned) == det_key(gold)


@settings(max_examples=25, deadline=None)
@given(SEEDS, st.sampled_from([3, 5, 7]))
def test_a_partial_function_or_too_few_pairs_give_a_machine_that_never_contradicts_its_pairs(seed, max_length):
    pairs = _pairs(_gold(seed, total=False), range(0, max_length))
    learned = Ostia(pairs).learn()
    assert all(learned.apply(x) == y for x, y in pairs)


def test_induce_machine_declines_what_a_prefix_cannot_hold():
    assert induce_machine([("ab", "x"), ("ab", "y")]) is None  # not a function
    # output before any input symbol (every output starts with 'z'): an initial output
    assert induce_machine([("a", "za"), ("b", "zb"), ("", "z")]) is None
    # the output of 'a' depends on what follows: onward form delays it into a final output or two-symbol arcs
    assert induce_machine([("a", "x"), ("aa", "yy"), ("ab", "yb"), ("b", "b")]) is None
    many = _pairs(_gold(3), range(0, 7))
    assert induce_machine(many, max_states=0) is None
