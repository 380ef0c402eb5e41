"""Fine-tuning: parameter groups, run outputs for every task in one process, predict/evaluate round trip."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import torch

from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.train.finetune import finetune_param_groups
from tests.fixtures.tiny_fsts import write_pool, write_tasks

ROOT = Path(__file__).resolve().parents[1]
SHAPE = ["--d-model", "32", "--d-ff", "64", "--layers", "1", "--heads", "2", "--d-kv", "16"]


def test_param_groups_carry_intended_lrs():
    model = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8),
                                                  prefix_mode="tuned", prefix_length=4))
    groups = finetune_param_groups(model, lr=3e-4, prefix_lr=1.0)
    opt = torch.optim.Adam([g for g in groups if g["params"]])
    by_name = {g["name"]: g for g in opt.param_groups}
    assert by_name["prefix"]["lr"] == 1.0 and by_name["prefix"]["params"] == [model.prefix]
    assert by_name["body"]["lr"] == 3e-4
    n_body = sum(p.numel() for p in by_name["body"]["params"])
    assert n_body + model.prefix.numel() == sum(p.numel() for p in model.parameters())


def _sip(*args):
    return subprocess.run([sys.executable, "-m", "sip_core.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "SIP_THREADS": "1", "PATH": "/usr/bin:/bin"})


def test_finetune_all_tasks_then_evaluate_and_predict(tmp_path):
    pool = write_pool(tmp_path / "pool", n_train_fsts=6, n_dev_fsts=1, n_test_fsts=1, per_fst=5)
    tasks = write_tasks(tmp_path / "tasks", n_tasks=2, n_train=12, n_test=4)
    r = _sip("pretrain", "--variant", "sip", "--data", str(pool), "--out", str(tmp_path / "ckpt"), *SHAPE,
             "--max-steps", "3", "--batch-size", "8", "--no-progress")
    assert r.returncode == 0, r.stderr
    r = _sip("finetune", "--model", str(tmp_path / "ckpt"), "--tasks", str(tasks / "examples.parquet"), "--task-id", "all",
             "--out", str(tmp_path / "ft"), "--epochs", "3", "--batch-size", "8", "--no-progress", "--scale", "ci",
             "--params-hash", "abc123", "--model-name", "sip-d4")
    assert r.returncode == 0, r.stderr
    for tid in ("iteration-s2-0", "iteration-s2-1"):
        m = json.loads((tmp_path / "ft" / tid / "metrics.json").read_text())
        assert m["task_id"] == tid and m["model"] == "sip-d4" and m["scale"] == "ci" and m["params_hash"] == "abc123"
        assert m["prefix"] == "mean" and len(m["epochs"]) == 3 and m["n_test"] == 4
        assert m["reported"]["acc"] == sum(e["acc"] for e in m["epochs"]) / 3
        assert {"run_id", "seed", "steps", "device", "commit"} <= m.keys() and m["deterministic"] is True and m["determinism"] == "strict"
        assert 0 < m["eval_seconds"] < m["wall_seconds"]  # three test decodings, part of the run's time
        preds = pq.read_table(tmp_path / "ft" / tid / "predictions.parquet")
        assert preds.column_names == ["input", "gold", "prediction"] and len(preds) == 4
    # a TSV task with the no-prefix ablation, the model saved, then evaluate and predict with it
    (tmp_path / "train.tsv").write_text("ab\tba\nba\tab\n", encoding="utf-8")
    (tmp_path / "test.tsv").write_text("aab\tbaa\n", encoding="utf-8")
    r = _sip("finetune", "--model", str(tmp_path / "ckpt"), "--train", str(tmp_path / "train.tsv"), "--test",
             str(tmp_path / "test.tsv"), "--out", str(tmp_path / "run"), "--prefix", "none", "--epochs", "1",
             "--save-model", "--no-progress", "--determinism", "off")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run" / "model.safetensors").exists()
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["determinism"] == "off" and m["deterministic"] is False  # the flag overrides the strict default
    r = subprocess.run([sys.executable, "-m", "sip_core.cli", "predict", "--model", str(tmp_path / "run")],
                       input="ab\nb\n", capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2
    r = _sip("evaluate", "--model", str(tmp_path / "run"), "--tasks", str(tasks / "examples.parquet"), "--out",
             str(tmp_path / "ev"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ev" / "iteration-s2-0" / "metrics.json").exists()
    r = _sip("finetune", "--model", str(tmp_path / "missing"), "--train", "x.tsv", "--test", "y.tsv", "--out", str(tmp_path / "z"))
    assert r.returncode == 2 and r.stderr.startswith("sip: error:") and "Traceback" not in r.stderr
