"""Table 5: input length statistics of the generated data, as a tidy DataFrame.

Columns model, setting, metric, value, n (DESIGN §6): model = "data"; setting = `pretrain` (the train
split of the given pre-training pools), `s{n}-train` / `s{n}-test` (iteration tasks with n states) or
`bimachine-train` / `bimachine-test`; metrics len_min, len_max, len_mean; n = number of strings
(all tasks of a setting are pooled; with equal sizes that is the mean over tasks, duplicates included).
`max_tasks` keeps tasks 0..max_tasks-1 of every setting: the paper's 21-state row is the first 5 of the
10 bimachine tasks, those of its Table 2 (the original code reproduces 11.80 / 23.07 from those 5 only).
"""
from __future__ import annotations

import re

import pandas as pd
import pyarrow.parquet as pq

from sip_core.errors import SipError

_TASK = re.compile(r"^(?:iteration-s(\d+)|bimachine-iteration)-(\d+)$")


def _read(path) -> pd.DataFrame:
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        p = p / "examples.parquet"
    if not p.exists():
        raise SipError(f"no examples file at {p}")
    return pq.read_table(p).to_pandas()


def _rows(setting: str, lengths: pd.Series) -> list[dict]:
    if lengths.empty:
        return []
    n = int(len(lengths))
    return [
        {"model": "data", "setting": setting, "metric": "len_min", "value": float(lengths.min()), "n": n},
        {"model": "data", "setting": setting, "metric": "len_max", "value": float(lengths.max()), "n": n},
        {"model": "data", "setting": setting, "metric": "len_mean", "value": round(float(lengths.mean()), 4), "n": n},
    ]


def length_stats(pretrain=(), eval_=(), max_tasks: int | None = None) -> pd.DataFrame:
    if max_tasks is not None and max_tasks < 1:
        raise SipError(f"max_tasks must be >= 1, got {max_tasks}")
    rows: list[dict] = []
    if pretrain:
        frames = [_read(p) for p in pretrain]
        ex = pd.concat(frames, ignore_index=True)
        rows += _rows("pretrain", ex.loc[ex["split"] == "train", "input"].str.len())
    groups: dict[str, list[pd.Series]] = {}
    for path in eval_:
        ex = _read(path)
        if "task_id" not in ex.columns:
            raise SipError(f"{path} has no task_id column (not an evaluation task file)")
        for task_id, part in ex.groupby("task_id", sort=True):
            m = _TASK.match(task_id)
            if not m:
                continue  # UC and other tasks are not in Table 5
            if max_tasks is not None and int(m.group(2)) >= max_tasks:
                continue
            base = f"s{m.group(1)}" if m.group(1) else "bimachine"
            for split in ("train", "test"):
                groups.setdefault(f"{base}-{split}", []).append(part.loc[part["split"] == split, "input"].str.len())
    for setting in sorted(groups, key=_order):
        rows += _rows(setting, pd.concat(groups[setting], ignore_index=True))
    if not rows:
        raise SipError("no data for Table 5: give --pretrain and/or --eval example files")
    return pd.DataFrame(rows, columns=["model", "setting", "metric", "value", "n"])


def _order(setting: str):
    base, split = setting.rsplit("-", 1)
    return (base == "bimachine", int(base[1:]) if base != "bimachine" else 0, split != "train")
