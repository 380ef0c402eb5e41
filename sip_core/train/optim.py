"""Optimiser and LR schedule: Adam(W) with named parameter groups; constant/linear/cosine with warmup."""
from __future__ import annotations

import math

import torch

from sip_core.errors import SipError

SCHEDULES = ("constant", "linear", "cosine")


def build_optimizer(groups: list[dict], device: torch.device, weight_decay: float = 0.0,
                    betas=(0.9, 0.999), eps: float = 1e-8) -> torch.optim.Optimizer:
    """AdamW over ``groups`` ([{'name', 'params', 'lr'}]); weight decay 0 is the original's plain Adam.

    Fused on CUDA (one kernel for all parameters); the for-each implementation elsewhere.
    """
    groups = [g for g in groups if g["params"]]
    kwargs = dict(betas=betas, eps=eps, weight_decay=weight_decay)
    if device.type == "cuda":
        kwargs["fused"] = True
    else:
        kwargs["foreach"] = True
    return torch.optim.AdamW(groups, **kwargs)


def build_scheduler(optimizer, schedule: str, warmup_steps: int, total_steps: int):
    if schedule not in SCHEDULES:
        raise SipError(f"--schedule must be one of {SCHEDULES}, not {schedule!r}")

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant":
            return 1.0
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
