"""`sip finetune --task-workers N`: the tasks of a task file as parallel child processes give the same run
directory as the in-process loop, and a stopped parent stops its children and resumes on a rerun."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.fixtures.tiny_fsts import write_tasks

ROOT = Path(__file__).resolve().parents[1]
ENV = {"PYTHONPATH": str(ROOT), "SIP_THREADS": "1", "PATH": "/usr/bin:/bin"}
TINY = ["--model", "scratch", "--d-model", "32", "--d-ff", "64", "--layers", "1", "--decoder-layers", "1",
        "--heads", "2", "--d-kv", "16", "--prefix", "none", "--batch-size", "8", "--no-progress", "--device", "cpu"]


def _cmd(tasks: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "sip_core.cli", "finetune", *TINY, "--tasks", str(tasks / "examples.parquet"),
            "--task-id", "all", "--out", str(out), *extra]


def _same_results(a: Path, b: Path, task_ids: list[str]) -> None:
    for tid in task_ids:
        ma, mb = (json.loads((d / tid / "metrics.json").read_text()) for d in (a, b))
        assert ma["epochs"] == mb["epochs"] and ma["reported"] == mb["reported"] and ma["steps"] == mb["steps"]
        assert pq.read_table(a / tid / "predictions.parquet").equals(pq.read_table(b / tid / "predictions.parquet"))


def _worker_pids(staging: Path) -> list[int]:
    """The workers' process ids, from the first line of their logs (forked workers share the fork server's
    command line, so it cannot tell them)."""
    return [int(log.read_text().split("(pid ", 1)[1].split(")", 1)[0]) for log in sorted(staging.glob(".worker-*.log"))]


def _alive(pid: int) -> bool:
    """A process that runs (a zombie has ended: it waits only to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.parametrize("start", ["forkserver", "spawn"])
def test_task_workers_reproduce_the_in_process_loop(tmp_path, start):
    tasks = write_tasks(tmp_path / "tasks", n_tasks=3, n_train=16, n_test=6)
    ids = [f"iteration-s2-{i}" for i in range(3)]
    seq = subprocess.run(_cmd(tasks, tmp_path / "seq", "--epochs", "3"), capture_output=True, text=True, cwd=ROOT,
                         env=ENV)
    assert seq.returncode == 0, seq.stderr
    pool = subprocess.run(_cmd(tasks, tmp_path / "pool", "--epochs", "3", "--task-workers", "2"), capture_output=True,
                          text=True, cwd=ROOT, env={**ENV, "SIP_WORKER_START": start})
    assert pool.returncode == 0, pool.stderr
    assert pool.stderr == "", "workers start without warnings (the job log shows every line of stderr)"
    assert "3 of 3 tasks to run, 2 at a time" in pool.stdout and pool.stdout.count("finetune iteration-s2-") == 3
    _same_results(tmp_path / "seq", tmp_path / "pool", ids)
    assert not list(tmp_path.glob(".pool*")), "the staging directory is renamed onto --out"
    # two processes, not one per task: the first worker ran tasks 0 and 2 one after the other
    logs = sorted((tmp_path / "pool").glob(".worker-*.log"))
    assert [p.name for p in logs] == [".worker-0.log", ".worker-1.log"]
    finished = [ln for ln in logs[0].read_text().splitlines() if ln.startswith("finetune iteration") and " acc " in ln]
    assert [ln.split(":")[0] for ln in finished] == ["finetune iteration-s2-0", "finetune iteration-s2-2"]
    # each worker's log says where its start-up went, in seconds since the pool launched it: imports, tasks, (on a
    # GPU the CUDA context,) model, then each task's first epoch
    for log in logs:
        lines = log.read_text().splitlines()
        startup = [ln for ln in lines if ln.startswith("worker: ")]
        assert [ln.split(" after")[0].rsplit(" ", 2)[0] for ln in startup] == \
            ["worker: Python and its imports ready", "worker: tasks read", "worker: model loaded"]  # CUDA: one more
        first_epochs = [ln for ln in lines if ln.startswith("finetune iteration") and ": epoch 1 done " in ln]
        assert len(first_epochs) == len([ln for ln in lines if ln.startswith("finetune iteration") and " acc " in ln])
        seconds = [float(ln.rsplit(" s after", 1)[0].rsplit(" ", 1)[1]) for ln in startup + first_epochs]
        assert seconds == sorted(seconds) and 0 <= seconds[0] and seconds[-1] < 120
    # the environment variable the hand-off sets works the same way; a bad value is one line, exit 2
    bad = subprocess.run(_cmd(tasks, tmp_path / "bad", "--epochs", "1"), capture_output=True, text=True, cwd=ROOT,
                         env={**ENV, "SIP_TASK_WORKERS": "two"})
    assert bad.returncode == 2 and bad.stderr.startswith("sip: error: SIP_TASK_WORKERS") and not (tmp_path / "bad").exists()
    # so does a start method that does not exist, before any worker starts
    bad = subprocess.run(_cmd(tasks, tmp_path / "bad", "--epochs", "1", "--task-workers", "2"), capture_output=True,
                         text=True, cwd=ROOT, env={**ENV, "SIP_WORKER_START": "fork"})
    assert bad.returncode == 2 and bad.stderr.startswith("sip: error: $SIP_WORKER_START must be forkserver or spawn")
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()


def test_a_stopped_parent_stops_its_children_and_a_rerun_resumes(tmp_path):
    tasks = write_tasks(tmp_path / "tasks", n_tasks=3, n_train=16, n_test=6)
    ids = [f"iteration-s2-{i}" for i in range(3)]
    long = ["--epochs", "150", "--eval-last", "2", "--report-last", "2"]  # children that outlive a late kill by seconds
    ref = subprocess.run(_cmd(tasks, tmp_path / "ref", *long), capture_output=True, text=True, cwd=ROOT,
                         env=ENV)
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "run"
    parent = subprocess.Popen(_cmd(tasks, out, *long, "--task-workers", "2", "--checkpoint-every", "10"),
                              cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    staging = tmp_path / ".run.partial"
    deadline = time.monotonic() + 240
    # 2 workers, round-robin: [0, 2] and [1]; the third task's staging appears once the first worker starts it
    while not (staging / f".{ids[2]}.partial").exists() and not (staging / ids[2]).exists():
        assert parent.poll() is None and time.monotonic() < deadline, "the third task never started"
        time.sleep(0.2)
    children = _worker_pids(staging)
    assert len(children) == 2 and _alive(children[0])  # worker 0 runs the third task (worker 1 may have ended)
    os.kill(parent.pid, signal.SIGTERM)  # the parent alone, as a user's `kill` would
    assert parent.wait(timeout=60) != 0
    time.sleep(1)
    assert not any(_alive(pid) for pid in children), "children outlived their parent"
    assert not out.exists(), "an interrupted run must not look complete"
    rerun = subprocess.run(_cmd(tasks, out, *long, "--task-workers", "2", "--checkpoint-every", "10"),
                           capture_output=True, text=True, cwd=ROOT, env=ENV)
    assert rerun.returncode == 0, rerun.stderr
    assert "finished before the interruption" in rerun.stdout
    _same_results(tmp_path / "ref", out, ids)


def test_workers_take_over_an_interrupted_run_without_them(tmp_path):
    """An in-process run stopped mid-task, rerun with --task-workers: finished tasks are kept, the interrupted
    one (its checkpoint laid out for the in-process loop) is restarted, and the results equal an uninterrupted run."""
    tasks = write_tasks(tmp_path / "tasks", n_tasks=2, n_train=16, n_test=6)
    ids = [f"iteration-s2-{i}" for i in range(2)]
    long = ["--epochs", "150", "--eval-last", "2", "--report-last", "2", "--checkpoint-every", "10"]
    ref = subprocess.run(_cmd(tasks, tmp_path / "ref", *long), capture_output=True, text=True, cwd=ROOT, env=ENV)
    assert ref.returncode == 0, ref.stderr
    out, staging = tmp_path / "run", tmp_path / ".run.partial"
    first = subprocess.Popen(_cmd(tasks, out, *long), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not list((staging / ids[1]).glob("**/state*")):  # the first task done, the second checkpointed
        assert first.poll() is None and time.monotonic() < deadline, "the second task never checkpointed"
        time.sleep(0.2)
    first.terminate()
    first.wait(timeout=60)
    assert (staging / ids[0] / "metrics.json").exists() and not out.exists()
    rerun = subprocess.run(_cmd(tasks, out, *long, "--task-workers", "2"), capture_output=True, text=True, cwd=ROOT,
                           env=ENV)
    assert rerun.returncode == 0, rerun.stderr
    assert f"finetune {ids[0]}: finished before the interruption" in rerun.stdout
    assert f"finetune {ids[1]}: restarted" in rerun.stdout
    _same_results(tmp_path / "ref", out, ids)
