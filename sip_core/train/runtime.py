"""Device, precision, seeds and provenance shared by pre-training, fine-tuning and evaluation."""
from __future__ import annotations

import contextlib
import functools
import os
import random
import subprocess
from pathlib import Path

import numpy as np
import torch

from sip_core.errors import SipError

PRECISIONS = ("fp32", "tf32", "bf16")


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SipError(f"--device {name} requested but CUDA is not available")
    return torch.device(name)


def set_precision(precision: str, device: torch.device, determinism: str | None = None):
    """Configure matmul precision and determinism (``determinism_mode()`` when not given); return a
    zero-argument factory of the autocast context to train in.

    bf16 means bf16 autocast with fp32 master weights (T5 overflows in fp16, so fp16 is not offered).
    """
    if precision not in PRECISIONS:
        raise SipError(f"--precision must be one of {PRECISIONS}, not {precision!r}")
    if device.type == "cuda":
        # cuDNN's fused attention returns NaN gradients in T5's cross-attention (bias + mask) under bf16
        # (ScaledDotProductCudnnAttentionBackward0, found by `bench_loss --trace`; docs/BENCHMARKS.md);
        # SDPA then takes its memory-efficient kernel, which handles the additive bias.
        torch.backends.cuda.enable_cudnn_sdp(False)
    set_determinism(determinism or determinism_mode())
    tf32 = precision in ("tf32", "bf16")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    if precision == "bf16":
        return functools.partial(torch.autocast, device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


DETERMINISM_MODES = ("off", "math", "strict")


def determinism_mode(requested: str | None = None, default: str = "off") -> str:
    """A command's determinism: its ``--determinism`` if given, else ``$SIP_DETERMINISTIC`` if set (0 -> ``off``,
    ``strict`` -> ``strict``, any other value (1) -> ``math``), else the command's default."""
    if requested:
        return requested
    value = os.environ.get("SIP_DETERMINISTIC", "")
    if value == "":
        return default
    return "off" if value == "0" else "strict" if value == "strict" else "math"


def deterministic_kernel_error(err: RuntimeError) -> SipError | None:
    """The one-line error for an op that strict mode stops (PyTorch has no deterministic kernel for it)."""
    text = str(err)
    if "does not have a deterministic implementation" not in text:
        return None
    first = text.strip().splitlines()[0]
    return SipError(f"{first[:300]} (strict determinism; rerun with --determinism math, or off)")


def set_determinism(mode: str) -> None:
    """Bitwise-repeatable GPU runs: ``strict`` by default for fine-tuning, ``off`` elsewhere.

    Why: a fine-tune with a tuned prefix moved by up to 9.5 points on one task between runs of one seed, while
    base and no-prefix runs repeat to the last digit (docs/EXPERIMENTS.md, sessions 14-15). The cause (sweep 20,
    session 16: plain runs of one seed differ, math and strict ones repeat bitwise, also across hosts): SDPA's
    memory-efficient backward splits the keys over thread blocks and sums their gradients with atomics once the
    keys outgrow one block; the 80-vector prefix makes the encoder's keys ~100 long, g2p words alone stay short.
    PyTorch forces one split only under strict deterministic mode, which cost ~7% wall time there (math ~11%).

    ``math`` (``SIP_DETERMINISTIC=1``): deterministic kernels where PyTorch has them (a warning names any op
    without one), a fixed cuBLAS workspace, and SDPA's math kernel instead of the fused ones.
    ``strict``: PyTorch's strict deterministic mode (an op without a deterministic kernel stops the run), the
    fused SDPA kernels kept (memory-efficient with one key split), and the fixed cuBLAS workspace.
    """
    if mode not in DETERMINISM_MODES:
        raise SipError(f"determinism must be one of {DETERMINISM_MODES}, not {mode!r}")
    if mode == "off":
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts: before any matmul
    torch.use_deterministic_algorithms(True, warn_only=mode == "math")
    # No NaN fill of every new uninitialised tensor (PyTorch's default under deterministic mode: one more kernel per
    # torch.empty, ~22% of a gpu fine-tuning step). The same bits wherever no op reads memory it has not written:
    # checked over the gpu Table 1 protocol (session 50) and every ci table (session 51). $SIP_FILL_UNINITIALIZED=1
    # puts the fill back, to catch such a read.
    torch.utils.deterministic.fill_uninitialized_memory = os.environ.get("SIP_FILL_UNINITIALIZED", "0") == "1"
    torch.backends.cudnn.benchmark = False
    if mode == "math":
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        torch.backends.cuda.enable_math_sdp(True)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def git_commit() -> str:
    """The source tree's commit (``unknown`` outside git or when git is missing, e.g. on GPU hosts)."""
    if os.environ.get("SIP_COMMIT"):
        return os.environ["SIP_COMMIT"]
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({torch.get_num_threads()} threads)"


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def configure_threads(device: torch.device, threads: int | None = None) -> int:
    """CPU intra-op threads: --threads, else $SIP_THREADS, else 1 on a CPU and PyTorch's default (one per core)
    on a GPU.

    One thread is the CPU default because the small models of the ci/cpu scales are dominated by per-op
    overhead, and Snakemake runs jobs side by side: on a shared 2-core machine two threads per job were
    measured ~8× slower per matmul than one. On a GPU host the hand-off and the task pool set $SIP_THREADS to a
    job's share of the cores: ignoring it there gave each of 10 fine-tuning workers a thread per core, and loading
    the model took them 27-29 s instead of ~1 s (docs/BENCHMARKS.md, session 35).
    """
    n = threads or int(os.environ.get("SIP_THREADS", "0") or 0)
    if device.type != "cpu" and not n:
        return torch.get_num_threads()
    n = n or 1
    torch.set_num_threads(n)
    return n
