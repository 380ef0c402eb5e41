"""Run outputs (DESIGN §5): metrics.json and predictions.parquet, written atomically."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from sip_core.io import write_json, write_parquet


def write_run(out_dir: str | Path, metrics: dict, inputs: list[str], golds: list[str], predictions: list[str]) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = pa.table({"input": pa.array(inputs, pa.string()), "gold": pa.array(golds, pa.string()),
                      "prediction": pa.array(predictions, pa.string())})
    write_parquet(table, out_dir / "predictions.parquet")
    write_json(metrics, out_dir / "metrics.json")


def reported(evaluations: list[dict], last: int = 10) -> dict:
    """Mean of the last ``last`` evaluations of each metric (the original's moving-average protocol)."""
    tail = evaluations[-last:] if last > 0 else evaluations
    if not tail:
        return {}
    return {k: sum(e[k] for e in tail) / len(tail) for k in ("acc", "ed", "per")} | {"n_evaluations": len(tail)}
