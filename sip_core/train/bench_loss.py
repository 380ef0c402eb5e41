"""Loss-ε benchmark (issue 3): does our fast loop learn what the reference-style fp32 loop learns?

    python -m sip_core.train.bench_loss --data data/gpu/pretrain/d4 --shape byt5-small --steps 300
    python -m sip_core.train.bench_loss --data POOL --shape tiny --steps 20 --device cpu   # smoke test

Both loops start from the same weights and take the same number N of optimiser steps of the same 30
examples per step (the paper's 10 × 3) at the same LR; only the loop differs:
  * reference: fp32, micro-batch 10 × 3 accumulation (summed losses), random batches padded to the batch
    maximum with padding transitions attended, torch Adam (``bench.py``'s reference-style loop);
  * ours: the ``sip pretrain`` path, one batch of 30, length-bucketed, packed prefix, fused AdamW, bf16
    autocast by default.
A third run, the reference loop with another data-order seed, measures how far two equally valid fp32
runs land apart after N steps. Each model is then scored in fp32 on the same held-out examples (dev: unseen
FSTs), each in the layout it was trained in. The claim checked: |loss_ours - loss_ref| <= ε, with
ε = --epsilon × loss_ref (default 5%), printed next to the seed-to-seed difference. One JSON object out.
"""
from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch

from sip_core.model.config import SIPConfig, t5_kwargs
from sip_core.model.sip_model import SIPForConditionalGeneration
from sip_core.train import runtime
from sip_core.train.batching import DeviceSplit, bucketed_batches, random_batches
from sip_core.train import bench
from sip_core.train.bench import SHAPES, ReferenceStyleModel, reference_batch
from sip_core.train.optim import build_optimizer

STEP_EXAMPLES = 30  # the original's effective batch: 10 × 3
REF_MICRO = 10


def _plans(kind: str, n: int, seed: int, data: DeviceSplit):
    """Endless (step, micro-batches of that step) for each loop: 3 × 10 random examples, or one bucketed 30."""
    epoch = 0
    while True:
        if kind == "ours":
            for idx in bucketed_batches(data.encoder_lengths, data.label_lengths, STEP_EXAMPLES, seed, epoch):
                yield [idx]
        else:
            plan = random_batches(n, STEP_EXAMPLES, seed, epoch)
            for idx in plan:
                yield [idx[i:i + REF_MICRO] for i in range(0, len(idx), REF_MICRO)]
        epoch += 1


def train_steps(kind: str, model, data: DeviceSplit, steps: int, lr: float, precision: str, seed: int, device):
    """N optimiser steps; returns (seconds, per-step training losses)."""
    if kind == "ours":
        autocast = runtime.set_precision(precision, device)
        opt = build_optimizer([{"name": "all", "params": list(model.parameters()), "lr": lr}], device)
        forward = model
    else:
        autocast = runtime.set_precision("fp32", device)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        forward = ReferenceStyleModel(model)
    model.train()
    torch.manual_seed(seed)  # dropout masks
    losses = []
    start = time.monotonic()
    for step, micro in zip(range(steps), _plans(kind, len(data), seed, data)):
        total = 0.0
        for idx in micro:
            batch = data.batch(idx) if kind == "ours" else reference_batch(data, idx)
            with autocast():
                loss = forward(**batch).loss
            loss.backward()  # the original sums the accumulated micro-batch losses
            total += loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(total) / len(micro))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.monotonic() - start, losses


@torch.no_grad()
def heldout_loss(kind: str, model, data: DeviceSplit, device, batch_size: int = 10) -> float:
    """Token-mean cross-entropy in fp32 over every example of ``data``, in the layout the loop trained in
    (fixed sequential batches, so the reference layout's batch-dependence is the same for every model)."""
    runtime.set_precision("fp32", device)
    model.eval()
    forward = model if kind == "ours" else ReferenceStyleModel(model)
    total, count = 0.0, 0
    for start in range(0, len(data), batch_size):
        idx = np.arange(start, min(start + batch_size, len(data)))
        batch = data.batch(idx) if kind == "ours" else reference_batch(data, idx)
        logits = forward(**batch).logits.float()
        labels = batch["labels"]
        total += torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100,
                                                   reduction="sum").item()
        count += int((labels != -100).sum())
    return total / max(1, count)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a d4 pool directory (train + dev splits)")
    p.add_argument("--shape", choices=sorted(SHAPES), default="byt5-small")
    p.add_argument("--steps", type=int, default=300, help="optimiser steps N of each loop")
    p.add_argument("--lr", type=float, default=5e-4, help="the paper's pre-training LR")
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="bf16", help="our loop's precision")
    p.add_argument("--epsilon", type=float, default=0.05,
                   help="allowed |ours - reference| as a fraction of the reference loss")
    p.add_argument("--eval-examples", type=int, default=500, help="held-out examples scored (dev, else train)")
    p.add_argument("--max-train", type=int, default=0, help="use only the first N training examples (0: all)")
    p.add_argument("--no-control", action="store_true", help="skip the second-seed reference run")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    device, pool, split = bench.setup(args)
    held_name = "dev" if "dev" in pool.splits else "train"
    held = pool.splits[held_name]
    held = held.subset(np.arange(min(args.eval_examples, len(held))))
    train = DeviceSplit(split, device, pool.fsts, use_fsts=True)
    evaluation = DeviceSplit(held, device, pool.fsts, use_fsts=True)
    base = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(**SHAPES[args.shape]), prefix_mode="fst"))
    init_state = copy.deepcopy(base.state_dict())

    runs = [("ours", "ours", args.seed), ("reference", "reference", args.seed)]
    if not args.no_control:
        runs.append(("reference_seed2", "reference", args.seed + 1))
    out = {"device": runtime.device_name(device), "shape": args.shape, "n_params": runtime.count_parameters(base),
           "steps": args.steps, "examples_per_step": STEP_EXAMPLES, "lr": args.lr, "precision_ours": args.precision,
           "heldout": f"{held_name} ({len(held)} examples)", "initial_heldout_loss": None}
    for name, kind, seed in runs:
        model = SIPForConditionalGeneration(base.config)
        model.load_state_dict(init_state)
        model.to(device)
        if out["initial_heldout_loss"] is None:
            out["initial_heldout_loss"] = round(heldout_loss("ours", model, evaluation, device), 4)
        seconds, losses = train_steps(kind, model, train, args.steps, args.lr, args.precision, seed, device)
        out[name] = {"seed": seed, "seconds": round(seconds, 2),
                     "heldout_loss": round(heldout_loss(kind, model, evaluation, device), 4),
                     "train_loss_last_10_steps": round(float(np.mean(losses[-10:])), 4)}
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    ref = out["reference"]["heldout_loss"]
    diff = out["ours"]["heldout_loss"] - ref
    out["epsilon"] = round(args.epsilon * ref, 4)
    out["loss_difference_ours_minus_reference"] = round(diff, 4)
    if "reference_seed2" in out:
        out["loss_difference_between_reference_seeds"] = round(out["reference_seed2"]["heldout_loss"] - ref, 4)
    out["within_epsilon"] = bool(abs(diff) <= args.epsilon * ref)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
