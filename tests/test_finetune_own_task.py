"""`sip finetune --train/--test` on a user's task: an ordinary Hugging Face checkpoint with a model card,
`sip predict` from it, Auto-class loading, and resumption after a kill (single task and --task-id all)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
import transformers
from safetensors.torch import load_file

from sip_core import cli
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import load_sip, save_model
from sip_core.train.rundir import Staging
from tests.fixtures.tiny_fsts import write_tasks

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = Path(__file__).parent / "data" / "example_task"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    torch.manual_seed(0)
    model = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16),
                                                  prefix_mode="none"))
    path = tmp_path_factory.mktemp("base") / "tiny"
    save_model(model, path)
    return path


@pytest.fixture(scope="module")
def run(base, tmp_path_factory):
    """One fine-tune through the CLI in this process (sys.argv as a shell would set it)."""
    out = tmp_path_factory.mktemp("ft") / "run"
    argv = ["finetune", "--model", str(base), "--train", str(EXAMPLE / "train.tsv"), "--test", str(EXAMPLE / "test.tsv"),
            "--out", str(out), "--epochs", "3", "--batch-size", "8", "--lr", "3e-3", "--no-progress"]
    old = sys.argv
    sys.argv = ["sip", *argv]
    try:
        assert cli.main(argv) == 0
    finally:
        sys.argv = old
    return out, argv


def test_result_is_an_ordinary_checkpoint_with_outputs(run):
    out, _ = run
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "metrics.json", "model.safetensors",
                                                     "predictions.parquet"]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # staging renamed away
    assert json.loads((out / "config.json").read_text())["model_type"] == "sip"


def test_model_card_describes_data_metrics_and_command(run, base):
    out, argv = run
    card = (out / "README.md").read_text(encoding="utf-8")
    metrics = json.loads((out / "metrics.json").read_text())
    assert card.startswith("---\nlibrary_name: transformers\n")
    for name in ("train.tsv", "test.tsv"):
        data = (EXAMPLE / name).read_bytes()
        n = len([line for line in data.decode().splitlines()[1:] if line])  # minus the header line
        row = f"| `{EXAMPLE / name}` | {n} | {len(data)} | `{hashlib.sha256(data).hexdigest()}` |"
        assert row in card
    assert hashlib.sha256((base / "model.safetensors").read_bytes()).hexdigest() in card
    rep = metrics["reported"]
    assert f"| exact-match accuracy (%) | {rep['acc']:.2f} |" in card
    assert f"| edit distance (mean) | {rep['ed']:.3f} |" in card
    assert "sip " + " ".join(argv) in card
    assert f"| torch | {torch.__version__} |" in card and f"| transformers | {transformers.__version__} |" in card
    assert "date (UTC): 20" in card


def test_predict_reproduces_the_runs_predictions(run, capsys, monkeypatch):
    out, _ = run
    table = pq.read_table(out / "predictions.parquet").to_pydict()
    stdin = "".join(x + "\n" for x in table["input"]).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    assert cli.main(["predict", "--model", str(out)]) == 0
    assert capsys.readouterr().out.split("\n")[:-1] == table["prediction"]


def test_auto_classes_load_it_without_remote_code(run):
    out, _ = run
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, PreTrainedModel
    config = AutoConfig.from_pretrained(out)
    assert isinstance(config, SIPConfig) and "auto_map" not in json.loads((out / "config.json").read_text())
    model = AutoModelForSeq2SeqLM.from_pretrained(out)  # trust_remote_code not needed: registered classes
    assert type(model) is SIPForConditionalGeneration
    reference = load_sip(out)
    ids = torch.tensor([[100, 101, 1]])
    with torch.no_grad():
        a = model.eval()(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).logits
        b = reference.eval()(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).logits
    assert torch.equal(a, b)
    assert SIPForConditionalGeneration.push_to_hub is PreTrainedModel.push_to_hub  # the standard call, not run


def _sip(*args, kill_after=None, **extra_env):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIP_THREADS": "1", **extra_env}
    env.pop("SIP_TEST_KILL_AFTER_EPOCH", None)
    if kill_after:
        env["SIP_TEST_KILL_AFTER_EPOCH"] = kill_after
    return subprocess.run([sys.executable, "-m", "sip_core.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def _same_outputs(a: Path, b: Path, ignore: tuple[str, ...] = ()) -> None:
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    ma, mb = json.loads((a / "metrics.json").read_text()), json.loads((b / "metrics.json").read_text())
    [m.pop(k) for m in (ma, mb) for k in ("wall_seconds", "eval_seconds", *ignore)]
    assert ma == mb
    assert pq.read_table(a / "predictions.parquet").equals(pq.read_table(b / "predictions.parquet"))


def test_profile_steps_summarises_its_window_and_leaves_the_result_alone(run, tmp_path):
    out, argv = run
    profiled = _sip(*argv[:argv.index("--out")], "--out", tmp_path / "p", *argv[argv.index("--out") + 2:],
                    "--profile-steps", "1:3")
    assert profiled.returncode == 0, profiled.stderr
    first, *rest = (tmp_path / "p" / "profile-rank0.txt").read_text().splitlines()
    assert first.startswith("steps 2, wall ") and float(first.split()[3]) > 0  # ms per step of the window
    assert any("aten::" in line for line in rest)  # the operator table
    _same_outputs(out, tmp_path / "p")
    bad = _sip(*argv[:argv.index("--out")], "--out", tmp_path / "bad", "--profile-steps", "3:1")
    assert bad.returncode != 0 and bad.stderr.strip().splitlines() == ["sip: error: --profile-steps 3:1: needs 0 <= A < B"]
    assert not (tmp_path / "bad").exists()


def test_the_uninitialised_memory_fill_is_off_by_default_and_changes_no_bit(run, tmp_path):
    """Strict determinism without PyTorch's NaN fill of new tensors (the default) gives the bits of the same run with
    the fill ($SIP_FILL_UNINITIALIZED=1): only the record changes."""
    out, argv = run
    filled = _sip(*argv[:argv.index("--out")], "--out", tmp_path / "f", *argv[argv.index("--out") + 2:],
                  SIP_FILL_UNINITIALIZED="1")
    assert filled.returncode == 0, filled.stderr
    record = [json.loads((d / "metrics.json").read_text()) for d in (out, tmp_path / "f")]
    assert [(m["determinism"], m["fill_uninitialized_memory"]) for m in record] == [("strict", False), ("strict", True)]
    _same_outputs(out, tmp_path / "f", ignore=("fill_uninitialized_memory",))


def test_killed_finetune_resumes_to_identical_outputs(base, tmp_path):
    args = ["finetune", "--model", base, "--train", EXAMPLE / "train.tsv", "--test", EXAMPLE / "test.tsv",
            "--epochs", "4", "--batch-size", "8", "--lr", "3e-3", "--checkpoint-every", "1", "--no-progress"]
    assert cli.main([*map(str, args), "--out", str(tmp_path / "full")]) == 0  # uninterrupted, in this process
    killed = _sip(*args, "--out", tmp_path / "run", kill_after="2")
    assert killed.returncode == 137
    assert not (tmp_path / "run").exists()  # nothing that looks complete
    staging = tmp_path / ".run.partial"
    assert (staging / "checkpoints" / "latest").read_text().strip() == "step-000000002"
    assert not (staging / "metrics.json").exists()
    curve = json.loads((staging / "progress.json").read_text())["epochs"]  # what a time-limited run brings back
    full = json.loads((tmp_path / "full" / "metrics.json").read_text())["epochs"]
    assert curve == full[:2]
    resumed = _sip(*args, "--out", tmp_path / "run")
    assert resumed.returncode == 0, resumed.stderr
    assert not (tmp_path / "run" / "progress.json").exists()
    assert "resuming from epoch 2" in resumed.stdout
    assert not staging.exists() and not (tmp_path / "run" / "checkpoints").exists()
    _same_outputs(tmp_path / "full", tmp_path / "run")


def test_killed_multi_task_run_keeps_finished_tasks(base, tmp_path):
    tasks = write_tasks(tmp_path / "tasks", n_tasks=2, n_train=12, n_test=4) / "examples.parquet"
    args = ["finetune", "--model", base, "--tasks", tasks, "--task-id", "all", "--epochs", "3", "--batch-size", "4",
            "--checkpoint-every", "1", "--no-progress"]
    assert cli.main([*map(str, args), "--out", str(tmp_path / "full")]) == 0
    killed = _sip(*args, "--out", tmp_path / "run", kill_after="iteration-s2-1:2")
    assert killed.returncode == 137 and not (tmp_path / "run").exists()
    resumed = _sip(*args, "--out", tmp_path / "run")
    assert resumed.returncode == 0, resumed.stderr
    assert "finetune iteration-s2-0: finished before the interruption" in resumed.stdout
    assert "finetune iteration-s2-1: resuming from epoch 2" in resumed.stdout
    for tid in ("iteration-s2-0", "iteration-s2-1"):
        a, b = tmp_path / "full" / tid, tmp_path / "run" / tid
        ma, mb = json.loads((a / "metrics.json").read_text()), json.loads((b / "metrics.json").read_text())
        [m.pop(k) for m in (ma, mb) for k in ("wall_seconds", "eval_seconds")]
        assert ma == mb
        assert pq.read_table(a / "predictions.parquet").equals(pq.read_table(b / "predictions.parquet"))


def test_staging_resumes_only_with_the_same_settings(tmp_path, capsys):
    out = tmp_path / "run"
    first = Staging(out, {"lr": 0.1})
    (first.path / "task").mkdir()
    (first.path / "task" / "metrics.json").write_text('{"acc": 1}')
    again = Staging(out, {"lr": 0.1})
    assert again.resumed and again.done(again.path / "task") == {"acc": 1}
    other = Staging(out, {"lr": 0.2})
    assert not other.resumed and other.done(other.path / "task") is None
    assert "discarding" in capsys.readouterr().out
    other.commit()
    assert out.is_dir() and not other.path.exists() and not (out / "settings.json").exists()


def test_tables_ignore_an_interrupted_runs_staging_directory(tmp_path):
    from sip_core.report.runs import load_runs
    metrics = {"task_id": "uc-s4-0", "seed": 1, "reported": {"acc": 50.0, "ed": 1.0, "per": 0.1}}
    for setting in ("uc-s4", ".uc-s5.partial"):
        (tmp_path / "sip-d4" / setting / "uc-s4-0").mkdir(parents=True)
        (tmp_path / "sip-d4" / setting / "uc-s4-0" / "metrics.json").write_text(json.dumps(metrics))
    assert len(load_runs(tmp_path)) == 1
