"""How fast the GPUs of one host all-reduce a gradient-sized buffer, and through which NCCL transport (issue 8:
what the 2-GPU pre-training step pays for its all-reduce). Run on a multi-GPU host:
    NCCL_DEBUG=INFO torchrun --standalone --nproc-per-node 2 experiments/allreduce_bench.py 2> nccl.txt
    grep -E " via |Connected" nccl.txt   # P2P/CUMEM or P2P/IPC: NVLink or PCIe peer access; SHM: through host memory
The gpu shape's 18M parameters are 72 MB of fp32 gradients (36 MB in bf16, --ddp-grads bf16). On CPU (gloo) it
runs too, for a dry run: torchrun --standalone --nproc-per-node 2 experiments/allreduce_bench.py --device cpu
"""
from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist

# never NVLink multicast on the lent hosts (KINDS.md), even when started without ddp_bench.sh's environment
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
for name, value in NO_MULTICAST.items():
    os.environ.setdefault(name, value)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--sizes-mb", default="1,4,25,36,72")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if a.device == "cuda" else "gloo")
    device = torch.device(a.device, int(os.environ["LOCAL_RANK"])) if a.device == "cuda" else torch.device("cpu")

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    for dtype in (torch.float32, torch.bfloat16):
        for mb in (float(s) for s in a.sizes_mb.split(",")):
            n = int(mb * 2**20 / torch.tensor([], dtype=dtype).element_size())
            x = torch.ones(n, dtype=dtype, device=device)
            for _ in range(3):  # warm-up: NCCL's connections are set up on first use
                dist.all_reduce(x)
            sync()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                dist.all_reduce(x)
            sync()
            seconds = (time.perf_counter() - t0) / a.iters
            if rank == 0:  # bus bandwidth as nccl-tests define it: bytes x 2(n-1)/n per second
                bus = mb * 2**20 * 2 * (world - 1) / world / seconds / 1e9
                print(f"{str(dtype).removeprefix('torch.'):>8} {mb:6.1f} MB: {seconds * 1e3:7.2f} ms, "
                      f"bus bandwidth {bus:6.1f} GB/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
