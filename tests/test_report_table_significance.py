"""The paper's significance tests reach the Markdown of Tables 2, 3 and 7 (computed on all tasks run)."""
import json

import pandas as pd

from sip_core.cli import main
from sip_core.report import significance as sig
from sip_core.report.runs import load_runs


def write_run(root, model, setting, task_id, acc):
    path = root / model / setting / task_id / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"task_id": task_id, "seed": 1, "device": "cpu", "wall_s": 1.0, "params_hash": "h",
                                "reported": {"acc": acc, "ed": 0.0, "per": 0.0}}))


def bimachine_runs(root, nd7, d4plus):
    for kind in ("iteration", "uc"):
        for i in range(10):
            for model, acc in (("sip-nd7", nd7(i)), ("sip-d4plus", d4plus(i))):
                write_run(root, model, f"bimachine-{kind}", f"bimachine-{kind}-{i}", acc)


def test_identical_models_give_p_one_in_the_note(tmp_path):
    bimachine_runs(tmp_path, lambda i: 80.0 + i, lambda i: 80.0 + i)
    (note,) = sig.table_notes(load_runs(tmp_path), "table2", resamples=10_000)
    assert "n = 20 tasks" in note and "p = 1 " in note and "p ≈ 0.017" in note
    assert sig.table_notes(load_runs(tmp_path), "table1") == []


def test_separated_models_are_significant_in_table2_markdown(tmp_path):
    bimachine_runs(tmp_path / "runs", lambda i: 95.0 - i % 2, lambda i: 60.0 + i % 3)
    out = tmp_path / "table2.csv"
    assert main(["table", "--table", "table2", "--scale", "ci", "--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    line = next(l for l in out.with_suffix(".md").read_text().splitlines() if l.startswith("Significance"))
    assert "sip-nd7 vs sip-d4plus" in line and "n = 20 tasks" in line  # all 10 tasks per kind, not Table 2's first 5
    p = float(line.split("p = ")[1].split(" ")[0])
    assert p < 0.01
    table = pd.read_csv(out)
    assert set(table["model"]) == {"sip-nd7", "sip-d4plus"}  # the CSV itself is unchanged by the note


def test_the_note_names_the_settings_it_covers(tmp_path):
    """Runs of both models on iteration only: the note says the test covers iteration, and UC has none yet."""
    for i in range(10):
        for model, acc in (("sip-nd7", 70.0 + i), ("sip-d4plus", 71.0 + i)):
            write_run(tmp_path, model, "bimachine-iteration", f"bimachine-iteration-{i}", acc)
    (note,) = sig.table_notes(load_runs(tmp_path), "table2", resamples=2_000)
    assert "on bimachine-iteration only (bimachine-uc: no runs of both models yet): n = 10 tasks" in note
    assert "mean difference -1.00" in note
    bimachine_runs(tmp_path / "both", lambda i: 80.0, lambda i: 80.0)
    (note,) = sig.table_notes(load_runs(tmp_path / "both"), "table2", resamples=2_000)
    assert "on bimachine-iteration, bimachine-uc: n = 20 tasks" in note
