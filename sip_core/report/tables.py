"""Result tables: tidy CSV (model, setting, metric, value, n), Markdown laid out like the paper's table
with the paper's numbers beside ours, and meta.json (DESIGN §6)."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from sip_core.errors import SipError
from sip_core.io import write_json, write_text
from sip_core.report.paper_numbers import PAPER

SYGUS_GROUPS = {"reverse-name": "rev-name", "name-combine-4": "sur-initial"}


def _strip(prefix: str) -> Callable[[str], str | None]:
    return lambda s: s[len(prefix):] if s.startswith(prefix) else None


def _table1_setting(s: str) -> str | None:
    return {"iteration-s4": "iteration", "uc-s4": "uc"}.get(s)


def _table2_setting(s: str) -> str | None:
    return {"bimachine-iteration": "iteration", "bimachine-uc": "uc"}.get(s)


def _table6_setting(s: str) -> str | None:
    kind, _, states = s.partition("-s")
    return s if kind in ("iteration", "uc") and states.isdigit() else None


def _sygus_group(s: str) -> str | None:
    name = _strip("sygus-")(s)
    return None if name is None else SYGUS_GROUPS.get(name, "fst")


@dataclass(frozen=True)
class TableSpec:
    name: str
    title: str
    setting_of: Callable[[str], str | None]   # run setting -> table setting (None: not in this table)
    metrics: tuple[str, ...]
    medians: tuple[str, ...] = ()              # table settings that also report medians over tasks
    average: str | None = None                 # name of an extra column averaging the settings
    average_over_runs: bool = False            # average = mean over all runs (Table 4) vs over settings
    max_task_index: int | None = None          # Table 2 uses the first 5 of 10 tasks
    settings_order: tuple[str, ...] = field(default=())


TABLES = {
    "table1": TableSpec("table1", "Systematic generalisation on 4-state FST tasks (paper Table 1)",
                        _table1_setting, ("acc", "ed"), medians=("uc",), settings_order=("iteration", "uc")),
    "table2": TableSpec("table2", "Non-deterministic FSTs, bimachines with 21 states (paper Table 2)",
                        _table2_setting, ("acc", "ed"), max_task_index=5, settings_order=("iteration", "uc")),
    "table6": TableSpec("table6", "More states than in pre-training (paper Table 6 / Figure 3)",
                        _table6_setting, ("acc", "ed"),
                        settings_order=tuple(f"{k}-s{n}" for k in ("iteration", "uc") for n in (4, 5, 7, 10))),
    "table3": TableSpec("table3", "Grapheme-to-phoneme conversion, 100 training words (paper Table 3)",
                        _strip("g2p-"), ("acc",), average="avg",
                        settings_order=("ban", "cop", "got", "lao", "syl", "tel", "tzm")),
    "table7": TableSpec("table7", "Grapheme-to-phoneme conversion with PER (paper Table 7)",
                        _strip("g2p-"), ("acc", "per"), average="avg",
                        settings_order=("ban", "cop", "got", "lao", "syl", "tel", "tzm")),
    "table4": TableSpec("table4", "Few-shot text editing, 5 examples (paper Table 4)",
                        _sygus_group, ("acc", "ed"), average="overall", average_over_runs=True,
                        settings_order=("rev-name", "sur-initial", "fst")),
    "table11": TableSpec("table11", "Generalisation to longer strings, trained on inputs <= 15 (paper Table 11)",
                         lambda s: s if s in ("len-40-70", "len-90-110") else None, ("acc", "ed"),
                         settings_order=("len-40-70", "len-90-110")),
}


def aggregate(runs: pd.DataFrame, spec: TableSpec, models: list[str]) -> pd.DataFrame:
    """Tidy rows: the mean over runs (tasks × seeds) per model and table setting."""
    runs = runs[runs["model"].isin(models)].copy()
    runs["table_setting"] = runs["setting"].map(spec.setting_of)
    runs = runs.dropna(subset=["table_setting"])
    if spec.max_task_index is not None:
        runs = runs[runs["task_index"].map(lambda i: isinstance(i, int) and i < spec.max_task_index)]
    if runs.empty:
        raise SipError(f"{spec.name}: no runs of models {', '.join(models)} found")
    rows = []
    for (model, setting), group in runs.groupby(["model", "table_setting"], sort=False):
        for metric in spec.metrics:
            rows.append((model, setting, metric, group[metric].mean(), len(group)))
            if setting in spec.medians:  # median over tasks of each task's mean over seeds
                per_task = group.groupby("task_id")[metric].mean()
                rows.append((model, setting, f"{metric}_median", per_task.median(), len(group)))
    table = pd.DataFrame(rows, columns=["model", "setting", "metric", "value", "n"])
    if spec.average:
        extra = []
        for model, group in table.groupby("model", sort=False):
            for metric in spec.metrics:
                if spec.average_over_runs:
                    sub = runs[runs["model"] == model]
                    extra.append((model, spec.average, metric, sub[metric].mean(), len(sub)))
                else:
                    sub = group[group["metric"] == metric]
                    extra.append((model, spec.average, metric, sub["value"].mean(), int(sub["n"].sum())))
        table = pd.concat([table, pd.DataFrame(extra, columns=table.columns)], ignore_index=True)
    order = {m: i for i, m in enumerate(models)}
    settings = list(spec.settings_order) + ([spec.average] if spec.average else [])
    sorder = {s: i for i, s in enumerate(settings)}
    table = table.sort_values(["model", "setting", "metric"],
                              key=lambda c: c.map(order) if c.name == "model"
                              else c.map(lambda s: sorder.get(s, len(sorder))) if c.name == "setting" else c,
                              kind="stable").reset_index(drop=True)
    table["value"] = table["value"].round(4)
    return table


PRETRAIN_SPLITS = ("easy_dev", "dev", "test")  # seen FSTs (new strings), unseen FSTs, unseen FSTs


def _rounded(seconds):
    return None if seconds is None else round(float(seconds), 1)


def pretrain_table(checkpoints: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """pretrain.csv: greedy exact match of each pre-trained model per split (DESIGN §6), from the
    final evaluation in its pretrain_metrics.json; the second frame feeds meta.json."""
    import json

    rows, runs = [], []
    for ckpt in checkpoints:
        path = Path(ckpt) / "pretrain_metrics.json"
        if not path.exists():
            raise SipError(f"{path} is missing (was the checkpoint pre-trained by `sip pretrain`?)")
        metrics = json.loads(path.read_text())
        final = metrics.get("final") or {}
        for split in PRETRAIN_SPLITS:
            if f"{split}_acc" in final:
                rows.append((Path(ckpt).name, split, "acc", round(final[f"{split}_acc"], 4), 1))
        curve = metrics.get("curve") or []
        if curve:  # the training loss at the first and the last log: evidence of learning at any scale
            rows.append((Path(ckpt).name, "train", "loss_start", round(curve[0]["loss"], 4), 1))
            rows.append((Path(ckpt).name, "train", "loss_end", round(curve[-1]["loss"], 4), 1))
        runs.append({"model": Path(ckpt).name, "device": metrics.get("device"),
                     "params_hash": metrics.get("params_hash"), "wall_s": _rounded(metrics.get("train_seconds")),
                     "steps": metrics.get("steps"), "status": metrics.get("status"),
                     "commit": (metrics.get("commit") or "")[:7] or None})
    if not rows:
        raise SipError("no pre-training evaluations found in the given checkpoints")
    return pd.DataFrame(rows, columns=["model", "setting", "metric", "value", "n"]), pd.DataFrame(runs)


def _fmt(metric: str, value) -> str:
    if value is None or pd.isna(value):
        return "–"
    if metric.startswith("acc"):
        return f"{value:.1f}"
    if metric.startswith("per"):
        return f"{value:.3f}"
    if metric.startswith("loss"):
        return f"{value:.3f}"
    if metric.startswith("len"):
        return f"{value:.2f}" if metric == "len_mean" else f"{value:.0f}"
    return f"{value:.2f}"


# Tables the paper lays out with one row per setting (Table 5: states/split × min, max, mean).
ROW_PER_SETTING = {"table5"}


def to_markdown(table: pd.DataFrame, name: str, title: str, meta: dict, notes: list[str] | None = None) -> str:
    """The paper's layout: one row per model (or setting), the rest as columns; cells 'ours (paper)'."""
    paper = PAPER.get(name, {})
    if name in ROW_PER_SETTING:  # swap roles: rows are settings, columns metrics
        table = table.assign(model=table["setting"], setting=table["model"])
        paper = {(s, m, k): v for (m, s, k), v in paper.items()}
    columns = list(dict.fromkeys(zip(table["setting"], table["metric"])))
    models = list(dict.fromkeys(table["model"]))
    models += [m for m in dict.fromkeys(k[0] for k in paper) if m.startswith("paper:") and m not in models]
    ours = {(r.model, r.setting, r.metric): (r.value, r.n) for r in table.itertuples()}
    first = "setting" if name in ROW_PER_SETTING else "model"
    header = f"| {first} | " + " | ".join(f"{s} {m}" for s, m in columns) + " |"
    lines = [f"# {title}", "",
             f"Scale `{meta['scale']}`, params `{meta['params_hash']}`, base init `{meta['base_init']}`, "
             f"devices: {', '.join(meta['devices']) or 'none'}. Cells: ours (paper); n = runs averaged.", "",
             header, "|" + "---|" * (len(columns) + 1)]
    for model in models:
        cells = []
        for setting, metric in columns:
            mine = ours.get((model, setting, metric))
            cited = paper.get((model, setting, metric))
            text = "–" if mine is None else f"{_fmt(metric, mine[0])}"
            if cited is not None:
                text += f" ({_fmt(metric, cited)})"
            cells.append(text)
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    ns = sorted(set(table["n"].tolist()))
    lines += ["", f"n per cell: {', '.join(map(str, ns))}. `–`: not built at this scale or not in the paper."]
    for note in notes or ():  # e.g. the paper's significance test on these runs
        lines += ["", note]
    return "\n".join(lines) + "\n"


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build_meta(runs: pd.DataFrame, scale: str, params_hash: str, base_init: str) -> dict:
    devices = sorted(set(runs["device"].dropna().astype(str))) if len(runs) else []
    hashes = sorted(set(runs["params_hash"].dropna().astype(str))) if len(runs) else []
    wall = runs["wall_s"].dropna().sum() if len(runs) else 0.0

    def counts(column):  # how many runs have each value (commits shortened as git prints them)
        if not len(runs) or column not in runs:
            return {}
        values = runs[column].fillna("unrecorded").astype(str)
        return {k: int(v) for k, v in sorted((values.str[:7] if column == "commit" else values).value_counts().items())}

    return {"commit": git_commit(), "scale": scale, "params_hash": params_hash, "run_params_hashes": hashes,
            "base_init": base_init, "devices": devices, "runs": int(len(runs)), "wall_s": round(float(wall), 1),
            "run_commits": counts("commit"), "run_determinism": counts("determinism")}


def write_table(table: pd.DataFrame, out_csv: str | Path, name: str, title: str, meta: dict,
                notes: list[str] | None = None) -> None:
    """Write tableN.csv, tableN.md and tableN.meta.json side by side (each atomically)."""
    out_csv = Path(out_csv)
    write_text(table.to_csv(index=False, lineterminator="\n"), out_csv)
    write_text(to_markdown(table, name, title, meta, notes), out_csv.with_suffix(".md"))
    write_json(meta, out_csv.with_suffix(".meta.json"))
