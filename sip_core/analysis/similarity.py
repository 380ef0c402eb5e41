"""Assignment-based cosine similarity of two prefixes (paper Appendix, "Analysis of fine-tuned prefixes").

sim(p, q) = max over one-to-one assignments π of the mean cosine similarity between p_i and q_π(i).
The paper approximates the assignment with Sinkhorn (soft assignments), then for each position greedily
picks a matching position; we do the same, batched over many q (the 10,000 distractors), and keep the
exact Hungarian solution (scipy) for checking the approximation.

Prefixes of different lengths (an FST encoding shorter than the tuned prefix): every position of the
shorter one is assigned to a distinct position of the longer one and the mean runs over the shorter
length; a longer FST encoding is truncated to the prefix length first, as in the paper.
"""
from __future__ import annotations

import math

import numpy as np
import torch

SINKHORN_TAU = 0.02      # entropy temperature on cosine similarities in [-1, 1]
SINKHORN_ITERS = 100
CHUNK = 1024             # distractors per batch (bounds memory: chunk x n x m floats)


def cosine_matrix(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """p (n, d), q (B, m, d) -> (B, n, m) cosine similarities."""
    pn = torch.nn.functional.normalize(p.float(), dim=-1)
    qn = torch.nn.functional.normalize(q.float(), dim=-1)
    return torch.einsum("nd,bmd->bnm", pn, qn)


def sinkhorn(sim: torch.Tensor, col_mask: torch.Tensor, tau: float = SINKHORN_TAU,
             iters: int = SINKHORN_ITERS) -> torch.Tensor:
    """Soft assignment (B, n, m) with uniform marginals over the n rows and each item's valid columns
    (log domain, so a small temperature cannot overflow)."""
    neg = torch.finfo(sim.dtype).min / 4
    logk = torch.where(col_mask[:, None, :], sim / tau, torch.full_like(sim, neg))
    n = sim.shape[1]
    m_valid = col_mask.sum(1).clamp(min=1).to(sim.dtype)
    log_a = -math.log(n)
    log_b = torch.where(col_mask, -torch.log(m_valid)[:, None], torch.full_like(col_mask, neg, dtype=sim.dtype))
    u = torch.zeros(sim.shape[:2], dtype=sim.dtype, device=sim.device)
    v = torch.zeros(sim.shape[0], sim.shape[2], dtype=sim.dtype, device=sim.device)
    for _ in range(iters):
        u = log_a - torch.logsumexp(logk + v[:, None, :], dim=2)
        v = log_b - torch.logsumexp(logk + u[:, :, None], dim=1)
    return torch.exp(logk + u[:, :, None] + v[:, None, :]) * col_mask[:, None, :]


def greedy_matching(soft: torch.Tensor, col_mask: torch.Tensor) -> torch.Tensor:
    """One-to-one matching read off a soft assignment: repeatedly take the largest remaining entry and
    retire its row and column. Returns (B, n) matched column per row, -1 where a row stays unmatched."""
    bsz, n, m = soft.shape
    scores = torch.where(col_mask[:, None, :], soft, torch.full_like(soft, -1.0))
    match = torch.full((bsz, n), -1, dtype=torch.long, device=soft.device)
    todo = torch.minimum(col_mask.sum(1), torch.tensor(n, device=soft.device))
    rows = torch.arange(bsz, device=soft.device)
    for step in range(min(n, m)):
        flat = scores.reshape(bsz, -1).argmax(1)
        r, c = flat // m, flat % m
        active = step < todo
        match[rows[active], r[active]] = c[active]
        scores[rows[active], r[active], :] = -2.0
        scores[rows[active], :, c[active]] = -2.0
    return match


def assignment_similarity(p: torch.Tensor, q: torch.Tensor, q_mask: torch.Tensor | None = None,
                          tau: float = SINKHORN_TAU, iters: int = SINKHORN_ITERS) -> torch.Tensor:
    """sim(p, q_b) for each b: p (n, d); q (B, m, d) with q_mask (B, m) marking real positions.
    Encodings longer than p are truncated to len(p) first."""
    n = p.shape[0]
    q = q[:, :n]
    q_mask = torch.ones(q.shape[:2], dtype=torch.bool) if q_mask is None else q_mask[:, :n].bool()
    out = []
    for start in range(0, q.shape[0], CHUNK):
        qc, mc = q[start:start + CHUNK], q_mask[start:start + CHUNK]
        sim = cosine_matrix(p, qc)
        match = greedy_matching(sinkhorn(sim, mc, tau, iters), mc)
        hit = match >= 0
        picked = torch.gather(sim, 2, match.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        out.append((picked * hit).sum(1) / hit.sum(1).clamp(min=1))
    return torch.cat(out) if out else torch.zeros(0)


def exact_similarity(p: np.ndarray | torch.Tensor, q: np.ndarray | torch.Tensor) -> float:
    """sim(p, q) by the Hungarian algorithm (scipy): the value Sinkhorn + greedy approximates from below."""
    from scipy.optimize import linear_sum_assignment

    p = torch.as_tensor(p).float()
    q = torch.as_tensor(q).float()[: p.shape[0]]
    sim = cosine_matrix(p, q.unsqueeze(0))[0].numpy()
    rows, cols = linear_sum_assignment(sim, maximize=True)
    return float(sim[rows, cols].mean())
