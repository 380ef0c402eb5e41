"""Figure of the fine-tuning sweeps on the 4-state iteration tasks (docs/EXPERIMENTS.md, ft-sweep1-7).
Left: test exact match per epoch, mean over tasks, for the body-LR × prefix-LR settings that tell the story.
Right: exact match by test input length (training inputs are at most 11 long): where the fine-tuned model fails.

    python experiments/plot_finetune_sweep.py   # writes docs/img/finetune_iteration_sweep.png
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).parent / "results"
SHOWN = [("ft-sweep1/plr1", "paper LRs (body 3e-4, prefix 1.0), prefix 50", "k"),
         ("ft-sweep1/frz-plr0.1", "body frozen, prefix LR 0.1, prefix 50", "tab:gray"),
         ("ft-sweep2/p80-plr0.1-lr1e-4", "body 1e-4, prefix 0.1, prefix 80", "tab:blue"),
         ("ft-sweep3/p80-plr0.1-lr3e-5-e20", "body 3e-5, prefix 0.1, prefix 80", "tab:orange"),
         ("ft-sweep3/p80-plr0.3-lr1e-5", "body 1e-5, prefix 0.3, prefix 80", "tab:red"),
         ("ft-sweep7/p80-plr0.3-lr1e-5", "same, 5 tasks (the gpu params)", "darkred"),
         ("ft-sweep4/soft-plr0.1-lr1e-5", "soft prefix 0.1, body 1e-5", "tab:purple")]
BY_LENGTH = [("ft-sweep7/p80-plr0.3-lr1e-5", "body 1e-5, prefix 0.3 (5 tasks)", "darkred"),
             ("ft-sweep6/p80-plr0.3-frz", "body frozen, prefix 0.3", "tab:gray"),
             ("ft-sweep4/soft-plr0.1-lr1e-5", "soft prefix 0.1, body 1e-5", "tab:purple")]
LENGTH_BINS = [0, 11, 15, 20, 25, 30]


def mean_curve(stem: str) -> tuple[list[int], list[float]]:
    # sweeps 1-3 kept metrics.json as <run>.json; later ones keep each run's directory
    files = sorted(RESULTS.glob(f"{stem}--iteration-s4-*.json")) or sorted(RESULTS.glob(f"{stem}--iteration-s4-*/metrics.json"))
    runs = [json.loads(p.read_text()) for p in files]
    epochs = [e["epoch"] for e in runs[0]["epochs"]]
    return epochs, [sum(r["epochs"][i]["acc"] for r in runs) / len(runs) for i in range(len(epochs))]


def accuracy_by_length(stem: str) -> pd.Series:
    runs = [pd.read_parquet(p) for p in sorted(RESULTS.glob(f"{stem}--iteration-s4-*/predictions.parquet"))]
    p = pd.concat(runs)
    bins = pd.cut(p["input"].str.len(), LENGTH_BINS)
    return 100 * (p["prediction"] == p["gold"]).groupby(bins, observed=True).mean()


def main() -> None:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [3, 2]})
    for stem, label, colour in BY_LENGTH:
        acc = accuracy_by_length(stem)
        bx.plot([f"{b.left + 1}-{b.right}" for b in acc.index], acc.values, label=label, color=colour, marker="o")
    bx.set(xlabel="test input length", ylabel="test exact match (%)", ylim=(0, 100),
           title="By input length (training inputs ≤ 11)")
    bx.legend(fontsize=7)
    for stem, label, colour in SHOWN:
        ax.plot(*mean_curve(stem), label=label, color=colour, marker=".")
    ax.axhline(94.8, ls="--", color="tab:green", lw=1, label="paper: ByT5 SIP-d4 (94.8)")
    ax.set(xlabel="fine-tuning epoch", ylabel="test exact match (%)", ylim=(0, 100),
           title="From-scratch SIP-d4, 4-state iteration tasks (one H100)")
    ax.legend(fontsize=7, loc="upper left")
    out = Path(__file__).parents[1] / "docs" / "img" / "finetune_iteration_sweep.png"
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
