"""CI regression of result tables: produced tables vs the committed ``results/ci/`` copies, within a
tolerance per metric derived from the measured seed-to-seed spread (``results/ci/tolerance.json``)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sip_core.errors import SipError

KEY = ["model", "setting", "metric"]


def metric_family(metric: str) -> str:
    """acc_median -> acc; len_mean -> len; loss_end -> loss."""
    return metric.split("_")[0]


def load_tolerance(path: str | Path, table: str | None = None) -> dict[str, float]:
    """Tolerance per metric family; ``table``'s own measured spread (``by_table``) where it has one, since a
    metric's scale can differ by table (edit distance on 90-110-character strings in Table 11 vs ~20 in Table 1)."""
    return _for_table(_read_spec(path), table)


def _read_spec(path: str | Path) -> dict:
    path = Path(path)
    if not path.exists():
        raise SipError(f"tolerance file missing: {path} (run `sip report spread` to derive it)")
    return json.loads(path.read_text())


def _for_table(spec: dict, table: str | None) -> dict[str, float]:
    return {**spec["tolerance"], **spec.get("by_table", {}).get(table, {}).get("tolerance", {})}


def compare_table(produced: pd.DataFrame, reference: pd.DataFrame, tolerance: dict[str, float]) -> list[str]:
    """Differences beyond tolerance, missing and unexpected cells, one line each (empty: the tables agree)."""
    merged = reference.merge(produced, on=KEY, how="outer", suffixes=("_ref", "_new"), indicator="status")
    problems = []
    for row in merged.itertuples():
        cell = f"{row.model}/{row.setting}/{row.metric}"
        if row.status == "left_only":
            problems.append(f"{cell}: missing (reference {row.value_ref})")
        elif row.status == "right_only":
            problems.append(f"{cell}: not in the reference (got {row.value_new})")
        else:
            tol = tolerance.get(metric_family(row.metric), 0.0)
            if abs(row.value_new - row.value_ref) > tol + 1e-9:
                problems.append(f"{cell}: {row.value_new:.4g} vs reference {row.value_ref:.4g} (tolerance {tol:.4g})")
    return problems


def compare_dirs(produced_dir: str | Path, reference_dir: str | Path, names: list[str]) -> dict[str, list[str]]:
    spec = _read_spec(Path(reference_dir) / "tolerance.json")  # once, not per table
    result = {}
    for name in names:
        tolerance = _for_table(spec, name)
        ref = pd.read_csv(Path(reference_dir) / f"{name}.csv")
        new_path = Path(produced_dir) / f"{name}.csv"
        result[name] = compare_table(pd.read_csv(new_path), ref, tolerance) if new_path.exists() else [
            f"{name}.csv was not produced"]
    return result


def spread_tolerance(tables_by_seed: list[pd.DataFrame], factor: float = 3.0,
                     floors: dict[str, float] | None = None) -> dict:
    """Tolerance per metric family = factor × the largest per-cell standard deviation across seeds
    (or a floor where the spread measured was smaller), with the measurements kept beside it."""
    floors = floors or {}
    stacked = pd.concat([t.assign(seed_run=i) for i, t in enumerate(tables_by_seed)])
    spread = stacked.groupby(KEY)["value"].std(ddof=1).reset_index()
    spread["family"] = spread["metric"].map(metric_family)
    max_std = spread.groupby("family")["value"].max().to_dict()
    tolerance = {fam: round(max(factor * std, floors.get(fam, 0.0)), 4) for fam, std in max_std.items()}
    return {"tolerance": tolerance, "max_seed_std": {k: round(v, 4) for k, v in max_std.items()},
            "factor": factor, "floors": floors, "seeds": len(tables_by_seed)}
