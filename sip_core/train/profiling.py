"""``sip pretrain --profile-steps A:B``: a torch.profiler trace of optimiser steps A..B, summarised per rank.

Why: data-parallel pre-training at the gpu shape scales 1.77x on two GPUs (docs/BENCHMARKS.md), and the step
times alone cannot say whether the missing time is the host waiting (synchronisations), the GPU idle between
kernels (launch-bound), or communication. The summary (``profile-rank<R>.txt`` beside the run's outputs) gives
the wall time of the window, the GPU's busy time in it, NCCL's share, and the top operators by host and device time.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from sip_core.errors import SipError
from sip_core.io import write_text


def parse_window(spec: str | None) -> tuple[int, int] | None:
    """"A:B" -> (A, B) with 0 <= A < B; None for no profiling."""
    if not spec:
        return None
    try:
        start, end = (int(x) for x in spec.split(":"))
    except ValueError:
        raise SipError(f"--profile-steps takes A:B (optimiser steps), not {spec!r}") from None
    if not 0 <= start < end:
        raise SipError(f"--profile-steps {spec}: needs 0 <= A < B")
    return start, end


class StepProfiler:
    """Call ``at(step)`` after every optimiser step: the trace starts after step A and ends after step B."""

    def __init__(self, window: tuple[int, int] | None, out: Path, rank: int = 0):
        self.window, self.out, self.rank = window, Path(out), rank
        self.prof = None
        self.started = 0.0

    def at(self, step: int) -> None:
        if self.window is None:
            return
        start, end = self.window
        if step == start and self.prof is None:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.prof = torch.profiler.profile(activities=activities)
            self.prof.start()
            self.started = time.perf_counter()
        elif step == end and self.prof is not None:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            wall = time.perf_counter() - self.started
            self.prof.stop()
            self.out.mkdir(parents=True, exist_ok=True)
            write_text(summary(self.prof, wall, end - start), self.out / f"profile-rank{self.rank}.txt")
            self.prof, self.window = None, None


def summary(prof, wall_s: float, steps: int) -> str:
    events = prof.key_averages()
    kernels = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    device_us = sum(getattr(e, "self_device_time_total", 0) for e in kernels)
    nccl_us = sum(getattr(e, "self_device_time_total", 0) for e in kernels if "nccl" in e.key.lower())
    lines = [f"steps {steps}, wall {wall_s * 1e3 / steps:.1f} ms/step",
             f"GPU kernels {device_us / 1e3 / steps:.1f} ms/step ({100 * device_us / 1e6 / max(wall_s, 1e-9):.0f}% busy), "
             f"of which NCCL {nccl_us / 1e3 / steps:.1f} ms/step", "",
             events.table(sort_by="self_cpu_time_total", row_limit=25), "",
             events.table(sort_by="self_device_time_total", row_limit=25) if device_us else ""]
    return "\n".join(lines) + "\n"
