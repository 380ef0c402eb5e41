"""A Snakemake run killed at a random point and rerun: the job resumes from its last checkpoint (it is not
restarted), ends with the same bytes as an uninterrupted run, and nothing of the killed job passes for
complete in between. Target: the ci continued pre-training of sip-nd7 (94 steps) in a temporary copy of
the workflow, from the ci pools and sip-d4 checkpoint: this checkout's (DVC's), or, in a clean clone (CI), those of
the ci build the regression tests made (`ci_run`)."""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TARGET = "data/ci/checkpoints/sip-nd7/model.safetensors"
INPUTS = ["data/ci/pretrain/d4", "data/ci/pretrain/nd7", "data/ci/checkpoints/sip-d4/config.json",
          "data/ci/checkpoints/sip-d4/model.safetensors", "data/ci/checkpoints/sip-d4/prefix_init.safetensors"]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not SNAKEMAKE.exists(), reason="needs snakemake")]


@pytest.fixture(scope="module")
def inputs(request) -> Path:
    """Where the ci pools and sip-d4 checkpoint are: here, or the session's ci build (made once if needed)."""
    return ROOT if all((ROOT / p).exists() for p in INPUTS) else request.getfixturevalue("ci_run")


def _copy_workflow(dest: Path, inputs: Path) -> Path:
    dest.mkdir()
    for name in ("Snakefile", "params.yaml"):
        shutil.copy2(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "workflow", dest / "workflow", ignore=ignore)
    shutil.copytree(ROOT / "profiles", dest / "profiles", ignore=ignore)
    shutil.copytree(ROOT / "sip_core", dest / "sip_core", ignore=ignore)
    for rel in INPUTS:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (inputs / rel).is_dir() else shutil.copy2)(inputs / rel, dest / rel)
    return dest


def _snakemake(cwd: Path, *extra, wait=True):
    env = {**os.environ, "SIP_THREADS": "1", "SIP_CHECKPOINT_EVERY": "10",
           "PATH": f"{SNAKEMAKE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)  # the jobs import the copy's sip_core (python -m from the copy's root)
    # profiles/default (rerun-incomplete, no mtime triggers) applies by itself: it lies beside the Snakefile
    cmd = [str(SNAKEMAKE), "-j1", "--config", "scale=ci", *extra,
           "--", TARGET]
    if wait:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # its own process group: the kill reaches the job too


def _step(latest: Path) -> int:
    """The step of the run's newest checkpoint (its `latest` file names it: step-000000010), 0 before the first."""
    try:
        return int(latest.read_text().strip().split("-")[1])
    except (FileNotFoundError, IndexError, ValueError):  # not there yet, or caught mid-write
        return 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory, inputs):
    work = _copy_workflow(tmp_path_factory.mktemp("sm") / "uninterrupted", inputs)
    result = _snakemake(work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return (work / TARGET).read_bytes()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_snakemake_run_resumes_to_the_same_output(tmp_path, inputs, reference, sig):
    work = _copy_workflow(tmp_path / "work", inputs)
    latest = work / "data/ci/checkpoints/sip-nd7/checkpoints/latest"
    proc = _snakemake(work, wait=False)
    # a random point between checkpoints 10 and 60 of 94 steps, counted in the run's own steps (not in seconds,
    # which a faster machine would run past): the checkpoint first, then a random fraction of the steps after it
    after = random.randrange(10, 70, 10)
    deadline = time.monotonic() + 120
    while _step(latest) < after:
        assert proc.poll() is None, f"the run ended before its checkpoint of step {after}"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    delay = random.uniform(0.0, 0.2)
    time.sleep(delay)
    assert proc.poll() is None, f"finished within {delay:.2f}s of step {after}; nothing was interrupted"
    os.killpg(proc.pid, sig)
    proc.wait(timeout=60)
    time.sleep(0.5)  # let a SIGTERMed job's children go
    checkpoint = latest.read_text().strip()
    if sig == signal.SIGKILL:  # a hard kill leaves Snakemake's lock behind; its message says to unlock
        assert _snakemake(work, "--unlock").returncode == 0
        # as if a writer without atomic renames had died mid-file: Snakemake's incomplete marker must win
        (work / TARGET).write_bytes(reference[:1000])

    # the killed job's output never passes for complete: it is absent, or Snakemake knows it is incomplete
    dry = _snakemake(work, "-n")
    assert dry.returncode == 0, dry.stderr[-3000:]
    # (after SIGKILL the target file exists, so only the incomplete marker can send the job again)
    assert "rule pretrain:" in dry.stdout + dry.stderr, f"{sig!r} after step {after}: the job is not rerun"

    rerun = _snakemake(work)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    log = (work / "logs/ci/pretrain/sip-nd7.log").read_text()
    assert f"resuming from step {int(checkpoint.split('-')[1])}" in log, f"{sig!r} after step {after}: restarted"
    assert (work / TARGET).read_bytes() == reference, f"{sig!r} after step {after}: different weights"
