"""`sip vote`: the majority vote of runs' predictions. The vote is checked against a definition written out
independently (counts by list.count, the earliest of the most frequent), and end to end on hand-made runs."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from sip_core import cli
from sip_core.eval.outputs import write_run
from sip_core.eval.vote import majority


@given(st.integers(1, 5).flatmap(lambda k: st.lists(st.lists(st.sampled_from("abc"), min_size=k, max_size=k),
                                                     min_size=0, max_size=20)))
def test_majority_is_the_most_frequent_value_and_ties_go_to_the_first_run(rows):
    columns = [list(c) for c in zip(*rows)] if rows else []
    voted = majority(columns) if columns else []
    for row, v in zip(rows, voted):
        best = max(row.count(x) for x in row)
        assert v == next(x for x in row if row.count(x) == best)


def _run(path, predictions, golds=("ab", "ba", "aa", "bb"), inputs=("1", "2", "3", "4")):
    write_run(path, {"reported": {}}, list(inputs), list(golds), list(predictions))
    return str(path)


def test_three_runs_vote_and_the_record_says_what_each_scored(tmp_path, capsys):
    a = _run(tmp_path / "a", ["ab", "xx", "aa", "yy"])  # 50%
    b = _run(tmp_path / "b", ["ab", "ba", "zz", "yy"])  # 50%
    c = _run(tmp_path / "c", ["qq", "ba", "aa", "bb"])  # 75%
    assert cli.main(["vote", a, b, c, "--out", str(tmp_path / "v")]) == 0
    m = json.loads((tmp_path / "v" / "metrics.json").read_text())
    assert m["run_acc"] == [50.0, 50.0, 75.0]
    assert m["acc"] == 75.0  # inputs 1-3 right by 2 of 3; input 4: yy twice beats bb
    assert m["any_run_right"] == 100.0 and m["n_test"] == 4
    assert "acc 75.0%" in capsys.readouterr().out


def test_runs_on_other_inputs_or_too_few_runs_are_one_line_errors(tmp_path, capsys):
    a = _run(tmp_path / "a", ["ab", "ba", "aa", "bb"])
    b = _run(tmp_path / "b", ["ab", "ba", "aa", "bb"], inputs=("1", "2", "3", "5"))
    assert cli.main(["vote", a, b, "--out", str(tmp_path / "v")]) == 2
    assert cli.main(["vote", a, "--out", str(tmp_path / "v")]) == 2
    assert cli.main(["vote", a, str(tmp_path), "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "other inputs" in err[0] and "at least two" in err[1] and "not a run directory" in err[2]
    assert not (tmp_path / "v").exists(), "nothing is written on an error"


def _tiny(path, seed):
    import torch

    from sip_core.model import SIPConfig, SIPForConditionalGeneration
    from sip_core.model.config import t5_kwargs
    from sip_core.model.loading import save_model
    torch.manual_seed(seed)
    shape = t5_kwargs(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, dropout_rate=0.0)
    save_model(SIPForConditionalGeneration(SIPConfig(t5=shape, prefix_mode="none", variant="base")), path)
    return str(path)


def _predict(monkeypatch, capsys, models, lines):
    import io
    import sys
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("".join(x + "\n" for x in lines).encode()),
                                                      encoding="utf-8"))
    assert cli.main(["predict", "--model", *models]) == 0
    return capsys.readouterr().out.split("\n")[:-1]


def test_predict_with_several_models_outputs_their_vote(tmp_path, monkeypatch, capsys):
    a, b = _tiny(tmp_path / "a", 1), _tiny(tmp_path / "b", 2)
    lines = ["ab", "banana", "x", "coconut", "aaaa"]
    out_a, out_b = _predict(monkeypatch, capsys, [a], lines), _predict(monkeypatch, capsys, [b], lines)
    assert len(out_a) == len(lines) and out_a != out_b, "two random models must differ somewhere for this test"
    assert _predict(monkeypatch, capsys, [b, a, a], lines) == out_a  # a is the majority on every line
    assert _predict(monkeypatch, capsys, [b, a], lines) == out_b  # one each: ties go to the first named
