"""Table 11's fine-tuned runs by input length: exact match per length band, and how long the outputs are.

Reads each model's predictions (``<runs>/<model>/<setting>/<task>/predictions.parquet``, the last evaluation)
and prints, per model, the accuracy in each band of input lengths and the 10th/50th/90th percentile of
output length / gold length (1.0: the outputs have gold's length; < 1: they stop early).

    python experiments/table11_by_length.py --setting len-40-70 --bands 40-50,51-60,61-70 \
        --models sip-d4 sip-d4-long sip-d4-long-induced --tasks 0 1 2
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd


def read_runs(runs: Path, model: str, setting: str, tasks: list[int] | None) -> pd.DataFrame:
    dirs = sorted((runs / model / setting).glob(f"{setting}-*/predictions.parquet"))
    frames = [pd.read_parquet(p).assign(task=int(p.parent.name.rpartition("-")[2])) for p in dirs]
    if not frames:
        raise SystemExit(f"no predictions under {runs / model / setting}")
    runs_df = pd.concat(frames, ignore_index=True)
    return runs_df[runs_df.task.isin(tasks)] if tasks else runs_df


def by_band(df: pd.DataFrame, bands: list[tuple[int, int]]) -> dict[str, float]:
    lengths = df["input"].str.len()
    correct = df["prediction"] == df["gold"]
    return {f"{lo}-{hi}": round(100 * float(correct[(lengths >= lo) & (lengths <= hi)].mean()), 1) for lo, hi in bands}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=Path("data/gpu/runs"))
    ap.add_argument("--setting", default="len-40-70")
    ap.add_argument("--bands", default="40-50,51-60,61-70", help="inclusive LO-HI input lengths, comma-separated")
    ap.add_argument("--models", nargs="+", default=["sip-d4", "sip-d4-long", "sip-d4-long-induced"])
    ap.add_argument("--tasks", nargs="*", type=int, help="task numbers (default: all)")
    a = ap.parse_args()
    bands = [tuple(int(x) for x in b.split("-")) for b in a.bands.split(",")]
    for model in a.models:
        df = read_runs(a.runs, model, a.setting, a.tasks)
        ratio = df["prediction"].str.len() / df["gold"].str.len()
        p10, p50, p90 = np.percentile(ratio, [10, 50, 90])
        print(f"{model}: n={len(df)} exact % by input length {by_band(df, bands)}; "
              f"output/gold length p10 {p10:.2f} p50 {p50:.2f} p90 {p90:.2f}")


if __name__ == "__main__":
    main()
