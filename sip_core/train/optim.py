"""Optimiser and LR schedule: Adam(W) with named parameter groups; constant/linear/cosine with warmup."""
from __future__ import annotations

import math

import torch

from sip_core.errors import SipError

# wsd: warmup, stable (constant), then a cosine decay to 0 over the last `cooldown` steps ("warmup-stable-
# decay"); a constant-LR run can be resumed into its decay by raising --max-steps.
SCHEDULES = ("constant", "linear", "cosine", "wsd")


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


def build_scheduler(optimizer, schedule: str, warmup_steps: int, total_steps: int, cooldown_steps: int = 0,
                    decay_later: bool = False):
    """LambdaLR of ``schedule``. For wsd, ``wsd_decay(scheduler)`` ({"start", "steps"}) says where the decay
    lies; with ``decay_later`` it is left open (no decay) until the caller sets it, e.g. once a time budget
    says how many steps remain (``sip pretrain --cooldown-minutes``)."""
    if schedule not in SCHEDULES:
        raise SipError(f"--schedule must be one of {SCHEDULES}, not {schedule!r}")
    if schedule == "wsd" and not decay_later and not 0 < cooldown_steps <= total_steps:
        raise SipError(f"--schedule wsd needs 0 < --cooldown-steps <= total steps ({total_steps}), not {cooldown_steps}")
    decay = {"start": None if decay_later else total_steps - cooldown_steps, "steps": cooldown_steps}

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant":
            return 1.0
        if schedule == "wsd":
            if decay["start"] is None or step < decay["start"]:
                return 1.0
            return _cosine((step - decay["start"]) / max(1, decay["steps"]))
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        return _cosine(progress)

    # The plan hangs on the function, not the scheduler: LambdaLR.load_state_dict replaces the scheduler's
    # attributes with saved copies (which would cut the link to `factor`), but never touches a plain function.
    factor.decay = decay
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _cosine(progress: float) -> float:
    """Cosine decay factor from 1 (progress 0) to 0 (progress >= 1)."""
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def wsd_decay(scheduler) -> dict:
    """The live {"start", "steps"} decay plan of a scheduler from ``build_scheduler`` (mutable)."""
    return scheduler.lr_lambdas[0].decay
