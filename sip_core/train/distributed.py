"""Data parallelism over torchrun: one process per GPU (or CPU process with gloo), the one-GPU code path.

``torchrun --nproc_per_node N -m sip_core.cli pretrain|finetune ...`` (or ``sip pretrain|finetune --nproc N``,
which starts that itself) sets RANK/WORLD_SIZE/LOCAL_RANK; without them everything here is a no-op and
training is exactly the single-process loop.

* ``--batch-size`` stays the *global* batch: every rank builds the same batch plan (it depends only on
  seed and epoch) and takes every N-th example of each batch (batches are length-sorted, so the shards
  carry similar token counts). The same command therefore trains the same model on 1 or N devices.
* Each rank's loss is re-weighted by its share of the batch's label tokens, so DDP's gradient mean equals
  the gradient of the token mean over the whole global batch, as one process computes it.
* Sparse gradients (the TE task table's) stay out of DDP, whose all-reduce would hand them to NCCL, which
  cannot sum sparse tensors; ``mean_sparse_grads_`` gathers every rank's rows and averages them instead.
* Rank 0 alone evaluates, logs, writes checkpoints and outputs; every rank resumes from them.
"""
from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch

from sip_core.errors import SipError

DDP_GRADS = ("fp32", "bf16")  # the dtype gradients are all-reduced in (--ddp-grads)
# NCCL channels for the gradient all-reduce (--nccl-channels): each channel's kernel holds an SM for as long as the
# all-reduce overlaps the backward pass, mostly waiting for the next bucket. Two H200s over NVLink: 2 channels
# 1.90x one GPU, NCCL's own choice (up to 24) 1.79x, at the gpu shape (docs/BENCHMARKS.md, session 31; on the ci
# pool, whose 2-GPU shares were padded ~20% more than one GPU's batches: the ranking holds, the ratios are low).
NCCL_CHANNELS = 2


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    control: object = None  # a gloo group for CPU-side agreement: no GPU stream sync per step under NCCL

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, idx: np.ndarray, label_lengths: np.ndarray) -> tuple[np.ndarray, float]:
        """This rank's part of global batch ``idx`` and its loss weight (1.0 without DDP).

        weight = world × local label tokens / global label tokens; a rank left without examples (a last
        batch smaller than the world) gets one example at weight 0, since every rank must run backward.
        """
        if not self.enabled:
            return idx, 1.0
        local = idx[self.part(len(idx))]
        if self.rank >= len(idx):
            return local, 0.0
        total = float(label_lengths[idx].sum())
        return local, self.world * float(label_lengths[local].sum()) / max(total, 1.0)

    def part(self, n: int) -> slice:
        """The positions in a global batch of ``n`` examples that this rank trains on (``shard``'s; also to
        slice the batch's indices already on the device, with no host-to-device copy per step)."""
        return slice(self.rank, None, self.world) if self.rank < n else slice(0, 1)

    def wrap(self, model: torch.nn.Module, device: torch.device, grads: str = "fp32",
             bucket_mb: float = 25.0) -> torch.nn.Module:
        """The module to call for training: DDP around ``model`` (which stays the one to save/evaluate).

        ``grads="bf16"`` all-reduces the gradients in bf16 (``_bf16_mean_hook``: half the bytes); ``bucket_mb``
        is DDP's ``bucket_cap_mb``."""
        if grads not in DDP_GRADS:
            raise SipError(f"--ddp-grads must be one of {', '.join(DDP_GRADS)}, not {grads!r}")
        if not bucket_mb > 0:
            raise SipError(f"--ddp-bucket-mb must be positive, not {bucket_mb}")
        if not self.enabled:
            return model
        from torch.nn.parallel import DistributedDataParallel
        ids = [device.index] if device.type == "cuda" else None
        sparse = sparse_gradient_parameters(model)
        if sparse:  # NCCL cannot all-reduce sparse gradients: DDP leaves them to `mean_sparse_grads_`
            DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, list(sparse))
            for p in sparse.values():  # the start-up broadcast DDP does for the parameters it keeps
                torch.distributed.broadcast(p.data, 0)
        # bucket views: gradients live in the all-reduce buckets (no copy in and out each step)
        ddp = DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True, bucket_cap_mb=bucket_mb)
        if grads == "bf16":
            ddp.register_comm_hook(self.world, _bf16_mean_hook)
        return ddp

    def mean_sparse_grads_(self, model: torch.nn.Module) -> None:
        """DDP's gradient mean for the parameters ``wrap`` kept out of DDP (sparse gradients: the TE task
        table). Each rank's rows and values are gathered (padded to the largest count), then summed / world."""
        if not self.enabled:
            return
        for p in sparse_gradient_parameters(model).values():
            grad = p.grad.coalesce()
            rows, values = grad.indices()[0], grad.values()
            counts = [torch.zeros(1, dtype=torch.long, device=rows.device) for _ in range(self.world)]
            torch.distributed.all_gather(counts, torch.tensor([len(rows)], device=rows.device))
            counts = [int(c) for c in counts]
            pad = max(counts) - len(rows)
            all_rows = [rows.new_empty(max(counts)) for _ in counts]
            all_values = [values.new_empty((max(counts), *values.shape[1:])) for _ in counts]
            torch.distributed.all_gather(all_rows, torch.nn.functional.pad(rows, (0, pad)))
            torch.distributed.all_gather(all_values, torch.nn.functional.pad(values, (0, 0, 0, pad)))
            rows = torch.cat([r[:n] for r, n in zip(all_rows, counts)])
            values = torch.cat([v[:n] for v, n in zip(all_values, counts)])
            p.grad = torch.sparse_coo_tensor(rows[None], values / self.world, grad.shape).coalesce()

    def no_sync(self, wrapped: torch.nn.Module, sync: bool):
        """Skip the gradient all-reduce on micro-batches that do not end an accumulation window."""
        if self.enabled and not sync:
            return wrapped.no_sync()
        return contextlib.nullcontext()

    def any(self, flag: bool) -> bool:
        """True on every rank if it is true on any (time limits, time-based checkpoints)."""
        return self.agree(flag)[0]

    def agree(self, *flags: bool) -> tuple[bool, ...]:
        """Each flag true on every rank if true on any, in one all-reduce (time limit, time-based
        checkpoint, time-based decay: wall clocks differ between ranks, their decisions must not)."""
        if not self.enabled:
            return tuple(bool(f) for f in flags)
        t = torch.tensor([1.0 if f else 0.0 for f in flags])
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX, group=self.control)
        return tuple(bool(v > 0) for v in t.tolist())

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """In-place sum over ranks (logged losses and counters)."""
        if self.enabled:
            torch.distributed.all_reduce(tensor)
        return tensor

    def gather(self, obj) -> list:
        """``obj`` of every rank, in rank order (per-rank RNG states for exact resumption)."""
        if not self.enabled:
            return [obj]
        out = [None] * self.world
        torch.distributed.all_gather_object(out, obj, group=self.control)
        return out

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier(group=self.control)

    def finish(self, code: int = 0) -> int:
        """The last call of a torchrun worker's command, once its outputs are written: wait for every rank, then
        end the process at once (``os._exit(code)``; it does not return). Outside torchrun it returns ``code``.

        Nothing is torn down: neither the process group (``destroy_process_group`` now and then never returns,
        pytorch#75097) nor the command's objects (DDP's reducer and the groups die with the process). In CI a
        finished worker, its last line printed, was kept alive until the test's 4-minute limit three times
        (sessions 11, 13, 26); in session 26 its stack stopped at the return of ``pretrain.run``, where those
        objects are destroyed, after the old thread-guarded teardown had passed.
        """
        if not (self.enabled and torch.distributed.is_initialized()):
            return code
        self.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def abandon(self, teardown_s: float = 30.0) -> None:
        """Leave the process group on an error, without waiting for ranks that may never arrive; the error then
        ends the process the ordinary way. A watchdog in C (faulthandler's, which needs no GIL, unlike a Python
        thread: a hung C++ call can hold it) prints every stack and ends the process, status 1, if the
        teardown still runs ``teardown_s`` later."""
        if not (self.enabled and torch.distributed.is_initialized()):
            return
        faulthandler.dump_traceback_later(teardown_s, exit=True)
        torch.distributed.destroy_process_group()


def sparse_gradient_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """{name: weight} of the embeddings with sparse gradients (the TE task table in pre-training)."""
    return {f"{name}.weight" if name else "weight": m.weight for name, m in model.named_modules()
            if isinstance(m, torch.nn.Embedding) and m.sparse}


def setup(device_arg: str = "auto", nccl_channels: int = NCCL_CHANNELS) -> tuple[Dist, str]:
    """Join the torchrun process group if there is one; return it and the device this rank should use.

    GPUs: NCCL, device cuda:LOCAL_RANK. CPU (``--device cpu`` or no CUDA): gloo, for tests and debugging.
    ``nccl_channels`` caps NCCL's channels (0: NCCL's choice); an NCCL_MAX_NCHANNELS in the environment wins.
    """
    check_nccl_channels(nccl_channels)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist(), device_arg
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device_arg in ("auto", "cuda") and torch.cuda.is_available()
    if device_arg.startswith("cuda:"):
        raise SipError("under torchrun give --device cuda or auto (each rank uses cuda:LOCAL_RANK)")
    if device_arg.startswith("cuda") and not torch.cuda.is_available():
        raise SipError(f"--device {device_arg} requested but CUDA is not available")
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise SipError(f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} GPU(s) are visible")
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    else:
        device = "cpu"
    # a rank whose peer died (a kill, a preemption) must end with an error, not wait in a collective forever
    # (an orphaned rank once held a test's pipe open indefinitely); $SIP_DDP_TIMEOUT_S, default 10 min
    timeout = timedelta(seconds=float(os.environ.get("SIP_DDP_TIMEOUT_S") or 600))
    if use_cuda and nccl_channels:
        os.environ.setdefault("NCCL_MAX_NCHANNELS", str(nccl_channels))  # read when NCCL creates a communicator
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=world,
                                             timeout=timeout)
    control = torch.distributed.new_group(backend="gloo", timeout=timeout) if use_cuda else None  # None: default group
    return Dist(rank=rank, world=world, local_rank=local_rank, control=control), device


def check_nccl_channels(n: int) -> None:
    if n < 0:
        raise SipError(f"--nccl-channels must be 0 (NCCL's choice) or positive, not {n}")


def processes(nproc: str | int | None) -> int:
    """--nproc N | auto (every visible GPU; 1 without CUDA)."""
    value = str(nproc if nproc is not None else os.environ.get("SIP_NPROC") or 1).strip()
    if value == "auto":
        return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1
    if not value.isdigit() or int(value) < 1:
        raise SipError(f"--nproc must be a positive number or 'auto', not {value!r}")
    return int(value)


def relaunch(nproc: str | int | None, argv: list[str] | None = None) -> int | None:
    """Run this very command under torchrun with ``nproc`` processes, unless that is 1 or we already are
    a torchrun worker; returns the launcher's exit status, or None to go on in this process. Lets a
    Snakemake/SLURM job use every GPU of its allocation (``SIP_NPROC=auto``) with an unchanged rule."""
    import subprocess
    import sys
    n = processes(nproc)
    if n <= 1 or "WORLD_SIZE" in os.environ:
        return None
    argv = _without_nproc(list(sys.argv[1:] if argv is None else argv))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
           "-m", "sip_core.cli", *argv]
    return subprocess.run(cmd, env={**os.environ, "SIP_NPROC": "1"}).returncode


def _without_nproc(argv: list[str]) -> list[str]:
    """The command minus --nproc (torchrun's own parser would take it for an abbreviated option)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def seed_rank(dist: Dist, seed: int) -> None:
    """Different dropout draws per rank (under DDP only: the one-process stream stays as it was)."""
    if dist.enabled:
        torch.manual_seed(seed * 1_000_003 + dist.rank)


def _bf16_mean_hook(world: int, bucket):  # no return annotation: DDP checks it against a non-string type
    """DDP communication hook: the bucket's mean over ranks, summed in bf16 and written back in the gradients'
    dtype. What torch's ``bf16_compress_hook`` does, which refuses gloo (CPU tests); gloo and NCCL both sum bf16."""
    grads = bucket.buffer()
    low = grads.to(torch.bfloat16).div_(world)
    sent = torch.distributed.all_reduce(low, async_op=True).get_future()

    def write_back(done: torch.futures.Future) -> torch.Tensor:
        grads.copy_(done.value()[0])
        return grads

    return sent.then(write_back)
