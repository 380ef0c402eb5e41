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


def test_a_table_with_its_own_measured_spread_is_compared_with_it(tmp_path):
    """Table 11's edit distances (90-110-character strings) spread far more than Table 1's: its own tolerance,
    recorded by `sip report spread --for-table`, replaces the general one for that table only."""
    import json

    from sip_core.cli import main
    from sip_core.report.regression import compare_dirs, load_tolerance

    seeds = []
    for i, values in enumerate([[80.0, 100.0, 20.0], [70.0, 130.0, 30.0], [75.0, 115.0, 25.0]]):
        d = tmp_path / f"seed{i}"
        d.mkdir()
        REF.assign(value=values).to_csv(d / "table11.csv", index=False)
        seeds.append(d)
    tol_file = tmp_path / "tolerance.json"
    tol_file.write_text(json.dumps({"tolerance": {"acc": 5.0, "ed": 0.3}}))
    args = ["report", "spread", *map(str, seeds), "--tables", "table11", "--for-table", "table11", "--out", str(tol_file)]
    assert main(args) == 0
    assert load_tolerance(tol_file) == {"acc": 5.0, "ed": 0.3}  # the general tolerance is left alone
    own = load_tolerance(tol_file, table="table11")
    assert own["ed"] == pytest.approx(45.0) and own["acc"] == pytest.approx(15.0)  # 3 x the seed std (15, 5)
    produced = tmp_path / "produced"
    produced.mkdir()
    REF.assign(value=[80.0, 140.0, 20.0]).to_csv(produced / "table11.csv", index=False)
    REF.assign(value=[80.0, 140.0, 20.0]).to_csv(produced / "table1.csv", index=False)
    REF.assign(value=[80.0, 100.0, 20.0]).to_csv(seeds[0] / "table1.csv", index=False)
    (seeds[0] / "tolerance.json").write_text(tol_file.read_text())
    problems = compare_dirs(produced, seeds[0], ["table1", "table11"])
    assert problems["table11"] == [] and len(problems["table1"]) == 1  # +40 ed: within Table 11's, not Table 1's
    assert main(["report", "spread", *map(str, seeds), "--tables", "table11", "--for-table", "table11",
                 "--out", str(tmp_path / "absent.json")]) == 2
