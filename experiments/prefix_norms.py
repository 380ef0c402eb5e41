"""How large are tuned prefixes, against the body's own encodings, and does size go with accuracy? (session 44)

Per run of unpacked sweep archives (finished runs: `prefix.safetensors` and the reported accuracy; runs a time limit
stopped: their latest `prefix-epoch<N>/` and the mean of their last 5 evaluations), the mean L2 norm of the tuned
slots; then per sweep the Pearson r of norm and accuracy, over all runs and within task (deviations from each task's
mean). First the yardsticks: the norms of the frozen body's encodings of each gold FST and of the mean init.

    python experiments/prefix_norms.py /tmp/s25 /tmp/s26 [--model models/sip-d4]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from partial_prefixes import latest_prefix_folder  # a sibling script: sys.path[0] is experiments/
from sip_core.analysis.prefix import fst_encodings
from sip_core.model.loading import load_prefix_init, load_sip, load_tuned_prefix, mean_prefix
from sip_core.train.data import fst_table_from_arrow, read_parquet

EVAL = "data/gpu/eval/iteration-s4"


def tuned_runs(sweep: Path) -> list[tuple[str, str, Path, float]]:
    """(run, task, prefix folder, accuracy) of every run under ``sweep`` that left a tuned prefix."""
    runs = []
    for run in sorted(sweep.iterdir()):
        if not run.is_dir() or "--" not in run.name:
            continue
        name, folder = run.name.removeprefix(".").removesuffix(".partial"), latest_prefix_folder(run)
        if folder == run:
            runs.append((name, name.split("--")[1], run, json.loads((run / "metrics.json").read_text())["reported"]["acc"]))
        elif folder is not None and (run / "progress.json").exists():
            curve = json.loads((run / "progress.json").read_text())["epochs"]
            runs.append((name, name.split("--")[1], folder, float(np.mean([e["acc"] for e in curve[-5:]]))))
    return runs


def within_task(values: np.ndarray, tasks: list[str]) -> np.ndarray:
    return values - np.array([values[[t == u for u in tasks]].mean() for t in tasks])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", type=Path, nargs="+")
    ap.add_argument("--model", default="models/sip-d4")
    a = ap.parse_args()
    body = load_sip(a.model).eval()
    arrow = read_parquet(f"{EVAL}/fsts.parquet")
    fsts = fst_table_from_arrow(arrow, body.config.num_states, body.config.symbols)
    ids = arrow.column("task_id").to_pylist()
    with torch.no_grad():
        init = mean_prefix(body.fst_encoder, load_prefix_init(a.model), 32, 80, torch.Generator().manual_seed(762354),
                           body.t5.shared)
        print(f"mean init: slot norm {init.norm(dim=-1).mean():.1f}")
        for row, task in enumerate(ids):
            gold = fst_encodings(body, fsts, np.array([row]), int(np.diff(fsts.offsets)[row]))[0][0]
            print(f"{task}: gold encoding slot norm {gold.norm(dim=-1).mean():.1f}")
    for sweep in a.sweeps:
        runs = tuned_runs(sweep)
        if len(runs) < 3:
            raise SystemExit(f"prefix_norms: {sweep} has {len(runs)} runs with a tuned prefix (need 3 or more)")
        norms = np.array([load_tuned_prefix(folder).float().norm(dim=-1).mean().item() for _, _, folder, _ in runs])
        accs, tasks = np.array([r[3] for r in runs]), [r[1] for r in runs]
        for (name, _, _, acc), norm in zip(runs, norms):
            print(f"{name:40s} slot norm {norm:6.1f}  acc {acc:5.1f}")
        r_all = np.corrcoef(norms, accs)[0, 1]
        r_task = np.corrcoef(within_task(norms, tasks), within_task(accs, tasks))[0, 1]
        print(f"{sweep}: {len(runs)} runs, r(norm, acc) {r_all:.2f}, within task {r_task:.2f}")


if __name__ == "__main__":
    main()
