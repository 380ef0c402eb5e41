"""Sweep 18: is the default seed's edge (762354) its prefix init or its data order?

Fits acc[run, task] = task mean + a·[prefix init seed = 762354] + b·[data seed = 762354] by least squares over every
plain gpu-settings run on the five iteration-s4 tasks, and tests a and b by permuting the runs' (init, data) labels
(task structure kept). Runs: sweep 18 (the split seeds), sweep 17 (seeds 1-4, init = data), and the default seed's
runs (sweep 11's `cos` run, and the Table 1 run where `data/gpu/runs` is present here). The probe's five fine-tunes at
the default seed ran host-only; their accuracies are copied from the hand-off log (docs/EXPERIMENTS.md, session 12).
Usage: python experiments/sweep18_analysis.py
"""
import json
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent / "results"
TASKS = 5
PROBE_RUN_762354 = [74.4, 86.3, 91.7, 85.1, 92.6]  # session 12, results/gpu/probe hand-off log


def accs(folder: pathlib.Path, pattern: str) -> list[float] | None:
    files = [folder / pattern.format(t=t) / "metrics.json" for t in range(TASKS)]
    if not all(f.exists() for f in files):
        return None
    return [json.loads(f.read_text())["reported"]["acc"] for f in files]


def runs() -> list[tuple[str, bool, bool, list[float]]]:
    """(name, init is 762354, data is 762354, accuracies of tasks 0-4)."""
    out = []
    s18 = ROOT / "ft-sweep18"
    for s in (1, 2):
        out.append((f"init762354-data{s}", True, False, accs(s18, f"init762354-data{s}--iteration-s4-{{t}}")))
        out.append((f"init{s}-data762354", False, True, accs(s18, f"init{s}-data762354--iteration-s4-{{t}}")))
    for s in (1, 2, 3, 4):
        out.append((f"seed{s}", False, False, accs(ROOT / "ft-sweep17", f"seed{s}--iteration-s4-{{t}}")))
    out.append(("762354 sweep 11", True, True, accs(ROOT / "ft-sweep11", "cos--iteration-s4-{t}")))
    table1 = accs(ROOT.parents[1] / "data/gpu/runs/sip-d4/iteration-s4", "iteration-s4-{t}")
    if table1 is not None:
        out.append(("762354 Table 1", True, True, table1))
    out.append(("762354 probe", True, True, PROBE_RUN_762354))
    return [r for r in out if r[3] is not None]


def fit(y: np.ndarray, init: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Least-squares (a, b) with a fixed effect per task; y is runs × tasks."""
    n_runs, n_tasks = y.shape
    task_dummies = np.kron(np.ones((n_runs, 1)), np.eye(n_tasks))
    x = np.column_stack([task_dummies, np.repeat(init, n_tasks), np.repeat(data, n_tasks)])
    coef, *_ = np.linalg.lstsq(x, y.reshape(-1), rcond=None)
    return coef[-2:]


def main(resamples: int = 10_000) -> None:
    rows = runs()
    for name, i, d, a in rows:
        print(f"{name:22s} init762354={int(i)} data762354={int(d)}  " + " / ".join(f"{v:5.1f}" for v in a)
              + f"  mean {np.mean(a):5.1f}")
    y = np.array([r[3] for r in rows])
    init = np.array([r[1] for r in rows], float)
    data = np.array([r[2] for r in rows], float)
    a, b = fit(y, init, data)
    rng = np.random.default_rng(0)
    null = np.array([fit(y, init[p], data[p]) for p in (rng.permutation(len(rows)) for _ in range(resamples))])
    p_a = (1 + np.sum(np.abs(null[:, 0]) >= abs(a))) / (1 + resamples)
    p_b = (1 + np.sum(np.abs(null[:, 1]) >= abs(b))) / (1 + resamples)
    print(f"\n{len(rows)} runs x {TASKS} tasks; permutation test of the run labels, {resamples} resamples")
    print(f"init 762354: {a:+.1f} points (p = {p_a:.3f});  data order 762354: {b:+.1f} points (p = {p_b:.3f})")


if __name__ == "__main__":
    main()
