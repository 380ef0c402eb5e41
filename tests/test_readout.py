"""`sip finetune --prefix readout`: the machine a model's per-character states imply is read off the training pairs.

Checked against an independent path: states are the gold machine's own (`Machine.state_sequence`), renamed at
random as a model's state head may name them; the read machine must then map strings *longer* than any it was
read from exactly as the gold machine does (`Machine.apply` of each, nothing shared with the reading)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from sip_core.fst import vocab as V
from sip_core.fst.evalfst import eval_fst
from sip_core.fst.iteration import iteration_split
from sip_core.fst.machine import Machine
from sip_core.train.finetune import FineTuner
from sip_core.train.readout import _fold, identity_shorthands, read_machine, solve_outputs
from tests.test_induced_prefix import GOLD, _pairs
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import save_model, save_prefix_init
from tests.test_prefix_levers import _args
from tests.test_soft_prefix import SAMPLE


def _states(machine: Machine, pairs, rename: dict[int, int]) -> list[np.ndarray]:
    """What a state head would read: the state after each character, under another numbering."""
    return [np.array([rename[q] for q in machine.state_sequence(x)[1:]]) for x, _ in pairs]


def _tiny_with_state_head(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    tiny = t5_kwargs(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, dropout_rate=0.0)
    base = SIPForConditionalGeneration(SIPConfig(t5=tiny, prefix_mode="fst", num_states=4, state_head=True))
    save_model(base, tmp_path / "sip")
    save_prefix_init(tmp_path / "sip", SAMPLE)
    return tmp_path / "sip"


def _task(seed: int):
    rng = random.Random(seed)
    for _ in range(50):  # the evaluation tasks' own generator: 4 states, inputs visiting a state <= 3 times
        machine = eval_fst(rng, 4, vocab_size=6)
        if split := iteration_split(machine, rng, n_train=600, n_test=60, draws_per_length=150):
            return machine, split
    raise AssertionError("no iteration task drawn")


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), offset=st.integers(0, 11))
@example(seed=89, offset=0)  # one output the training pairs leave open (found by CI, session 62)
def test_the_gold_states_read_back_the_gold_function_on_longer_strings(seed, offset):
    machine, (train, test) = _task(seed)
    rename = {q: (q + offset) % 16 for q in range(machine.n_states)}
    result = read_machine(train, _states(machine, train, rename), machine.vocab)
    # (an output the training pairs leave undetermined may remain, `unsolved`: seed 89 has one; the test strings judge)
    assert result.agreement == 1.0 and result.train_acc == 1.0
    longest = max(len(x) for x, _ in train)
    assert any(len(x) > longest for x, _ in test) or all(machine.iteration_count(x) > 3 for x, _ in test)
    assert all(result.machine.apply(x) == y for x, y in test)  # test strings visit states more often than any train
    assert result.machine.n_states <= machine.n_states  # merged back, never more states than the gold (which need not be minimal)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_a_state_the_head_splits_in_two_is_merged_back(seed):
    machine, (train, test) = _task(seed)
    split_state = machine.n_states - 1
    # the head names the last state 7 on strings of even length, as a head may tell one state apart by context
    states = [np.array([7 if q == split_state and len(x) % 2 == 0 else q for q in machine.state_sequence(x)[1:]])
              for x, _ in train]
    result = read_machine(train, states, machine.vocab)
    assert result.train_acc == 1.0 and result.machine.n_states <= machine.n_states
    assert all(result.machine.apply(x) == y for x, y in test)


def test_a_minority_of_wrong_states_is_outvoted():
    machine, (train, test) = _task(4)
    rng = np.random.default_rng(0)
    states = _states(machine, train, {q: q for q in range(machine.n_states)})
    for k in rng.choice(len(states), size=len(states) // 20, replace=False):  # 5% of the strings read one wrong state
        i = rng.integers(len(states[k]))
        states[k][i] = (states[k][i] + 1) % machine.n_states
    result = read_machine(train, states, machine.vocab)
    assert result.agreement < 1.0
    assert all(result.machine.apply(x) == y for x, y in test)


def test_states_that_contradict_the_data_give_a_machine_that_says_so():
    machine, (train, _) = _task(4)
    one_state = [np.zeros(len(x), dtype=int) for x, _ in train]  # a head that sees no structure at all
    result = read_machine(train, one_state, machine.vocab)
    assert result.train_acc < 0.5


def test_outputs_are_solved_from_paths_even_where_no_pair_has_one_symbol_per_character():
    # arcs A, B; "A" alone writes "x", so in "AB" -> "x" B writes nothing; "BB" -> "" follows from either
    paths = [[(0, "a")], [(0, "a"), (1, "b")], [(1, "b"), (1, "b")]]
    outs, unsolved = solve_outputs(paths, ["x", "x", ""])
    assert outs == {(0, "a"): "x", (1, "b"): V.EPS} and unsolved == 0
    # "a" or "b" could write it: one guess (a writes ε), and the pruning then gives "x" to b
    outs, unsolved = solve_outputs([[(0, "a"), (1, "b")]], ["x"])
    assert unsolved == 1 and outs == {(0, "a"): V.EPS, (1, "b"): "x"}


def test_a_state_that_copies_every_symbol_to_one_state_becomes_one_id_arc():
    explicit = Machine(2, (1,), ((0, "a", "a", 1), (0, "b", "b", 1), (0, "c", "c", 1), (1, "a", "b", 1)), "abc")
    short = identity_shorthands(explicit)
    assert (0, V.ID, V.ID, 1) in short.transitions and len(short.transitions) == 2
    assert all(short.apply(x) == explicit.apply(x) for x in ("a", "ba", "caaa", "bb"))


def test_the_readout_run_starts_from_the_machine_its_first_pass_read(tmp_path):
    model = _tiny_with_state_head(tmp_path)
    pairs = _pairs(GOLD, 5)  # 189 pairs: the first 160 to train on, the rest to test
    # a tiny untrained model reads no usable machine at the default, so a second try follows (--readout-tries 2);
    # at --readout-min-acc 0.01 the first try's machine is used
    for min_acc, expect, tries in (("1.0", "mean: the first pass read", 2), ("0.01", "readout: ", 1)):
        out = tmp_path / f"run{min_acc}"
        flags = ("--prefix", "readout", "--prefix-length", "80", "--readout-epochs", "1", "--readout-tries", "2",
                 "--readout-min-acc", min_acc, "--epochs", "1", "--eval-last", "1")
        tuner = FineTuner(_args(model, out, *flags))
        metrics = tuner.run("t", pairs[:160], pairs[160:], out)
        assert metrics["prefix"] == "readout" and metrics["prefix_init"].startswith(expect), metrics["prefix_init"]
        log = json.loads((out / "readout" / "readout.json").read_text())
        assert metrics["readout"]["machine_train_acc"] == log["machine_train_acc"]
        assert (log["machine"] is None) == (min_acc == "1.0")
        if log["machine"] is not None:  # one prefix vector per transition of the read machine
            assert tuner.model.prefix.shape[0] == len(Machine.from_row(log["machine"]).transitions)
        assert log["tries"] == tries and [t["seed"] for t in log["all_tries"]] == [3 + k for k in range(tries)]
        assert (out / "readout-try2" / "metrics.json").is_file() == (tries == 2)
        assert log["machine_train_acc"] == max(t["machine_train_acc"] for t in log["all_tries"])
        assert metrics["wall_seconds"] >= log["first_pass_wall_seconds"]
        # a resumed run reads the log instead of running the first pass again, and where only the log is lost,
        # each try's own reading instead of running that try again
        again = FineTuner(_args(model, out, *flags))
        assert again.run("t", pairs[:160], pairs[160:], out)["prefix_init"] == metrics["prefix_init"]
        (out / "readout" / "readout.json").unlink()
        stamp = (out / "readout" / "metrics.json").stat().st_mtime_ns
        again = FineTuner(_args(model, out, *flags))
        assert again.run("t", pairs[:160], pairs[160:], out)["prefix_init"] == metrics["prefix_init"]
        assert (out / "readout" / "metrics.json").stat().st_mtime_ns == stamp


def test_a_fold_that_would_write_two_outputs_for_one_arc_is_refused():
    m = Machine(3, (1, 2), ((0, "a", "x", 1), (0, "b", "y", 2), (1, "a", "x", 1), (2, "a", "y", 2)), "ab")
    assert _fold(m, 1, 2) is None  # 1 and 2 write x and y on a
    ok = Machine(3, (1, 2), ((0, "a", "x", 1), (0, "b", "y", 2), (1, "a", "x", 1), (2, "b", "x", 2)), "ab")
    folded = _fold(ok, 1, 2)
    assert folded.n_states == 2 and folded.apply("aab") == "xxx" and folded.apply("bba") == "yxx"


def _systematically_wrong(machine: Machine, pairs, arc: tuple[int, str], wrong: int) -> list[np.ndarray]:
    """A head that names ``wrong`` after every pass through ``arc`` and the right state elsewhere."""
    out = []
    for x, _ in pairs:
        seq = machine.state_sequence(x)
        out.append(np.array([wrong if (seq[i], ch) == arc else seq[i + 1] for i, ch in enumerate(x)]))
    return out


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), pick=st.integers(0, 10_000), shift=st.integers(1, 3))
@example(seed=1441, pick=224, shift=2)  # the raw graph misses pairs that the merge puts right: nothing to repair
def test_repair_never_maps_fewer_training_pairs(seed, pick, shift):
    machine, (train, _) = _task(seed)
    used = sorted({(q, ch) for x, _ in train for q, ch in zip(machine.state_sequence(x), x)})
    arc = used[pick % len(used)]
    states = _systematically_wrong(machine, train, arc, (machine.table[arc][1] + shift) % machine.n_states)
    plain = read_machine(train, states, machine.vocab)
    repaired = read_machine(train, states, machine.vocab, repair=True)
    assert repaired.train_acc >= plain.train_acc
    assert bool(repaired.repairs) <= (plain.train_acc < 1.0)  # a consistent reading is left alone


def test_repair_undoes_a_systematically_wrong_arc_and_maps_the_longer_strings_right():
    machine, (train, test) = _task(4)
    # a used arc that is not the start's (wrong start arcs: the test below)
    used = sorted({(q, ch) for x, _ in train for q, ch in zip(machine.state_sequence(x), x) if q != machine.start})
    arc = used[len(used) // 2]
    states = _systematically_wrong(machine, train, arc, (machine.table[arc][1] + 1) % machine.n_states)
    plain = read_machine(train, states, machine.vocab)
    repaired = read_machine(train, states, machine.vocab, repair=True)
    assert plain.train_acc < 1.0 and repaired.repairs and repaired.train_acc == 1.0
    assert all(repaired.machine.apply(x) == y for x, y in test)  # checked by running, on longer strings


@pytest.mark.parametrize("seed, ch, shift", [
    (263, "@", 1),  # the arcs after the wrong one are voted wrong too: the twin change and a re-vote undo it
    (255, "%", 2),  # the wrong arc is the start's self-loop, so the head never names the start: the start node
    (264, "<", 1),  # the only arc into a state is the wrong one, so the head never names it: a fresh node
])
def test_repair_undoes_a_wrong_start_arc_where_no_single_arc_change_helps(seed, ch, shift):
    machine, (train, test) = _task(seed)
    arc = (machine.start, ch)
    states = _systematically_wrong(machine, train, arc, (machine.table[arc][1] + shift) % machine.n_states)
    plain = read_machine(train, states, machine.vocab)
    repaired = read_machine(train, states, machine.vocab, repair=True)
    assert plain.train_acc < 0.95 and repaired.train_acc == 1.0, (plain.summary(), repaired.summary())
    assert all(repaired.machine.apply(x) == y for x, y in test)  # checked by running, on longer strings
