"""Approximate permutation tests over tasks (the paper's significance tests) and the significance table.

The paper compares two models with a paired approximate permutation test over tasks (each task's score
is its mean over seeds): random sign flips of the per-task differences, statistic = mean difference.
The probe-transfer study compares two unpaired groups of examples by shuffling group labels.
p = (count + 1) / (R + 1), so a Monte-Carlo p-value is never 0.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
import pandas as pd

from sip_core.errors import SipError

RESAMPLES = 20_000   # the paper's analysis scripts use scipy's permutation_test with 20k resamples
SEED = 0
ALTERNATIVES = ("two-sided", "greater", "less")
_CELLS_PER_CHUNK = 2_000_000  # bounds memory of the resample matrix (floats) for large n


@dataclass(frozen=True)
class TestResult:
    n: int
    statistic: float     # observed mean difference (a - b)
    p_value: float
    resamples: int
    alternative: str


def _check(resamples: int, alternative: str) -> None:
    if resamples < 1:
        raise SipError(f"resamples must be >= 1, got {resamples}")
    if alternative not in ALTERNATIVES:
        raise SipError(f"alternative must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}")


def _p_value(null_stats: np.ndarray, observed: float, alternative: str, scale: float) -> int:
    """Count resampled statistics at least as extreme as the observed one (float ties count)."""
    eps = 1e-9 * max(1.0, scale)
    if alternative == "greater":
        return int(np.count_nonzero(null_stats >= observed - eps))
    if alternative == "less":
        return int(np.count_nonzero(null_stats <= observed + eps))
    return int(np.count_nonzero(np.abs(null_stats) >= abs(observed) - eps))


def paired_permutation_test(a, b, resamples: int = RESAMPLES, seed: int = SEED,
                            alternative: str = "two-sided") -> TestResult:
    """Test mean(a - b) = 0 for paired scores by flipping the sign of each difference at random."""
    _check(resamples, alternative)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise SipError(f"paired test needs two equally long score lists, got {a.shape} and {b.shape}")
    n = len(a)
    if n == 0:
        raise SipError("paired test needs at least one pair of scores")
    diffs = a - b
    observed = float(diffs.mean())
    rng = np.random.default_rng(seed)
    chunk = max(1, _CELLS_PER_CHUNK // n)
    count, done = 0, 0
    while done < resamples:
        size = min(chunk, resamples - done)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
        count += _p_value(signs @ diffs / n, observed, alternative, float(np.abs(diffs).max()))
        done += size
    return TestResult(n, observed, (count + 1) / (resamples + 1), resamples, alternative)


def permutation_test(a, b, resamples: int = RESAMPLES, seed: int = SEED,
                     alternative: str = "two-sided") -> TestResult:
    """Test mean(a) = mean(b) for two independent samples by shuffling which sample each score is in."""
    _check(resamples, alternative)
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if len(a) == 0 or len(b) == 0:
        raise SipError(f"unpaired test needs scores in both groups, got {len(a)} and {len(b)}")
    pooled = np.concatenate([a, b])
    observed = float(a.mean() - b.mean())
    rng = np.random.default_rng(seed)
    chunk = max(1, _CELLS_PER_CHUNK // len(pooled))
    count, done = 0, 0
    while done < resamples:
        size = min(chunk, resamples - done)
        shuffled = rng.permuted(np.broadcast_to(pooled, (size, len(pooled))), axis=1)
        stats = shuffled[:, :len(a)].mean(axis=1) - shuffled[:, len(a):].mean(axis=1)
        count += _p_value(stats, observed, alternative, float(np.abs(pooled).max()))
        done += size
    return TestResult(len(a) + len(b), observed, (count + 1) / (resamples + 1), resamples, alternative)


# ---- pairs of models over run outputs ------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    """Model ``a`` vs model ``b`` on the runs whose setting is one of ``settings`` (or starts with one + '-')."""
    a: str
    b: str
    settings: tuple[str, ...]
    metric: str = "acc"
    alternative: str = "two-sided"
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or f"{self.a}:{self.b}@{','.join(self.settings)}"


# The paper's two tests over tasks (Section 5.2: n=20 bimachine tasks; Section 6.1: g2p language x draw).
PAPER_PAIRS = (
    Pair("sip-nd7", "sip-d4plus", ("bimachine-iteration", "bimachine-uc")),
    Pair("sip-d4", "set", ("g2p",)),
)


def parse_pair(text: str, metric: str = "acc", alternative: str = "two-sided") -> Pair:
    """``sip-nd7:sip-d4plus@bimachine-iteration,bimachine-uc`` -> Pair."""
    models, at, settings = text.partition("@")
    a, colon, b = models.partition(":")
    names = tuple(s for s in settings.split(",") if s)
    if not (at and colon and a and b and names):
        raise SipError(f"pair {text!r}: expected MODEL_A:MODEL_B@SETTING[,SETTING...]")
    return Pair(a, b, names, metric, alternative)


def _in_settings(setting: str, settings: tuple[str, ...]) -> bool:
    return any(setting == s or setting.startswith(s + "-") for s in settings)


def task_scores(runs: pd.DataFrame, model: str, metric: str) -> pd.Series:
    """Each task's score: the mean over its seeds."""
    rows = runs[runs["model"] == model]
    return rows.groupby("task_id")[metric].mean()


def paired_scores(runs: pd.DataFrame, pair: Pair) -> pd.DataFrame:
    """task_id, score_a, score_b for the tasks both models were run on (sorted by task)."""
    runs = runs[runs["setting"].map(lambda s: _in_settings(s, pair.settings))]
    a = task_scores(runs, pair.a, pair.metric).rename("score_a")
    b = task_scores(runs, pair.b, pair.metric).rename("score_b")
    both = pd.concat([a, b], axis=1, join="inner").dropna().sort_index()
    return both.rename_axis("task_id").reset_index()


def compare(runs: pd.DataFrame, pair: Pair, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[dict, pd.DataFrame]:
    """One significance row for ``pair`` and its per-task paired scores; n = 0 rows carry no p-value."""
    scores = paired_scores(runs, pair)
    row = {"pair": pair.name, "model_a": pair.a, "model_b": pair.b, "settings": ",".join(pair.settings),
           "metric": pair.metric, "n": len(scores), "mean_a": np.nan, "mean_b": np.nan, "mean_diff": np.nan,
           "p_value": np.nan, "alternative": pair.alternative, "resamples": resamples, "seed": seed}
    if len(scores):
        result = paired_permutation_test(scores["score_a"], scores["score_b"], resamples, seed, pair.alternative)
        row.update(mean_a=scores["score_a"].mean(), mean_b=scores["score_b"].mean(),
                   mean_diff=result.statistic, p_value=result.p_value)
    return row, scores.assign(pair=pair.name)[["pair", "task_id", "score_a", "score_b"]]


def significance_table(runs: pd.DataFrame, pairs, resamples: int = RESAMPLES,
                       seed: int = SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Summary (one row per pair) and per-task scores (one row per pair x task)."""
    rows, tasks = [], []
    for pair in pairs:
        row, scores = compare(runs, pair, resamples, seed)
        rows.append(row)
        tasks.append(scores)
    summary = pd.DataFrame(rows)
    for column in ("mean_a", "mean_b", "mean_diff"):
        summary[column] = summary[column].round(4)
    return summary, pd.concat(tasks, ignore_index=True)


# ---- tidy output (results/<scale>/significance.{csv,md,meta.json}) and notes for the tables ---------

# The paper's p-values for its two tests, shown beside ours.
PAPER_P = {PAPER_PAIRS[0].name: "p ≈ 0.017, n = 20", PAPER_PAIRS[1].name: "p ≈ 4e-4"}
# Tables whose Markdown carries a paper test (Table 2: Section 5.2; Tables 3 and 7: Section 6.1).
TABLE_PAIRS = {"table2": PAPER_PAIRS[0], "table3": PAPER_PAIRS[1], "table7": PAPER_PAIRS[1]}


def tidy(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per pair and quantity in the tables' layout (model = the pair, setting = its settings):
    ``<metric>_a``, ``<metric>_b``, ``<metric>_diff`` and ``p_value``; n = tasks compared."""
    rows = []
    for r in summary.itertuples():
        setting = r.settings.replace(",", "+")
        for metric, value in ((f"{r.metric}_a", r.mean_a), (f"{r.metric}_b", r.mean_b),
                              (f"{r.metric}_diff", r.mean_diff), ("p_value", r.p_value)):
            rows.append((r.pair, setting, metric, value, int(r.n)))
    return pd.DataFrame(rows, columns=["model", "setting", "metric", "value", "n"])


def _describe(row) -> str:
    if row.n == 0:
        return "not computed: no task has runs of both models"
    return f"n = {row.n} tasks, mean difference {row.mean_diff:+.2f}, p = {row.p_value:.3g}"


def to_markdown(summary: pd.DataFrame, title: str) -> str:
    lines = [f"# {title}", "",
             "Paired approximate permutation tests over tasks (each task's score: its mean over seeds; random "
             "sign flips of the per-task differences; p = (count + 1) / (resamples + 1)).", "",
             "| pair | alternative | metric | n | mean a | mean b | diff | p | paper |", "|---|---|---|---|---|---|---|---|---|"]
    for r in summary.itertuples():
        fmt = (lambda v: "–" if pd.isna(v) else f"{v:.2f}")
        p = "–" if pd.isna(r.p_value) else f"{r.p_value:.3g}"
        lines.append(f"| {r.pair} | {r.alternative} | {r.metric} | {r.n} | {fmt(r.mean_a)} | {fmt(r.mean_b)} | "
                     f"{fmt(r.mean_diff)} | {p} | {PAPER_P.get(r.pair, '–')} |")
    resamples = sorted(set(summary["resamples"]))
    lines += ["", f"Resamples: {', '.join(map(str, resamples))}; seed {summary['seed'].iloc[0]}."]
    return "\n".join(lines) + "\n"


def table_notes(runs: pd.DataFrame, table: str, resamples: int = RESAMPLES, seed: int = SEED) -> list[str]:
    """Markdown lines with the paper's test for ``table`` computed on ``runs`` (all tasks of the setting,
    also those beyond the ones the table averages), or [] for tables without one."""
    pair = TABLE_PAIRS.get(table)
    if pair is None:
        return []
    row, _ = compare(runs, pair, resamples, seed)
    described = _describe(SimpleNamespace(**row))
    # name the settings the test actually covers: one with no runs of both models yet is said, not implied
    covered = [s for s in pair.settings if len(paired_scores(runs, replace(pair, settings=(s,))))]
    where = ", ".join(covered or pair.settings)
    if covered and len(covered) < len(pair.settings):
        absent = [s for s in pair.settings if s not in covered]
        where += f" only ({', '.join(absent)}: no runs of both models yet)"
    return [f"Significance ({pair.alternative} paired approximate permutation test over tasks, {resamples} "
            f"resamples): {pair.a} vs {pair.b} on {where}: {described} (paper: {PAPER_P[pair.name]})."]
