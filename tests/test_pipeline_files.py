"""Pipeline plumbing: dvc.yaml is what params.yaml generates; the GPU hand-off parses, orders and packs."""
import re
import tarfile
from pathlib import Path

import pytest
import yaml

from sip_core import config, dvcstages, handoff
from sip_core.errors import SipError

ROOT = Path(__file__).resolve().parent.parent

DRY_RUN = """
[Thu Nov 26 02:18:13 2026]
rule probe_train:
    input: data/gpu/checkpoints/sip-d4/model.safetensors, data/gpu/eval/probe/examples.parquet
    output: data/gpu/probe/probe.safetensors, data/gpu/probe/probing.json
    wildcards: scale=gpu
Shell command: python -m sip_core.cli probe train --model data/gpu/checkpoints/sip-d4 --out data/gpu/probe > logs/gpu/probe/train.log 2>&1

[Thu Nov 26 02:18:13 2026]
rule finetune:
    input: data/gpu/checkpoints/sip-d4/model.safetensors, data/gpu/eval/uc-s4/examples.parquet
    output: data/gpu/runs/sip-d4/uc-s4
    wildcards: scale=gpu, model=sip-d4, setting=uc-s4
Shell command: /x/.venv/bin/python -m sip_core.cli finetune --model data/gpu/checkpoints/sip-d4 --out data/gpu/runs/sip-d4/uc-s4 > logs/gpu/finetune/sip-d4-uc-s4.log 2>&1

[Thu Nov 26 02:18:13 2026]
rule pretrain:
    output: data/gpu/checkpoints/sip-nd7/model.safetensors
    wildcards: scale=gpu, model=sip-nd7
Shell command: python -m sip_core.cli pretrain --variant sip --init data/gpu/checkpoints/sip-d4 --out data/gpu/checkpoints/sip-nd7 > logs/gpu/pretrain/sip-nd7.log 2>&1

[Thu Nov 26 02:18:13 2026]
rule pretrain:
    output: data/gpu/checkpoints/sip-d4/model.safetensors
    wildcards: scale=gpu, model=sip-d4
Shell command: python -m sip_core.cli pretrain --variant sip --out data/gpu/checkpoints/sip-d4 > logs/gpu/pretrain/sip-d4.log 2>&1
"""


def test_committed_dvc_yaml_is_generated_from_params():
    assert (ROOT / "dvc.yaml").read_text() == dvcstages.render(config.load())


def test_gpu_and_paper_stages_are_frozen_and_tables_are_not_cached():
    stages = dvcstages.stages(config.load())["stages"]
    assert all(s.get("frozen") for name, s in stages.items() if "-gpu" in name)
    assert not any(s.get("frozen") for name, s in stages.items() if "-ci" in name or "-cpu" in name)
    table = stages["table1-ci"]
    assert all(list(o.values())[0] == {"cache": False} for o in table["outs"])
    assert "data/ci/checkpoints/sip-d4" in table["deps"] and "data/ci/checkpoints/sip-d4plus" not in table["deps"]


def test_handoff_orders_parents_before_children_and_fine_tuning_last():
    jobs = handoff.order_jobs(handoff.parse_dry_run(DRY_RUN))
    assert [j["wildcards"].get("model") for j in jobs] == ["sip-d4", "sip-nd7", "sip-d4", None]
    assert [j["rule"] for j in jobs] == ["pretrain", "pretrain", "finetune", "probe_train"]
    assert handoff._portable(jobs[2]["cmd"]).startswith("python3 -m sip_core.cli finetune ")
    assert jobs[3]["output"] == ["data/gpu/probe/probe.safetensors", "data/gpu/probe/probing.json"]


def test_handoff_orders_the_jobs_of_one_rule_by_the_targets_given():
    """The targets' order is the priority (a free slot goes to the first ready job); others come last."""
    def finetune(model):
        return {"rule": "finetune", "output": [f"data/gpu/runs/{model}/uc-s4"], "wildcards": {"model": model}}

    def outputs(ordered):
        return [j["output"][0].split("/")[3] for j in ordered]

    jobs = [finetune(m) for m in ("base", "sip-d4", "te")]
    assert outputs(handoff.order_jobs(jobs)) == ["base", "sip-d4", "te"]
    assert outputs(handoff.order_jobs(jobs, ["data/gpu/runs/te/uc-s4", "data/gpu/runs/sip-d4"])) == ["te", "sip-d4", "base"]


def test_handoff_carries_what_the_jobs_read_that_neither_git_nor_a_job_provides(monkeypatch):
    """A checkpoint pre-trained earlier and the evaluation sets must be carried; the release travels in git and
    the checkpoint copied from it is made on the host."""
    monkeypatch.chdir(ROOT)
    jobs = [{"rule": "host_data", "output": ["data/gpu/checkpoints/sip-d4/model.safetensors"],
             "input": ["models/sip-d4/model.safetensors"]},
            {"rule": "finetune", "output": ["data/gpu/runs/te/uc-s4"],
             "input": ["data/gpu/eval/uc-s4/examples.parquet", "data/gpu/checkpoints/te/model.safetensors"]},
            {"rule": "finetune", "output": ["data/gpu/runs/sip-d4/uc-s4"],
             "input": ["data/gpu/eval/uc-s4/examples.parquet", "data/gpu/checkpoints/sip-d4/model.safetensors"]}]
    assert handoff.carry_paths(jobs) == ["data/gpu/checkpoints/te", "data/gpu/eval/uc-s4"]


def _archive_names(out_dir: Path) -> list[str]:
    parts = sorted(out_dir.glob(f"{handoff.ARCHIVE}.*"))
    return sorted(tarfile.open(handoff._joined(parts, out_dir)).getnames())


def test_handoff_packs_a_checkpoint_without_its_resume_state_in_parts_that_import_joins(tmp_path, monkeypatch):
    """A model larger than one part still travels (split, then joined on import); the optimiser state in
    checkpoints/ stays on the host; parts given out of order or incomplete are refused with a message."""
    import pytest
    from sip_core.errors import SipError
    monkeypatch.chdir(tmp_path)
    ckpt = Path("data/gpu/checkpoints/sip-d4")
    (ckpt / "checkpoints" / "step-000000010").mkdir(parents=True)
    (ckpt / "checkpoints" / "step-000000010" / "state.pt").write_bytes(b"s" * 5000)
    model = bytes(range(256)) * 20  # 5,120 bytes: four parts of 1,500
    (ckpt / "model.safetensors").write_bytes(model)
    (ckpt / "config.json").write_text("{}")
    Path("logs").mkdir()
    Path("logs/sip-d4.log").write_text("done")
    Path("logs/other.log").write_text("not this job's")
    monkeypatch.setattr(handoff, "PART_BYTES", 1500)
    parts = handoff.pack([str(ckpt / "model.safetensors"), "logs/sip-d4.log"], tmp_path / "out")
    assert [p.name for p in parts] == [f"handoff.tar.{i:02d}" for i in range(len(parts))] and len(parts) > 4
    assert all(p.stat().st_size <= 1500 for p in parts)
    assert _archive_names(tmp_path / "out") == sorted([str(ckpt / "config.json"), str(ckpt / "model.safetensors"),
                                                       "logs/sip-d4.log"])
    monkeypatch.setattr(handoff, "snakemake", lambda args: type("P", (), {"returncode": 0})())
    dest = tmp_path / "here"
    dest.mkdir()
    monkeypatch.chdir(dest)
    with pytest.raises(SipError, match="parts must be"):
        handoff.import_archives(parts[1:], "gpu", ["t"])
    with pytest.raises(SipError, match="give all parts"):  # the first parts alone, the rest beside them
        handoff.import_archives(parts[:2], "gpu", ["t"])
    lone = tmp_path / "lone" / parts[0].name  # a truncated archive with no parts beside it: refused, nothing written
    lone.parent.mkdir()
    lone.write_bytes(parts[0].read_bytes())
    with pytest.raises(SipError, match="not a complete hand-off archive"):
        handoff.import_archives([lone], "gpu", ["t"])
    assert not list(dest.iterdir())
    with pytest.raises(SipError, match="no such archive"):
        handoff.import_archives([tmp_path / "handoff-missing.tar.xz"], "gpu", ["t"])
    handoff.import_archives(list(reversed(parts)), "gpu", ["t"])
    assert (dest / ckpt / "model.safetensors").read_bytes() == model
    assert not (dest / ckpt / "checkpoints").exists()
    # the whole archive compressed, as kept under experiments/results/, imports as it is
    import lzma
    kept = tmp_path / "handoff-kept.tar.xz"
    kept.write_bytes(lzma.compress(b"".join(p.read_bytes() for p in parts)))
    again = tmp_path / "again"
    again.mkdir()
    monkeypatch.chdir(again)
    handoff.import_archives([kept], "gpu", ["t"])
    assert (again / ckpt / "model.safetensors").read_bytes() == model


def test_pack_keeps_within_what_one_call_brings_back_runs_first_then_the_models_that_fit(tmp_path, monkeypatch, capsys):
    """The device brings back 64 MiB a call (two gpu-shape models are 72 MB): runs and logs always travel,
    model weights while they fit, in order; the rest stays on the host, named in a warning."""
    monkeypatch.chdir(tmp_path)
    for name, size in (("a", 3000), ("b", 3000), ("c", 1000)):
        ckpt = Path(f"data/gpu/checkpoints/{name}")
        ckpt.mkdir(parents=True)
        (ckpt / "model.safetensors").write_bytes(b"w" * size)
        (ckpt / "pretrain_metrics.json").write_text("{}")
    Path("data/gpu/runs/x/t0").mkdir(parents=True)
    Path("data/gpu/runs/x/t0/metrics.json").write_text("{}" * 1000)
    monkeypatch.setattr(handoff, "BACK_BYTES", 2006 + 7 * 2048 + 3000 + 1000 + 500)  # small files + headers, a, c
    paths = [f"data/gpu/checkpoints/{n}/model.safetensors" for n in "abc"] + ["data/gpu/runs/x"]
    handoff.pack(paths, tmp_path / "out")
    names = _archive_names(tmp_path / "out")
    assert "data/gpu/checkpoints/a/model.safetensors" in names and "data/gpu/checkpoints/c/model.safetensors" in names
    assert "data/gpu/checkpoints/b/model.safetensors" not in names  # a fitted, b did not, c (smaller) still did
    assert {f"data/gpu/checkpoints/{n}/pretrain_metrics.json" for n in "abc"} <= set(names)
    assert "data/gpu/runs/x/t0/metrics.json" in names
    assert "left on the host" in capsys.readouterr().out


def test_handoff_run_stops_a_job_at_the_budget_and_packs_the_finished_ones(tmp_path, monkeypatch):
    """A job still running when the budget ends is stopped (not failed), so the device call returns in time
    with what finished; its output is not packed and it stays pending for the next call."""
    import json
    import time
    monkeypatch.chdir(tmp_path)
    jobs = [{"rule": "finetune", "output": ["runs/quick"], "wildcards": {}, "cmd": "mkdir -p runs/quick && echo 1 > runs/quick/metrics.json"},
            {"rule": "finetune", "output": ["runs/slow"], "wildcards": {}, "cmd": "sleep 300 && mkdir -p runs/slow"}]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    monkeypatch.setattr(handoff, "PACK_SECONDS", 0)
    started = time.monotonic()
    summary = handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=35 / 60)
    assert time.monotonic() - started < 60
    assert summary == {"done": 1, "failed": 0, "pending": 1}
    assert _archive_names(tmp_path / "out") == ["runs/quick/metrics.json"]


def test_the_finished_tasks_of_a_stopped_finetune_job_come_back_and_resume(tmp_path, monkeypatch, capsys):
    """A fine-tuning job of many tasks cut off by the budget: its finished tasks (and the staging settings) travel
    back, its unfinished task's checkpoint does not, and `import` without targets restores them in place."""
    import json
    monkeypatch.chdir(tmp_path)
    staging = "data/gpu/runs/sip-d4/.g2p.partial"
    cmd = (f"mkdir -p {staging}/g2p-ban-d0 {staging}/.g2p-cop-d0.partial/checkpoints && echo s > {staging}/settings.json"
           f" && echo m > {staging}/g2p-ban-d0/metrics.json && echo p > {staging}/g2p-ban-d0/predictions.parquet"
           f" && echo c > {staging}/.g2p-cop-d0.partial/checkpoints/state.pt && sleep 300")
    jobs = [{"rule": "finetune", "output": ["data/gpu/runs/sip-d4/g2p"], "wildcards": {}, "cmd": cmd}]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    monkeypatch.setattr(handoff, "PACK_SECONDS", 0)
    assert handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=31 / 60) == {"done": 0, "failed": 0, "pending": 1}
    assert _archive_names(tmp_path / "out") == [f"{staging}/g2p-ban-d0/metrics.json",
                                                f"{staging}/g2p-ban-d0/predictions.parquet", f"{staging}/settings.json"]
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setattr(handoff, "snakemake", lambda args: pytest.fail("nothing is complete: nothing to touch"))
    handoff.import_archives(sorted((tmp_path / "out").glob("handoff.tar.*")), "gpu", [])
    assert "restored (data/gpu/runs/sip-d4/g2p: 1)" in capsys.readouterr().out
    assert (here / staging / "g2p-ban-d0" / "metrics.json").read_text() == "m\n"
    assert not (here / "data/gpu/runs/sip-d4/g2p").exists()


def test_a_run_that_comes_back_whole_replaces_its_partial_work_here(tmp_path, monkeypatch, capsys):
    """A later call finishes a job whose finished tasks an earlier import restored: its staging directory goes,
    so nothing here looks unfinished; another job's staging stays."""
    import tarfile
    monkeypatch.chdir(tmp_path)
    done, other = Path("data/gpu/runs/base/sygus"), Path("data/gpu/runs/set/.sygus.partial/task-1")
    for d in (Path("data/gpu/runs/base/.sygus.partial/task-1"), other):
        d.mkdir(parents=True)
        (d / "metrics.json").write_text("old")
    (tmp_path / "host" / done / "task-1").mkdir(parents=True)
    (tmp_path / "host" / done / "task-1" / "metrics.json").write_text("new")
    with tarfile.open(tmp_path / "handoff.tar.00", "w") as tar:
        tar.add(tmp_path / "host" / done / "task-1" / "metrics.json", arcname=f"{done}/task-1/metrics.json")
    monkeypatch.setattr(handoff, "snakemake", lambda args: pytest.fail("no targets: nothing to touch"))
    handoff.import_archives([tmp_path / "handoff.tar.00"], "gpu", [])
    assert (done / "task-1" / "metrics.json").read_text() == "new"
    assert not Path("data/gpu/runs/base/.sygus.partial").exists()
    assert (other / "metrics.json").read_text() == "old"
    assert "earlier partial work" in capsys.readouterr().out


def test_handoff_run_refuses_outputs_older_than_its_last_call_on_this_host(tmp_path, monkeypatch):
    """A warm host keeps its staging between calls, but a carried runs directory replaces it: carried from before
    the last archive was imported, it would rerun that call's finished tasks. The next call refuses instead."""
    import json
    monkeypatch.chdir(tmp_path)
    staging = Path("data/gpu/runs/base/.g2p.partial")
    cmd = f"mkdir -p {staging}/g2p-ban-d0 && echo m > {staging}/g2p-ban-d0/metrics.json && exit 1"  # cut off after one task
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": [
        {"rule": "finetune", "output": ["data/gpu/runs/base/g2p"], "wildcards": {}, "cmd": cmd}]}))
    handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1)
    handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1)  # the same outputs again: fine
    (staging / "g2p-ban-d0" / "metrics.json").unlink()  # what an old carry does
    with pytest.raises(SipError, match=r"older than this host's last hand-off call \(data/gpu/runs/base/g2p: 1 then, 0 now"):
        handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1)
    assert handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1, allow_rerun=True)["failed"] == 1


def test_the_probe_models_stay_on_the_host_and_its_report_comes_back(tmp_path, monkeypatch):
    """The probe's fine-tuned models (~360 MB at gpu scale) feed the report on the host and cannot travel; the
    report (tables, figures) and every log do."""
    import json
    monkeypatch.chdir(tmp_path)
    jobs = [{"rule": "probe_train", "output": ["data/gpu/probe/probe.safetensors"], "wildcards": {},
             "cmd": "{ mkdir -p data/gpu/probe && echo p > data/gpu/probe/probe.safetensors; } > logs/train.log 2>&1"},
            {"rule": "probe_finetune", "output": ["data/gpu/probe/finetuned"], "wildcards": {},
             "cmd": "{ mkdir -p data/gpu/probe/finetuned/t0 && echo w > data/gpu/probe/finetuned/t0/model.safetensors; }"
                    " > logs/ft.log 2>&1"},
            {"rule": "probe_report", "output": ["results/gpu/probe.csv"], "wildcards": {},
             "cmd": "{ test -f data/gpu/probe/finetuned/t0/model.safetensors && echo acc > results/gpu/probe.csv; }"
                    " > logs/report.log 2>&1"}]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    for d in ("logs", "results/gpu"):
        Path(d).mkdir(parents=True)
    assert handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1) == {"done": 3, "failed": 0, "pending": 0}
    # the probe's checkpoint directory holds the fine-tuned models too: they stay (session 12 packed 345 MB of them)
    assert _archive_names(tmp_path / "out") == ["data/gpu/probe/probe.safetensors", "logs/ft.log", "logs/report.log",
                                                "logs/train.log", "results/gpu/probe.csv"]
    assert handoff.GPU_RULES.index("probe_report") > handoff.GPU_RULES.index("probe_finetune")


def test_the_local_profile_is_the_one_snakemake_loads_by_itself():
    """Snakemake applies a workflow profile without being told only from profiles/default beside the
    Snakefile; its no-mtime rerun triggers and checksum threshold are what keep `dvc checkout` from forcing
    rebuilds (tests/test_profile_timestamps.py)."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--config", "scale=ci", "--", "results/ci/table5.csv"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Using workflow specific profile profiles/default" in proc.stdout + proc.stderr
    import yaml
    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    assert "mtime" not in profile["rerun-triggers"] and profile["rerun-incomplete"] is True


def test_per_model_settings_take_a_plain_value_or_a_map():
    from sip_core import pipeline
    prefix_lr = {"default": 1.0, "sip": 0.3}
    assert pipeline.by_model(prefix_lr, "sip-d4") == 0.3 and pipeline.by_model(prefix_lr, "sip-nd7") == 0.3
    assert pipeline.by_model(prefix_lr, "te") == 1.0 and pipeline.by_model(0.5, "te") == 0.5
    gpu = config.resolve(config.load(), "gpu")["finetune"]
    assert pipeline.by_model(gpu["prefix_length"], "sip-d4") == 80 and pipeline.by_model(gpu["prefix_length"], "te") == 50


def _write_pool(directory: Path, values: list[int], **parquet_kw) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"x": values, "y": [str(v) for v in values]}), directory / "examples.parquet", **parquet_kw)


def test_table_digest_sees_values_not_file_layout(tmp_path):
    from sip_core.data.digest import table_digest
    _write_pool(tmp_path / "a", list(range(5000)))
    _write_pool(tmp_path / "b", list(range(5000)), row_group_size=700, compression="gzip")
    _write_pool(tmp_path / "c", list(range(4999)) + [0])
    digest = table_digest(tmp_path / "a" / "examples.parquet")
    assert (tmp_path / "a" / "examples.parquet").read_bytes() != (tmp_path / "b" / "examples.parquet").read_bytes()
    assert table_digest(tmp_path / "b" / "examples.parquet") == digest
    assert table_digest(tmp_path / "c" / "examples.parquet") != digest


def _host_job(script: str) -> dict:
    import sys
    from sip_core.data.digest import table_digest
    return {"rule": handoff.HOST_RULE, "output": ["pool/examples.parquet"], "wildcards": {},
            "cmd": f"{sys.executable} -c '{script}'",  # this interpreter: a bare python3 may lack pyarrow
            "digests": {"pool/examples.parquet": table_digest("ref/examples.parquet")}}


def test_handoff_run_rebuilds_big_data_on_the_host_checks_it_and_does_not_pack_it(tmp_path, monkeypatch):
    """A host_data job runs first; identical content lets the GPU jobs run (and a second call skips the
    rebuild); different content stops the run before any job trains on it."""
    import json
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    _write_pool(Path("ref"), list(range(300)))
    build = ("import sys; sys.path.insert(0, \"{root}\"); from pathlib import Path; "
             "from tests.test_pipeline_files import _write_pool; _write_pool(Path(\"pool\"), list(range({n})), compression=\"gzip\")")
    train = {"rule": "probe_train", "output": ["ckpt/model.safetensors"], "wildcards": {},
             "cmd": "mkdir -p ckpt && test -f pool/examples.parquet && touch ckpt/model.safetensors"}
    for n, expect in ((300, {"done": 1, "failed": 0, "pending": 0}), (299, {"done": 0, "failed": 1, "pending": 2})):
        for p in ("pool", "ckpt"):
            if Path(p).exists():
                import shutil
                shutil.rmtree(p)
        jobs = [train, _host_job(build.format(root=ROOT, n=n))]
        Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": handoff.order_jobs(jobs)}))
        summary = handoff.run(Path("jobs.json"), tmp_path / f"out{n}", budget_min=2)
        assert summary == expect, n
        assert Path("ckpt/model.safetensors").exists() == (n == 300)
    names = _archive_names(tmp_path / "out300")
    assert names == ["ckpt/model.safetensors"]  # the rebuilt pool stays on the host
    _write_pool(Path("pool"), list(range(300)))  # a later call: the pool is there and right, so not rebuilt
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": [_host_job("raise SystemExit(1)")]}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out-again", budget_min=1)["failed"] == 0


def test_a_pretraining_stopped_by_the_handoff_budget_is_resumed_not_taken_as_done(tmp_path, monkeypatch):
    """Pre-training writes its model also when stopped by the time limit the hand-off gives it: that model is
    neither packed nor skipped by the next call, which resumes the run until its status is "finished"."""
    import json
    import sys
    monkeypatch.chdir(tmp_path)
    script = ("import json, pathlib; c = pathlib.Path(\"ckpt\"); c.mkdir(exist_ok=True); "
              "n = len(list(c.glob(\"call*\"))); (c / f\"call{n}\").touch(); (c / \"model.safetensors\").touch(); "
              "(c / \"pretrain_metrics.json\").write_text(json.dumps({\"status\": \"finished\" if n else \"time_limit\"})); "
              "import sys; (c / \"argv\").write_text(\" \".join(sys.argv[1:]))")
    job = {"rule": "pretrain", "output": ["ckpt/model.safetensors"], "wildcards": {"model": "sip-d4"},
           "cmd": f"{sys.executable} -c '{script}' > logs/pretrain.log 2>&1"}
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": [job]}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out1", budget_min=2.2) == {"done": 0, "failed": 0, "pending": 1}
    assert not list((tmp_path / "out1").glob("handoff.tar.*"))
    limit = Path("ckpt/argv").read_text().split()  # the budget less the margin, and checkpoints meanwhile
    assert float(limit[limit.index("--max-minutes") + 1]) <= 2.2 - handoff.PRETRAIN_MARGIN / 60
    assert limit[limit.index("--checkpoint-minutes") + 1] == str(handoff.SAFETY_CHECKPOINT_MIN)
    assert handoff.run(Path("jobs.json"), tmp_path / "out2", budget_min=2.2) == {"done": 1, "failed": 0, "pending": 0}
    assert "ckpt/call1" in _archive_names(tmp_path / "out2") and "logs/pretrain.log" in _archive_names(tmp_path / "out2")
    assert handoff.run(Path("jobs.json"), tmp_path / "out3", budget_min=2.2) == {"done": 0, "failed": 0, "pending": 0}


def test_a_fine_tuning_whose_pretraining_stopped_at_the_budget_waits_for_the_next_call(tmp_path, monkeypatch):
    """Side by side (--parallel 2): a pre-training stopped by the hand-off's time limit is neither done nor
    failed, the fine-tuning that reads its checkpoint is skipped (pending), the one that does not runs."""
    import json
    import sys
    monkeypatch.chdir(tmp_path)
    stops = ("import json, pathlib; c = pathlib.Path(\"ckpt\"); c.mkdir(exist_ok=True); (c / \"model.safetensors\").touch(); "
             "(c / \"pretrain_metrics.json\").write_text(json.dumps({\"status\": \"time_limit\"}))")
    pretrain = {"rule": "pretrain", "output": ["ckpt/model.safetensors"], "input": [], "wildcards": {"model": "te"},
                "cmd": f"{sys.executable} -c '{stops}'"}

    def finetune(name, reads):
        return {"rule": "finetune", "output": [f"{name}/done"], "input": reads, "wildcards": {"model": "te"},
                "cmd": f"{sys.executable} -c 'import pathlib; p = pathlib.Path(\"{name}\"); p.mkdir(exist_ok=True); (p / \"done\").touch()'"}

    jobs = [pretrain, finetune("reads", ["ckpt/model.safetensors"]), finetune("free", [])]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=2.2, parallel=2) == {"done": 1, "failed": 0, "pending": 2}
    assert Path("free/done").exists() and not Path("reads").exists()
    assert _archive_names(tmp_path / "out") == ["free/done"]


def test_handoff_jobs_record_the_exported_commit_not_the_hosts_copy_of_git(tmp_path, monkeypatch):
    """A GPU host's .git recorded the session's first commit once: the jobs get the commit written at export
    ($SIP_COMMIT), which the runs' metrics record (runtime.git_commit)."""
    import json
    import sys
    monkeypatch.chdir(tmp_path)
    script = "import os, pathlib; pathlib.Path(\"c\").mkdir(exist_ok=True); pathlib.Path(\"c/commit\").write_text(os.environ.get(\"SIP_COMMIT\", \"\"))"
    job = {"rule": "finetune", "output": ["c/commit"], "input": [], "wildcards": {"model": "base"},
           "cmd": f"{sys.executable} -c '{script}'"}
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "commit": "abc123-dirty", "jobs": [job]}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1)["done"] == 1
    assert Path("c/commit").read_text() == "abc123-dirty"
    monkeypatch.setenv("SIP_COMMIT", "abc123-dirty")
    from sip_core.train.runtime import git_commit
    assert git_commit() == "abc123-dirty"


def test_export_copies_a_released_model_on_the_host_instead_of_carrying_it(tmp_path, monkeypatch):
    """A checkpoint the scale takes from models/ (rule use_release) becomes a host job with the sha256 of the
    copy made here; on the host, a copy with other bytes stops the run before a GPU job reads it."""
    import json
    import subprocess
    import sys
    monkeypatch.chdir(tmp_path)
    release, ckpt = Path("models/sip-d4"), Path("data/gpu/checkpoints/sip-d4")
    for d in (release, ckpt):
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"weights")
    dry = ("rule use_release:\n    input: models/sip-d4/model.safetensors\n"
           "    output: data/gpu/checkpoints/sip-d4/model.safetensors\n    wildcards: released=gpu/checkpoints/sip-d4\n"
           "Shell command: /x/bin/python -m sip_core.cli use-release models/sip-d4 --out data/gpu/checkpoints/sip-d4"
           " > logs/use-release.log 2>&1\n")
    seen = []

    def fake_snakemake(args):
        seen.append(args)
        return subprocess.CompletedProcess(args, 0, stdout=dry, stderr="")

    monkeypatch.setattr(handoff, "snakemake", fake_snakemake)
    gpu_jobs = [{"rule": "finetune", "input": [str(ckpt / "model.safetensors"), "data/gpu/eval/x/examples.parquet"]}]
    [job] = handoff.host_release_jobs(gpu_jobs, ["--config", "scale=gpu"])
    assert seen[0][-1] == str(ckpt / "model.safetensors") and "--forcerun" in seen[0]
    assert job["rule"] == handoff.HOST_RULE
    assert job["digests"] == {str(ckpt / "model.safetensors"): __import__("hashlib").sha256(b"weights").hexdigest()}
    assert handoff.host_release_jobs([{"rule": "finetune", "input": ["data/gpu/eval/x/examples.parquet"]}], []) == []

    # on the host: the copy is checked like a rebuilt pool, and not packed
    import shutil
    for content, expect in ((b"weights", 0), (b"other", 1)):
        shutil.rmtree("run", ignore_errors=True)
        (ckpt / "model.safetensors").unlink(missing_ok=True)
        (release / "model.safetensors").write_bytes(content)
        copy = f"{sys.executable} -c 'import shutil; shutil.copyfile(\"{release}/model.safetensors\", \"{ckpt}/model.safetensors\")'"
        train = {"rule": "probe_train", "output": ["run/metrics.json"], "wildcards": {},
                 "cmd": f"mkdir -p run && cp {ckpt}/model.safetensors run/metrics.json"}
        Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [],
                                                  "jobs": handoff.order_jobs([train, {**job, "cmd": copy}])}))
        summary = handoff.run(Path("jobs.json"), tmp_path / f"out{expect}", budget_min=1)
        assert summary["failed"] == expect, content
        assert Path("run/metrics.json").exists() == (expect == 0)
        assert (ckpt / "model.safetensors").exists() == (expect == 0)  # a wrong copy is deleted
    assert _archive_names(tmp_path / "out0") == ["run/metrics.json"]


def _timed_job(rule, name, seconds, reads=(), args=""):
    """A hand-off job that records when it started and ended and the GPU it saw ($CUDA_VISIBLE_DEVICES)."""
    import sys
    script = (f"import os, time, pathlib; p = pathlib.Path(\"{name}\"); p.mkdir(exist_ok=True); "
              f"(p / \"gpu\").write_text(os.environ.get(\"CUDA_VISIBLE_DEVICES\", \"\")); "
              f"(p / \"start\").write_text(repr(time.time())); "
              f"time.sleep({seconds}); (p / \"end\").write_text(repr(time.time()))")
    return {"rule": rule, "output": [f"{name}/end"], "input": list(reads), "wildcards": {"model": "sip-d4"},
            "cmd": f"{sys.executable} -c '{script}' --max-minutes 1 {args}"}  # its own limit: not a hand-off pre-training


def _started_ended(name):
    return float(Path(name, "start").read_text()), float(Path(name, "end").read_text())


def test_a_fine_tuning_job_counts_one_process_per_task_it_runs_at_once(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"task_id": [f"t{i % 10}" for i in range(30)]}), "tasks.parquet")
    monkeypatch.setenv("SIP_TASK_WORKERS", "8")
    ten = {**_timed_job("finetune", "run", 0, args="--tasks tasks.parquet --task-id all > logs/x.log 2>&1"),
           "output": ["run"]}  # a fine-tuning job's output: its run directory
    assert handoff.job_processes(ten) == 8  # 10 tasks, 8 at a time
    assert handoff.job_processes({**ten, "cmd": ten["cmd"] + " --task-workers 3"}) == 8  # past the redirect: not a flag
    assert handoff.job_processes({**ten, "cmd": ten["cmd"].replace(" >", " --task-workers 3 >")}) == 3
    assert handoff.job_processes({**ten, "cmd": ten["cmd"].replace("--task-id all", "--task-id t1")}) == 1
    assert handoff.job_processes({**ten, "cmd": ten["cmd"].replace("tasks.parquet", "mine.tsv")}) == 1  # own pairs
    assert handoff.job_processes({**ten, "rule": "pretrain"}) == 1
    for i in range(8):  # a job resumed after 8 finished tasks runs the other 2
        Path(f"run/t{i}").mkdir(parents=True)
        Path(f"run/t{i}/metrics.json").write_text("{}")
    assert handoff.job_processes(ten) == 2


def test_a_task_with_long_test_outputs_counts_as_several_processes(tmp_path, monkeypatch):
    """decode_weight: ceil(mean test output length / 32) from the evaluation file itself (train rows ignored);
    1 for a TSV, a missing file, a file without outputs and any other rule."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    monkeypatch.chdir(tmp_path)

    def tasks(name, test_len, train_len=5):
        pq.write_table(pa.table({"task_id": ["t0"] * 4, "split": ["train", "train", "test", "test"],
                                 "output": ["x" * train_len] * 2 + ["y" * (test_len - 1), "y" * (test_len + 1)]}), name)
        return {**_timed_job("finetune", "run", 0, args=f"--tasks {name} --task-id all > logs/x.log 2>&1"),
                "output": ["run"]}

    assert handoff.decode_weight(tasks("short.parquet", 19, train_len=200)) == 1  # Table 1's test lengths
    assert handoff.decode_weight(tasks("edge.parquet", 32)) == 1
    assert handoff.decode_weight(tasks("long.parquet", 102)) == 4  # Table 11's 90-110
    long = tasks("long.parquet", 102)
    assert handoff.decode_weight({**long, "rule": "pretrain"}) == 1
    assert handoff.decode_weight({**long, "cmd": long["cmd"].replace("long.parquet", "mine.tsv")}) == 1
    pq.write_table(pa.table({"task_id": ["t0"]}), "bare.parquet")
    assert handoff.decode_weight({**long, "cmd": long["cmd"].replace("long.parquet", "bare.parquet")}) == 1


def test_handoff_run_weighs_long_decoding_tasks_when_it_places_jobs(tmp_path, monkeypatch, capsys):
    """--gpus 2 --parallel 4 --gpu-procs 8, 5 task workers: a 1-task job of 100-character outputs (load 4) takes
    one GPU, a 5-task job the other, and a second 5-task job waits for the second GPU to empty (4 + 5 > 8); by
    processes alone (1 + 5) it would have joined the long job at once (session 32: that long task finished in none
    of three calls beside two 5-task jobs)."""
    import json
    import pyarrow as pa
    import pyarrow.parquet as pq
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"task_id": [f"t{i}" for i in range(5)], "split": ["test"] * 5, "output": ["ab"] * 5}),
                   "short.parquet")
    pq.write_table(pa.table({"task_id": ["t0"], "split": ["test"], "output": ["z" * 100]}), "long.parquet")
    monkeypatch.setenv("SIP_TASK_WORKERS", "5")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    short, long = "--tasks short.parquet --task-id all", "--tasks long.parquet --task-id all"
    jobs = [_timed_job("finetune", "l", 2.0, args=long), _timed_job("finetune", "a", 1.0, args=short),
            _timed_job("finetune", "b", 0.1, args=short)]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1, parallel=4, gpus=2, gpu_procs=8) == {
        "done": 3, "failed": 0, "pending": 0}
    t = {n: _started_ended(n) for n in "lab"}
    gpu = {n: Path(n, "gpu").read_text() for n in "lab"}
    assert gpu["l"] != gpu["a"] == gpu["b"] and t["a"][1] <= t["b"][0] < t["l"][1]
    assert "(GPU 0, 1 process, load 4)" in capsys.readouterr().out


def test_handoff_run_caps_the_processes_on_a_gpu(tmp_path, monkeypatch):
    """--gpus 2 --parallel 2 --gpu-procs 10, 8 task workers: two 10-task jobs take one GPU each, a 1-task job joins
    one of them (9 processes), and a third 10-task job waits for a GPU with room, though each GPU has a free job
    slot (session 30: two such jobs on one card finished no task in 7.8 min while the other card was half idle)."""
    import json
    import pyarrow as pa
    import pyarrow.parquet as pq
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"task_id": [f"t{i}" for i in range(10)]}), "tasks.parquet")
    monkeypatch.setenv("SIP_TASK_WORKERS", "8")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    many, one = "--tasks tasks.parquet --task-id all", "--tasks tasks.parquet --task-id t0"
    jobs = [_timed_job("finetune", "a", 2.0, args=many), _timed_job("finetune", "b", 3.0, args=many),
            _timed_job("finetune", "c", 0.1, args=one), _timed_job("finetune", "d", 0.1, args=many)]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1, parallel=2, gpus=2, gpu_procs=10) == {
        "done": 4, "failed": 0, "pending": 0}
    t = {n: _started_ended(n) for n in "abcd"}
    gpu = {n: Path(n, "gpu").read_text() for n in "abcd"}
    assert gpu["a"] != gpu["b"] and t["c"][0] < t["a"][1]  # one GPU each; the small job did not wait
    assert t["d"][0] >= t["a"][1] and gpu["d"] == gpu["a"]  # 8 + 8 > 10: it waited for a's GPU to empty


def test_handoff_run_runs_training_jobs_side_by_side_after_what_they_read_and_anything_else_alone(tmp_path, monkeypatch,
                                                                                                  capsys):
    """--parallel 4: two pre-trainings overlap in time; fine-tunings start once both have ended (the card is
    time-sliced by process, and a pre-training beside them starves); a job of another rule starts only when all
    have ended; at the budget's end the running ones are stopped and stay pending."""
    import json
    import sys
    monkeypatch.chdir(tmp_path)

    job = _timed_job
    jobs = [job("pretrain", "pt0", 1.5), job("pretrain", "pt1", 3.0), job("finetune", "ft1w", 0.1, reads=["pt1/end"]),
            job("finetune", "ft0", 0.1, reads=["pt0/end"]), job("finetune", "ft1", 0.5),
            job("prefix_table", "other", 0.1, reads=["ft1w/end"])]
    logged = {**jobs[2], "cmd": "python -m sip_core.cli finetune --out run > logs/ft.log 2>&1"}
    assert handoff._command(logged, remaining=100) == (  # a task cut off by the budget resumes from its checkpoint
        f"python -m sip_core.cli finetune --out run --checkpoint-minutes {handoff.FINETUNE_CHECKPOINT_MIN} > logs/ft.log 2>&1")
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out", budget_min=1, parallel=4) == {"done": 6, "failed": 0, "pending": 0}
    t = {n: (float(Path(n, "start").read_text()), float(Path(n, "end").read_text()))
         for n in ("pt0", "pt1", "ft1w", "ft0", "ft1", "other")}
    assert max(t["pt0"][0], t["pt1"][0]) < min(t["pt0"][1], t["pt1"][1])  # the pre-trainings overlapped
    assert min(t[n][0] for n in ("ft1w", "ft0", "ft1")) >= max(t["pt0"][1], t["pt1"][1])  # no fine-tuning beside them
    assert t["other"][0] >= max(t[n][1] for n in ("pt0", "pt1", "ft1w", "ft0", "ft1"))  # anything else runs alone
    assert _archive_names(tmp_path / "out") == ["ft0/end", "ft1/end", "ft1w/end", "other/end", "pt0/end", "pt1/end"]
    # every line is stamped with the call's elapsed time, and a side-by-side job's end is logged as it happens
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(re.match(r"\[handoff \+\d+:\d\d\] ", ln) for ln in lines)
    assert sum(" finished: " in ln for ln in lines) == 5  # the five side-by-side jobs; `other` ran alone
    assert lines.index(next(ln for ln in lines if ln.endswith("finished: pt1/end"))) < \
        lines.index(next(ln for ln in lines if ln.endswith("finetune -> ft1w/end")))

    # a slot freed by a pre-training goes to the job that reads it, listed first, not to a later job chosen meanwhile
    jobs = [job("pretrain", "pa", 0.5), job("pretrain", "child", 0.1, reads=["pa/end"]),
            job("pretrain", "busy", 2.0), job("pretrain", "later", 0.1)]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out1", budget_min=1, parallel=2) == {"done": 4, "failed": 0, "pending": 0}
    assert float(Path("child/start").read_text()) < float(Path("later/start").read_text())

    # a job whose input is neither on this host nor made by a job waits for a call that carries it
    jobs = [job("finetune", "uncarried", 0.1, reads=["data/gpu/checkpoints/te/model.safetensors"]),
            job("finetune", "carried", 0.1, reads=["pa/end"])]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out3", budget_min=1, parallel=2) == {"done": 1, "failed": 0, "pending": 1}
    assert Path("carried/end").exists() and not Path("uncarried").exists()

    # --gpus 2: a pre-training keeps its GPU to itself while the fine-tunings fill the other, each job seeing one
    # GPU; with two fine-tunings per GPU the third waits for a slot
    gpu_job = _timed_job
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    jobs = [gpu_job("pretrain", "g_pt", 3.0), gpu_job("finetune", "g_ft0", 0.6), gpu_job("finetune", "g_ft1", 0.6),
            gpu_job("finetune", "g_ft2", 0.6), gpu_job("finetune", "g_after", 0.1, reads=["g_pt/end"])]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": jobs}))
    assert handoff.run(Path("jobs.json"), tmp_path / "out4", budget_min=1, parallel=2, gpus=2) == {
        "done": 5, "failed": 0, "pending": 0}
    g = {n: (Path(n, "gpu").read_text(), float(Path(n, "start").read_text()), float(Path(n, "end").read_text()))
         for n in ("g_pt", "g_ft0", "g_ft1", "g_ft2", "g_after")}
    assert {g[n][0] for n in ("g_ft0", "g_ft1", "g_ft2")} == {"5", "7"} - {g["g_pt"][0]}  # not the pre-training's
    assert g["g_ft0"][1] < g["g_pt"][2] and g["g_ft1"][1] < g["g_pt"][2]  # ... while it runs
    assert g["g_ft2"][1] >= min(g["g_ft0"][2], g["g_ft1"][2])  # two per GPU: the third waits
    assert g["g_after"][1] >= g["g_pt"][2]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")

    slow = [job("finetune", f"slow{i}", 60) for i in range(2)]
    Path("jobs.json").write_text(json.dumps({"scale": "gpu", "targets": [], "jobs": slow}))
    monkeypatch.setattr(handoff, "PACK_SECONDS", 0)
    assert handoff.run(Path("jobs.json"), tmp_path / "out2", budget_min=0.52, parallel=2) == {"done": 0, "failed": 0, "pending": 2}
    assert Path("slow0/start").exists() and Path("slow1/start").exists() and not Path("slow0/end").exists()


def test_export_to_a_directory_writes_its_job_list_there(tmp_path, monkeypatch):
    """`sip export ... --out DIR` used to end in a traceback (a directory cannot be replaced by a file)."""
    import json
    import subprocess
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(handoff, "snakemake", lambda args: subprocess.CompletedProcess(args, 0, stdout="", stderr=""))
    Path("exported").mkdir()
    assert handoff.export(["results/gpu/table2.csv"], "gpu", Path("exported")) == []
    assert json.loads(Path("exported/jobs.json").read_text())["targets"] == ["results/gpu/table2.csv"]
    assert handoff.jobs_path(Path("exported")) == Path("exported/jobs.json")
    assert handoff.jobs_path(Path("mine.json")) == Path("mine.json")


def test_export_refuses_a_job_list_outside_the_repository(tmp_path, monkeypatch):
    """A device call carries paths of the working tree: a job list in /tmp would never reach the host (an export to
    /tmp/x once listed `/tmp` itself, 64 MiB, as a path to carry)."""
    import pytest
    from sip_core.errors import SipError
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    ran = []
    monkeypatch.setattr(handoff, "snakemake", lambda args: ran.append(args))
    with pytest.raises(SipError, match="must lie inside the repository"):
        handoff.export(["results/gpu/table2.csv"], "gpu", tmp_path / "elsewhere.json")
    assert not ran and not (tmp_path / "elsewhere.json").exists()  # refused before building anything


def test_import_commits_only_the_dvc_stages_of_its_scale_that_were_built_here(tmp_path, monkeypatch, capsys):
    # a bare `dvc commit` stops at the first stage never built here (another scale's) and commits nothing
    monkeypatch.chdir(tmp_path)
    (tmp_path / "built").mkdir()
    def stage(scale, deps, outs):
        return {"cmd": dvcstages.SNAKEMAKE.format(scale=scale) + " x", "deps": deps, "outs": outs}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "checkpoint-gpu-sip-d4": stage("gpu", ["built"], [{"built/sip-d4": {"persist": True}}]),
        "table1-gpu": stage("gpu", ["built"], [{"built/table1.csv": {"cache": False}}]),
        "table2-gpu": stage("gpu", ["missing-checkpoint"], ["built/table2.csv"]),
        "table1-ci": stage("ci", ["built"], ["built/table1.csv"]),
    }}))
    (tmp_path / "built" / "table1.csv").write_text("x\n")
    (tmp_path / "built" / "sip-d4").mkdir()
    assert handoff._dvc_stages_present("gpu") == ["checkpoint-gpu-sip-d4", "table1-gpu"]
    assert handoff._dvc_stages_present("cpu") == []
    assert "dvc commit skipped" in capsys.readouterr().out
