"""Data parallelism: the per-rank loss weighting reproduces the one-process gradient, and two gloo (CPU)
processes (torchrun, or `--nproc 2`) train like one process with the same global batch."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from sip_core.errors import SipError
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import save_model
from sip_core.train.batching import DeviceSplit, bucketed_batches
from sip_core.train.data import make_split
from sip_core.train import distributed
from sip_core.train.distributed import Dist
from tests.fixtures.tiny_fsts import write_pool

ROOT = Path(__file__).resolve().parents[1]
SHAPE = ["--d-model", "32", "--d-ff", "64", "--layers", "1", "--heads", "2", "--d-kv", "16", "--dropout", "0"]
EXAMPLE = ROOT / "tests" / "data" / "example_task"


def _tiny(dropout=0.0):
    torch.manual_seed(0)
    return SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16,
                                                              dropout_rate=dropout), prefix_mode="none"))


@pytest.mark.parametrize("flag, preset, expected", [(2, None, "2"), (0, None, None), (2, "8", "8"), (4, None, "4")])
def test_nccl_channels_are_set_before_the_process_group_forms(monkeypatch, flag, preset, expected):
    """--nccl-channels reaches NCCL as NCCL_MAX_NCHANNELS before init_process_group (NCCL reads it when it creates a
    communicator); 0 leaves NCCL's choice, and a value already in the environment wins. No GPU here: CUDA and the
    process group are stand-ins that record what NCCL would see."""
    seen = {}
    env = {k: v for k, v in os.environ.items() if k != "NCCL_MAX_NCHANNELS"}  # a copy: what setup sets dies with it
    env.update({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}, **({"NCCL_MAX_NCHANNELS": preset} if preset else {}))
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: None)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.distributed, "new_group", lambda **kw: None)

    def init_process_group(backend, **kw):
        seen["backend"], seen["channels"] = backend, os.environ.get("NCCL_MAX_NCHANNELS")
    monkeypatch.setattr(torch.distributed, "init_process_group", init_process_group)
    dist, device = distributed.setup("auto", flag)
    assert (dist.world, device) == (2, "cuda:0")
    assert seen == {"backend": "nccl", "channels": expected}


def test_nccl_channels_below_zero_are_refused():
    with pytest.raises(SipError, match="--nccl-channels must be 0"):
        distributed.setup("auto", -1)


@pytest.mark.parametrize("world, batch", [(2, 7), (3, 8), (4, 3)])
def test_shards_partition_the_batch_and_weights_restore_the_token_mean(world, batch):
    rng = np.random.default_rng(world)
    words = ["".join(rng.choice(list("abcdef"), size=rng.integers(1, 9))) for _ in range(12)]
    split = make_split(words, [w[::-1] * int(rng.integers(1, 3)) for w in words])
    data = DeviceSplit(split, "cpu")
    idx = rng.permutation(len(words))[:batch]
    model = _tiny()
    model(**data.batch(idx)).loss.backward()  # one process: token mean over the whole batch
    reference = [p.grad.clone() for p in model.parameters()]
    summed = [torch.zeros_like(g) for g in reference]
    seen = []
    for rank in range(world):
        dist = Dist(rank=rank, world=world)
        local, weight = dist.shard(idx, data.label_lengths)
        # the same examples as pre-training takes them from the batch's indices already on the device
        assert torch.from_numpy(idx)[dist.part(len(idx))].tolist() == local.tolist()
        if weight > 0:
            seen += local.tolist()
        model.zero_grad()
        (model(**data.batch(local)).loss * weight).backward()
        summed = [s + p.grad for s, p in zip(summed, model.parameters())]
    assert sorted(seen) == sorted(idx.tolist())
    for s, r in zip(summed, reference):  # DDP averages over ranks
        torch.testing.assert_close(s / world, r, rtol=1e-5, atol=1e-6)


def _mean_shard_width(lengths, global_batch, world, seed=0):
    """Mean padded width of what one rank trains on per step: its share of each global batch of an epoch."""
    part = Dist(rank=0, world=world).part
    widths = [lengths[b[part(len(b))]].max() for b in bucketed_batches(lengths, lengths, global_batch, seed, 0)]
    return float(np.mean(widths))


@pytest.mark.parametrize("n, same_padding", [(7_500, False), (200_000, True)])
def test_a_rank_pads_like_one_gpu_only_when_the_pool_fills_a_bucket_chunk(n, same_padding):
    """Weak scaling (1 GPU at batch B vs 2 at 2B) compares equal work only if a rank's half of a 2B batch is as
    long-padded as a 1-GPU batch of B. Batches are cut from length-sorted chunks of 64 batches, so that holds once
    the pool fills a chunk (64 x 2B examples). The ci pool (7,500 training examples) pads the 2-GPU shares' encoder
    13% wider (68.5 vs 60.8 positions; ~20% more padded compute), which made the DDP bench of sessions 4-33 charge
    DDP for padding (docs/BENCHMARKS.md, session 33); these uniform lengths show it at 6%."""
    lengths = np.random.default_rng(0).integers(20, 90, size=n)
    one, two = _mean_shard_width(lengths, 1024, 1), _mean_shard_width(lengths, 2048, 2)
    if same_padding:
        assert two == pytest.approx(one, rel=0.02)
    else:
        assert two > 1.05 * one


def _run(args, nproc=None, module="sip_core.cli", env_extra=None):
    # gloo over the loopback interface: a host name that resolves to an unreachable address cannot stall it
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIP_THREADS": "1", "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
           "SIP_DDP_TIMEOUT_S": "60",  # a rank left behind by a killed sibling gives up instead of hanging
           "PYTHONFAULTHANDLER": "1",  # SIGABRT on a timeout prints every thread's stack: where a hang was
           **(env_extra or {})}
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)] \
        if nproc else [sys.executable]
    proc = subprocess.Popen([*launcher, "-m", module, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        out_dir = str(args[args.index("--out") + 1]) if "--out" in args else None
        if out_dir:  # the stacks of whatever still runs this command, then kill it, lest it hold the pipes open
            subprocess.run(["pkill", "-ABRT", "-f", "--", f"--out {out_dir}"], check=False)
            time.sleep(3)
            subprocess.run(["pkill", "-9", "-f", "--", f"--out {out_dir}"], check=False)
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher; torchrun's workers live in sessions of their own
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            out, err = "", "(pipes still held open)"
        # each SIGABRT'ed process printed its threads' stacks; the extension-module lists after them are noise
        stacks = "\n".join(line for line in err.splitlines() if not line.startswith("Extension modules"))
        pytest.fail(f"timed out; stdout tail: {out[-1000:]}\nstacks: {stacks[-8000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# te: the task table's sparse gradient stays out of DDP and is averaged by gathering every rank's rows;
# bf16: gradients all-reduced in bf16 (--ddp-grads), the same training within bf16's rounding, and not fp32's
@pytest.mark.parametrize("variant, grads", [("sip", "fp32"), ("te", "fp32"), ("sip", "bf16")])
def test_torchrun_pretraining_matches_one_process(tmp_path, variant, grads):
    pool = write_pool(tmp_path / "pool", n_train_fsts=10, n_dev_fsts=2, n_test_fsts=2, per_fst=8)
    args = ["pretrain", "--variant", variant, "--data", pool, *SHAPE, "--batch-size", "16", "--max-steps", "8",
            "--lr", "3e-3", "--log-every", "1", "--eval-max", "10", "--no-progress", "--seed", "3", "--device", "cpu",
            "--checkpoint-every", "4", *(["--te-lr", "0.1", "--clip", "0.5"] if variant == "te" else [])]
    one = _run([*args, "--out", tmp_path / "one"])
    assert one.returncode == 0, one.stderr
    two = _run([*args, "--out", tmp_path / "two", "--ddp-grads", grads], nproc=2)
    assert two.returncode == 0, two.stderr[-3000:]
    a = json.loads((tmp_path / "one" / "pretrain_metrics.json").read_text())
    b = json.loads((tmp_path / "two" / "pretrain_metrics.json").read_text())
    assert b["device"].endswith("x 2 (DDP)") and [r["step"] for r in a["curve"]] == [r["step"] for r in b["curve"]]
    assert b["options"]["ddp_grads"] == grads
    losses_a, losses_b = np.array([r["loss"] for r in a["curve"]]), np.array([r["loss"] for r in b["curve"]])
    assert losses_a[-1] < losses_a[0] - 1.0  # it learns, so matching curves mean something
    np.testing.assert_allclose(losses_b, losses_a, rtol=1e-3 if grads == "fp32" else 2e-2)
    wa, wb = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    gap = max(float((wa[k] - wb[k]).abs().max()) for k in wa)
    # measured 1e-7 to 4e-7 in fp32 and 3e-3 in bf16: bf16's rounding shows, so the hook ran
    assert gap < 1e-3 if grads == "fp32" else 1e-5 < gap < 2e-2
    assert "checkpoints" in os.listdir(tmp_path / "two")  # rank 0 wrote the resumable checkpoint


def test_accumulated_micro_batches_all_reduce_once_per_optimiser_step(tmp_path):
    """With --grad-accum 2 every rank all-reduces its gradients once per optimiser step (DDP's no_sync on the
    first micro-batch), as many times as without accumulation, and still trains like one process."""
    pool = write_pool(tmp_path / "pool", n_train_fsts=10, n_dev_fsts=2, n_test_fsts=2, per_fst=8)
    args = ["pretrain", "--variant", "sip", "--data", pool, *SHAPE, "--batch-size", "8", "--max-steps", "4",
            "--lr", "3e-3", "--log-every", "1", "--eval-max", "10", "--no-progress", "--seed", "3", "--device", "cpu"]
    counts = {}
    for accum in (1, 2):
        count = tmp_path / f"syncs-{accum}"
        run = _run([*args, "--grad-accum", accum, "--out", tmp_path / f"two-{accum}"], nproc=2,
                   module="tests.fixtures.count_ddp_syncs", env_extra={"SIP_SYNC_COUNT": str(count)})
        assert run.returncode == 0, run.stderr[-3000:]
        counts[accum] = [int(Path(f"{count}.{rank}").read_text()) for rank in (0, 1)]
    assert counts[1][0] >= 4 and counts[1] == counts[2]  # without no_sync, accumulation 2 would count twice as many
    one = _run([*args, "--grad-accum", 2, "--out", tmp_path / "one"])
    assert one.returncode == 0, one.stderr
    wa, wb = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two-2" / "model.safetensors")
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) < 1e-3


def test_nproc_finetuning_matches_one_process(tmp_path):
    save_model(_tiny(), tmp_path / "base")
    args = ["finetune", "--model", tmp_path / "base", "--train", EXAMPLE / "train.tsv", "--test", EXAMPLE / "test.tsv",
            "--epochs", "4", "--batch-size", "8", "--lr", "3e-3", "--no-progress", "--device", "cpu"]
    one = _run([*args, "--out", tmp_path / "one"])
    assert one.returncode == 0, one.stderr
    two = _run([*args, "--out", tmp_path / "two", "--nproc", "2"])  # starts torchrun itself
    assert two.returncode == 0, two.stderr[-3000:]
    a = json.loads((tmp_path / "one" / "metrics.json").read_text())
    b = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert a["steps"] == b["steps"] == 4 * 5  # 40 examples / global batch 8, on both
    for ea, eb in zip(a["epochs"], b["epochs"]):
        assert ea["ed"] == pytest.approx(eb["ed"], abs=0.05)
    wa, wb = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) < 1e-3
    assert (tmp_path / "two" / "README.md").exists() and not list(tmp_path.glob(".two*"))


def test_an_error_after_the_process_group_formed_ends_every_rank_with_its_message(tmp_path):
    """Both ranks refuse to resume another variant's checkpoint, after joining the group: each leaves it
    (Dist.abandon) and the command fails with the one-line message, promptly, instead of waiting on a peer."""
    pool = write_pool(tmp_path / "pool", n_train_fsts=6, n_dev_fsts=2, n_test_fsts=2, per_fst=4)
    common = ["--data", pool, *SHAPE, "--batch-size", "8", "--max-steps", "2", "--eval-max", "4", "--no-progress",
              "--device", "cpu", "--checkpoint-every", "1", "--out", tmp_path / "run"]
    assert _run(["pretrain", "--variant", "naive", *common]).returncode == 0
    started = time.monotonic()
    two = _run(["pretrain", "--variant", "sip", *common], nproc=2)
    assert two.returncode != 0 and time.monotonic() - started < 60
    assert two.stderr.count("refusing to resume it as sip") == 2, two.stderr[-3000:]  # one line per rank


@pytest.mark.slow
def test_killed_data_parallel_run_resumes_to_identical_weights(tmp_path):
    """Every rank's RNG stream is checkpointed: with dropout on, a killed 2-process run resumes exactly."""
    pool = write_pool(tmp_path / "pool", n_train_fsts=10, n_dev_fsts=2, n_test_fsts=2, per_fst=8)
    args = ["pretrain", "--variant", "sip", "--data", pool, *SHAPE[:-2], "--dropout", "0.1", "--batch-size", "16",
            "--max-steps", "8", "--eval-max", "10", "--no-progress", "--seed", "3", "--device", "cpu",
            "--checkpoint-every", "4", "--nproc", "2"]
    assert _run([*args, "--out", tmp_path / "full"]).returncode == 0
    os.environ["SIP_TEST_KILL_AFTER_STEP"] = "4"
    try:
        killed = _run([*args, "--out", tmp_path / "resumed"])
    finally:
        del os.environ["SIP_TEST_KILL_AFTER_STEP"]
    assert killed.returncode != 0 and not (tmp_path / "resumed" / "model.safetensors").exists()
    resumed = _run([*args, "--out", tmp_path / "resumed"])
    assert resumed.returncode == 0 and "resuming from step 4" in resumed.stdout
    a, b = load_file(tmp_path / "full" / "model.safetensors"), load_file(tmp_path / "resumed" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


_ENDING = """
import re, sys, torch, torch.distributed as td
from sip_core.train.distributed import Dist
td.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
def hang():  # a teardown that never returns, in C code that holds the GIL, as a hung C++ destructor can
    print("teardown", flush=True)
    re.match(r"(a+)+$", "a" * 64 + "!")
class Reducer:  # stands for the command's objects (DDP's reducer, the groups), destroyed when it returns
    def __del__(self):
        hang()
td.destroy_process_group = hang
def command():
    reducer, dist = Reducer(), Dist(rank=0, world=2)
    if sys.argv[1] == "finish":
        return dist.finish(3)
    dist.abandon(teardown_s=1)
sys.exit(command())
"""


@pytest.mark.parametrize("how", ["finish", "abandon"])
def test_no_teardown_can_keep_a_rank_alive(how):
    """A rank whose outputs are written ends at once with its command's status, tearing nothing down (teardowns
    now and then hang: pytorch#75097; CI, sessions 11, 13 and 26). One leaving on an error does tear down, and
    a watchdog that needs no GIL ends it, with status 1 and every stack printed, if that hangs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GLOO_SOCKET_IFNAME": "lo"}
    done = subprocess.run([sys.executable, "-c", _ENDING, how], capture_output=True, text=True, timeout=120, env=env)
    if how == "finish":
        assert done.returncode == 3 and done.stdout == "", done.stderr[-2000:]
    else:
        assert done.returncode == 1 and done.stdout.splitlines() == ["teardown"], done.stderr[-2000:]
        assert "Timeout (0:00:01)!" in done.stderr and "in hang" in done.stderr  # the stack of the hang
