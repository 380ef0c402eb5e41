"""`sip finetune --state-consistency W` (sip_core/train/consistency.py): the transition graph read off the
model's own states, walks on it checked by simulating the machine independently, and the fine-tuning hook
(state head frozen, walks recorded, one-line errors)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sip_core import cli
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import load_sip, save_model, save_prefix_init, with_prefix_mode
from sip_core.train import consistency as consist
from tests.test_finetune_own_task import EXAMPLE
from tests.test_soft_prefix import SAMPLE


@st.composite
def machines(draw):
    """A partial deterministic machine over a few characters: (start, {(state, char): next})."""
    n = draw(st.integers(1, 4))
    alphabet = draw(st.lists(st.sampled_from("abcdeé"), min_size=1, max_size=4, unique=True))
    delta = {}
    for q in range(n):
        for ch in alphabet:
            if draw(st.booleans()) or (q == 0 and not delta):
                delta[(q, ch)] = draw(st.integers(0, n - 1))
    return 0, delta


def _run(start, delta, text):
    """Independent simulation: the states after each character, or None where the machine has no arc."""
    q, out = start, []
    for ch in text:
        if (q, ch) not in delta:
            return None
        q = delta[(q, ch)]
        out.append(q)
    return out


@settings(max_examples=60, deadline=None)
@given(machines(), st.integers(0, 2**31 - 1))
def test_walks_follow_the_machine_the_training_states_imply(machine, seed):
    start, delta = machine
    rng = np.random.default_rng(seed)
    # training strings: random paths of the machine, with their true states (what a perfect state head reads)
    train, states = [], []
    for _ in range(30):
        q, text, seq = start, [], []
        for _ in range(int(rng.integers(1, 6))):
            options = sorted(ch for (p, ch) in delta if p == q)
            if not options:
                break
            ch = options[int(rng.integers(len(options)))]
            q = delta[(q, ch)]
            text.append(ch)
            seq.append(q)
        if text:
            train.append("".join(text))
            states.append(np.array(seq))
    if not train:
        return
    graph = consist.transition_graph(train, states)
    texts, seqs = consist.sample_walks(graph, 40, 25, rng)
    for text, seq in zip(texts, seqs):
        assert 1 <= len(text) <= 25 and len(seq) == len(text)
        assert _run(start, delta, text) == seq, "a walk leaves the machine or disagrees with its states"
    # the split carries the walk states as labels at each character's last byte (é is two bytes)
    split = consist.walk_split(texts, seqs)
    labels = split.state_labels()
    assert [int(v) for v in labels[labels != -100]] == [q for seq in seqs for q in seq]


def test_majority_decides_and_ties_go_to_the_smaller_state():
    graph = consist.transition_graph(["ab", "ab", "ab", "ac", "ac"],
                                     [np.array([1, 2]), np.array([1, 2]), np.array([3, 0]),
                                      np.array([1, 3]), np.array([2, 0])])
    assert graph.next[(consist.START, "a")] == 1  # 3 votes of 5
    assert graph.next[(1, "b")] == 2
    assert graph.next[(1, "c")] == 3
    assert graph.next[(3, "b")] == 0 and graph.next[(2, "c")] == 0
    tie = consist.transition_graph(["x", "x"], [np.array([5]), np.array([4])])
    assert tie.next[(consist.START, "x")] == 4
    with pytest.raises(ValueError, match="2 states for 1 characters"):
        consist.transition_graph(["x"], [np.array([1, 2])])


def _checkpoint(tmp_path, state_head: bool):
    torch.manual_seed(0)
    tiny = t5_kwargs(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, dropout_rate=0.0)
    model = SIPForConditionalGeneration(SIPConfig(t5=tiny, prefix_mode="fst", num_states=4))
    if state_head:
        model.enable_state_head()
    path = tmp_path / ("sip-head" if state_head else "sip")
    save_model(model, path)
    save_prefix_init(path, SAMPLE)
    return model, path


def _argv(model, out, *extra):
    return ["finetune", "--model", str(model), "--train", str(EXAMPLE / "train.tsv"), "--test", str(EXAMPLE / "test.tsv"),
            "--out", str(out), "--epochs", "2", "--batch-size", "8", "--no-progress", "--prefix", "mean",
            "--prefix-length", "6", "--seed", "3", *extra]


def test_the_tuned_model_keeps_the_pre_trained_state_head(tmp_path):
    base, _ = _checkpoint(tmp_path, state_head=True)
    tuned = with_prefix_mode(base, "tuned", prefix_length=6)
    assert tuned.state_head is base.state_head


def test_consistency_trains_prefix_and_body_through_a_frozen_state_head(tmp_path):
    base, model = _checkpoint(tmp_path, state_head=True)
    assert cli.main(_argv(model, tmp_path / "run", "--state-consistency", "1.0", "--consistency-walk-length", "12",
                          "--save-model", "--lr", "1e-3")) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    log = metrics["consistency"]
    assert [e["epoch"] for e in log] == [1, 2]
    assert all(e["transitions"] > 0 and 1 <= e["walk_mean_length"] <= 12 for e in log)
    assert metrics["hyperparameters"]["state_consistency"] == 1.0
    tuned = load_sip(tmp_path / "run")
    assert torch.equal(tuned.state_head.weight, base.state_head.weight), "the state head must stay frozen"
    assert not torch.equal(tuned.t5.encoder.block[0].layer[1].DenseReluDense.wo.weight,
                           base.t5.encoder.block[0].layer[1].DenseReluDense.wo.weight), "the body trains"


@pytest.mark.parametrize("head, flags, message", [
    (False, ["--state-consistency", "1"], "needs a SIP checkpoint with a state head"),
    (True, ["--state-consistency", "1", "--prefix", "none"], "and a tuned prefix"),
    (True, ["--state-consistency", "-1"], "--state-consistency must be at least 0"),
    (True, ["--state-consistency", "1", "--consistency-walk-length", "0"], "--consistency-walk-length at least 1"),
])
def test_bad_consistency_settings_are_one_line_errors(tmp_path, capsys, head, flags, message):
    _, model = _checkpoint(tmp_path, state_head=head)
    assert cli.main(_argv(model, tmp_path / "run", *flags)) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()
