"""``--prefix-max-norm``: keep every tuned prefix slot inside the ball the body's own FST encodings lie on.

Session 44 (docs/EXPERIMENTS.md) found the tuned prefixes of the gpu Table 1 iteration runs at slot norms of 89-153,
where models/sip-d4's encodings of the gold FSTs have ~57: the search inflates the prefix off the encodings' sphere.
Sweep 30 capped each slot's L2 norm after every optimiser step (as ``nn.Embedding``'s ``max_norm`` does rows) and
gained 6.9 points over 10 (seed, task) pairs at a cap of 57 (p = 0.009). ``fst`` takes the radius from the checkpoint
itself: the mean slot norm of its encodings of its pre-training FST sample (56.6 for models/sip-d4), so the same
setting carries over to other SIP checkpoints. An extension, not the paper's method (DEVIATIONS.md).
"""
from __future__ import annotations

from sip_core.errors import SipError

FROM_FSTS = "fst"  # --prefix-max-norm fst: the radius measured on the checkpoint's own FST encodings


def parse_max_norm(text: str | float | None) -> float | str | None:
    """--prefix-max-norm as given: None (no cap), ``fst``, or a positive radius; anything else a SipError."""
    if text is None or text == FROM_FSTS:
        return text
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise SipError(f"--prefix-max-norm must be a positive number or '{FROM_FSTS}', not {text!r}")
    return value


def encoding_slot_norm(fst_encoder, fst_sample, byte_embedding=None, batch: int = 100) -> float:
    """Mean L2 norm of the slots (real transitions only) of ``fst_encoder``'s encodings of ``fst_sample``."""
    import torch

    total, count = 0.0, 0
    device = next(fst_encoder.parameters()).device
    with torch.no_grad():
        for start in range(0, fst_sample.shape[0], batch):
            vectors, mask = fst_encoder(fst_sample[start:start + batch].to(device), byte_embedding)
            norms = vectors.float().norm(dim=-1)[mask.bool()]
            total, count = total + norms.sum().item(), count + norms.numel()
    return total / max(count, 1)


def cap_slot_norms(prefix, max_norm: float) -> None:
    """Scale every row (slot) of ``prefix`` whose L2 norm exceeds ``max_norm`` back onto that sphere, in place."""
    import torch

    with torch.no_grad():
        norms = prefix.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        prefix.mul_((max_norm / norms).clamp(max=1.0))
