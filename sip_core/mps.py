"""CUDA MPS for the jobs that share a GPU on the device host (``sip handoff-run --mps``).

Without MPS a GPU is time-sliced between processes: ten small fine-tunings side by side each get the card in
turn and their kernels never overlap, so a 5,000-pair fine-tuning costs ~50 s of an H200 however many share it
(docs/EXPERIMENTS.md, sessions 24-25). MPS's control daemon lets kernels of different processes run at once:
ten side by side on an H200 took ~300 s each instead of ~520 s (session 26): decoding 3x faster, from MPS alone;
training 1.5x, MPS and session 25's removal of two host synchronisations per forward together.
On by default where the host shows a GPU (``--no-mps`` to opt out) and best effort: where it cannot start or a
client cannot reach it (no binary, a sandbox without it), the run goes on time-sliced after one warning line.
``python3 -m sip_core.mps CMD...`` runs any command under it the same way (experiments/finetune_sweep.sh's ``MPS=1``).
"""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys

CONTROL = "nvidia-cuda-mps-control"
# a client that creates a CUDA context: under a daemon that cannot serve, this fails instead of the jobs
CLIENT_PROBE = (sys.executable, "-c", "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()")


def _warn(message: str) -> None:
    print(f"[handoff] --mps: {message}; the GPUs stay time-sliced", file=sys.stderr, flush=True)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no message")


@contextlib.contextmanager
def daemon(enabled: bool, probe: tuple[str, ...] | None = None):
    """Run the block under an MPS control daemon if ``enabled`` and it works here; yields whether it does.
    ``probe``: the client command that must succeed under it (default CLIENT_PROBE)."""
    exe = shutil.which(CONTROL) if enabled else None
    if not enabled or exe is None:
        if enabled:
            _warn(f"{CONTROL} not found")
        yield False
        return
    started = _run([exe, "-d"])
    # one left by an earlier call on this warm host (killed before it could stop it) serves the jobs as well
    left_running = "already running" in (started.stderr + started.stdout).lower()
    if started.returncode != 0 and not left_running:
        _warn(f"the control daemon did not start ({_first_line(started.stderr or started.stdout)})")
        yield False
        return
    client = _run(list(probe or CLIENT_PROBE), timeout=120)
    if client.returncode != 0:
        _run([exe], stdin="quit\n")
        _warn(f"a CUDA client could not use the daemon ({_first_line(client.stderr)}); it was stopped")
        yield False
        return
    print("[handoff] --mps: CUDA MPS control daemon started; jobs on one GPU share it at once", flush=True)
    try:
        yield True
    finally:
        _run([exe], stdin="quit\n")


def _run(cmd: list[str], stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``cmd``'s result; one that cannot be run or hangs counts as failed, with the reason as its stderr."""
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as err:
        return subprocess.CompletedProcess(cmd, 1, "", str(err))


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` under the daemon (best effort, as above); its exit status."""
    command = sys.argv[1:] if argv is None else argv
    if not command:
        print("usage: python3 -m sip_core.mps COMMAND [ARG...]", file=sys.stderr)
        return 2
    with daemon(True):
        return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
