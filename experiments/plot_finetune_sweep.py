"""Figure of the fine-tuning sweeps on the 4-state iteration tasks (docs/EXPERIMENTS.md, ft-sweep1-3):
test exact match per epoch, mean of the two tasks, for the body-LR × prefix-LR settings that tell the story.

    python experiments/plot_finetune_sweep.py   # writes docs/img/finetune_iteration_sweep.png
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).parent / "results"
SHOWN = [("ft-sweep1/plr1", "paper LRs (body 3e-4, prefix 1.0), prefix 50", "k"),
         ("ft-sweep1/frz-plr0.1", "body frozen, prefix LR 0.1, prefix 50", "tab:gray"),
         ("ft-sweep2/p80-plr0.1-lr1e-4", "body 1e-4, prefix 0.1, prefix 80", "tab:blue"),
         ("ft-sweep3/p80-plr0.1-lr3e-5-e20", "body 3e-5, prefix 0.1, prefix 80", "tab:orange"),
         ("ft-sweep3/p80-plr0.3-lr1e-5", "body 1e-5, prefix 0.3, prefix 80", "tab:red")]


def mean_curve(stem: str) -> tuple[list[int], list[float]]:
    runs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob(f"{stem}--iteration-s4-*.json"))]
    epochs = [e["epoch"] for e in runs[0]["epochs"]]
    return epochs, [sum(r["epochs"][i]["acc"] for r in runs) / len(runs) for i in range(len(epochs))]


def main() -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for stem, label, colour in SHOWN:
        ax.plot(*mean_curve(stem), label=label, color=colour, marker=".")
    ax.axhline(94.8, ls="--", color="tab:green", lw=1, label="paper: ByT5 SIP-d4 (94.8)")
    ax.set(xlabel="fine-tuning epoch", ylabel="test exact match (%)", ylim=(0, 100),
           title="From-scratch SIP-d4 on 4-state iteration tasks (mean of 2 tasks, one H100)")
    ax.legend(fontsize=7, loc="upper left")
    out = Path(__file__).parents[1] / "docs" / "img" / "finetune_iteration_sweep.png"
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
