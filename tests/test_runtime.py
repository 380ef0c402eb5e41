"""Run-wide switches of sip_core.train.runtime, each in a fresh process (they set global torch state)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, os, torch
from sip_core.train import runtime
runtime.set_precision("tf32", torch.device("cpu"))
print(json.dumps({"deterministic": torch.are_deterministic_algorithms_enabled(),
                  "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
                  "mem_efficient_sdp": torch.backends.cuda.mem_efficient_sdp_enabled(),
                  "flash_sdp": torch.backends.cuda.flash_sdp_enabled(),
                  "cublas": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}))
"""


def _flags(value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SIP_DETERMINISTIC", "CUBLAS_WORKSPACE_CONFIG")}
    if value is not None:
        env["SIP_DETERMINISTIC"] = value
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("value", [None, "", "0"])
def test_runs_keep_the_fast_kernels_unless_asked(value):
    assert _flags(value) == {"deterministic": False, "warn_only": False, "mem_efficient_sdp": True, "flash_sdp": True,
                             "cublas": None}


def test_sip_deterministic_selects_repeatable_kernels():
    assert _flags("1") == {"deterministic": True, "warn_only": True, "mem_efficient_sdp": False, "flash_sdp": False,
                           "cublas": ":4096:8"}


def test_strict_determinism_keeps_the_fused_attention_and_lets_no_op_pass():
    """Strict mode: PyTorch then runs memory-efficient attention with one key split (deterministic), and an op
    without a deterministic kernel raises instead of warning."""
    assert _flags("strict") == {"deterministic": True, "warn_only": False, "mem_efficient_sdp": True, "flash_sdp": True,
                                "cublas": ":4096:8"}


@pytest.mark.parametrize("flag, env, default, expected", [
    (None, None, "strict", "strict"),   # fine-tuning's default
    (None, None, "off", "off"),         # every other command's
    (None, "0", "strict", "off"),       # the environment overrides a default
    (None, "1", "strict", "math"),
    (None, "strict", "off", "strict"),
    ("off", "strict", "strict", "off"),  # the flag overrides both
    ("math", None, "strict", "math"),
])
def test_determinism_mode_precedence(monkeypatch, flag, env, default, expected):
    from sip_core.train import runtime
    monkeypatch.delenv("SIP_DETERMINISTIC", raising=False)
    if env is not None:
        monkeypatch.setenv("SIP_DETERMINISTIC", env)
    assert runtime.determinism_mode(flag, default=default) == expected


def test_an_op_strict_mode_stops_becomes_one_line_naming_the_way_out():
    from sip_core.train import runtime
    err = RuntimeError("index_add_cuda_ does not have a deterministic implementation, but you set "
                       "'torch.use_deterministic_algorithms(True)'.\nYou can turn off determinism ...")
    one = runtime.deterministic_kernel_error(err)
    assert "\n" not in str(one) and str(one).startswith("index_add_cuda_") and "--determinism math" in str(one)
    assert runtime.deterministic_kernel_error(RuntimeError("CUDA out of memory")) is None


THREADS = """
import json, torch
from sip_core.train import runtime
torch.set_num_threads(3)  # stands in for PyTorch's default of one thread per core
gpu = torch.device("cuda")  # only its type is read: no GPU needed
seen = []
for device, threads in ((gpu, None), (gpu, 2), (torch.device("cpu"), None)):
    seen.append([runtime.configure_threads(device, threads), torch.get_num_threads()])
print(json.dumps(seen))
"""


@pytest.mark.parametrize("sip_threads, expected", [
    (None, [[3, 3], [2, 2], [1, 1]]),  # a GPU job alone keeps PyTorch's default; a CPU job takes one thread
    ("1", [[1, 1], [2, 2], [1, 1]]),   # a GPU job given its share (hand-off, task pool) takes it; --threads wins
])
def test_a_gpu_job_given_its_share_of_the_cores_takes_it(sip_threads, expected):
    # 10 fine-tuning workers on a 16-core H200 host, each with a thread per core, took 27-29 s to load an 18M model
    # after their CUDA context was up; with one thread each, 0.5-1.5 s (session 35)
    env = {k: v for k, v in os.environ.items() if k != "SIP_THREADS"}
    if sip_threads is not None:
        env["SIP_THREADS"] = sip_threads
    done = subprocess.run([sys.executable, "-c", THREADS], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == expected
