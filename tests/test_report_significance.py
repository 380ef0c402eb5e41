"""Permutation tests agree with scipy's exact tests; the significance table pairs tasks across models."""
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sip_core.cli import main
from sip_core.errors import SipError
from sip_core.report import significance as sig
from sip_core.report.runs import load_runs


def write_run(root, model, setting, task_id, acc, seed=1):
    path = root / model / setting / f"{task_id}-seed{seed}" / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"task_id": task_id, "seed": seed, "device": "cpu",
                                "reported": {"acc": acc, "ed": 0.0, "per": 0.0}}))


def mc_tolerance(p, resamples=sig.RESAMPLES):
    return 4 * np.sqrt(p * (1 - p) / resamples) + 2 / resamples


def test_identical_scores_give_p_one():
    scores = [10.0, 55.5, 80.0, 99.0, 3.0]
    assert sig.paired_permutation_test(scores, scores).p_value == 1.0
    assert sig.permutation_test(scores, scores).p_value == 1.0


def test_separated_scores_are_significant():
    rng = np.random.default_rng(1)
    low, high = rng.uniform(0, 10, 20), rng.uniform(80, 90, 20)
    assert sig.paired_permutation_test(high, low).p_value < 0.01
    assert sig.paired_permutation_test(high, low, alternative="greater").p_value < 0.01
    assert sig.paired_permutation_test(high, low, alternative="less").p_value > 0.99
    assert sig.permutation_test(high, low).p_value < 0.01


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_paired_agrees_with_scipy_exact(alternative):
    a = np.array([3.0, 5.0, 2.0, 8.0, 6.0, 7.0, 4.5])
    b = np.array([1.0, 4.0, 3.0, 5.0, 2.0, 6.0, 4.0])
    exact = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                   permutation_type="samples", alternative=alternative,
                                   n_resamples=np.inf).pvalue
    ours = sig.paired_permutation_test(a, b, alternative=alternative)
    assert ours.statistic == pytest.approx(np.mean(a - b))
    assert ours.p_value == pytest.approx(exact, abs=mc_tolerance(exact))


def test_unpaired_agrees_with_scipy_exact():
    a, b = np.array([3.0, 5.0, 9.0, 8.0, 7.0]), np.array([1.0, 4.0, 2.0, 0.5, 6.0])
    exact = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                                   vectorized=True, permutation_type="independent", n_resamples=np.inf).pvalue
    assert sig.permutation_test(a, b).p_value == pytest.approx(exact, abs=mc_tolerance(exact))


def test_seeded_and_monte_carlo_p_never_zero():
    a, b = np.arange(30.0) + 100, np.arange(30.0)
    first = sig.paired_permutation_test(a, b, resamples=10_000, seed=7)
    assert first == sig.paired_permutation_test(a, b, resamples=10_000, seed=7)
    assert first.p_value == pytest.approx(1 / 10_001)


def test_bad_input_is_a_sip_error():
    with pytest.raises(SipError):
        sig.paired_permutation_test([1.0, 2.0], [1.0])
    with pytest.raises(SipError):
        sig.paired_permutation_test([1.0], [2.0], alternative="bigger")
    with pytest.raises(SipError):
        sig.parse_pair("sip-nd7@bimachine-uc")


def test_parse_pair():
    pair = sig.parse_pair("sip-nd7:sip-d4plus@bimachine-iteration,bimachine-uc")
    assert (pair.a, pair.b, pair.settings) == ("sip-nd7", "sip-d4plus", ("bimachine-iteration", "bimachine-uc"))
    assert pair.name == "sip-nd7:sip-d4plus@bimachine-iteration,bimachine-uc"


def test_paired_scores_average_seeds_and_keep_shared_tasks(tmp_path):
    write_run(tmp_path, "a", "g2p", "g2p-ban-d0", 50.0, seed=1)
    write_run(tmp_path, "a", "g2p", "g2p-ban-d0", 70.0, seed=2)
    write_run(tmp_path, "a", "g2p", "g2p-cop-d0", 10.0)
    write_run(tmp_path, "b", "g2p", "g2p-ban-d0", 40.0)
    write_run(tmp_path, "b", "sygus", "sygus-phone-d0", 40.0)
    scores = sig.paired_scores(load_runs(tmp_path), sig.Pair("a", "b", ("g2p",)))
    assert scores.to_dict("records") == [{"task_id": "g2p-ban-d0", "score_a": 60.0, "score_b": 40.0}]


def make_bimachine_runs(root, n=10):
    for kind in ("iteration", "uc"):
        for i in range(n):
            write_run(root, "sip-nd7", f"bimachine-{kind}", f"bimachine-{kind}-{i}", 90.0 + i % 3)
            write_run(root, "sip-d4plus", f"bimachine-{kind}", f"bimachine-{kind}-{i}", 85.0 + i % 2)


def test_significance_cli_writes_summary_and_task_scores(tmp_path, capsys):
    make_bimachine_runs(tmp_path / "runs")
    out = tmp_path / "results" / "significance.csv"
    code = main(["report", "significance", "--runs", str(tmp_path / "runs"),
                 "--pairs", "sip-nd7:sip-d4plus@bimachine-iteration,bimachine-uc", "sip-d4:set@g2p",
                 "--out", str(out)])
    assert code == 0
    tidy = pd.read_csv(out)  # the tables' layout: model = the pair, setting = its settings
    assert list(tidy.columns) == ["model", "setting", "metric", "value", "n"]
    cells = tidy.set_index(["model", "metric"])
    first = "sip-nd7:sip-d4plus@bimachine-iteration,bimachine-uc"
    assert set(tidy[tidy["model"] == first]["setting"]) == {"bimachine-iteration+bimachine-uc"}
    assert (cells.loc[(first, "acc_a"), "n"], cells.loc[(first, "acc_b"), "n"]) == (20, 20)
    assert cells.loc[(first, "acc_diff"), "value"] == pytest.approx(
        cells.loc[(first, "acc_a"), "value"] - cells.loc[(first, "acc_b"), "value"])
    assert cells.loc[(first, "acc_a"), "value"] == pytest.approx(np.mean([90.0 + i % 3 for i in range(10)]))
    assert cells.loc[(first, "p_value"), "value"] < 0.01
    second = cells.loc[("sip-d4:set@g2p", "p_value")]
    assert second["n"] == 0 and pd.isna(second["value"])  # no g2p runs: visible, not dropped
    markdown = (tmp_path / "results" / "significance.md").read_text()
    assert first in markdown and "p ≈ 0.017" in markdown
    assert json.loads((tmp_path / "results" / "significance.meta.json").read_text())["resamples"] == 20_000
    tasks = pd.read_csv(tmp_path / "results" / "significance.tasks.csv")
    assert len(tasks) == 20 and set(tasks.columns) == {"pair", "task_id", "score_a", "score_b"}
    assert "n=20" in capsys.readouterr().out


def test_significance_cli_defaults_include_the_paper_tests(tmp_path):
    make_bimachine_runs(tmp_path / "runs")
    out = tmp_path / "significance.csv"
    assert main(["report", "significance", "--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    pairs = pd.read_csv(out)
    assert "sip-nd7:sip-d4plus@bimachine-iteration,bimachine-uc" in set(pairs["model"])
    assert "sip-d4:set@g2p" in set(pairs["model"])
    claim = pairs[pairs["model"].str.startswith("t2-nd7:") & (pairs["metric"] == "p_value")].iloc[0]
    assert claim.n == 20  # the claims' own test, one-sided:
    assert "| greater |" in next(line for line in (tmp_path / "significance.md").read_text().splitlines()
                                 if line.startswith("| t2-nd7:"))


def test_significance_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["report", "significance", "--runs", str(tmp_path / "nope"), "--out", str(tmp_path / "s.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sip: error:") and err.count("\n") == 1
    make_bimachine_runs(tmp_path / "runs", n=2)
    assert main(["report", "significance", "--runs", str(tmp_path / "runs"), "--pairs", "x:y@g2p",
                 "--out", str(tmp_path / "s.csv")]) == 2
    assert "no pair has tasks" in capsys.readouterr().err
