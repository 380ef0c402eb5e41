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


def train_steps(kind: str, model, data: DeviceSplit, steps: int, lr: float, precision: str, seed: int, device,
                clip: float = 0.0, warmup: int = 0, trace: dict | None = None):
    """N optimiser steps; returns (seconds, per-step training losses). ``clip`` > 0 clips the global grad
    norm, ``warmup`` > 0 ramps the LR linearly; with ``trace`` (a dict, filled in) every step's grad norm is
    recorded and training stops at the first non-finite loss or gradient, saying where it arose."""
    if kind == "ours":
        autocast = runtime.set_precision(precision, device)
        opt = build_optimizer([{"name": "all", "params": list(model.parameters()), "lr": lr}], device)
        forward = model
    else:
        autocast = runtime.set_precision("fp32", device)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        forward = ReferenceStyleModel(model)
    ramp = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup)) if warmup > 0 else None
    model.train()
    torch.manual_seed(seed)  # dropout masks
    losses = []
    start = time.monotonic()

    def batch_of(idx):
        return data.batch(idx) if kind == "ours" else reference_batch(data, idx)

    for step, micro in zip(range(steps), _plans(kind, len(data), seed, data)):
        rng = runtime.rng_state() if trace is not None else None
        total = 0.0
        for idx in micro:
            with autocast():
                loss = forward(**batch_of(idx)).loss
            loss.backward()  # the original sums the accumulated micro-batch losses
            total += loss.detach()
        if trace is not None:  # measured before clipping: a NaN norm would make clipping spread NaN everywhere
            norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
            trace.setdefault("grad_norms", []).append(round(float(norm), 4))
            if not (torch.isfinite(total) and torch.isfinite(norm)):
                trace.update(first_nonfinite_step=step, loss=float(total) / len(micro), grad_norm=float(norm),
                             **locate_nonfinite(forward, micro, batch_of, autocast, model, rng))
                break
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if ramp is not None:
            ramp.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(total) / len(micro))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.monotonic() - start, losses


def locate_nonfinite(forward, micro, batch_of, autocast, model, rng) -> dict:
    """Where a non-finite gradient is born: the step is replayed (same batch, same dropout masks from ``rng``)
    (1) with forward hooks: the first module whose output is not finite, if the forward already fails;
    (2) with gradient hooks on every leaf module's output: the last module, in forward order, whose output
    gradient is not finite (the NaN arose in the backward of what follows it);
    (3) under autograd anomaly detection: the backward function that returned it, and the forward line."""
    import warnings

    bad_grads = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    model.zero_grad(set_to_none=True)
    leaves = [(n, m) for n, m in model.named_modules() if next(m.children(), None) is None]
    forward_bad, order, grad_ok, handles = [], [], {}, []

    def hook(name, output):
        t = output[0] if isinstance(output, (tuple, list)) else output
        if not (torch.is_tensor(t) and t.is_floating_point()):
            return
        if not torch.isfinite(t).all():
            forward_bad.append(name)
        if t.requires_grad:
            order.append(name)
            t.register_hook(lambda g, name=name: grad_ok.__setitem__(name, bool(torch.isfinite(g).all())))

    def replay():
        runtime.set_rng_state(rng)
        for idx in micro:
            with autocast():
                loss = forward(**batch_of(idx)).loss
            loss.backward()
        model.zero_grad(set_to_none=True)

    for name, module in leaves:
        handles.append(module.register_forward_hook(lambda m, i, o, name=name: hook(name, o)))
    try:
        replay()  # (1) and (2): the hooks see every output and its gradient
    finally:
        for h in handles:
            h.remove()
    anomaly = None
    with warnings.catch_warnings(record=True) as caught, torch.autograd.detect_anomaly(check_nan=True):
        warnings.simplefilter("always")
        try:
            replay()
        except RuntimeError as err:
            stack = [str(w.message) for w in caught if "Traceback of forward call" in str(w.message)]
            frames = [line.strip() for line in (stack[-1].splitlines() if stack else []) if line.strip()]
            anomaly = {"error": str(err).splitlines()[0], "forward_call": frames[-12:]}
    model.zero_grad(set_to_none=True)
    bad_outputs = [n for n in order if grad_ok.get(n) is False]
    last_bad = bad_outputs[-1] if bad_outputs else None
    after = order[order.index(last_bad) + 1:order.index(last_bad) + 4] if last_bad else []
    return {"first_nonfinite_forward_module": forward_bad[0] if forward_bad else None,
            "last_module_with_nonfinite_output_grad": last_bad, "modules_after_it": after,
            "n_modules_with_nonfinite_output_grad": len(bad_outputs), "anomaly": anomaly,
            "nonfinite_grads": bad_grads[:8], "n_nonfinite_grads": len(bad_grads)}


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
    p.add_argument("--only-ours", action="store_true", help="run our loop only (diagnosis)")
    p.add_argument("--clip", type=float, default=0.0, help="our loop: clip the global grad norm (0: off, as the paper)")
    p.add_argument("--warmup", type=int, default=0, help="our loop: linear LR warm-up steps (0: none, as the paper)")
    p.add_argument("--trace", action="store_true",
                   help="our loop: record grad norms, stop at the first non-finite loss/gradient and say where")
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

    runs = [("ours", "ours", args.seed)] + ([] if args.only_ours else [("reference", "reference", args.seed)])
    if not (args.no_control or args.only_ours):
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
        ours = kind == "ours"
        trace = {} if ours and args.trace else None
        seconds, losses = train_steps(kind, model, train, args.steps, args.lr, args.precision, seed, device,
                                      clip=args.clip if ours else 0.0, warmup=args.warmup if ours else 0, trace=trace)
        out[name] = {"seed": seed, "seconds": round(seconds, 2),
                     "heldout_loss": round(heldout_loss(kind, model, evaluation, device), 4),
                     "train_loss_last_10_steps": round(float(np.mean(losses[-10:])), 4)}
        if ours:
            out[name].update(clip=args.clip, warmup=args.warmup)
        if trace is not None:
            norms = trace.pop("grad_norms")
            out[name]["trace"] = {**trace, "steps_run": len(norms), "grad_norm_max": max(norms),
                                  "grad_norm_first_5": norms[:5], "grad_norm_last_5": norms[-5:],
                                  "grad_norm_every_25": norms[::25], "loss_every_25": [round(x, 3) for x in losses[::25]]}
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.only_ours:
        print(json.dumps(out, indent=2))
        return
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
