"""Probe transfer (paper Section 7, Figure 5): the frozen probe reads state sequences from SIP-d4
fine-tuned on the 4-state iteration tasks; predicted ids are matched to the gold FST's states per task
(Hungarian algorithm, maximising agreement), then confusion matrices and accuracy of the fine-tuned model
when the read sequence is right vs wrong (unpaired approximate permutation test)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

OTHER = -1  # a predicted id the alignment gave no gold state (more probe classes than task states)


def confusion(predicted: list[np.ndarray], gold: list[np.ndarray], n_gold: int, n_pred: int) -> np.ndarray:
    """Counts (n_gold, n_pred) of gold state g read as predicted id p, over all positions."""
    counts = np.zeros((n_gold, n_pred), np.int64)
    if predicted:
        np.add.at(counts, (np.concatenate(gold).astype(np.int64), np.concatenate(predicted).astype(np.int64)), 1)
    return counts


def align(counts: np.ndarray) -> dict[int, int]:
    """Predicted id -> gold state: the one-to-one matching with the most agreeing positions."""
    gold_idx, pred_idx = linear_sum_assignment(counts, maximize=True)
    return {int(p): int(g) for g, p in zip(gold_idx, pred_idx)}


def relabel(predicted: list[np.ndarray], mapping: dict[int, int], n_pred: int) -> list[np.ndarray]:
    table = np.full(n_pred, OTHER, np.int64)
    for p, g in mapping.items():
        table[p] = g
    return [table[p] for p in predicted]


def row_normalised(predicted: list[np.ndarray], gold: list[np.ndarray], n_gold: int) -> np.ndarray:
    """(n_gold, n_gold + 1) confusion of aligned predictions, rows summing to 1 (last column: OTHER);
    a gold state that never occurs gives a NaN row."""
    counts = np.zeros((n_gold, n_gold + 1))
    if predicted:
        cols = np.concatenate(predicted)
        cols = np.where(cols == OTHER, n_gold, cols)
        np.add.at(counts, (np.concatenate(gold).astype(np.int64), cols.astype(np.int64)), 1)
    totals = counts.sum(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, counts / totals, np.nan)


def mean_matrix(matrices: list[np.ndarray]) -> np.ndarray:
    """Average over tasks (Figure 5), ignoring tasks where a gold state does not occur."""
    stacked = np.stack(matrices)
    present = ~np.isnan(stacked)
    total = np.where(present, stacked, 0.0).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(present.any(0), total / present.sum(0), np.nan)


def confusion_figure(matrix: np.ndarray, out: str | Path, title: str) -> None:
    """Row-normalised gold x predicted heat map with the values written in the cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sip_core.io import atomic_path

    n_gold = matrix.shape[0]
    show = matrix if np.nan_to_num(matrix[:, -1]).any() else matrix[:, :-1]  # OTHER only when it occurs
    fig, ax = plt.subplots(figsize=(1.2 + 0.7 * show.shape[1], 1.0 + 0.7 * n_gold))
    ax.imshow(np.nan_to_num(show), vmin=0.0, vmax=1.0, cmap="Blues")
    for (g, p), value in np.ndenumerate(show):
        text = "–" if np.isnan(value) else f"{value:.2f}"
        ax.text(p, g, text, ha="center", va="center", fontsize=8, color="white" if value > 0.6 else "black")
    labels = [str(i) for i in range(n_gold)] + (["other"] if show.shape[1] > n_gold else [])
    ax.set_xticks(range(show.shape[1]), labels)
    ax.set_yticks(range(n_gold), [str(i) for i in range(n_gold)])
    ax.set_xlabel("predicted state (aligned)")
    ax.set_ylabel("gold state")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=130, format="png")
    plt.close(fig)
