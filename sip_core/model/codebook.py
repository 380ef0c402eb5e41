"""Single-transition codebook: keeps a tuned prefix on the manifold of FST encodings.

A tuned prefix that fits the short training strings of an iteration task stays a blend of transitions
(docs/EXPERIMENTS.md, session 8: cosine 0.45-0.48 to the nearest single transition) and generalises poorly
to longer inputs, while the gold FST's encoding generalises (95-96%). The codebook holds the encoding of
every transition (src, in, out, dst, final) over ``num_states`` states and the task's symbols; fine-tuning
can read the prefix through it straight-through (forward: nearest entries, backward: identity, as in
VQ-VAE) and pull each slot towards its entry (the commitment loss), so the prefix the body sees is always a
set of real transitions.
"""
from __future__ import annotations

import itertools

import torch

from sip_core.fst import vocab


def task_symbol_ids(pairs: list[tuple[str, str]], symbols: list[str]) -> list[int]:
    """Ids of every character of the pairs that the model's symbol map has, plus ε and the shorthands
    (an evaluation FST may use them); sorted."""
    table = {s: i for i, s in enumerate(symbols)}
    chars = {c for inp, out in pairs for c in inp + out}
    ids = {table[c] for c in chars if c in table}
    ids |= {table[s] for s in (vocab.EPS, *vocab.SHORTHANDS) if s in table}
    return sorted(ids)


@torch.no_grad()
def transition_codebook(fst_encoder, byte_embedding, num_states: int, symbol_ids: list[int],
                        chunk: int = 65536) -> torch.Tensor:
    """(K, d) fp32 encodings of every transition over states 0..num_states-1 and ``symbol_ids``, both
    final flags (K = 2 · num_states² · |symbols|²)."""
    device = next(fst_encoder.parameters()).device
    states, finals = range(num_states), (1, 2)
    rows = torch.tensor(list(itertools.product(states, symbol_ids, symbol_ids, states, finals)), dtype=torch.long)
    out = [fst_encoder(rows[i:i + chunk].to(device)[None], byte_embedding)[0][0].float()
           for i in range(0, len(rows), chunk)]
    return torch.cat(out)


def nearest(prefix: torch.Tensor, codebook: torch.Tensor, chunk: int = 65536) -> torch.Tensor:
    """(L, d): for each prefix row the codebook entry nearest in L2 (no gradient)."""
    with torch.no_grad():
        p = prefix.detach().float()
        best_d = torch.full((p.shape[0],), float("inf"), device=p.device)
        best_i = torch.zeros(p.shape[0], dtype=torch.long, device=p.device)
        for start in range(0, len(codebook), chunk):
            c = codebook[start:start + chunk]
            dist = (c * c).sum(-1)[None, :] - 2 * p @ c.T  # ‖p‖² is the same for every entry
            d, i = dist.min(-1)
            better = d < best_d
            best_d, best_i = torch.where(better, d, best_d), torch.where(better, i + start, best_i)
        return codebook[best_i].to(prefix.dtype)


def straight_through(prefix: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """Forward: the nearest codebook entries; backward: the identity to ``prefix``."""
    return prefix + (nearest(prefix, codebook) - prefix).detach()
