"""A task file's tasks fine-tuned by parallel processes on one device (``sip finetune --task-workers N``).

One small model leaves most of a GPU idle: fine-tuning sweeps ran 18-25 of the gpu scale's 18M models side by side
on one H100 (docs/EXPERIMENTS.md, sessions 12-13). So a job of many tasks (35 g2p draws, 152 text-editing
draws) runs its tasks as N child processes, each an ordinary ``sip finetune --task-id T --out <staging>/T``: every
task stages, checkpoints and resumes on its own, and the parent commits the run directory only when all have
finished. Children are in the parent's process group, so stopping the job (Snakemake, the hand-off's budget) stops
them too; a rerun skips the finished tasks and resumes the others.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sip_core.errors import SipError

POLL_SECONDS = 0.5


def child_command(cli_argv: list[str], task_id: str, out: Path) -> list[str]:
    """The parent's own command line for one task. argparse keeps an option's last value, so the overrides go last."""
    return [sys.executable, "-m", "sip_core.cli", *cli_argv, "--task-id", task_id, "--out", str(out),
            "--task-workers", "1", "--nproc", "1", "--no-progress"]


def log_path(out: Path) -> Path:
    """A child's log, beside its task directory (hidden, so that readers of the run's tasks skip it)."""
    return out.parent / f".{out.name}.log"


def last_line(path: Path) -> str:
    lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "(empty log)"


def run_tasks(cli_argv: list[str], todo: list[tuple[str, Path]], workers: int, threads: int,
              on_done=lambda task_id, metrics: None) -> None:
    """Fine-tune ``todo`` ((task id, output directory) pairs), ``workers`` at a time; ``threads`` CPU threads each.
    ``on_done`` gets each finished task's metrics; any failure raises SipError after the others have finished."""
    env = {**os.environ, "SIP_THREADS": str(threads), "PYTHONPATH": os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")) if p)}
    pending, running, failed = list(todo), {}, []
    # a SIGTERM to the parent alone (not its group) must stop the children too: let it unwind through `finally`
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        while pending or running:
            while pending and len(running) < workers:
                task_id, out = pending.pop(0)
                with open(log_path(out), "w", encoding="utf-8") as log:
                    proc = subprocess.Popen(child_command(cli_argv, task_id, out), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
                running[proc] = (task_id, out)
            time.sleep(POLL_SECONDS)
            for proc in [p for p in running if p.poll() is not None]:
                task_id, out = running.pop(proc)
                if proc.returncode == 0 and (out / "metrics.json").exists():
                    on_done(task_id, json.loads((out / "metrics.json").read_text(encoding="utf-8")))
                else:
                    failed.append((task_id, proc.returncode, log_path(out)))
    finally:
        for proc in running:  # the parent is being stopped: its children stop too (they resume on a rerun)
            proc.terminate()
        for proc in running:
            proc.wait()
        signal.signal(signal.SIGTERM, previous)
    if failed:
        task_id, code, log = failed[0]
        raise SipError(f"{len(failed)} of {len(todo)} tasks failed; task {task_id} exited {code}: "
                       f"{last_line(log)} (log: {log})")
