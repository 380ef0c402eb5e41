"""Speed benchmark: our pre-training loop vs a reference-style loop, same process, same data and init.

    python -m sip_core.train.bench --data data/gpu/pretrain/d4 --shape byt5-small --seconds 120
    python -m sip_core.train.bench --data POOL --shape tiny --seconds 10 --device cpu     # smoke test

Reference-style (REFERENCE §4.8/§9.2): fp32, micro-batch 10 × 3 accumulation (summed losses), random
batches padded to the batch maximum with the prefix padding attended (no packing), no bucketing, Adam.
Ours: the ``sip pretrain`` path (bucketed, packed, fused AdamW, bf16 autocast by default, one step per batch).
Prints one JSON object: examples/s of each, speed-up, the training loss of each after the same number of
examples, projected hours for 4M example-passes, and MFU on real (non-padding) tokens.
"""
from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch

from sip_core.model.fused import fuse_elementwise
from sip_core.model.config import BYT5_SMALL_SHAPE, SIPConfig, t5_kwargs
from sip_core.model.sip_model import SIPForConditionalGeneration
from sip_core.train import runtime
from sip_core.train.batching import DeviceSplit, bucketed_batches, plan_on_device, random_batches
from sip_core.train.data import load_pool
from sip_core.train.optim import build_optimizer

SHAPES = {"byt5-small": BYT5_SMALL_SHAPE,
          "tiny": dict(d_model=64, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=2, d_kv=32),
          "small": dict(d_model=256, d_ff=1024, num_layers=4, num_decoder_layers=4, num_heads=4, d_kv=64)}
PEAK_TFLOPS_BF16 = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def flops_per_example(model, enc_tokens: float, dec_tokens: float) -> float:
    """≈ 6 × parameters × tokens (training), encoder and decoder separately; embeddings excluded."""
    t5 = model.t5
    enc = sum(p.numel() for p in t5.encoder.parameters()) - t5.shared.weight.numel()
    dec = sum(p.numel() for p in t5.decoder.parameters()) - t5.shared.weight.numel() + t5.lm_head.weight.numel()
    prefix = sum(p.numel() for p in model.fst_encoder.parameters()) if model.fst_encoder is not None else 0
    return 6.0 * ((enc + prefix) * enc_tokens + dec * dec_tokens)


def reference_batch(data: DeviceSplit, idx: np.ndarray) -> dict:
    """The original's layout: [all transitions padded to batch max (attended) | bytes | byte padding]."""
    batch = data.batch(idx)
    fst = batch.pop("fst")
    batch.pop("encoder_width", None)
    return {**batch, "fst": fst}


class ReferenceStyleModel(torch.nn.Module):
    """Wraps our model to reproduce the original's unpacked, unmasked prefix."""

    def __init__(self, model):
        super().__init__()
        self.model = fuse_elementwise(model, fused=False)  # transformers' own T5 modules, as the original ran

    def forward(self, input_ids, attention_mask, labels, fst):
        prefix, _ = self.model.fst_encoder(fst, self.model.t5.shared)
        embeds = torch.cat([prefix, self.model.t5.shared(input_ids)], 1)
        mask = torch.cat([torch.ones(fst.shape[:2], dtype=attention_mask.dtype, device=fst.device), attention_mask], 1)
        return self.model.t5(inputs_embeds=embeds, attention_mask=mask, labels=labels)


def run_loop(kind, model, data, args, device, seconds, loss_at_examples=None):
    if kind == "ours":
        autocast = runtime.set_precision(args.precision, device)
        opt = build_optimizer([{"name": "all", "params": list(model.parameters()), "lr": args.lr}], device)
        micro, accum = args.batch_size, 1
        forward = torch.compile(model, dynamic=True) if args.compile else model
    else:
        autocast = runtime.set_precision("fp32", device)
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        micro, accum = 10, 3
        forward = ReferenceStyleModel(model)
    model.train()
    examples = real_enc = real_dec = 0
    losses = []  # (examples so far, loss)
    epoch = 0
    _sync(device)
    start = time.monotonic()
    done = False
    warm_until = args.warmup_steps
    steps = 0
    while not done:
        if kind == "ours":
            plan = bucketed_batches(data.encoder_lengths, data.label_lengths, micro, args.seed, epoch)
        else:
            plan = random_batches(len(data), micro, args.seed, epoch)
        plan_dev = plan_on_device(plan, device)
        for i, idx in enumerate(plan):
            if kind == "ours":
                batch = data.batch(idx, idx_t=plan_dev[i])
            else:
                batch = reference_batch(data, idx)
            with autocast():
                loss = forward(**batch).loss
            loss.backward()  # the original sums accumulated losses (REFERENCE §8.2-8)
            losses.append((examples + len(idx), loss.detach()))
            examples += len(idx)
            real_enc += int(data.encoder_lengths[idx].sum())
            real_dec += int(data.label_lengths[idx].sum())
            if (i + 1) % accum == 0:
                opt.step()
                opt.zero_grad(set_to_none=True)
                steps += 1
                if steps == warm_until:  # exclude start-up (allocator, autotuning, compile) from timing
                    _sync(device)
                    start = time.monotonic()
                    examples_at_start, enc_at_start, dec_at_start = examples, real_enc, real_dec
            if steps >= warm_until and time.monotonic() - start >= seconds:
                done = True
                break
            if loss_at_examples is not None and examples >= loss_at_examples and time.monotonic() - start >= seconds:
                done = True
                break
        epoch += 1
    _sync(device)
    wall = time.monotonic() - start
    if warm_until == 0:
        examples_at_start = enc_at_start = dec_at_start = 0
    n = examples - examples_at_start
    return {"examples": n, "seconds": wall, "examples_per_second": n / wall,
            "enc_tokens": real_enc - enc_at_start, "dec_tokens": real_dec - dec_at_start,
            "loss_curve": [(e, float(l)) for e, l in losses]}


def profile_steps(model, data, args, device) -> dict:
    """Profile ``--profile-steps`` steps of our loop: wall vs summed GPU kernel time per step (host-bound when
    the GPU is busy for a small part of the wall), and the kernels that take the most GPU time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    autocast = runtime.set_precision(args.precision, device)
    opt = build_optimizer([{"name": "all", "params": list(model.parameters()), "lr": args.lr}], device)
    plan = bucketed_batches(data.encoder_lengths, data.label_lengths, args.batch_size, args.seed, 99)[:args.profile_steps]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    _sync(device)
    with profile(activities=activities) as prof:
        start = time.monotonic()
        for idx in plan:
            with autocast():
                loss = model(**data.batch(idx)).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        _sync(device)
        wall = time.monotonic() - start
    # device-side events only (kernels, memcpy/memset); CPU ops also carry the time of the kernels they launch
    kernels = sorted(((e.key, e.self_device_time_total, e.count) for e in prof.key_averages()
                      if e.device_type == DeviceType.CUDA), key=lambda t: -t[1])
    gpu_us = sum(t for _, t, _ in kernels)
    steps = max(1, len(plan))
    return {"steps": steps, "wall_ms_per_step": round(1e3 * wall / steps, 2),
            "gpu_kernel_ms_per_step": round(gpu_us / 1e3 / steps, 2),
            "kernel_launches_per_step": round(sum(c for _, _, c in kernels) / steps, 1),
            "top_kernels_ms_per_step": [(k[:90], round(t / 1e3 / steps, 3), c // steps) for k, t, c in kernels[:15]]}


def loss_near(curve, examples, window=300):
    vals = [l for e, l in curve if examples - window < e <= examples]
    return float(np.mean(vals)) if vals else float("nan")


def setup(args):
    """(device, pool, training split) for a benchmark's common options (--device --threads --seed --data
    --max-train)."""
    device = runtime.pick_device(args.device)
    runtime.configure_threads(device, args.threads)
    runtime.seed_everything(args.seed)
    pool = load_pool(args.data, with_fsts=True, num_states=16)
    split = pool.splits["train"]
    if args.max_train and len(split) > args.max_train:
        split = split.subset(np.arange(args.max_train))
    return device, pool, split


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a d4 pool directory")
    p.add_argument("--shape", choices=sorted(SHAPES), default="byt5-small")
    p.add_argument("--seconds", type=float, default=120.0, help="timed wall time per loop")
    p.add_argument("--batch-size", type=int, default=256, help="our loop's batch size")
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="bf16")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--max-train", type=int, default=0, help="use only the first N training examples (0: all)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peak-tflops", type=float, default=None, help="device peak for MFU (default: by GPU name)")
    p.add_argument("--loops", default="ours,reference")
    p.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa", help="T5's attention implementation")
    p.add_argument("--unfused", action="store_true", help="our loop without the fused GELU/RMS-norm kernels")
    p.add_argument("--profile-steps", type=int, default=0,
                   help="after timing, profile N steps of our loop: GPU-busy vs wall time and the top kernels")
    args = p.parse_args(argv)

    device, pool, split = setup(args)
    data = DeviceSplit(split, device, pool.fsts, use_fsts=True)
    shape = SHAPES[args.shape]
    base = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(**shape), prefix_mode="fst"))
    init_state = copy.deepcopy(base.state_dict())
    results = {}
    for kind in args.loops.split(","):
        model = SIPForConditionalGeneration(base.config)
        model.load_state_dict(init_state)
        model.t5.set_attn_implementation(args.attn)
        if args.unfused:
            fuse_elementwise(model, fused=False)
        model.to(device)
        torch.manual_seed(args.seed)
        results[kind] = run_loop(kind, model, data, args, device, args.seconds)
        if kind == "ours" and args.profile_steps:
            results["profile"] = profile_steps(model, data, args, device)
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()

    name = runtime.device_name(device)
    peak = args.peak_tflops
    if peak is None:
        peak = next((v for k, v in PEAK_TFLOPS_BF16.items() if k in name), None)
    out = {"device": name, "shape": args.shape, "n_params": runtime.count_parameters(base),
           "batch_size": args.batch_size, "precision": args.precision, "compile": args.compile,
           "seconds_per_loop": args.seconds, "train_examples": len(split)}
    if "profile" in results:
        out["profile"] = results.pop("profile")
    common = min(r["examples"] for r in results.values()) if results else 0
    for kind, r in results.items():
        per_ex = flops_per_example(base, r["enc_tokens"] / max(1, r["examples"]), r["dec_tokens"] / max(1, r["examples"]))
        achieved = per_ex * r["examples_per_second"] / 1e12
        out[kind] = {"examples_per_second": round(r["examples_per_second"], 1), "examples": r["examples"],
                     "hours_for_4M_example_passes": round(4e6 / r["examples_per_second"] / 3600, 3),
                     "achieved_tflops_real_tokens": round(achieved, 2),
                     "mfu": round(achieved / peak, 4) if peak else None,
                     f"loss_at_{common}_examples": round(loss_near(r["loss_curve"], common), 4)}
    if "ours" in results and "reference" in results:
        out["speedup"] = round(results["ours"]["examples_per_second"] / results["reference"]["examples_per_second"], 2)
        out["loss_difference_at_common_examples"] = round(
            loss_near(results["ours"]["loss_curve"], common) - loss_near(results["reference"]["loss_curve"], common), 4)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
