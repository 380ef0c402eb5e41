"""Batches from pre-tokenised splits: length-bucketed plans on the CPU, gathers on the device.

The flat id arrays live on the training device; a batch is built by index arithmetic there, so the loop
never pads or copies Python lists. Planning uses only the (numpy) length arrays.
"""
from __future__ import annotations

import numpy as np
import torch

from sip_core.train.data import FstTable, Seq2SeqSplit


class DeviceSplit:
    """A split's arrays moved to ``device`` once; ``batch(idx)`` returns padded model inputs."""

    def __init__(self, split: Seq2SeqSplit, device, fsts: FstTable | None = None, use_fsts: bool = False,
                 pad_multiple: int | None = None, state_labels: bool = False):
        self.split = split
        self.device = torch.device(device)
        # On GPUs, widths are rounded up to a multiple of 8: fewer distinct shapes (cuBLAS heuristics and
        # allocator blocks are reused; measured ~3x less host overhead per step than fully varying shapes)
        # and tensor-core friendly sizes. Padding is masked, so results do not change.
        self.pad_multiple = pad_multiple or (8 if self.device.type == "cuda" else 1)
        to = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(self.device)
        self.input_lengths = split.input_lengths
        self.label_lengths = split.label_lengths
        self._in_ids, self._in_off = to(split.input_ids.astype(np.int64)), to(split.input_offsets[:-1])
        self._in_len = to(self.input_lengths)
        self._lab_ids, self._lab_off = to(split.label_ids.astype(np.int64)), to(split.label_offsets[:-1])
        self._lab_len = to(self.label_lengths)
        self.prefix_lengths = np.zeros(len(split), np.int64)
        self._fst = None
        if use_fsts:
            if fsts is None or split.fst_rows is None:
                raise ValueError("this model needs FSTs but the data has none")
            counts = fsts.n_transitions[split.fst_rows]
            self.prefix_lengths = counts.astype(np.int64)
            self._fst = (to(fsts.transitions.astype(np.int64)), to(fsts.offsets[:-1][split.fst_rows]), to(counts))
        self._task = to(split.task_rows) if split.task_rows is not None else None
        # per input id: the FST state after the character it ends, else -100 (auxiliary state loss)
        self._state_lab = to(split.state_labels()) if state_labels else None

    def __len__(self) -> int:
        return len(self.split)

    @property
    def encoder_lengths(self) -> np.ndarray:
        return self.prefix_lengths + self.input_lengths

    def _upload(self, idx_np: np.ndarray) -> torch.Tensor:
        # A pageable host→device copy makes the host wait for all queued GPU work; a pinned, non-blocking
        # one lets the host prepare the next step while the GPU still runs this one.
        idx = torch.from_numpy(idx_np)
        if self.device.type != "cuda":
            return idx
        return idx.pin_memory().to(self.device, non_blocking=True)

    def _round(self, width) -> int:
        m = self.pad_multiple
        return int(-(-int(width) // m) * m)

    @staticmethod
    def _gather(flat, starts, lengths, width, fill):
        ar = torch.arange(width, device=flat.device)
        mask = ar.unsqueeze(0) < lengths.unsqueeze(1)
        pos = torch.where(mask, starts.unsqueeze(1) + ar.unsqueeze(0), torch.zeros_like(mask, dtype=starts.dtype))
        vals = flat[pos]
        fill_t = torch.full_like(vals, fill)
        if vals.dim() == 3:
            return torch.where(mask.unsqueeze(-1), vals, fill_t), mask
        return torch.where(mask, vals, fill_t), mask

    def batch(self, idx: np.ndarray, with_labels: bool = True, idx_t: torch.Tensor | None = None) -> dict:
        """Padded tensors of examples ``idx``; all widths come from the numpy length arrays (no device sync).

        ``idx_t``: the same indices already on the device (a whole epoch's plan is uploaded at once).
        """
        idx_np = np.asarray(idx, dtype=np.int64)
        if idx_t is None:
            idx_t = self._upload(idx_np)
        width = self._round(self.input_lengths[idx_np].max())
        ids, mask = self._gather(self._in_ids, self._in_off[idx_t], self._in_len[idx_t], width, 0)
        out = {"input_ids": ids, "attention_mask": mask.long()}
        if with_labels:
            lw = self._round(self.label_lengths[idx_np].max())
            out["labels"], _ = self._gather(self._lab_ids, self._lab_off[idx_t], self._lab_len[idx_t], lw, -100)
        if self._fst is not None:
            flat, starts, counts = self._fst
            tw = self._round(max(1, int(self.prefix_lengths[idx_np].max())))
            out["fst"], _ = self._gather(flat, starts[idx_t], counts[idx_t], tw, 0)
            out["encoder_width"] = self._round(self.encoder_lengths[idx_np].max())
        if self._task is not None:
            out["task_ids"] = self._task[idx_t]
        if self._state_lab is not None:
            out["state_labels"] = self._state_targets(idx_t, out.get("encoder_width", width))
        return out

    def _state_targets(self, idx_t: torch.Tensor, enc_width: int) -> torch.Tensor:
        """(B, enc_width) state labels in encoder coordinates: byte k of row r sits at n_prefix_r + k
        (the packed layout of ``SIPForConditionalGeneration.encoder_inputs``); -100 elsewhere."""
        n_pre = self._fst[2][idx_t] if self._fst is not None else torch.zeros_like(idx_t)
        k = torch.arange(enc_width, device=idx_t.device).unsqueeze(0) - n_pre.unsqueeze(1)
        valid = (k >= 0) & (k < self._in_len[idx_t].unsqueeze(1))
        pos = torch.where(valid, self._in_off[idx_t].unsqueeze(1) + k, torch.zeros_like(k))
        return torch.where(valid, self._state_lab[pos], torch.full_like(k, -100))


def bucketed_batches(encoder_lengths: np.ndarray, label_lengths: np.ndarray, batch_size: int, seed: int,
                     epoch: int, chunk_batches: int = 64, shuffle: bool = True) -> list[np.ndarray]:
    """The deterministic batch plan of one epoch.

    A seeded permutation is cut into chunks of ``chunk_batches`` batches; each chunk is sorted by length
    (so batches hold similar lengths and little padding) and the batch order is shuffled again. Depends
    only on (seed, epoch), so a resumed run replays the same plan from the saved batch index.
    """
    n = len(encoder_lengths)
    rng = np.random.default_rng([seed, epoch])
    perm = rng.permutation(n) if shuffle else np.arange(n)
    batches = []
    chunk = max(1, chunk_batches) * batch_size
    for start in range(0, n, chunk):
        part = perm[start:start + chunk]
        order = np.lexsort((label_lengths[part], encoder_lengths[part]))
        part = part[order]
        batches.extend(part[i:i + batch_size] for i in range(0, len(part), batch_size))
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


class LengthCurriculum:
    """Batches of the first ``steps`` optimiser steps: only inputs of at most L(step) characters,
    L(step) = start + (longest - start) * step / steps. Batch j of step s is a seeded draw from the
    eligible examples, so it depends only on (seed, s, j) and a resumed run replays it exactly.
    """

    def __init__(self, char_lengths: np.ndarray, steps: int, start: int, batch_size: int, seed: int):
        self.order = np.argsort(char_lengths, kind="stable")
        self.sorted_lengths = np.asarray(char_lengths)[self.order]
        self.steps, self.start, self.batch_size, self.seed = steps, start, batch_size, seed
        self.longest = int(self.sorted_lengths[-1])

    def limit(self, step: int) -> float:
        return min(self.longest, self.start + (self.longest - self.start) * step / self.steps)

    def batch(self, step: int, j: int = 0) -> np.ndarray:
        n = int(np.searchsorted(self.sorted_lengths, self.limit(step), side="right"))
        if n == 0:  # nothing that short: the shortest batch_size examples
            n = min(self.batch_size, len(self.order))
        rng = np.random.default_rng([self.seed, 1789, step, j])
        return self.order[rng.choice(n, size=min(self.batch_size, n), replace=False)]


def random_batches(n: int, batch_size: int, seed: int, epoch: int, weights: np.ndarray | None = None) -> list[np.ndarray]:
    """Reference-style plan: a random permutation cut into batches (no bucketing). With ``weights``, an epoch
    of n examples drawn with replacement in proportion to them instead."""
    rng = np.random.default_rng([seed, epoch])
    perm = rng.permutation(n) if weights is None else rng.choice(n, size=n, replace=True, p=weights / weights.sum())
    return [perm[i:i + batch_size] for i in range(0, n, batch_size)]


def eval_batches(encoder_lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Evaluation plan: sorted by length (callers restore the original order)."""
    order = np.argsort(encoder_lengths, kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def plan_on_device(plan: list[np.ndarray], device) -> list[torch.Tensor]:
    """Upload one epoch's batch indices in a single copy; returns per-batch views."""
    if not plan:
        return []
    flat = torch.from_numpy(np.concatenate(plan)).to(device)
    return list(torch.split(flat, [len(b) for b in plan]))
