"""Tuned-prefix analysis (paper Figure 9): assignment similarity, permutations, prefix-only fine-tuning, and
the `sip prefix` commands end to end on tiny data."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from sip_core.analysis.prefix import fst_encodings, permuted
from sip_core.analysis.similarity import assignment_similarity, exact_similarity
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.train.data import fst_table_from_arrow
from tests.fixtures.tiny_fsts import _fst_table, random_fst, write_pool, write_tasks

ROOT = Path(__file__).resolve().parents[1]
TINY = t5_kwargs(d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16, dropout_rate=0.0)


def tiny_sip(mode="fst", **kw):
    torch.manual_seed(0)
    return SIPForConditionalGeneration(SIPConfig(t5=TINY, prefix_mode=mode, **kw)).eval()


def test_sinkhorn_greedy_is_a_matching_close_to_the_hungarian_optimum():
    gen = torch.Generator().manual_seed(3)
    for n, m in ((12, 12), (12, 7), (30, 30)):
        p, q = torch.randn(n, 16, generator=gen), torch.randn(1, m, 16, generator=gen)
        approx = float(assignment_similarity(p, q)[0])
        exact = exact_similarity(p, q[0])
        assert approx <= exact + 1e-5           # a matching can never beat the optimal one
        assert approx >= exact - 0.05           # and Sinkhorn + greedy finds a near-optimal one


def test_similarity_is_permutation_invariant_and_masks_padding():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(10, 8, generator=gen)
    p = q[torch.randperm(10, generator=gen)]
    assert float(assignment_similarity(p, q.unsqueeze(0))[0]) == pytest.approx(1.0, abs=1e-5)
    # a shorter encoding (padded in the batch) is matched position by position into the longer prefix
    short = torch.cat([q[:6], torch.randn(4, 8, generator=gen)]).unsqueeze(0)
    mask = torch.tensor([[True] * 6 + [False] * 4])
    assert float(assignment_similarity(p, short, mask)[0]) == pytest.approx(1.0, abs=1e-5)


def test_prefix_equal_to_gold_encoding_ranks_gold_above_random_distractors():
    model = tiny_sip()
    rng = random.Random(0)
    fsts = [random_fst(rng, 3, "abcd") for _ in range(41)]
    table = fst_table_from_arrow(_fst_table([{**f, "fst_id": i, "split": "x"} for i, f in enumerate(fsts)]))
    width = 12  # = the number of transitions of each FST (3 states x 4 symbols)
    vectors, mask = fst_encodings(model, table, np.arange(len(fsts)), width)
    assert mask.all()
    prefix = permuted(vectors[0], torch.Generator().manual_seed(5))  # the gold encoding in another order
    sims = assignment_similarity(prefix, vectors, mask).numpy()
    assert sims[0] == pytest.approx(1.0, abs=1e-4)
    assert sims[0] > sims[1:].max() + 0.01
    assert exact_similarity(prefix, vectors[1]) < 0.999  # independently: distractors are not the gold


def test_permuting_an_identity_like_prefix_changes_nothing_but_a_distinct_one_changes_the_encoding():
    model = tiny_sip("tuned", prefix_length=6)
    ids = torch.tensor([[10, 11, 12, 1]])
    att = torch.ones_like(ids)
    gen = torch.Generator().manual_seed(2)
    row = torch.randn(32, generator=gen)
    with torch.no_grad():
        model.prefix.copy_(row.expand(6, 32))       # every position the same vector
        before = model.encode(ids, att)[0].last_hidden_state
        model.prefix.copy_(permuted(model.prefix.detach().clone(), gen))
        assert torch.allclose(model.encode(ids, att)[0].last_hidden_state, before)
        distinct = torch.randn(6, 32, generator=gen)
        model.prefix.copy_(distinct)
        before = model.encode(ids, att)[0].last_hidden_state
        shuffled = distinct[[1, 0, 2, 3, 4, 5]]
        model.prefix.copy_(shuffled)
        after = model.encode(ids, att)[0].last_hidden_state
    # the same multiset of rows, but positions matter to T5's relative attention: the encoding moves
    assert sorted(map(tuple, shuffled.tolist())) == sorted(map(tuple, distinct.tolist()))
    assert not torch.allclose(after[:, 6:], before[:, 6:], atol=1e-5)


def _sip(*args):
    return subprocess.run([sys.executable, "-m", "sip_core.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "SIP_THREADS": "1", "PATH": "/usr/bin:/bin"})


def test_prefix_only_finetune_then_analyse_end_to_end(tmp_path):
    from safetensors.torch import load_file

    pool = write_pool(tmp_path / "pool", n_train_fsts=6, n_dev_fsts=1, n_test_fsts=1, per_fst=5, n_states=3)
    tasks = write_tasks(tmp_path / "tasks", n_tasks=2, n_train=12, n_test=4, n_states=3)
    shape = ["--d-model", "32", "--d-ff", "64", "--layers", "1", "--heads", "2", "--d-kv", "16", "--dropout", "0"]
    r = _sip("pretrain", "--variant", "sip", "--data", str(pool), "--out", str(tmp_path / "ckpt"), *shape,
             "--max-steps", "3", "--batch-size", "8", "--no-progress")
    assert r.returncode == 0, r.stderr
    r = _sip("finetune", "--model", str(tmp_path / "ckpt"), "--tasks", str(tasks / "examples.parquet"),
             "--task-id", "all", "--prefix", "mean", "--freeze-body", "--save-prefix", "--save-model", "--epochs", "2",
             "--batch-size", "4", "--prefix-lr", "0.5", "--lr", "0.1", "--no-progress", "--out", str(tmp_path / "tuned"))
    assert r.returncode == 0, r.stderr
    body = load_file(str(tmp_path / "ckpt" / "model.safetensors"))
    tuned = load_file(str(tmp_path / "tuned" / "iteration-s3-0" / "model.safetensors"))
    shared = [k for k in tuned if k.startswith("t5.") and k in body]
    assert shared and all(torch.equal(tuned[k], body[k]) for k in shared)   # --lr 0.1 ignored: body frozen
    prefix = load_file(str(tmp_path / "tuned" / "iteration-s3-0" / "prefix.safetensors"))["prefix"]
    assert prefix.shape == (50, 32) and torch.equal(prefix, tuned["prefix"])
    assert json.loads((tmp_path / "tuned" / "iteration-s3-0" / "metrics.json").read_text())["hyperparameters"]["freeze_body"]

    r = _sip("prefix", "distractors", "--fsts", str(tasks / "fsts.parquet"), "--per-task", "20", "--seed", "1",
             "--out", str(tmp_path / "distractors.parquet"))
    assert r.returncode == 0, r.stderr
    dis = pq.read_table(tmp_path / "distractors.parquet").to_pylist()
    gold = {g["task_id"]: g for g in pq.read_table(tasks / "fsts.parquet").to_pylist()}
    assert len(dis) == 40 and {d["task_id"] for d in dis} == set(gold)
    assert all(d["n_states"] == 3 and d["vocab"] == gold[d["task_id"]]["vocab"] for d in dis)

    out = tmp_path / "results" / "prefix.csv"
    r = _sip("prefix", "analyse", "--model", str(tmp_path / "ckpt"), "--tasks", str(tasks / "examples.parquet"),
             "--fsts", str(tasks / "fsts.parquet"), "--tuned", str(tmp_path / "tuned"), "--distractors",
             str(tmp_path / "distractors.parquet"), "--permutations", "3", "--scale", "ci", "--out", str(out),
             "--figure", str(tmp_path / "results" / "fig9.png"))
    assert r.returncode == 0, r.stderr
    table = pd.read_csv(out)
    assert list(table.columns) == ["model", "setting", "metric", "value", "n"]
    cells = table.set_index(["setting", "metric"])["value"]
    for task in ("iteration-s3-0", "iteration-s3-1"):
        assert cells[(task, "acc_drop_mean")] == pytest.approx(cells[(task, "acc")] - cells[(task, "acc_perm_mean")])
        assert 1 <= cells[(task, "rank_gold")] <= 21
        assert cells[(task, "sim_distractor_max")] >= cells[(task, "sim_distractor_mean")]
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["analysis"]["permutations"] == 3 and meta["analysis"]["distractors_per_task"] == 20
    assert (tmp_path / "results" / "fig9.png").stat().st_size > 1000
    assert "median drop" in out.with_suffix(".md").read_text()


def test_freeze_body_without_a_prefix_is_a_one_line_error(tmp_path):
    tasks = write_tasks(tmp_path / "tasks", n_tasks=1, n_train=4, n_test=2)
    r = _sip("finetune", "--model", "scratch", "--tasks", str(tasks / "examples.parquet"), "--freeze-body",
             "--prefix", "none", "--epochs", "1", "--d-model", "16", "--d-ff", "32", "--layers", "1", "--heads", "2",
             "--d-kv", "8", "--no-progress", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "--freeze-body needs a tunable prefix" in r.stderr and "Traceback" not in r.stderr


def test_distractors_are_the_same_with_one_or_two_workers(tmp_path):
    from sip_core.analysis.distractors import build_distractors

    tasks = write_tasks(tmp_path / "tasks", n_tasks=2, n_train=4, n_test=2, n_states=3)
    build_distractors(tasks / "fsts.parquet", tmp_path / "one.parquet", per_task=30, seed=4, workers=1, chunk=7)
    build_distractors(tasks / "fsts.parquet", tmp_path / "two.parquet", per_task=30, seed=4, workers=2, chunk=7)
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "two.parquet").read_bytes()
    rows = pq.read_table(tmp_path / "one.parquet").to_pylist()
    assert [r["fst_id"] for r in rows[:30]] == list(range(30))
    assert len({tuple((t["src"], t["ilabel"], t["olabel"], t["dst"]) for t in r["transitions"]) for r in rows}) > 50
