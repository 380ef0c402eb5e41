"""OSTIA learns the function of a random deterministic FST from a characteristic sample; checked on longer inputs
through `Machine.apply` (the gold machine's own path search), not through the learner.

OSTIA identifies *total* subsequential functions (Oncina et al. 1993); without knowing the domain it may generalise a
partial one differently, so the identification test draws total machines (every state final, no dropped arcs), and
partial ones are only held to agreeing with their training pairs. The letter-to-letter learner is held to
identifying partial machines from random walks (Table 11's training strings)."""
from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import example, given, settings, strategies as st

from sip_core.fst import vocab as V
from sip_core.fst.iso import det_key
from sip_core.fst.machine import Machine
from sip_core.fst.ostia import LetterToLetter, Ostia, induce_machine
from sip_core.fst.sample import random_fst
from sip_core.fst.walk import Walker

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


def _letter_machine(seed: int, vocab: str = "abcdefghijklmnopqrstuvwxy") -> Machine:
    """A partial 4-state letter-to-letter FST like Table 11's (one final state, about half of 25 symbols per state,
    random outputs), with walks of every length from 1 to 70."""
    rng = random.Random(seed)
    while True:
        arcs = tuple((q, a, rng.choice(vocab), rng.randrange(4)) for q in range(4)
                     for a in rng.sample(vocab, rng.randint(8, 16)))
        m = Machine(4, (3,), arcs, vocab)
        if not any(Walker(m, n, n).empty for n in range(1, 71)):
            return m


def _walks(m: Machine, rng: random.Random, n: int, lo: int, hi: int) -> list[tuple[str, str]]:
    walker = Walker(m, lo, hi)
    return [walker.sample(rng)[:2] for _ in range(n)]


@settings(max_examples=10, deadline=None)
@given(SEEDS)
@example(seed=19001)  # 2,000 walks gave 16 states (CI, session 30)
@example(seed=197)  # 5,000 walks needed a 5th state (clean-clone CI, session 40); 8,000 give the gold machine's 4
def test_letter_to_letter_learns_a_partial_fst_from_random_walks_where_ostia_needs_pairs_it_lacks(seed):
    """Table 11's situation: random walks of 1-15 symbols over 25 symbols (a length task's training pairs) hold
    almost no two strings that differ only in their first symbols, which OSTIA needs to tell states apart. The
    letter-to-letter learner must still compute the gold machine's function on walks of 40-70 symbols (checked by
    the gold machine's own path search, `Machine.apply`), with no more states than the gold machine. Greedy merging
    needs enough shared prefixes, so identification is a matter of sample size: with 2,000 walks 3 of 1,500 random
    machines came out larger (session 30); with 5,000 (a length task's training set) 0 of 1,700 (session 40), but a CI
    draw found seed 197, which needs 8,000. The property is asserted at 10,000 (0 of the same 1,700 fail)."""
    gold, rng = _letter_machine(seed), random.Random(seed)
    pairs = _walks(gold, rng, 10000, 1, 15)
    learned = LetterToLetter(pairs).learn(max_states=4)
    assert learned.states is not None and len(learned.states) <= 4
    machine = learned.to_machine(gold.vocab)
    assert all(machine.apply(x) == y for x, y in pairs)
    assert all(machine.apply(x) == y for x, y in _walks(gold, rng, 200, 40, 70))


def test_induce_machine_falls_back_to_letter_to_letter_where_ostia_fails():
    gold, rng = _letter_machine(0), random.Random(0)
    pairs = _walks(gold, rng, 2000, 1, 15)
    ostia = Ostia(pairs).learn(max_states=4)
    assert ostia.states is None  # OSTIA needs more than 4 states for these pairs
    machine = induce_machine(pairs, max_states=4)
    assert machine is not None and machine.n_states <= 4
    assert all(machine.apply(x) == y for x, y in _walks(gold, rng, 200, 40, 70))


@pytest.mark.parametrize("pairs", [[("ab", "x")], [("ab", "xy"), ("ac", "zy")]])  # a deletion; 'a' as x and as z
def test_letter_to_letter_refuses_pairs_that_are_not_letter_to_letter(pairs):
    with pytest.raises(ValueError, match="letter-to-letter"):
        LetterToLetter(pairs)
