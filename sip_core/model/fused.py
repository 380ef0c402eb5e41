"""Fused drop-ins for T5's elementwise hot spots: the same maths in fewer passes over memory.

transformers' T5 computes ``gelu_new`` as eight separate elementwise ops on the d_ff-wide feed-forward
activations and its RMS norm as five; at the ByT5-small shape those passes, not the matrix products, took
most of a bf16 training step on an H100 (``bench --profile-steps``, docs/BENCHMARKS.md). ``F.gelu(approximate=
"tanh")`` is the same function in one kernel, ``F.rms_norm`` the same norm. Neither changes the parameters,
so checkpoints are unaffected.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import NewGELUActivation
from transformers.models.t5.modeling_t5 import T5LayerNorm


class FusedT5LayerNorm(T5LayerNorm):
    """T5LayerNorm through ``F.rms_norm``: statistics in fp32 as T5 does, fp32 out for fp32 weights."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            return super().forward(hidden_states)  # T5's half-precision path casts before the weight
        return F.rms_norm(hidden_states.float(), (hidden_states.shape[-1],), self.weight, self.variance_epsilon)


def fuse_elementwise(module: nn.Module, fused: bool = True) -> nn.Module:
    """Swap T5's tanh-GELU and RMS norms in ``module`` for their fused equivalents, in place; ``fused=False``
    swaps back to transformers' own modules (the benchmark's reference-style loop runs the original's code)."""
    for parent in module.modules():
        for name, child in parent.named_children():
            if fused and isinstance(child, NewGELUActivation):
                setattr(parent, name, nn.GELU(approximate="tanh"))
            elif not fused and isinstance(child, nn.GELU) and child.approximate == "tanh":
                setattr(parent, name, NewGELUActivation())
            elif isinstance(child, T5LayerNorm):
                child.__class__ = FusedT5LayerNorm if fused else T5LayerNorm
    return module
