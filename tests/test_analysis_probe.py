"""The probing study's pieces: targets, the heuristic, the probe, Hungarian alignment, length buckets."""
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from transformers.modeling_outputs import BaseModelOutput

from sip_core.analysis import probe as P
from sip_core.analysis import transfer as T
from sip_core.analysis.lengths import build_bucket
from sip_core.analysis.states import IGNORE, destinations, gold_states, heuristic_accuracy, probe_labels
from sip_core.errors import SipError
from sip_core.fst.machine import Machine
from sip_core.model import tokenizer
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import make_split

# Parity of the a's read so far: state 1 after an odd number of a's.
PARITY = Machine(2, (0, 1), ((0, "a", "a", 1), (1, "a", "a", 0), (0, "b", "b", 0), (1, "b", "b", 1)), "ab")
# 0 -a-> 1, 1 -a-> 0, 1 -b-> 1: destinations of a = {0, 1}, of b = {1}.
SMALL = Machine(2, (0, 1), ((0, "a", "x", 1), (1, "a", "y", 0), (1, "b", "z", 1)), "ab")


def split_of(machine, inputs):
    return make_split(inputs, inputs, states=gold_states(machine, inputs))


def test_probe_labels_put_each_state_before_its_character_and_the_last_on_eos():
    split = split_of(PARITY, ["aab", "b"])
    labels = probe_labels(split)
    # "aab" + EOS: states before a, a, b are 0, 1, 0; after the last b: 0. "b" + EOS: 0, then 0.
    assert labels.tolist() == [0, 1, 0, 0, 0, 0]
    assert (split.input_ids[np.flatnonzero(labels != IGNORE)] >= 0).all()


def test_probe_labels_skip_utf8_continuation_bytes():
    m = Machine(1, (0,), ((0, "ɐ", "ɐ", 0),), "ɐ")
    labels = probe_labels(split_of(m, ["ɐɐ"]))
    assert labels.tolist() == [0, IGNORE, 0, IGNORE, 0]  # two 2-byte characters, then EOS


def test_targets_sit_after_each_rows_prefix():
    data = DeviceSplit(split_of(PARITY, ["ab", "aaa"]), "cpu")
    pdata = P.ProbeData(data, np.array([3, 1]))
    targets = pdata.targets(np.array([0, 1]), width=8).numpy()
    expected = np.full((2, 8), IGNORE)
    expected[0, 3:6] = [0, 1, 1]       # prefix of 3, then a, b, EOS
    expected[1, 1:5] = [0, 1, 0, 1]    # prefix of 1, then a, a, a, EOS
    assert (targets == expected).all()


def test_heuristic_has_the_accuracy_computed_by_hand():
    assert destinations(SMALL) == {"a": frozenset({0, 1}), "b": frozenset({1})}
    # "ab": states 0, 1, 1. q0 = start (sure), q1 among {0, 1} (1/2), q2 among {1} (sure).
    result = heuristic_accuracy([(SMALL, "ab", [0, 1, 1])])
    assert result["acc_token"] == pytest.approx(100 * 2.5 / 3)
    assert result["acc_seq"] == pytest.approx(50.0)


def test_heuristic_expectation_matches_sampling_it():
    inputs = ["ab", "abb", "abba", "a", "aaab"]
    items = [(SMALL, x, SMALL.state_sequence(x)) for x in inputs]
    rng = random.Random(0)
    dests = {a: sorted(s) for a, s in destinations(SMALL).items()}
    tok_hits = tok = seq_hits = 0
    draws = 4000
    for _ in range(draws):
        for _m, x, states in items:
            guess = [SMALL.start] + [rng.choice(dests[c]) for c in x]
            right = [g == q for g, q in zip(guess, states)]
            tok_hits += sum(right)
            tok += len(right)
            seq_hits += all(right)
    exact = heuristic_accuracy(items)
    assert exact["acc_token"] == pytest.approx(100 * tok_hits / tok, abs=1.0)
    assert exact["acc_seq"] == pytest.approx(100 * seq_hits / (draws * len(items)), abs=1.5)


class RunningStateEncoder(torch.nn.Module):
    """A stand-in encoder whose vectors hold the parity state before each token, linearly, plus noise
    (``signal=False``: noise only)."""

    def __init__(self, d_model=16, signal=True, seed=0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.config = type("Config", (), {"d_model": d_model, "prefix_mode": "none", "prefix_length": 0})()
        self.embed = torch.randn(2, d_model, generator=gen)
        self.signal, self.gen = signal, gen

    def encode(self, input_ids, attention_mask, fst=None, task_ids=None, encoder_width=None):
        is_a = (input_ids == ord("a") + tokenizer.BYTE_OFFSET).long()
        before = (torch.cumsum(is_a, 1) - is_a) % 2
        noise = 0.7 * torch.randn(*input_ids.shape, self.embed.shape[1], generator=self.gen)
        hidden = (self.embed[before] if self.signal else 0) + noise
        return BaseModelOutput(last_hidden_state=hidden), attention_mask


def _parity_data(n, seed):
    rng = random.Random(seed)
    inputs = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 12))) for _ in range(n)]
    return split_of(PARITY, inputs)


def test_the_probe_learns_a_linearly_decodable_state_and_not_noise():
    train, test = _parity_data(600, 1), _parity_data(200, 2)
    scores = {}
    for signal in (True, False):
        model = RunningStateEncoder(signal=signal)
        probe = P.train_probe(model, P.probe_data(model, train, "cpu"), n_classes=2, seed=0)
        scores[signal] = P.accuracy(*P.predict_states(model, probe, P.probe_data(model, test, "cpu")))
    assert scores[True].acc_token > 95.0
    assert scores[False].acc_token < 70.0  # chance level: the majority state
    assert scores[True].acc_seq > scores[False].acc_seq + 30.0
    assert scores[True].n_seq == 200


def test_hungarian_alignment_recovers_a_permutation():
    rng = np.random.default_rng(0)
    gold = [rng.integers(0, 4, size=rng.integers(3, 15)) for _ in range(200)]
    perm = np.array([2, 0, 3, 1])  # gold state g is read as id perm[g]
    predicted = [perm[g] for g in gold]
    for p in predicted[:30]:  # some noise
        p[0] = rng.integers(0, 4)
    mapping = T.align(T.confusion(predicted, gold, 4, 4))
    assert mapping == {int(perm[g]): g for g in range(4)}
    aligned = T.relabel(predicted, mapping, 4)
    assert all((a == g).all() for a, g in zip(aligned[30:], gold[30:]))


def test_more_probe_classes_than_states_leave_ids_unmatched():
    gold = [np.array([0, 1, 0, 1])]
    predicted = [np.array([4, 2, 4, 3])]
    mapping = T.align(T.confusion(predicted, gold, 2, 5))
    assert mapping == {4: 0, 2: 1} or mapping == {4: 0, 3: 1}
    matrix = T.row_normalised(T.relabel(predicted, mapping, 5), gold, 2)
    assert matrix.shape == (2, 3) and np.allclose(matrix.sum(1), 1.0)
    assert matrix[0, 0] == 1.0 and matrix[1, 1] == 0.5 and matrix[1, 2] == 0.5  # half of state 1 is "other"


def test_mean_matrix_ignores_tasks_without_a_state():
    a = np.array([[1.0, 0.0], [np.nan, np.nan]])
    b = np.array([[0.5, 0.5], [0.0, 1.0]])
    assert np.allclose(T.mean_matrix([a, b]), [[0.75, 0.25], [0.0, 1.0]])


def test_a_length_bucket_becomes_a_train_test_setting(tmp_path):
    rows = [("length-0", 0, "train", "ab", "xy"), ("length-0", 0, "test-40-70", "a" * 40, "x" * 40),
            ("length-0", 0, "test-90-110", "a" * 90, "x" * 90), ("length-1", 1, "test-40-70", "b" * 41, "y" * 41)]
    cols = list(zip(*rows))
    table = pa.table({"task_id": cols[0], "fst_id": pa.array(cols[1], pa.int64()), "split": cols[2],
                      "input": cols[3], "output": cols[4]})
    pq.write_table(table, tmp_path / "examples.parquet")
    info = build_bucket(tmp_path, "40-70", tmp_path / "out")
    out = pq.read_table(tmp_path / "out" / "examples.parquet").to_pylist()
    assert info["setting"] == "len-40-70"
    assert [(r["task_id"], r["split"], len(r["input"])) for r in out] == [
        ("len-40-70-0", "train", 2), ("len-40-70-0", "test", 40), ("len-40-70-1", "test", 41)]
    with pytest.raises(SipError, match="no split 'test-5-9'"):
        build_bucket(tmp_path, "5-9", tmp_path / "none")


def _fake_study(state_head):
    acc = {"acc_token": 50.0, "acc_seq": 10.0, "n_seq": 20, "n_tokens": 200}
    probing = {"results": {m: acc for m in ("probe", "probe-reinit", "probe-random", "heuristic")},
               "device": "cpu", "wall_seconds": 1.0, "checkpoint": "ckpt", "state_head": state_head,
               "baseline_init": "scratch", "n_classes": 4, "hyperparameters": {"lr": 0.1, "batch_size": 32},
               "n_train": 100, "n_test": 20}
    split = acc | {"confusion": np.eye(4, 5).tolist()}
    result = {"tasks": [], "splits": {"train": split, "test": split},
              "right_vs_wrong": {"n_right": 3, "n_wrong": 7, "acc_right": 100.0, "acc_wrong": 40.0,
                                 "p_value": 0.03, "resamples": 10000, "seed": 0}}
    return probing, result


@pytest.mark.parametrize("state_head", [True, False])
def test_the_table_records_whether_the_probed_model_had_a_state_head(tmp_path, state_head):
    from sip_core.analysis.commands import probe_table

    frame, meta, notes = probe_table(*_fake_study(state_head), "ci", str(tmp_path))
    assert list(frame.columns) == ["model", "setting", "metric", "value", "n"]
    assert meta["state_head"] is state_head
    assert ("Caveat" in notes) is state_head
    row = frame[(frame["model"] == "probe-transfer") & (frame["metric"] == "acc_wrong")].iloc[0]
    assert (row["value"], row["n"]) == (40.0, 7)


def test_features_are_the_top_layer_at_each_rows_bytes_and_eos_behind_its_fst_prefix():
    from sip_core.data.tables import fst_table
    from sip_core.model.config import SIPConfig, t5_kwargs
    from sip_core.model.sip_model import SIPForConditionalGeneration
    from sip_core.train.data import fst_table_from_arrow

    fsts = fst_table_from_arrow(fst_table([{"fst_id": i, "split": "test", "machine": m}
                                           for i, m in enumerate((PARITY, SMALL))]))
    inputs = ["aab", "ab"]
    states = (np.array([0, 1, 0, 0, 0, 1, 1]), np.array([0, 4, 7]))  # PARITY on "aab", SMALL on "ab"
    split = make_split(inputs, inputs, fst_rows=[0, 1], states=states)
    torch.manual_seed(0)
    shape = t5_kwargs(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8, dropout_rate=0.0)
    model = SIPForConditionalGeneration(SIPConfig(t5=shape, prefix_mode="fst")).eval()
    pdata = P.probe_data(model, split, "cpu", fsts)
    x, y, _ = P.features(model, pdata, np.array([0, 1]))
    expected = []
    for row, n_transitions in ((0, 4), (1, 3)):  # each example alone: its bytes + EOS follow its transitions
        batch = pdata.data.batch(np.array([row]), with_labels=False)
        with torch.no_grad():
            hidden = model.encode(batch["input_ids"], batch["attention_mask"], batch["fst"])[0].last_hidden_state
        expected.append(hidden[0, n_transitions:n_transitions + len(inputs[row]) + 1])
    assert torch.allclose(x, torch.cat(expected), atol=1e-5)
    assert y.tolist() == states[0].tolist()
