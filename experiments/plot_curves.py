"""Figure of the from-scratch SIP-d4 run that reached the gate (docs/EXPERIMENTS.md, runs s6-2 → s8):
dev exact match on unseen FSTs per input-length band against training minutes.

    python experiments/plot_curves.py   # writes docs/img/from_scratch_sip_d4.png
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).parent / "results"
LEGS = [("s6-2-resumed.json", "s6-2: from scratch, curriculum"), ("s8-0-resumed.json", "s8: continued, wsd decay")]
BANDS = [("dev_acc", "all lengths", "k"), ("dev_acc_len1-10", "1-10 chars", "tab:green"),
         ("dev_acc_len11-20", "11-20", "tab:orange"), ("dev_acc_len21-35", "21-35", "tab:red")]


def minutes_at(metrics: dict) -> dict[int, float]:
    """Training minutes at each logged step (cumulative examples / measured examples per second)."""
    out, seconds, last = {}, 0.0, 0
    for row in metrics["curve"]:
        seconds += (row["step"] - last) * metrics["options"]["batch_size"] / max(row["examples_per_second"], 1e-9)
        out[row["step"]], last = seconds / 60.0, row["step"]
    return out


def main() -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    offset = 0.0
    for leg, (name, label) in enumerate(LEGS):
        metrics = json.loads((RESULTS / name).read_text())
        when = minutes_at(metrics)
        evals = [e for e in metrics["evals"] if e["step"] in when and "dev_acc_len1-10" in e]
        for key, band, colour in BANDS:
            ax.plot([offset + when[e["step"]] for e in evals], [e[key] for e in evals], "o-", color=colour,
                    label=band if leg == 0 else None, lw=2 if key == "dev_acc" else 1)
        offset += max(when.values())
        ax.axvline(offset, color="grey", ls=":", lw=1)
        ax.text(offset - 0.3, 52, label, rotation=90, ha="right", va="bottom", fontsize=7, color="grey")
    ax.axhline(90, color="grey", ls="--", lw=1)
    ax.set(xlabel="training minutes on one H100", ylabel="exact match on unseen FSTs (%)", ylim=(0, 100),
           title="SIP-d4 from random initialisation (12+4 layers, 18M parameters)")
    ax.legend(title="dev inputs", loc="lower right", fontsize=8)
    fig.tight_layout()
    out = Path(__file__).parent.parent / "docs" / "img" / "from_scratch_sip_d4.png"
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
