"""The TE baseline (REFERENCE §4.4): per-task embedding rows learned in pre-training, the table's own LR,
and TE fine-tuning's fresh N(0,1) prefix with its own LR (REFERENCE §4.4, §7)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from sip_core.cli import build_parser
from sip_core.eval.decode import predict_split
from sip_core.model.loading import load_sip
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import load_pool
from sip_core.train.finetune import FineTuner
from sip_core.train.pretrain import PretrainOptions, run
from tests.fixtures.real_pool import build_tiny_pool

SHAPE = dict(d_model=32, d_ff=64, layers=2, decoder_layers=1, heads=2, d_kv=16, dropout=0.0)


def _options(pool_dir, out, **kw) -> PretrainOptions:
    base = dict(variant="te", data=str(pool_dir), out=str(out), **SHAPE, eval_splits=(), checkpoint_minutes=0,
                log_every=50, progress=False, seed=0, threads=1)
    return PretrainOptions(**{**base, **kw})


@pytest.fixture(scope="module")
def te_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("te")
    pool_dir = build_tiny_pool(root / "pool", n_train=8, per_fst=30, easy_per_fst=5, max_len=4, seed=0)
    run(_options(pool_dir, root / "te", lr=3e-3, te_lr=1.0, warmup=20, max_steps=300, batch_size=32))
    return root, pool_dir


def _acc_and_loss(model, split) -> tuple[float, float]:
    data = DeviceSplit(split, "cpu")
    preds = predict_split(model, data, batch_size=256)
    with torch.no_grad():
        loss = model(**data.batch(np.arange(len(split)))).loss.item()
    return 100.0 * float(np.mean([p == g for p, g in zip(preds, split.outputs)])), loss


def test_te_pretraining_learns_a_row_per_task(te_model):
    """Seen tasks through their own rows beat the same examples through another task's row or row 0."""
    root, pool_dir = te_model
    model = load_sip(root / "te").eval()
    assert model.config.prefix_mode == "te" and model.config.te_num_tasks == 9  # 8 tasks + the fallback row 0
    train = load_pool(pool_dir, False, te=True).splits["train"]
    rows = np.unique(train.task_rows)
    assert rows.tolist() == list(range(1, 9))
    other = dict(zip(rows, np.roll(rows, 1)))
    swapped = replace(train, task_rows=np.array([other[r] for r in train.task_rows]))
    fallback = replace(train, task_rows=np.zeros_like(train.task_rows))
    (acc, loss), (acc_sw, loss_sw), (acc_0, _) = (_acc_and_loss(model, s) for s in (train, swapped, fallback))
    assert acc > 2 * acc_sw and acc > 2 * acc_0 and acc >= 30.0, (acc, acc_sw, acc_0)
    assert loss < 0.6 * loss_sw, (loss, loss_sw)


def test_one_te_step_moves_the_table_at_te_lr_and_the_body_at_lr(te_model, tmp_path):
    """Adam's first step moves every parameter with a gradient by ~its group's LR: continuing the TE model for
    one step shows which LR each part got, and that only the rows of tasks in the batch moved."""
    root, pool_dir = te_model
    before = load_sip(root / "te").state_dict()
    run(_options(pool_dir, tmp_path / "step", init=str(root / "te"), lr=1e-3, te_lr=0.25, max_steps=1, batch_size=8))
    after = load_sip(tmp_path / "step").state_dict()
    table = "task_embedding.embedding.weight"
    moved = (after[table] - before[table]).abs().amax(1)
    assert moved[0] == 0.0  # the fallback row of unseen tasks is never trained
    touched = moved > 0
    assert 1 <= int(touched.sum()) <= 8  # only the tasks of the 8 examples in the batch
    assert torch.allclose(moved[touched], torch.full_like(moved[touched], 0.25), rtol=1e-3)
    body = max((after[k] - before[k]).abs().max().item() for k in before if k != table)
    assert 0.5e-3 < body <= 1.001e-3, body


def test_te_fine_tuning_uses_a_fresh_random_prefix_at_prefix_lr(te_model, tmp_path):
    """TE fine-tuning: the table is dropped, the body is the TE model's, the prefix is a new (50, d_model)
    N(0,1) matrix (no up-projection) trained at --prefix-lr while the body trains at --lr."""
    root, pool_dir = te_model
    (tmp_path / "train.tsv").write_text("ab\tba\nba\tab\naab\tbaa\n", encoding="utf-8")
    (tmp_path / "test.tsv").write_text("abb\tbba\n", encoding="utf-8")
    args = build_parser().parse_args(["finetune", "--model", str(root / "te"), "--train", str(tmp_path / "train.tsv"),
                                      "--test", str(tmp_path / "test.tsv"), "--out", str(tmp_path / "ft"),
                                      "--prefix", "random", "--epochs", "1", "--batch-size", "8", "--lr", "1e-3",
                                      "--prefix-lr", "0.5", "--no-progress", "--threads", "1", "--precision", "fp32"])
    tuner = FineTuner(args)
    model = tuner.model
    assert model.task_embedding is None and model.config.prefix_mode == "tuned"
    assert model.prefix.shape == (50, model.config.d_model)
    te = load_sip(root / "te").state_dict()
    body_before = {k: v.clone() for k, v in model.state_dict().items() if k != "prefix"}
    assert all(torch.equal(v, te[k]) for k, v in body_before.items())  # the TE model's body, unchanged
    metrics = tuner.run("tsv", [("ab", "ba"), ("ba", "ab"), ("aab", "baa")], [("abb", "bba")], tmp_path / "ft")
    assert metrics["prefix"] == "random" and metrics["steps"] == 1
    init = torch.randn(model.prefix.shape, generator=torch.Generator().manual_seed(args.seed))  # _reset's draw
    assert abs(init.mean().item()) < 0.1 and abs(init.std().item() - 1.0) < 0.1
    step = (model.prefix.detach() - init).abs()
    # Adam's first step is lr * g / (|g| + eps): the prefix LR for every entry whose gradient is not tiny
    assert step.max() <= 0.5 * (1 + 1e-5) and (step > 0.49).float().mean() > 0.9, step.max()
    body = max((model.state_dict()[k] - v).abs().max().item() for k, v in body_before.items())
    assert 0.5e-3 < body <= 1.001e-3, body
