"""`sip finetune --state-entropy W` and `--rehearsal W --rehearsal-data POOL` (sip_core/train/regularisers.py):
the entropy checked against a hand computation, each lever shown to move what it targets against the same run
without it, the model's own prefix untouched by the rehearsal, and bad settings as one-line errors."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sip_core import cli
from sip_core.model.loading import load_sip
from sip_core.train import regularisers
from sip_core.train.data import make_split
from sip_core.train.batching import DeviceSplit
from tests.fixtures.real_pool import build_tiny_pool
from tests.test_finetune_own_task import EXAMPLE
from tests.test_state_consistency import _argv, _checkpoint


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    return build_tiny_pool(tmp_path_factory.mktemp("rehearsal") / "pool", n_train=12, per_fst=20, easy_per_fst=3,
                           max_len=5, symbols="abcd", seed=1)


def test_state_entropy_is_the_mean_over_input_bytes_only(tmp_path):
    model, _ = _checkpoint(tmp_path, state_head=True)
    with torch.no_grad():
        model.state_head.weight.zero_()
        model.state_head.bias.copy_(torch.tensor([2.0, 0.0, 0.0, 0.0]))
    # row 0: 2 prefix positions, then 3 bytes; row 1: 1 byte, 2 padding positions. With a zero weight every
    # position has the same distribution, so the mean is that entropy, whatever the hidden states
    hidden = torch.randn(2, 5, model.config.d_model)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    p = torch.softmax(torch.tensor([2.0, 0.0, 0.0, 0.0]), 0)
    expected = float(-(p * p.log()).sum())
    assert regularisers.state_entropy(model, hidden, mask).item() == pytest.approx(expected, rel=1e-5)
    # a bias-free head: prefix positions (here made peaked) must not count, padding neither
    with torch.no_grad():
        model.state_head.bias.zero_()
        model.state_head.weight.copy_(torch.eye(4, model.config.d_model) * 50)
    hidden = torch.zeros(2, 5, model.config.d_model)
    hidden[:, :2, 0] = 1.0  # peaked at the prefix positions
    hidden[1, 3:, 1] = 1.0  # and at the padding
    assert regularisers.state_entropy(model, hidden, mask).item() == pytest.approx(math.log(4), rel=1e-5)


def _train_entropy(run_dir) -> float:
    """Mean state-head entropy of a saved run at the training inputs (eval mode)."""
    model = load_sip(run_dir).eval()
    pairs = [line.split("\t") for line in (EXAMPLE / "train.tsv").read_text(encoding="utf-8").splitlines()]
    data = DeviceSplit(make_split([x for x, _ in pairs], [y for _, y in pairs]), "cpu")
    batch = data.batch(np.arange(len(data)), with_labels=False)
    with torch.no_grad():
        hidden = model.encode(batch["input_ids"], batch["attention_mask"])[0].last_hidden_state
        return regularisers.state_entropy(model, hidden, batch["attention_mask"]).item()


def test_the_entropy_loss_sharpens_the_states_through_a_frozen_head(tmp_path):
    base, model = _checkpoint(tmp_path, state_head=True)
    common = ("--save-model", "--lr", "3e-3", "--prefix-lr", "0.3", "--epochs", "4")
    assert cli.main(_argv(model, tmp_path / "plain", *common)) == 0
    assert cli.main(_argv(model, tmp_path / "sharp", "--state-entropy", "5", *common)) == 0
    plain, sharp = _train_entropy(tmp_path / "plain"), _train_entropy(tmp_path / "sharp")
    assert sharp < 0.7 * plain, (plain, sharp)
    tuned = load_sip(tmp_path / "sharp")
    assert torch.equal(tuned.state_head.weight, base.state_head.weight), "the state head must stay frozen"


def _rehearsal_loss(run_dir, encoder, pool) -> float:
    """The rehearsal loss of a saved run on 8 fixed batches of the pool (eval mode, no dropout)."""
    model = load_sip(run_dir).eval()
    rehearsal = regularisers.Rehearsal(pool, model, encoder, "cpu", 32, seed=99)
    with torch.no_grad():
        return float(np.mean([rehearsal.loss(model, step).item() for step in range(8)]))


def test_rehearsal_keeps_the_body_simulating_and_leaves_the_prefix_mode_alone(tmp_path, pool):
    base, model = _checkpoint(tmp_path, state_head=False)
    common = ("--save-model", "--lr", "3e-3", "--epochs", "4")
    assert cli.main(_argv(model, tmp_path / "plain", *common)) == 0
    assert cli.main(_argv(model, tmp_path / "rehearsed", "--rehearsal", "1", "--rehearsal-data", str(pool),
                          "--rehearsal-batch", "16", *common)) == 0
    encoder = base.fst_encoder
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    plain, rehearsed = _rehearsal_loss(tmp_path / "plain", encoder, pool), _rehearsal_loss(tmp_path / "rehearsed",
                                                                                           encoder, pool)
    assert rehearsed < 0.9 * plain, (plain, rehearsed)
    assert all(torch.equal(before[k], v) for k, v in encoder.state_dict().items())
    tuned = load_sip(tmp_path / "rehearsed")
    assert tuned.config.prefix_mode == "tuned" and tuned.fst_encoder is None and tuned.prefix.shape[0] == 6


def test_reading_fsts_restores_the_model_after_an_error(tmp_path):
    base, _ = _checkpoint(tmp_path, state_head=False)
    from sip_core.model.loading import with_prefix_mode
    tuned = with_prefix_mode(base, "tuned", prefix_length=6)
    with pytest.raises(RuntimeError, match="boom"):
        with tuned.reading_fsts(base.fst_encoder):
            assert tuned.config.prefix_mode == "fst" and tuned.fst_encoder is base.fst_encoder
            raise RuntimeError("boom")
    assert tuned.config.prefix_mode == "tuned" and tuned.fst_encoder is None


@pytest.mark.parametrize("head, flags, message", [
    (False, ["--state-entropy", "1"], "--state-entropy needs a SIP checkpoint with a state head"),
    (True, ["--state-entropy", "-1"], "--state-entropy must be at least 0"),
    (True, ["--state-entropy", "nan"], "--state-entropy must be at least 0"),
    (False, ["--rehearsal", "1"], "--rehearsal needs --rehearsal-data POOL"),
    (False, ["--rehearsal", "1", "--rehearsal-data", "MISSING"], "is not a pre-training pool"),
    (False, ["--rehearsal", "1", "--rehearsal-data", "POOL", "--prefix", "none"], "and a tuned prefix"),
    (False, ["--rehearsal", "-0.5"], "--rehearsal must be at least 0"),
    (False, ["--rehearsal-batch", "-2"], "--rehearsal-batch must be at least 0"),
])
def test_bad_regulariser_settings_are_one_line_errors(tmp_path, capsys, pool, head, flags, message):
    _, model = _checkpoint(tmp_path, state_head=head)
    flags = [str(pool) if f == "POOL" else str(tmp_path / "missing") if f == "MISSING" else f for f in flags]
    assert cli.main(_argv(model, tmp_path / "run", *flags)) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()
