"""Approximate permutation tests over tasks (the paper's significance tests) and the significance table.

The paper compares two models with a paired approximate permutation test over tasks (each task's score
is its mean over seeds): random sign flips of the per-task differences, statistic = mean difference.
The probe-transfer study compares two unpaired groups of examples by shuffling group labels.
p = (count + 1) / (R + 1), so a Monte-Carlo p-value is never 0.
"""
from __future__ import annotations

from dataclasses import dataclass

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
