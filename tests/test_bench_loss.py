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
