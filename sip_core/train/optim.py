"""Optimiser and LR schedule: Adam(W) with named parameter groups (SparseAdam for sparse-gradient ones);
constant/linear/cosine/wsd with warmup; gradient clipping that also takes sparse gradients."""
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

    Fused on CUDA (one kernel for all parameters); the for-each implementation elsewhere. Groups marked
    ``"sparse": True`` (parameters with sparse gradients: the TE task table) get SparseAdam instead, lazy
    Adam that touches only the rows with a gradient (docs/DEVIATIONS.md), and both optimisers are returned
    as one ``SplitOptimizer``.
    """
    groups = [g for g in groups if g["params"]]
    dense = [{k: v for k, v in g.items() if k != "sparse"} for g in groups if not g.get("sparse")]
    sparse = [{k: v for k, v in g.items() if k != "sparse"} for g in groups if g.get("sparse")]
    kwargs = dict(betas=betas, eps=eps, weight_decay=weight_decay)
    if device.type == "cuda":
        kwargs["fused"] = True
    else:
        kwargs["foreach"] = True
    adamw = torch.optim.AdamW(dense, **kwargs)
    if not sparse:
        return adamw
    if weight_decay:
        raise SipError(f"weight decay {weight_decay} is not supported for the TE task table: it is trained by "
                       "SparseAdam, which has none (use --weight-decay 0)")
    return SplitOptimizer(dense=adamw, sparse=torch.optim.SparseAdam(sparse, betas=betas, eps=eps))


class SplitOptimizer(torch.optim.Optimizer):
    """Several optimisers stepped, zeroed, saved and loaded as one (AdamW for the body, SparseAdam for the
    TE task table).

    ``param_groups`` are the parts' own groups, read live (``load_state_dict`` replaces a part's group
    dicts), so an LR scheduler over this object sets the LR each part uses. Optimizer.__init__ is not
    called: the parts own parameters and state; the base class is there for LRScheduler's type check.
    """

    def __init__(self, **parts: torch.optim.Optimizer):
        self.parts = parts
        self.defaults = {}

    @property
    def param_groups(self) -> list[dict]:
        return [group for part in self.parts.values() for group in part.param_groups]

    @property
    def state(self) -> dict:
        return {p: s for part in self.parts.values() for p, s in part.state.items()}

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for part in self.parts.values():
            part.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for part in self.parts.values():
            part.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return {"parts": {name: part.state_dict() for name, part in self.parts.items()}}

    def load_state_dict(self, state_dict: dict) -> None:
        saved = state_dict.get("parts", {})
        if saved.keys() != self.parts.keys():
            raise SipError(f"the saved optimiser state has parts {sorted(saved)}, this optimiser {sorted(self.parts)}")
        for name, part in self.parts.items():
            part.load_state_dict(saved[name])


def clip_grad_norm_(parameters, max_norm: float) -> torch.Tensor:
    """torch's ``clip_grad_norm_`` (2-norm over all gradients), also for sparse gradients, which torch's
    norm kernels reject: the total norm includes them, so clipping is what it would be with the TE table's
    gradient dense."""
    params = [p for p in parameters if p.grad is not None]
    sparse = [p for p in params if p.grad.is_sparse]
    if not sparse:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    dense = [p for p in params if not p.grad.is_sparse]
    for p in sparse:
        p.grad = p.grad.coalesce()  # a row repeated in the batch adds up: only then is the norm the values' norm
    norms = [torch.nn.utils.get_total_norm([p.grad for p in dense])] + [p.grad.values().norm() for p in sparse]
    total = torch.linalg.vector_norm(torch.stack(norms))
    torch.nn.utils.clip_grads_with_norm_(dense, max_norm, total)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)  # torch's coefficient
    for p in sparse:
        p.grad.mul_(coef)
    return total


def build_scheduler(optimizer, schedule: str, warmup_steps: int, total_steps: int, cooldown_steps: int = 0,
                    decay_later: bool = False):
    """LambdaLR of ``schedule``. For wsd, ``wsd_decay(scheduler)`` ({"start", "steps"}) says where the decay
    lies; with ``decay_later`` it is left open (no decay) until the caller sets it, e.g. once a time budget
    says how many steps remain (``sip pretrain --cooldown-minutes``)."""
    factor = lr_factor(schedule, warmup_steps, total_steps, cooldown_steps, decay_later)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def lr_factor(schedule: str, warmup_steps: int, total_steps: int, cooldown_steps: int = 0, decay_later: bool = False):
    """The LR multiplier of ``build_scheduler`` as a function of the step (``factor.decay`` is the wsd decay)."""
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
    return factor


def decay_factor(schedule: str, step: int, total_steps: int) -> float:
    """LR multiplier at ``step`` of ``total_steps`` for a warmup-free constant/linear/cosine decay to 0
    (fine-tuning's schedule; pre-training has ``build_scheduler``)."""
    if schedule == "constant":
        return 1.0
    progress = min(1.0, step / max(1, total_steps))
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return _cosine(progress)
    raise SipError(f"--schedule must be one of constant, linear, cosine, not {schedule!r}")


def _cosine(progress: float) -> float:
    """Cosine decay factor from 1 (progress 0) to 0 (progress >= 1)."""
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def wsd_decay(scheduler) -> dict:
    """The live {"start", "steps"} decay plan of a scheduler from ``build_scheduler`` (mutable)."""
    return scheduler.lr_lambdas[0].decay
