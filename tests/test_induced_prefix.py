"""`sip finetune --prefix induced`: the tuned prefix starts as the FST encoder's own encoding of the FST that OSTIA
learns from the training pairs, one vector per transition; without such an FST, the paper's mean init. The released
SIP-d4 given that prefix simulates a held-out iteration task before any training step, where the paper's init
gets nothing right."""
from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
import torch

from sip_core import cli
from sip_core.data.tables import fst_table
from sip_core.errors import SipError
from sip_core.eval.decode import predict_split
from sip_core.eval.metrics import score
from sip_core.fst import vocab as V
from sip_core.fst.evalfst import eval_fst
from sip_core.fst.iteration import iteration_split
from sip_core.fst.machine import Machine
from sip_core.model.loading import load_sip
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import fst_table_from_arrow, make_split
from sip_core.train.finetune import FineTuner
from sip_core.train.induced_prefix import sampled_prefix
from tests.test_prefix_levers import _base

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "models" / "sip-d4"
# start copies any symbol to 1; 1 and 2 swap on 'a' and write b/c; 1 is final (7 transitions)
GOLD = Machine(3, (1,), ((0, V.ID, V.ID, 1), (1, "a", "b", 2), (1, "b", "b", 1), (1, "c", "a", 1),
                         (2, "a", "c", 1), (2, "b", "a", 2), (2, "c", "c", 2)), "abc")


def _pairs(m: Machine, max_length: int) -> list[tuple[str, str]]:
    strings = ("".join(p) for n in range(max_length + 1) for p in itertools.product(m.vocab, repeat=n))
    return [(x, y) for x in strings if (y := m.apply(x)) is not None]


def _tuner(model: Path, out: Path, *extra: str) -> FineTuner:
    return FineTuner(cli.build_parser().parse_args(
        ["finetune", "--model", str(model), "--train", "unused.tsv", "--test", "unused.tsv", "--out", str(out),
         "--no-progress", "--seed", "3", *extra]))


def _encoding(base, machine: Machine) -> torch.Tensor:
    table = fst_table_from_arrow(fst_table([{"fst_id": 0, "split": "x", "machine": machine}]),
                                 base.config.num_states, base.config.symbols)
    with torch.no_grad():
        vectors, _ = base.fst_encoder(torch.as_tensor(table.transitions, dtype=torch.long).unsqueeze(0), base.t5.shared)
    return vectors[0]


def test_the_induced_prefix_is_the_fsts_own_encoding_one_vector_per_transition(tmp_path):
    base, model = _base(tmp_path)
    tuner = _tuner(model, tmp_path / "run", "--prefix", "induced", "--prefix-length", "20")
    tuner._reset(3, _pairs(GOLD, 6))
    prefix = tuner.model.prefix.detach()
    assert tuner.prefix_init == "induced: 3 states, 7 transitions"
    assert prefix.shape[0] == tuner.model.config.prefix_length == 7
    gold = _encoding(base, GOLD)  # the gold machine encoded by its own numbering: the same rows, maybe reordered
    assert all(any(torch.allclose(row, g, atol=1e-5) for g in gold) for row in prefix)
    assert all(any(torch.allclose(row, g, atol=1e-5) for row in prefix) for g in gold)

    # pairs that are no function: the paper's init, at the full length again (the same tuner, as a task pool runs)
    tuner._reset(3, [("ab", "x"), ("ab", "y")])
    assert tuner.prefix_init.startswith("mean:")
    mean = _tuner(model, tmp_path / "run2", "--prefix", "mean", "--prefix-length", "20")
    mean._reset(3)
    assert torch.equal(tuner.model.prefix.detach(), mean.model.prefix.detach())


def test_only_a_task_whose_fst_was_induced_trains_its_prefix_at_the_induced_lr(tmp_path):
    _, model = _base(tmp_path)
    tuner = _tuner(model, tmp_path / "run", "--prefix", "induced", "--prefix-length", "20", "--prefix-lr", "0.3",
                   "--induced-prefix-lr", "0.01")
    tuner._reset(3, _pairs(GOLD, 6))
    assert tuner._prefix_lr() == 0.01
    tuner._reset(3, [("ab", "x"), ("ab", "y")])  # no FST: the mean init, which needs the usual LR (session 23)
    assert tuner.prefix_init.startswith("mean:") and tuner._prefix_lr() == 0.3
    plain = _tuner(model, tmp_path / "run2", "--prefix", "induced", "--prefix-length", "20", "--prefix-lr", "0.3")
    plain._reset(3, _pairs(GOLD, 6))
    assert plain._prefix_lr() == 0.3


def test_a_finetune_run_with_an_induced_prefix_records_it_and_saves_a_model_that_loads(tmp_path):
    _, model = _base(tmp_path)
    pairs = _pairs(GOLD, 5)
    for name, rows in (("train", pairs[::2]), ("test", pairs[1::2])):
        (tmp_path / f"{name}.tsv").write_text("".join(f"{x}\t{y}\n" for x, y in rows if x))
    out = tmp_path / "run"
    code = cli.main(["finetune", "--model", str(model), "--train", str(tmp_path / "train.tsv"), "--test",
                     str(tmp_path / "test.tsv"), "--out", str(out), "--prefix", "induced", "--epochs", "1",
                     "--no-progress", "--save-model"])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["prefix"] == "induced"
    assert metrics["prefix_init"].startswith("induced: ")
    saved = json.loads((out / "config.json").read_text())
    assert saved["prefix_length"] == int(metrics["prefix_init"].split(", ")[1].split()[0])
    assert load_sip(out).prefix.shape[0] == saved["prefix_length"]


@pytest.mark.skipif(not (RELEASE / "model.safetensors").exists(), reason="the released SIP-d4 is not checked out")
def test_the_released_sip_d4_simulates_an_unseen_iteration_task_from_the_induced_prefix_alone(tmp_path):
    rng = random.Random(2)
    for _ in range(50):  # the task generator's own draw: a 4-state FST over 8 symbols, inputs visiting states <= 3 times
        machine = eval_fst(rng, 4, vocab_size=8)
        if split := iteration_split(machine, rng, n_train=2000, n_test=60, draws_per_length=300):
            break
    train, test = split
    accuracy = {}
    for kind in ("induced", "mean"):
        tuner = _tuner(RELEASE, tmp_path / kind, "--prefix", kind, "--prefix-length", "80")
        tuner._reset(3, train)
        data = DeviceSplit(make_split([x for x, _ in test], [y for _, y in test]), tuner.device)
        accuracy[kind] = score(predict_split(tuner.model, data, 64, tuner.autocast), [y for _, y in test])["acc"]
    # test inputs visit a state 4-30 times, more than any training input: measured 93.3 vs 0.0 (session 22)
    assert accuracy["induced"] >= 80.0, accuracy
    assert accuracy["mean"] <= 20.0, accuracy


def test_the_sampled_prefix_encodes_one_cyclic_fst_over_the_tasks_own_symbols(tmp_path):
    base, model = _base(tmp_path)
    pairs = _pairs(GOLD, 4)  # symbols a, b, c only
    init, machine = sampled_prefix(base.fst_encoder, pairs, 20, base.t5.shared, base.config.num_states,
                                   base.config.symbols, random.Random(5), states=3)
    assert machine.is_cyclic() and 0 < machine.n_states <= 3
    labels = {c for _, i, o, _ in machine.transitions for c in (i, o) if len(c) == 1}
    assert labels <= set("abc"), labels
    assert torch.allclose(init, _encoding(base, machine), atol=1e-5)  # the FST encoder's own reading of it

    tuner = _tuner(model, tmp_path / "run", "--prefix", "sampled", "--prefix-length", "20")
    tuner._reset(3, pairs)
    first = tuner.model.prefix.detach().clone()
    assert tuner.prefix_init.startswith("sampled: ") and first.shape[0] == tuner.model.config.prefix_length <= 20
    tuner._reset(3, pairs)  # the same seed draws the same FST; another seed another one
    assert torch.equal(tuner.model.prefix.detach(), first)
    tuner._reset(4, pairs)
    assert tuner.model.prefix.shape != first.shape or not torch.equal(tuner.model.prefix.detach(), first)


def test_the_sampled_prefix_says_so_when_no_character_of_the_task_is_embedded(tmp_path):
    base, _ = _base(tmp_path)
    with pytest.raises(SipError, match="--prefix-sampled-states must be in"):
        sampled_prefix(base.fst_encoder, [("ab", "ba")], 20, base.t5.shared, base.config.num_states,
                       base.config.symbols, random.Random(0), states=base.config.num_states + 1)
    with pytest.raises(SipError, match="no character of the training pairs"):
        sampled_prefix(base.fst_encoder, [("\u263a", "\u263b")], 20, base.t5.shared, base.config.num_states,
                       base.config.symbols, random.Random(0))


@pytest.mark.skipif(not (RELEASE / "model.safetensors").exists(), reason="the released SIP-d4 is not checked out")
def test_the_sampled_prefix_of_a_table1_sized_task_is_a_full_size_machine(tmp_path):
    """Session 51's first sweep drew over the model's 16 states: only degenerate 3-transition machines fitted 80
    vectors. Over 4 states and 25 symbols the draw is a machine of Table 1's size (49-67 transitions)."""
    symbols = "abcdefghijklmnopqrstuvwxy"
    pairs = [(symbols, symbols[::-1])]
    tuner = _tuner(RELEASE, tmp_path / "run", "--prefix", "sampled", "--prefix-length", "80")
    lengths = []
    for seed in range(5):
        tuner._reset(seed, pairs)
        lengths.append(tuner.model.prefix.shape[0])
    assert min(lengths) >= 20 and max(lengths) <= 80, lengths
