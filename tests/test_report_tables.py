"""Tables are computed from run outputs exactly as the paper aggregates them."""
import json

import pandas as pd
import pytest

from sip_core.errors import SipError
from sip_core.report import tables
from sip_core.report.runs import load_runs, task_setting


def write_run(root, model, setting, task_id, acc, ed, per=0.0, seed=1, device="cpu", **extra):
    path = root / model / setting / task_id / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"task_id": task_id, "seed": seed, "device": device, "wall_s": 2.0,
                                "params_hash": "abc", "reported": {"acc": acc, "ed": ed, "per": per}, **extra}))


def test_task_setting_splits_the_index():
    assert task_setting("iteration-s4-3") == ("iteration-s4", 3)
    assert task_setting("bimachine-uc-12") == ("bimachine-uc", 12)
    assert task_setting("g2p-ban-d2") == ("g2p-ban", "d2")


def test_table1_means_medians_and_counts(tmp_path):
    for i, acc in enumerate([10.0, 20.0, 90.0]):
        write_run(tmp_path, "sip-d4", "uc-s4", f"uc-s4-{i}", acc, 3.0 - i)
        write_run(tmp_path, "sip-d4", "iteration-s4", f"iteration-s4-{i}", 50.0 + i, 1.0)
    write_run(tmp_path, "base", "uc-s4", "uc-s4-0", 5.0, 4.0)
    runs = load_runs(tmp_path)
    table = tables.aggregate(runs, tables.TABLES["table1"], ["base", "sip-d4"])
    value = table.set_index(["model", "setting", "metric"])["value"]
    assert value[("sip-d4", "uc", "acc")] == pytest.approx(40.0)
    assert value[("sip-d4", "uc", "acc_median")] == pytest.approx(20.0)
    assert value[("sip-d4", "uc", "ed_median")] == pytest.approx(2.0)
    assert value[("sip-d4", "iteration", "acc")] == pytest.approx(51.0)
    assert ("sip-d4", "iteration", "acc_median") not in value.index  # medians only where the paper has them
    assert table.set_index(["model", "setting", "metric"])["n"][("sip-d4", "uc", "acc")] == 3
    assert list(dict.fromkeys(table["model"])) == ["base", "sip-d4"]  # the paper's row order


def test_table2_uses_only_the_first_tasks(tmp_path):
    for i in range(7):
        write_run(tmp_path, "sip-nd7", "bimachine-uc", f"bimachine-uc-{i}", 100.0 if i >= 5 else 50.0, 0.0)
    table = tables.aggregate(load_runs(tmp_path), tables.TABLES["table2"], ["sip-nd7"])
    acc = table[(table.metric == "acc")].iloc[0]
    assert acc.value == pytest.approx(50.0) and acc.n == 5


def test_g2p_average_is_over_languages_and_sygus_overall_over_runs(tmp_path):
    write_run(tmp_path, "set", "g2p", "g2p-ban-d0", 60.0, 1.0, per=0.1)
    write_run(tmp_path, "set", "g2p", "g2p-ban-d1", 40.0, 1.0, per=0.3)
    write_run(tmp_path, "set", "g2p", "g2p-cop-d0", 10.0, 2.0, per=0.5)
    table = tables.aggregate(load_runs(tmp_path), tables.TABLES["table7"], ["set"])
    value = table.set_index(["setting", "metric"])["value"]
    assert value[("ban", "acc")] == pytest.approx(50.0)
    assert value[("avg", "acc")] == pytest.approx(30.0)  # (50 + 10) / 2, not (60 + 40 + 10) / 3
    assert value[("avg", "per")] == pytest.approx(0.35)

    root = tmp_path / "sygus"
    write_run(root, "te", "sygus", "sygus-reverse-name-d0", 100.0, 0.0)
    write_run(root, "te", "sygus", "sygus-phone-3-d0", 0.0, 4.0)
    write_run(root, "te", "sygus", "sygus-phone-4-d0", 50.0, 2.0)
    table = tables.aggregate(load_runs(root), tables.TABLES["table4"], ["te"])
    value = table.set_index(["setting", "metric"])["value"]
    assert value[("rev-name", "acc")] == 100.0 and value[("fst", "acc")] == 25.0
    assert value[("overall", "acc")] == pytest.approx(50.0)


def test_markdown_shows_ours_beside_the_paper_and_writes_atomically(tmp_path):
    write_run(tmp_path / "runs", "sip-d4", "iteration-s4", "iteration-s4-0", 91.25, 0.2, device="NVIDIA H100")
    runs = load_runs(tmp_path / "runs")
    table = tables.aggregate(runs, tables.TABLES["table1"], ["sip-d4"])
    meta = tables.build_meta(runs, "gpu", "hash", "scratch")
    tables.write_table(table, tmp_path / "out" / "table1.csv", "table1", "T1", meta)
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "| sip-d4 | 91.2 (94.8) | 0.20 (0.12) |" in md
    assert json.loads((tmp_path / "out" / "table1.meta.json").read_text())["devices"] == ["NVIDIA H100"]
    csv = pd.read_csv(tmp_path / "out" / "table1.csv")
    assert list(csv.columns) == ["model", "setting", "metric", "value", "n"]
    assert not list((tmp_path / "out").glob(".*tmp"))


def test_meta_counts_the_runs_commits_and_determinism_modes(tmp_path):
    """A table's meta.json says which code and which numerics its runs came from: runs before `--determinism`
    (no key) count as unrecorded, commits as git prints them short."""
    write_run(tmp_path, "sip-d4", "iteration-s4", "iteration-s4-0", 90.0, 0.1, commit="d81127dbe456", determinism="strict")
    write_run(tmp_path, "sip-d4", "iteration-s4", "iteration-s4-1", 80.0, 0.2, commit="d81127dbe456", determinism="strict")
    write_run(tmp_path, "base", "iteration-s4", "iteration-s4-0", 0.0, 20.0, commit="0280130aaaa")
    meta = tables.build_meta(load_runs(tmp_path), "gpu", "hash", "scratch")
    assert meta["run_commits"] == {"0280130": 1, "d81127d": 2}
    assert meta["run_determinism"] == {"strict": 2, "unrecorded": 1}


def test_no_runs_is_a_clear_error(tmp_path):
    with pytest.raises(SipError, match="no runs"):
        tables.aggregate(load_runs(tmp_path), tables.TABLES["table1"], ["sip-d4"])


def test_pretrain_table_reads_each_final_evaluation_and_its_runs_facts(tmp_path):
    for name, dev, steps in (("sip-d4", 98.5, 9000), ("te", 50.0, 100)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pretrain_metrics.json").write_text(json.dumps({
            "final": {"dev_acc": dev, "test_acc": dev - 1}, "curve": [{"loss": 4.0}, {"loss": 0.5}],
            "steps": steps, "train_seconds": 1116.68, "device": "H100", "status": "finished", "commit": "0d2601c4c3f1"}))
    frame, runs = tables.pretrain_table([tmp_path / "sip-d4", tmp_path / "te"])
    cells = frame.set_index(["model", "setting", "metric"])["value"]
    assert cells[("sip-d4", "dev", "acc")] == 98.5 and cells[("te", "test", "acc")] == 49.0
    assert cells[("te", "train", "loss_end")] == 0.5
    assert runs.set_index("model").loc["sip-d4", ["steps", "wall_s", "commit"]].tolist() == [9000, 1116.7, "0d2601c"]
    with pytest.raises(SipError, match="pretrain_metrics.json is missing"):
        tables.pretrain_table([tmp_path / "nothing"])


def test_the_pretraining_figure_draws_one_labelled_curve_per_model_with_a_curve(tmp_path, monkeypatch):
    from sip_core.report import figures
    for name, final, curve in (("sip-d4", {"dev_acc": 98.5}, [{"step": 50, "loss": 4.0}, {"step": 100, "loss": 0.5}]),
                               ("te", {"easy_dev_acc": 3.9}, [{"step": 50, "loss": 4.8}, {"step": 100, "loss": 0.1}]),
                               ("old", {}, [])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pretrain_metrics.json").write_text(json.dumps({"final": final, "curve": curve}))
    import matplotlib.axes
    drawn = []
    plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", lambda self, x, y, **kw: (drawn.append((x, y, kw["label"])),
                                                                               plot(self, x, y, **kw))[1])
    out = tmp_path / "curves.png"
    figures.pretrain_figure([tmp_path / "sip-d4", tmp_path / "te", tmp_path / "old"], out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert drawn == [([50, 100], [4.0, 0.5], "sip-d4 (dev 98.5%)"), ([50, 100], [4.8, 0.1], "te (seen FSTs 3.9%)")]
