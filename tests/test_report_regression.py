"""The CI table comparison passes within tolerance and fails on real changes (a test of the test)."""
import pandas as pd
import pytest

from sip_core.report.regression import compare_table, spread_tolerance

REF = pd.DataFrame({"model": ["sip-d4", "sip-d4", "base"], "setting": ["iteration"] * 3,
                    "metric": ["acc", "ed", "acc"], "value": [80.0, 0.5, 20.0], "n": [2, 2, 2]})
TOL = {"acc": 5.0, "ed": 0.3}


def test_within_tolerance_passes():
    produced = REF.assign(value=[83.0, 0.7, 17.5])
    assert compare_table(produced, REF, TOL) == []


def test_shifted_value_missing_and_extra_cells_fail():
    produced = REF.assign(value=[60.0, 0.5, 20.0]).iloc[:2]
    produced = pd.concat([produced, pd.DataFrame([{"model": "te", "setting": "iteration", "metric": "acc",
                                                    "value": 1.0, "n": 1}])])
    problems = compare_table(produced, REF, TOL)
    assert any("sip-d4/iteration/acc: 60" in p for p in problems)
    assert any("base/iteration/acc: missing" in p for p in problems)
    assert any("te/iteration/acc: not in the reference" in p for p in problems)


def test_tolerance_is_a_multiple_of_the_seed_spread_with_floors():
    seeds = [REF.assign(value=[80.0, 0.5, 20.0]), REF.assign(value=[82.0, 0.5, 18.0]),
             REF.assign(value=[78.0, 0.5, 22.0])]
    out = spread_tolerance(seeds, factor=3.0, floors={"ed": 0.1})
    assert out["max_seed_std"]["acc"] == pytest.approx(2.0)
    assert out["tolerance"]["acc"] == pytest.approx(6.0)
    assert out["tolerance"]["ed"] == pytest.approx(0.1)  # no spread measured: the floor
