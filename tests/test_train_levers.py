"""Training levers: auxiliary FST-state loss (labels on the right encoder positions, the head learns) and
the length curriculum (length caps, exact resume)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from sip_core.errors import SipError
from sip_core.model import tokenizer
from sip_core.model.config import SIPConfig, t5_kwargs
from sip_core.model.sip_model import SIPForConditionalGeneration
from sip_core.train import checkpoint as ckpt
from sip_core.train.batching import DeviceSplit, LengthCurriculum
from sip_core.train.data import FstTable, load_pool, make_split
from sip_core.train.pretrain import PretrainOptions, run
from tests.fixtures.tiny_fsts import write_pool
from tests.test_train_pretrain import _pretrain

TINY = dict(d_model=32, d_ff=64, layers=1, heads=2, d_kv=16)


def _hand_split():
    """Row 0: "aʃb" (ʃ is 2 bytes) after a 3-transition FST; row 1: "xy" after a 1-transition FST."""
    transitions = np.array([[0, 5, 5, 1, 1], [1, 6, 6, 2, 1], [2, 7, 7, 0, 2], [0, 5, 6, 0, 2]], np.int32)
    fsts = FstTable(fst_ids=np.array([1, 2]), transitions=transitions, offsets=np.array([0, 3, 4]))
    states = (np.array([0, 1, 2, 3, 0, 2, 1]), np.array([0, 4, 7]))
    split = make_split(["aʃb", "xy"], ["o", "p"], fst_rows=[0, 1], states=states)
    return split, fsts


@pytest.mark.parametrize("pad_multiple", [1, 8])
def test_state_labels_land_on_last_byte_of_each_character(pad_multiple):
    split, fsts = _hand_split()
    data = DeviceSplit(split, "cpu", fsts, use_fsts=True, pad_multiple=pad_multiple, state_labels=True)
    batch = data.batch(np.array([0, 1]))
    labels = batch["state_labels"]
    assert labels.shape == (2, batch["encoder_width"])
    expected = torch.full_like(labels, -100)
    # row 0: 3 transitions, then a(0..2) ʃ(3: first byte, 4: last) b(5), EOS
    expected[0, 3], expected[0, 5], expected[0, 6] = 1, 2, 3
    # row 1: 1 transition, then x y, EOS
    expected[1, 1], expected[1, 2] = 2, 1
    assert torch.equal(labels, expected)

    # the same positions hold those bytes in the model's packed encoder input
    config = SIPConfig(t5=t5_kwargs(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16), prefix_mode="fst")
    model = SIPForConditionalGeneration(config).eval()
    embeds, mask = model.encoder_inputs(batch["input_ids"], batch["attention_mask"], batch["fst"],
                                        encoder_width=batch["encoder_width"])
    assert embeds.shape[1] == labels.shape[1]
    last_bytes = {0: ["a", "ʃ", "b"], 1: ["x", "y"]}
    for row, chars in last_bytes.items():
        positions = torch.nonzero(labels[row] != -100).flatten()
        for pos, ch in zip(positions.tolist(), chars):
            byte_id = ch.encode("utf-8")[-1] + tokenizer.BYTE_OFFSET
            assert torch.equal(embeds[row, pos], model.t5.shared.weight[byte_id]), (row, pos, ch)


def test_state_labels_without_prefix_and_subset():
    split, _ = _hand_split()
    data = DeviceSplit(split.subset(np.array([1, 0])), "cpu", state_labels=True)
    labels = data.batch(np.array([0, 1]))["state_labels"]
    assert labels.tolist() == [[2, 1, -100, -100, -100], [1, -100, 2, 3, -100]]


def test_state_loss_needs_a_states_column(tmp_path):
    pool = write_pool(tmp_path / "pool", n_train_fsts=3, n_dev_fsts=1, n_test_fsts=1, per_fst=4)
    assert load_pool(pool, with_fsts=True).splits["train"].states is None
    with pytest.raises(SipError, match="--with-states"):
        run(PretrainOptions(variant="sip", data=str(pool), out=str(tmp_path / "run"), state_loss=1.0,
                            progress=False, device="cpu", **TINY))


@pytest.mark.parametrize("bad", [{"lr": -1e-3}, {"te_lr": float("nan")}, {"batch_size": 0}])
def test_bad_optimiser_values_stop_before_anything_is_written(tmp_path, bad):
    with pytest.raises(SipError, match="must be"):
        run(PretrainOptions(variant="sip", data=str(tmp_path / "pool"), out=str(tmp_path / "run"), progress=False,
                            device="cpu", **TINY, **bad))
    assert not (tmp_path / "run").exists()


def test_state_accuracy_rises(tmp_path):
    pool = write_pool(tmp_path / "pool", n_train_fsts=40, n_dev_fsts=2, n_test_fsts=2, per_fst=20, n_states=3,
                      states=True)
    metrics = run(PretrainOptions(variant="sip", data=str(pool), out=str(tmp_path / "run"), **TINY, dropout=0.0,
                                  batch_size=32, max_steps=200, lr=2e-3, state_loss=1.0, log_every=20, eval_max=10,
                                  eval_splits=("dev",), progress=False, device="cpu", threads=1,
                                  checkpoint_minutes=0))
    curve = metrics["curve"]
    assert curve[-1]["state_loss"] < curve[0]["state_loss"] - 0.5
    assert curve[-1]["state_acc"] > curve[0]["state_acc"] + 15, curve
    saved = load_file(tmp_path / "run" / "model.safetensors")
    assert saved["state_head.weight"].shape == (16, 32)  # --num-states rows


def test_curriculum_caps_input_length():
    lengths = np.random.default_rng(0).integers(1, 36, size=2000)
    cur = LengthCurriculum(lengths, steps=50, start=5, batch_size=30, seed=3)
    assert cur.limit(0) == 5 and cur.limit(50) == 35
    for step in range(50):
        idx = cur.batch(step)
        assert len(idx) == 30 and len(set(idx.tolist())) == 30
        assert lengths[idx].max() <= cur.limit(step)
        assert np.array_equal(idx, LengthCurriculum(lengths, 50, 5, 30, 3).batch(step))  # (seed, step) only
    assert lengths[np.concatenate([cur.batch(s) for s in range(40, 50)])].max() > 25  # it does widen


def test_pretrain_loop_uses_the_curriculum(tmp_path, monkeypatch):
    pool = write_pool(tmp_path / "pool", n_train_fsts=10, n_dev_fsts=1, n_test_fsts=1, per_fst=8, max_len=14)
    seen = []
    real = DeviceSplit.batch

    def spy(self, idx, with_labels=True, idx_t=None):
        if with_labels:
            seen.append(self.split.input_char_lengths[np.asarray(idx)].max())
        return real(self, idx, with_labels, idx_t)

    monkeypatch.setattr(DeviceSplit, "batch", spy)
    run(PretrainOptions(variant="sip", data=str(pool), out=str(tmp_path / "run"), **TINY, batch_size=8, max_steps=12,
                        curriculum_steps=8, curriculum_start=2, log_every=4, eval_max=4, eval_splits=("dev",),
                        progress=False, device="cpu", threads=1, checkpoint_minutes=0))
    assert len(seen) == 12
    for step, longest in enumerate(seen[:8]):
        assert longest <= 2 + (14 - 2) * step / 8, (step, seen)
    assert max(seen[8:]) > 6


@pytest.fixture(scope="module")
def states_pool(tmp_path_factory):
    return write_pool(tmp_path_factory.mktemp("pool"), n_train_fsts=10, n_dev_fsts=2, n_test_fsts=2, per_fst=8,
                      states=True)


@pytest.mark.parametrize("curriculum_steps", ["6", "8"])  # resume at / inside the curriculum's last step
def test_resume_with_curriculum_and_state_loss_is_exact(states_pool, tmp_path, curriculum_steps):
    levers = ["--curriculum-steps", curriculum_steps, "--curriculum-start", "2", "--state-loss", "0.5"]
    full = _pretrain(states_pool, tmp_path / "full", *levers)
    assert full.returncode == 0, full.stderr
    killed = _pretrain(states_pool, tmp_path / "resumed", *levers, env_extra={"SIP_TEST_KILL_AFTER_STEP": "4"})
    assert killed.returncode == 137
    assert ckpt.latest_checkpoint(tmp_path / "resumed").name == "step-000000006"
    resumed = _pretrain(states_pool, tmp_path / "resumed", *levers)
    assert resumed.returncode == 0, resumed.stderr
    a = load_file(tmp_path / "full" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "model.safetensors")
    assert a.keys() == b.keys() and "state_head.weight" in a
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_wsd_schedule_decays_over_its_last_steps():
    from sip_core.train.optim import build_scheduler
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = build_scheduler(opt, "wsd", warmup_steps=2, total_steps=10, cooldown_steps=4)
    lrs = []
    for _ in range(10):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[:2] == [0.5, 1.0] and lrs[2:6] == [1.0] * 4       # warmup, then stable up to step 6
    assert lrs[6] == 1.0 and lrs[7] > lrs[8] > lrs[9] > 0          # cosine from step 6 over 4 steps
    with pytest.raises(SipError):
        build_scheduler(opt, "wsd", 0, 10, cooldown_steps=0)


def test_constant_run_resumed_into_a_wsd_decay_ends_at_zero_lr(states_pool, tmp_path):
    """The sweep's recipe: train at constant LR, then resume the same run with a longer budget that ends in
    a decay. The resumed scheduler must follow the new plan (a saved scheduler state must not cut it off)."""
    out = tmp_path / "run"
    first = _pretrain(states_pool, out, "--max-steps", "6", "--lr", "1e-3")
    assert first.returncode == 0, first.stderr
    second = _pretrain(states_pool, out, "--max-steps", "12", "--lr", "1e-3", "--schedule", "wsd",
                       "--cooldown-steps", "4")
    assert second.returncode == 0, second.stderr
    import json
    curve = {r["step"]: r["lr"] for r in json.loads((out / "pretrain_metrics.json").read_text())["curve"]}
    assert curve[6] == pytest.approx(1e-3) and curve[8] == pytest.approx(1e-3)
    assert curve[10] < 1e-3 * 0.6 and curve[12] == pytest.approx(0.0, abs=1e-12)


def test_rerun_with_other_settings_starts_over_instead_of_resuming(states_pool, tmp_path):
    """A stale checkpoint of a run with other settings (Snakemake rerunning after a params change) is
    discarded; the same settings resume."""
    out = tmp_path / "run"
    first = _pretrain(states_pool, out, "--max-steps", "6", "--lr", "1e-3")
    assert first.returncode == 0, first.stderr
    other = _pretrain(states_pool, out, "--max-steps", "6", "--lr", "2e-3")
    assert other.returncode == 0, other.stderr
    assert "settings changed" in other.stdout and "lr: 0.001 -> 0.002" in other.stdout
    assert "resuming" not in other.stdout
    import json
    metrics = json.loads((out / "pretrain_metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["curve"][0]["step"] == 2  # a fresh curve, not the old one
    again = _pretrain(states_pool, out, "--max-steps", "8", "--lr", "2e-3")
    assert again.returncode == 0 and "resuming from step 6" in again.stdout
