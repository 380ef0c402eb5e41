"""Accuracy (percent), mean character edit distance, and per = ed / max(1, len(gold)) (REFERENCE §4.6)."""
from __future__ import annotations

from typing import Sequence


def _python_levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _levenshtein():
    # rapidfuzz is fast C++; GPU hosts may lack it, so fall back to a small pure-Python version.
    try:
        from rapidfuzz.distance import Levenshtein
        return Levenshtein.distance
    except ImportError:
        return _python_levenshtein


def edit_distance(a: str, b: str) -> int:
    return int(_levenshtein()(a, b))


def score(predictions: Sequence[str], golds: Sequence[str]) -> dict:
    """{'acc': percent exact match, 'ed': mean edit distance, 'per': mean ed / max(1, len(gold)), 'n'}."""
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold outputs")
    n = len(golds)
    if n == 0:
        return {"acc": 0.0, "ed": 0.0, "per": 0.0, "n": 0}
    dist = _levenshtein()
    eds = [int(dist(p, g)) for p, g in zip(predictions, golds)]
    return {
        "acc": 100.0 * sum(p == g for p, g in zip(predictions, golds)) / n,
        "ed": sum(eds) / n,
        "per": sum(e / max(1, len(g)) for e, g in zip(eds, golds)) / n,
        "n": n,
    }
