"""A task file's tasks fine-tuned by parallel processes on one device (``sip finetune --task-workers N``).

One small model leaves most of a GPU idle: fine-tuning sweeps ran 18-25 of the gpu scale's 18M models side by side
on one H100 (docs/EXPERIMENTS.md, sessions 12-13). So a job of many tasks (35 g2p draws, 152 text-editing
draws) runs its tasks as N child processes. Each runs its share of the tasks one after another, every task exactly
as ``sip finetune --task-id T --out <staging>/T`` would: every task stages, checkpoints and resumes on its own, and
the parent commits the run directory only when all have finished. (A process per task cost a ~45 s start-up per
task with 15 at once on an H200, and text editing's short tasks left the GPU idle most of the time: session 21.)
Children are in the parent's process group, so stopping the job (Snakemake, the hand-off's budget) stops them too;
a rerun skips the finished tasks and resumes the others.

The workers are forked from a fork server (``multiprocessing``'s ``forkserver``) that imports torch, transformers and
the fine-tuning code once per job. Launched as fresh interpreters, 20 workers at once on a GPU host spent 14-49 s
each on their imports (session 28's worker logs); the server has imported nothing that touches CUDA, so each fork
starts its own CUDA context as a fresh process would. Each worker runs the parent's own command line
(``child_command``) through ``sip_core.cli.main``, in the parent's environment and working directory.
``SIP_WORKER_START=spawn`` starts fresh interpreters instead.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

from sip_core.errors import SipError

POLL_SECONDS = 0.5
LAUNCHED_AT = "SIP_WORKER_LAUNCHED_AT"  # wall clock at the workers' launch: their logs say where start-up went
WORKER_START = "SIP_WORKER_START"  # how workers start: forkserver (default) or spawn


def since_launch() -> str:
    """Seconds since the pool launched its workers (``LAUNCHED_AT``), for a worker's log; '?' outside a pool."""
    try:
        return f"{time.time() - float(os.environ[LAUNCHED_AT]):.1f} s"
    except (KeyError, ValueError):
        return "? s"


# imported once by the job's fork server, before any worker is forked (none of them starts CUDA). Not sip_core.cli:
# a worker of `python -m sip_core.cli` runs that module again as __mp_main__ (multiprocessing's main-module fixup),
# and runpy warns on every worker's stderr if the server has already imported it. The module is light without these.
PRELOAD = ["torch", "transformers", "sip_core.train.finetune"]


def child_command(cli_argv: list[str], task_ids: list[str], root: Path) -> list[str]:
    """The parent's own command line (``sip`` arguments) for a worker running ``task_ids`` into ``root/<task>``.
    argparse keeps an option's last value, so the overrides go last."""
    return [*cli_argv, "--worker-tasks", ",".join(task_ids), "--out", str(root),
            "--task-workers", "1", "--nproc", "1", "--no-progress"]


def _worker(argv: list[str], log: str, env: dict[str, str]) -> None:
    """A forked worker: the parent's environment, output to ``log``, then ``sip <argv>``; its status is the exit code."""
    os.environ.clear()
    os.environ.update(env)
    null, out = os.open(os.devnull, os.O_RDONLY), os.open(log, os.O_WRONLY | os.O_APPEND)
    for fd, target in ((0, null), (1, out), (2, out)):
        os.dup2(target, fd)
    os.close(null)
    os.close(out)
    sys.stdout.reconfigure(line_buffering=True)
    from sip_core import cli
    sys.exit(cli.main(argv))


def _worker_context():
    """``forkserver`` (default), or ``spawn`` (a fresh interpreter per worker, as before session 28) where
    ``$SIP_WORKER_START`` says so: the way back if a host's sandbox cannot run the fork server."""
    method = os.environ.get(WORKER_START, "forkserver")
    if method not in ("forkserver", "spawn"):
        raise SipError(f"${WORKER_START} must be forkserver or spawn, got {method!r}")
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


def shards(todo: list[tuple[str, Path]], workers: int) -> list[list[tuple[str, Path]]]:
    """Round-robin: neighbouring tasks (often one language or one benchmark family, of similar cost) go to
    different workers."""
    n = min(workers, len(todo))
    return [todo[w::n] for w in range(n)]


def log_path(root: Path, worker: int) -> Path:
    """A worker's log, in the staging directory (hidden, so that readers of the run's tasks skip it)."""
    return root / f".worker-{worker}.log"


def last_line(path: Path) -> str:
    lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "(empty log)"


def run_tasks(cli_argv: list[str], todo: list[tuple[str, Path]], workers: int, threads: int,
              on_done=lambda task_id, metrics: None) -> None:
    """Fine-tune ``todo`` ((task id, output directory) pairs, all in one directory) by ``workers`` processes, each
    running its share one task after another; ``threads`` CPU threads each. ``on_done`` gets each finished task's
    metrics as it appears; any failure raises SipError after the other workers have finished."""
    ctx = _worker_context()
    env = {**os.environ, "SIP_THREADS": str(threads)}
    running, failed, reported = {}, [], set()
    # a SIGTERM to the parent alone (not its group) must stop the children too: let it unwind through `finally`
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    def report(share) -> None:
        for task_id, out in share:
            if task_id not in reported and (out / "metrics.json").exists():
                reported.add(task_id)
                on_done(task_id, json.loads((out / "metrics.json").read_text(encoding="utf-8")))

    launched = repr(time.time())  # one launch for all: a start() waits for the server's imports, which count too
    try:
        for w, share in enumerate(shards(todo, workers)):
            log = log_path(share[0][1].parent, w)
            log.write_text("", encoding="utf-8")
            argv = child_command(cli_argv, [t for t, _ in share], share[0][1].parent)
            proc = ctx.Process(target=_worker, args=(argv, str(log), {**env, LAUNCHED_AT: launched}),
                               name=f"sip-task-worker-{w}")
            proc.start()
            running[proc] = (share, log)
        while running:
            time.sleep(POLL_SECONDS)
            for proc, (share, log) in list(running.items()):
                report(share)
                if proc.exitcode is None:
                    continue
                del running[proc]
                missing = [t for t, _ in share if t not in reported]
                if proc.exitcode != 0 or missing:
                    failed.append((missing or [share[0][0]], proc.exitcode, log))
    finally:
        for proc in running:  # the parent is being stopped: its children stop too (they resume on a rerun)
            proc.terminate()
        for proc in running:
            proc.join()
        signal.signal(signal.SIGTERM, previous)
    if failed:
        tasks, code, log = failed[0]
        lost = sum(len(t) for t, _, _ in failed)
        raise SipError(f"{lost} of {len(todo)} tasks failed; the worker of task {tasks[0]} exited {code}: "
                       f"{last_line(log)} (log: {log})")
