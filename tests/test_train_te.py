"""The TE baseline (REFERENCE §4.4): per-task embedding rows learned in pre-training, the table's own LR,
and TE fine-tuning's fresh N(0,1) prefix with its own LR (REFERENCE §4.4, §7). The table trains with sparse
gradients and SparseAdam (lazy Adam, docs/DEVIATIONS.md): the same as dense Adam when every row is in every
batch, rows outside a batch untouched, both optimisers driven by the LR schedule."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from sip_core.cli import build_parser
from sip_core.errors import SipError
from sip_core.eval.decode import predict_split
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import load_sip, save_model
from sip_core.train import checkpoint as ckpt
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import load_pool, make_split
from sip_core.train.finetune import FineTuner
from sip_core.train.optim import build_optimizer, build_scheduler, clip_grad_norm_
from sip_core.train.pretrain import PretrainOptions, make_optimizer, run
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


def _whole_te(run_dir):
    """The TE model with its whole task table, from the run's resume checkpoint."""
    return ckpt.model_from_checkpoint(*ckpt.load_checkpoint(ckpt.latest_checkpoint(run_dir)))


def test_te_pretraining_learns_a_row_per_task(te_model):
    """Seen tasks through their own rows beat the same examples through another task's row or row 0."""
    root, pool_dir = te_model
    model = _whole_te(root / "te").eval()
    assert model.config.prefix_mode == "te" and model.config.te_num_tasks == 9  # 8 tasks + the fallback row 0
    assert not model.task_embedding.embedding.sparse  # trained with sparse gradients, loaded as a plain table
    train = load_pool(pool_dir, False, te=True).splits["train"]
    rows = np.unique(train.task_rows)
    assert rows.tolist() == list(range(1, 9))
    other = dict(zip(rows, np.roll(rows, 1)))
    swapped = replace(train, task_rows=np.array([other[r] for r in train.task_rows]))
    fallback = replace(train, task_rows=np.zeros_like(train.task_rows))
    (acc, loss), (acc_sw, loss_sw), (acc_0, _) = (_acc_and_loss(model, s) for s in (train, swapped, fallback))
    assert acc > 2 * acc_sw and acc > 2 * acc_0 and acc >= 30.0, (acc, acc_sw, acc_0)
    assert loss < 0.6 * loss_sw, (loss, loss_sw)


def test_the_saved_te_model_keeps_row_0_of_its_table_and_the_whole_body(te_model):
    """model.safetensors is what fine-tuning loads, which starts a fresh prefix: the table is cut to its row
    0 (the row of unseen FSTs) so that a gpu pool's 500k rows need not travel; the rest is the run's."""
    root, _ = te_model
    whole, saved = _whole_te(root / "te").state_dict(), load_sip(root / "te")
    assert saved.config.te_num_tasks == 1 and saved.config.prefix_mode == "te"
    table = "task_embedding.embedding.weight"
    assert torch.equal(saved.state_dict()[table], whole[table][:1])
    assert all(torch.equal(v, whole[k]) for k, v in saved.state_dict().items() if k != table)


def test_one_te_step_moves_the_table_at_te_lr_and_the_body_at_lr(te_model, tmp_path):
    """Adam's first step moves every parameter with a gradient by ~its group's LR: continuing the TE model for
    one step shows which LR each part got, and that only the rows of tasks in the batch moved."""
    root, pool_dir = te_model
    whole = _whole_te(root / "te")
    save_model(whole, tmp_path / "whole")
    before = whole.state_dict()
    run(_options(pool_dir, tmp_path / "step", init=str(tmp_path / "whole"), lr=1e-3, te_lr=0.25, max_steps=1,
                 batch_size=8))
    after = _whole_te(tmp_path / "step").state_dict()
    table = "task_embedding.embedding.weight"
    moved = (after[table] - before[table]).abs().amax(1)
    assert moved[0] == 0.0  # the fallback row of unseen tasks is never trained
    touched = moved > 0
    assert 1 <= int(touched.sum()) <= 8  # only the tasks of the 8 examples in the batch
    # rtol 1e-2: SparseAdam adds ε before the bias correction, 32× larger than dense Adam's at step 1,
    # and the table's gradients are small (~1e-4)
    assert torch.allclose(moved[touched], torch.full_like(moved[touched], 0.25), rtol=1e-2)
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


# --- the task table's sparse gradients and SparseAdam ------------------------------------------------------

CPU = torch.device("cpu")


def _tiny_te(num_tasks=4) -> SIPForConditionalGeneration:
    torch.manual_seed(0)
    return SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8,
                                                              dropout_rate=0.0),
                                                 prefix_mode="te", variant="te", te_num_tasks=num_tasks,
                                                 prefix_length=3, te_dim=4))


def _te_batch(rows, seed):
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list("abcd"), size=int(rng.integers(1, 6)))) for _ in rows]
    split = make_split(words, [w[::-1] for w in words], task_rows=list(rows))
    return DeviceSplit(split, "cpu").batch(np.arange(len(rows)))


def _train_step(model, optimizer, batch, clip=0.0, scheduler=None):
    model(**batch).loss.backward()
    if clip:
        clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)


def _groups(model, table_lr, sparse):
    table = [model.task_embedding.embedding.weight]
    body = [p for p in model.parameters() if p is not table[0]]
    return [{"name": "body", "params": body, "lr": 1e-2},
            {"name": "task_table", "params": table, "lr": table_lr, "sparse": sparse}]


def test_sparse_table_equals_dense_adam_when_every_row_is_in_every_batch():
    """Lazy Adam is Adam when every row gets a gradient every step: 3 clipped steps with sparse gradients,
    SparseAdam and our sparse-aware clipping give the weights of 3 steps of dense AdamW and torch's clipping.
    (eps tiny: SparseAdam adds it before the bias correction, dense Adam after; the only other difference.)"""
    dense, sparse = _tiny_te(), _tiny_te()
    sparse.task_embedding.embedding.sparse = True
    opt_dense = build_optimizer(_groups(dense, 0.1, False), CPU, eps=1e-12)
    opt_sparse = build_optimizer(_groups(sparse, 0.1, True), CPU, eps=1e-12)
    assert isinstance(opt_dense, torch.optim.AdamW) and set(opt_sparse.parts) == {"dense", "sparse"}
    for step in range(3):
        batch = _te_batch([0, 1, 2, 3, 2, 1, 0, 3], seed=step)  # all 4 rows, some twice
        _train_step(dense, opt_dense, batch, clip=0.05)
        _train_step(sparse, opt_sparse, batch, clip=0.05)
    table = sparse.task_embedding.embedding.weight
    assert (table - _tiny_te().task_embedding.embedding.weight).abs().amin(1).gt(0).all()  # every row moved
    for (name, a), b in zip(dense.named_parameters(), sparse.parameters()):
        assert torch.allclose(a, b, atol=1e-6), (name, (a - b).abs().max())


def test_rows_outside_the_batch_do_not_move():
    """The lazy half of lazy Adam: rows 1 and 2 (with momentum from step 1) stay put in step 2, which only
    has row 3, while dense Adam would move them with their stale momentum; row 0 is never trained."""
    model = _tiny_te()
    optimizer = make_optimizer(model, PretrainOptions(variant="te", data="", out="", te_lr=0.5), CPU)
    table = model.task_embedding.embedding.weight
    start = table.detach().clone()
    _train_step(model, optimizer, _te_batch([1, 2, 1], seed=0))
    after_one = table.detach().clone()
    _train_step(model, optimizer, _te_batch([3, 3], seed=1))
    moved_one = (after_one - start).abs().amax(1)
    moved_two = (table.detach() - after_one).abs().amax(1)
    assert moved_one.tolist()[0] == 0 and moved_one[1:3].gt(0.4).all() and moved_one[3] == 0
    assert moved_two[:3].eq(0).all() and moved_two[3] > 0.1
    dense = _tiny_te()  # the contrast: dense AdamW moves rows 1, 2 in step 2
    opt = build_optimizer(_groups(dense, 0.5, False), CPU)
    _train_step(dense, opt, _te_batch([1, 2, 1], seed=0))
    before = dense.task_embedding.embedding.weight.detach().clone()
    _train_step(dense, opt, _te_batch([3, 3], seed=1))
    assert (dense.task_embedding.embedding.weight - before).abs().amax(1)[1:3].gt(0.1).all()


def test_schedule_drives_the_lr_of_body_and_table_also_after_a_resume():
    """LambdaLR over the two optimisers: each part steps with base LR x schedule factor, also once both are
    reloaded from a state dict (which replaces their param groups), as a resumed run does."""
    model = _tiny_te()
    opts = PretrainOptions(variant="te", data="", out="", lr=1e-3, te_lr=0.5)
    optimizer = make_optimizer(model, opts, CPU)
    scheduler = build_scheduler(optimizer, "linear", 2, 6)
    factor = scheduler.lr_lambdas[0]
    table = model.task_embedding.embedding.weight

    def used_lrs(opt):  # the LR each part reads in its step
        return opt.parts["dense"].param_groups[0]["lr"], opt.parts["sparse"].param_groups[0]["lr"]

    before = table.detach().clone()
    assert used_lrs(optimizer) == pytest.approx((1e-3 * factor(0), 0.5 * factor(0)))
    _train_step(model, optimizer, _te_batch([2], seed=0), scheduler=scheduler)
    # Adam's first step moves a row by ~its LR: the table group's scheduled LR (0.25), not the base 0.5
    assert (table - before).abs().amax(1)[2].item() == pytest.approx(0.25, rel=1e-3)
    for step in range(1, 3):
        assert used_lrs(optimizer) == pytest.approx((1e-3 * factor(step), 0.5 * factor(step)))
        _train_step(model, optimizer, _te_batch([1, 2], seed=step), scheduler=scheduler)
    saved = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
    resumed = make_optimizer(model, opts, CPU)
    resumed_scheduler = build_scheduler(resumed, "linear", 2, 6)
    resumed.load_state_dict(saved["optimizer"])
    resumed_scheduler.load_state_dict(saved["scheduler"])
    assert resumed.parts["sparse"].state[table]["step"] == 3
    for step in range(3, 6):
        assert used_lrs(resumed) == pytest.approx((1e-3 * factor(step), 0.5 * factor(step)))
        assert [g["lr"] for g in resumed.param_groups] == list(used_lrs(resumed)) == resumed_scheduler.get_last_lr()
        _train_step(model, resumed, _te_batch([1, 3], seed=step), scheduler=resumed_scheduler)
    assert used_lrs(resumed) == (0.0, 0.0)  # the end of the linear decay


def test_te_weight_decay_is_refused():
    """SparseAdam has no weight decay: asking for it with a TE table is an error, not silently ignored."""
    with pytest.raises(SipError, match="weight decay"):
        make_optimizer(_tiny_te(), PretrainOptions(variant="te", data="", out="", weight_decay=0.01), CPU)


def test_a_checkpoint_of_the_dense_table_optimiser_starts_over(te_model, tmp_path, capsys):
    """A TE checkpoint written before the sparse table (one AdamW state, e.g. a killed cpu-scale run) is not
    resumed with the new optimiser: the run starts over, as after a change of settings."""
    _, pool_dir = te_model
    opts = _options(pool_dir, tmp_path / "run", max_steps=2, batch_size=8)
    run(opts)
    state = ckpt.latest_checkpoint(tmp_path / "run") / ckpt.STATE_FILE
    payload = torch.load(state, weights_only=False)
    payload["optimizer"] = payload["optimizer"]["parts"]["dense"]  # the layout of the dense code
    torch.save(payload, state)
    capsys.readouterr()
    run(replace(opts, max_steps=3))
    out = capsys.readouterr().out
    assert "AdamW -> SparseAdam); starting over" in out and "finished at step 3/3" in out


def test_max_fsts_keeps_the_first_training_fsts_and_sizes_the_table_by_them(te_model, tmp_path):
    """--max-fsts N: train and easy-dev keep the examples of the N lowest-id training FSTs, unseen-FST splits
    stay whole, and a TE run's table has N + 1 rows. Checked against the pool's own rows, read directly."""
    _, pool_dir = te_model
    rows = pd.read_parquet(pool_dir / "examples.parquet")
    first = sorted(rows.loc[rows.split == "train", "fst_id"].unique())[:3]
    pool = load_pool(pool_dir, False, te=True, max_fsts=3)
    for name in ("train", "easy_dev"):
        want = rows[(rows.split == name) & rows.fst_id.isin(first)]
        assert sorted(pool.splits[name].inputs) == sorted(want.input) and len(want) > 0
    assert pool.train_fst_ids.tolist() == first
    for name in set(pool.splits) - {"train", "easy_dev"}:
        assert len(pool.splits[name].inputs) == int((rows.split == name).sum())
    run(_options(pool_dir, tmp_path / "te3", max_fsts=3, max_steps=2, batch_size=8))
    assert _whole_te(tmp_path / "te3").config.te_num_tasks == 4
    with pytest.raises(SipError, match="has only 8 training FSTs"):
        load_pool(pool_dir, False, te=True, max_fsts=9)
