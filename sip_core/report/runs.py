"""Reading fine-tuning run outputs (``metrics.json``) into one tidy frame; tables are built only from these.

Runs live at ``<runs root>/<model>/<setting>/<task_id>/metrics.json``; the model key comes from the
path (the directory the pipeline chose), the task from the file.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sip_core.errors import SipError

METRICS = ("acc", "ed", "per")


def task_setting(task_id: str) -> tuple[str, int | str]:
    """``iteration-s4-3`` -> (``iteration-s4``, 3); ``g2p-ban-d2`` -> (``g2p-ban``, ``d2``)."""
    setting, _, index = task_id.rpartition("-")
    if not setting:
        return task_id, 0
    return setting, int(index) if index.isdigit() else index


def load_runs(root: str | Path, models: list[str] | None = None, settings: list[str] | None = None) -> pd.DataFrame:
    """One row per (model, task, seed) run under ``root`` with its reported metrics."""
    root = Path(root)
    rows = []
    for path in sorted(root.glob("*/*/*/metrics.json")):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue  # an interrupted fine-tune's staging directory (.SETTING.partial), not a finished run
        model = path.parts[-4]
        if models is not None and model not in models:
            continue
        if settings is not None and path.parts[-3] not in settings:
            continue
        try:
            run = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise SipError(f"{path}: not valid JSON ({err.msg})") from None
        reported = run.get("reported") or {}
        setting, index = task_setting(run["task_id"])
        rows.append({
            "model": model, "setting": setting, "task_id": run["task_id"], "task_index": index,
            "seed": run.get("seed"), "device": run.get("device", "unknown"), "steps": run.get("steps"),
            "wall_s": run.get("wall_s", run.get("wall_seconds")), "params_hash": run.get("params_hash"), "commit": run.get("commit"),
            # runs written before `--determinism` record none; they ran with nondeterministic kernels
            "determinism": run.get("determinism", "unrecorded"),
            "n_test": run.get("n_test"), **{m: reported.get(m) for m in METRICS},
        })
    columns = ["model", "setting", "task_id", "task_index", "seed", "device", "steps", "wall_s",
               "params_hash", "commit", "determinism", "n_test", *METRICS]
    return pd.DataFrame(rows, columns=columns)
