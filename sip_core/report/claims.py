"""The paper's claims checked against our result tables: pass / fail / not significant / not built.

Each claim is data: a source table (``results/<scale>/<source>.csv``), an ordering chain such as
``"sip-d4 > te > base|naive|set"`` (``|`` joins models of one tier, ``*`` = every other model of the paper's in
the table, not our extensions (pipeline.ModelSpec.extension); a number is a threshold), the settings it holds on,
and the metric. Adjacent tiers are compared pairwise. A ``>`` between two models also needs a paired permutation test over tasks
(one-sided, p < 0.05) when per-task runs of both exist; ``>=`` and thresholds need only the ordering.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sip_core import pipeline
from sip_core.errors import SipError
from sip_core.report import significance as sig
from sip_core.report.tables import TABLES

ALPHA = 0.05
# worst last: a claim takes its worst link. A failed link fails the claim even where other links are not built
# (its parts are all required), so "fail" outranks "not built".
STATUSES = ("pass", "not significant", "not built", "fail")


@dataclass(frozen=True)
class Claim:
    key: str
    text: str
    source: str                            # table1 ... table11, pretrain, probe
    chain: str                             # e.g. "sip-nd7 >= sip-d4plus >= sip-d4 > *"
    scopes: tuple[tuple[str, ...], ...]    # each scope is checked on its own; settings within one are pooled
    metric: str = "acc"
    tested: bool = True                    # False: no per-task test (e.g. medians are not mean differences)


def _each(*settings: str) -> tuple[tuple[str, ...], ...]:
    return tuple((s,) for s in settings)


# probe.csv is tidy like the tables: model ∈ {probe, heuristic, ...}, metrics acc_token and acc_seq (in the
# acc family, so the CI tolerance of accuracies applies); "*" pools whatever settings it has. pretrain.csv has split in place of setting.
CLAIMS = (
    Claim("t1-iteration", "Table 1: on iteration SIP-d4 > TE > ByT5, Naive, Set", "table1",
          "sip-d4 > te > base|naive|set", _each("iteration")),
    Claim("t1-uc-median", "Table 1: SIP-d4 has the best median accuracy on UC", "table1",
          "sip-d4 > *", _each("uc"), metric="acc_median", tested=False),
    Claim("t1-noprefix", "Table 1: fine-tuning without the prefix is below SIP-d4 on iteration", "table1",
          "sip-d4 > sip-d4-noprefix", _each("iteration")),
    Claim("t1-induced", "Extension (ours): the induced prefix beats the paper's init on iteration", "table1",
          "sip-d4-induced > sip-d4", _each("iteration")),
    Claim("t1-induced-90", "Extension (ours): the induced prefix gives SIP-d4 >= 90% on iteration", "table1",
          "sip-d4-induced >= 90", _each("iteration")),
    Claim("t1-capped", "Extension (ours): capping the tuned prefix's slot norms beats the paper's init on iteration",
          "table1", "sip-d4-capped > sip-d4", _each("iteration")),
    Claim("t1-capped-90", "Extension (ours): the capped prefix gives SIP-d4 >= 90% on iteration", "table1",
          "sip-d4-capped >= 90", _each("iteration")),
    Claim("t1-readout", "Extension (ours): restarting from the FST a first pass's states imply beats the capped prefix "
          "on iteration", "table1", "sip-d4-readout > sip-d4-capped", _each("iteration")),
    Claim("t1-readout-90", "Extension (ours): the read-out prefix gives SIP-d4 >= 90% on iteration", "table1",
          "sip-d4-readout >= 90", _each("iteration")),
    Claim("t6-iteration", "Table 6: SIP-d4 best on iteration with 5, 7 and 10 states", "table6",
          "sip-d4 > *", _each("iteration-s5", "iteration-s7", "iteration-s10")),
    Claim("t6-uc", "Table 6: SIP-d4 best on UC with 5, 7 and 10 states", "table6",
          "sip-d4 > *", _each("uc-s5", "uc-s7", "uc-s10")),
    Claim("t2-order", "Table 2: SIP-nd7 >= SIP-d4+ >= SIP-d4 > baselines on bimachines", "table2",
          "sip-nd7 >= sip-d4plus >= sip-d4 > *", (("iteration", "uc"),)),
    Claim("t2-nd7", "Section 5.2: SIP-nd7 > SIP-d4+ over the bimachine tasks (paper p≈0.017, n=20)", "table2",
          "sip-nd7 > sip-d4plus", (("iteration", "uc"),)),
    Claim("t3-g2p", "Table 3: SIP-d4 has the best g2p average among ours (vs Set paper p≈4e-4)", "table3",
          "sip-d4 > *", _each("avg")),
    Claim("t4-overall", "Table 4: SIP-d4 and TE reach >= 90% overall on text editing", "table4",
          "sip-d4|te >= 90", _each("overall")),
    Claim("t4-names", "Table 4: SIP-d4 > TE on rev-name and sur-initial", "table4",
          "sip-d4 > te", _each("rev-name", "sur-initial")),
    Claim("t11-long", "Table 11: SIP-d4-long best on inputs of length 90-110", "table11",
          "sip-d4-long > *", _each("len-90-110")),
    Claim("t11-induced", "Extension (ours): the induced prefix beats SIP-d4-long's init on long inputs", "table11",
          "sip-d4-long-induced > sip-d4-long", _each("len-40-70", "len-90-110")),
    Claim("probe-seq", "Section 7: the probe recovers state sequences above the naive heuristic", "probe",
          "probe > heuristic", _each("*"), metric="acc_seq", tested=False),
    Claim("probe-token", "Section 7: the probe recovers states (per token) above the naive heuristic", "probe",
          "probe > heuristic", _each("*"), metric="acc_token", tested=False),
    Claim("simulation", "Section 4: pre-trained SIP-d4 simulates unseen FSTs with >= 90% exact match", "pretrain",
          "sip-d4 >= 90", _each("dev", "test")),
)


# ---- the chain --------------------------------------------------------------------------------------

def parse_chain(chain: str) -> tuple[list[list[str]], list[str]]:
    """``"a > b|c >= 90"`` -> tiers [[a], [b, c], ["90"]], relations [">", ">="]."""
    tokens = chain.split()
    tiers, relations = [t.split("|") for t in tokens[0::2]], tokens[1::2]
    if not tokens or len(tiers) != len(relations) + 1 or any(r not in (">", ">=") for r in relations):
        raise SipError(f"claim chain {chain!r}: expected TIER (> | >=) TIER ...")
    return tiers, relations


def _threshold(name: str) -> float | None:
    try:
        return float(name)
    except ValueError:
        return None


# ---- values: the table, or per-task runs where both models have them ---------------------------------

def load_source(results: Path, source: str) -> pd.DataFrame | None:
    path = results / f"{source}.csv"
    if not path.exists():
        return None
    frame = pd.read_csv(path).rename(columns={"split": "setting"})
    missing = {"model", "setting", "metric", "value"} - set(frame.columns)
    if missing:
        raise SipError(f"{path}: missing columns {', '.join(sorted(missing))}")
    frame["setting"] = frame["setting"].astype(str)
    return frame


def table_value(frame: pd.DataFrame, model: str, scope: tuple[str, ...], metric: str) -> float | None:
    """The table's value (mean of the scope's settings); None if any setting has no row."""
    rows = frame[(frame["model"] == model) & (frame["metric"] == metric)]
    if scope == ("*",):
        return float(rows["value"].mean()) if len(rows) else None
    values = [rows.loc[rows["setting"] == s, "value"] for s in scope]
    if any(v.empty for v in values):
        return None
    return float(sum(v.iloc[0] for v in values) / len(values))


def run_settings(runs: pd.DataFrame, source: str, scope: tuple[str, ...]) -> tuple[str, ...]:
    """The run settings that make up ``scope`` of table ``source`` (all the table's for its average)."""
    spec = TABLES.get(source)
    if spec is None or runs is None or runs.empty:
        return ()
    wanted = set(scope)
    every = spec.average in wanted or "*" in wanted
    return tuple(sorted(s for s in set(runs["setting"])
                        if (t := spec.setting_of(s)) is not None and (every or t in wanted)))


def claim_pair(claim: Claim, a: str, b: str, scope: tuple[str, ...], runs: pd.DataFrame | None) -> sig.Pair | None:
    settings = run_settings(runs, claim.source, scope) if claim.tested else ()
    if not settings:
        return None
    # one-sided: each claim states a direction
    return sig.Pair(a, b, settings, claim.metric, "greater", f"{claim.key}:{a}>{b}@{'+'.join(scope)}")


# ---- checking ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Link:
    status: str
    text: str


def _fmt(value: float) -> str:
    return f"{value:.1f}" if abs(value) >= 1 or value == 0 else f"{value:.3f}"


def check_link(claim: Claim, frame: pd.DataFrame, left: str, rel: str, right: str, scope: tuple[str, ...],
               runs: pd.DataFrame | None, resamples: int, seed: int) -> Link:
    where = "+".join(scope)
    bound = _threshold(right)
    lv = table_value(frame, left, scope, claim.metric)
    rv = bound if bound is not None else table_value(frame, right, scope, claim.metric)
    # judged only once the table has every setting of the scope for both models: the per-task runs of a
    # part of it (iteration without UC) would test a claim the paper did not make
    missing = [m for m, v in ((left, lv), (right, rv)) if v is None]
    if missing:
        return Link("not built", f"{where}: no {claim.metric} row for {', '.join(missing)}")
    pair = None if bound is not None else claim_pair(claim, left, right, scope, runs)
    scores = sig.paired_scores(runs, pair) if pair is not None else None
    if scores is not None and len(scores):
        lv, rv = float(scores["score_a"].mean()), float(scores["score_b"].mean())
    else:
        scores = None
    holds = lv > rv if rel == ">" else lv >= rv
    right_text = _fmt(rv) if bound is not None else f"{right} {_fmt(rv)}"
    text = f"{where}: {left} {_fmt(lv)} {rel} {right_text}"
    if not holds:
        return Link("fail", text + " (violated)")
    if rel == ">" and scores is not None:
        result = sig.paired_permutation_test(scores["score_a"], scores["score_b"], resamples, seed, pair.alternative)
        note = f" (p={result.p_value:.3g}, n={result.n})"
        return Link("pass" if result.p_value < ALPHA else "not significant", text + note)
    untested = rel == ">" and bound is None and claim.tested
    return Link("pass", text + (" (no per-task runs: untested)" if untested else ""))


def expand(claim: Claim, frame: pd.DataFrame):
    """(left, relation, right) for every model of adjacent tiers; '*' = the table's other models of ours that the
    paper has too (an extension is no rival in the paper's claims)."""
    tiers, relations = parse_chain(claim.chain)
    named = {m for tier in tiers for m in tier}
    ours = [m for m in dict.fromkeys(frame["model"]) if not str(m).startswith("paper:") and m not in named
            and not (m in pipeline.MODELS and pipeline.MODELS[m].extension)]
    tiers = [[m for t in tier for m in (ours if t == "*" else [t])] for tier in tiers]
    return [(l, rel, r) for left, rel, right in zip(tiers, relations, tiers[1:]) for l in left for r in right]


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    status: str
    details: tuple[str, ...]


def check(claim: Claim, results: Path, runs: pd.DataFrame | None, resamples: int = sig.RESAMPLES,
          seed: int = sig.SEED) -> ClaimResult:
    frame = load_source(results, claim.source)
    if frame is None:
        return ClaimResult(claim, "not built", (f"{claim.source}.csv missing",))
    links = expand(claim, frame)
    if not links:
        return ClaimResult(claim, "not built", (f"{claim.source}.csv has no models to compare",))
    checked = [check_link(claim, frame, l, rel, r, scope, runs, resamples, seed)
               for scope in claim.scopes for l, rel, r in links]
    status = max((link.status for link in checked), key=STATUSES.index)
    return ClaimResult(claim, status, tuple(link.text for link in checked))


def tested_pairs(runs: pd.DataFrame, results: Path | None = None) -> list[sig.Pair]:
    """Every model-vs-model '>' the claims test, resolved against the runs (for the significance table)."""
    pairs = []
    for claim in CLAIMS:
        frame = load_source(results, claim.source) if results is not None else None
        if frame is None:  # without the table, '*' resolves against the models that have runs
            frame = pd.DataFrame({"model": sorted(set(runs["model"]))})
        for scope in claim.scopes:
            for left, rel, right in expand(claim, frame):
                if rel != ">" or _threshold(right) is not None:
                    continue
                pair = claim_pair(claim, left, right, scope, runs)
                if pair is not None and len(sig.paired_scores(runs, pair)):
                    pairs.append(pair)
    return pairs


def to_markdown(results: list[ClaimResult], title: str) -> str:
    lines = [f"# {title}", "",
             f"Ordering claims between two models need a one-sided paired approximate permutation test over "
             f"tasks with p < {ALPHA} where per-task runs exist; otherwise the table's numbers decide.", "",
             "| claim | status | numbers |", "|---|---|---|"]
    for r in results:
        lines.append(f"| {r.claim.text} | **{r.status}** | {'; '.join(r.details)} |")
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    lines += ["", ", ".join(f"{s}: {n}" for s, n in counts.items())]
    return "\n".join(lines) + "\n"


def summary_line(r: ClaimResult) -> str:
    return f"[{r.status}] {r.claim.key}: {r.claim.text} — {'; '.join(r.details)}"
