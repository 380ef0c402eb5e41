"""Figures people would rather look at than read: Figure 3 (accuracy deviation from base vs states) and the
pre-training curves (training loss per step of each pre-trained model)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from sip_core.io import atomic_path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: str | Path) -> None:
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=130, format="png")
    fig.clf()
    _pyplot().close(fig)


def more_states_figure(table6: pd.DataFrame, out: str | Path, title_suffix: str = "") -> None:
    """Paper Figure 3: accuracy minus the base model's, per number of states, iteration and UC."""
    plt = _pyplot()
    acc = table6[table6["metric"] == "acc"].copy()
    acc[["kind", "states"]] = acc["setting"].str.extract(r"^(iteration|uc)-s(\d+)$")
    acc["states"] = acc["states"].astype(int)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=False)
    for ax, kind in zip(axes, ("iteration", "uc")):
        sub = acc[acc["kind"] == kind]
        base = sub[sub["model"] == "base"].set_index("states")["value"]
        for model, group in sub[sub["model"] != "base"].groupby("model", sort=False):
            group = group.set_index("states").sort_index()
            delta = group["value"] - base.reindex(group.index)
            ax.plot(delta.index, delta.values, marker="o", label=model)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_title(f"{'Iteration' if kind == 'iteration' else 'UC'}{title_suffix}")
        ax.set_xlabel("states in the test FST")
        ax.set_xticks(sorted(sub["states"].unique()))
    axes[0].set_ylabel("accuracy − base (points)")
    axes[1].legend(fontsize=8, frameon=False)
    fig.tight_layout()
    _save(fig, out)


def pretrain_figure(checkpoints: list[Path], out: str | Path, title_suffix: str = "") -> None:
    """Training loss per step of each pre-trained model (log scale), each labelled with its final exact match (dev:
    unseen FSTs): whether pre-training from scratch converged, at a glance."""
    import json

    fig, ax = _pyplot().subplots(figsize=(6, 3.6))
    for ckpt in checkpoints:
        metrics = json.loads((Path(ckpt) / "pretrain_metrics.json").read_text())
        curve = [point for point in metrics.get("curve") or [] if "loss" in point and "step" in point]
        if not curve:
            continue
        final = metrics.get("final") or {}
        # dev: unseen FSTs (Set: its own held-out sets); TE has seen FSTs only (its task table)
        shown = (("dev_acc", "dev"), ("easy_dev_acc", "seen FSTs"))
        score = next((f" ({name} {final[key]:.1f}%)" for key, name in shown if final.get(key) is not None), "")
        label = Path(ckpt).name + score
        ax.plot([p["step"] for p in curve], [p["loss"] for p in curve], label=label)
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss")
    ax.set_title(f"Pre-training from a random init{title_suffix}")
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    _save(fig, out)
