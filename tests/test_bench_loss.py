"""The loss-ε benchmark (`python -m sip_core.train.bench_loss`): both loops learn from the same weights, and
its verdict is the stated comparison of their held-out losses."""
from __future__ import annotations

import json

from sip_core.train import bench_loss
from tests.fixtures.real_pool import build_tiny_pool


def test_both_loops_learn_and_the_verdict_follows_epsilon(tmp_path, capsys):
    build_tiny_pool(tmp_path / "pool", n_train=20, per_fst=20)
    bench_loss.main(["--data", str(tmp_path / "pool"), "--shape", "tiny", "--steps", "30", "--lr", "3e-3",
                     "--device", "cpu", "--threads", "1", "--eval-examples", "60", "--no-control"])
    out = json.loads(capsys.readouterr().out)
    initial = out["initial_heldout_loss"]
    for loop in ("ours", "reference"):
        assert out[loop]["heldout_loss"] < 0.8 * initial, (loop, out[loop], initial)
    diff = out["ours"]["heldout_loss"] - out["reference"]["heldout_loss"]
    assert abs(out["loss_difference_ours_minus_reference"] - diff) < 1e-3
    assert out["within_epsilon"] == (abs(diff) <= out["epsilon"])
    assert out["examples_per_step"] == 30 and "reference_seed2" not in out


def test_trace_stops_at_the_first_nonfinite_step_and_names_the_module(tmp_path):
    """The bf16 diagnosis: a weight made infinite is reported as where the non-finite values start."""
    import torch

    from sip_core.model.config import SIPConfig, t5_kwargs
    from sip_core.model.sip_model import SIPForConditionalGeneration
    from sip_core.train import bench
    from sip_core.train.batching import DeviceSplit
    from sip_core.train.bench import SHAPES

    build_tiny_pool(tmp_path / "pool", n_train=10, per_fst=10)
    args = type("A", (), {"data": str(tmp_path / "pool"), "device": "cpu", "threads": 1, "max_train": 0, "seed": 0})
    device, pool, split = bench.setup(args)
    model = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(**SHAPES["tiny"]), prefix_mode="fst"))
    with torch.no_grad():
        model.t5.encoder.block[1].layer[1].DenseReluDense.wo.weight[0, 0] = float("inf")
    trace = {}
    _, losses = bench_loss.train_steps("ours", model, DeviceSplit(split, device, pool.fsts, use_fsts=True), 5, 1e-3,
                                       "fp32", 0, device, trace=trace)
    assert losses == [] and trace["first_nonfinite_step"] == 0
    assert trace["first_nonfinite_forward_module"] == "t5.encoder.block.1.layer.1.DenseReluDense.wo"
    assert trace["anomaly"]["error"]  # the replay under anomaly detection names the backward function
    assert trace["n_nonfinite_grads"] > 0
