"""Bad input through the `sip` command line: one case per test, each a one-line `sip: error:` message, a
non-zero exit, and nothing written under --out (nor its staging directory beside it)."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import torch

from sip_core import cli
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import save_model
from sip_core.train import finetune

EXAMPLE = Path(__file__).parent / "data" / "example_task"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8),
                                                  prefix_mode="tuned", prefix_length=4))
    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_model(model, path)
    return path


def _sip(capsys, argv, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_one_line_error(code, err, *fragments):
    assert code != 0
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sip: error:"), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def _assert_nothing_written(tmp_path):
    assert not (tmp_path / "out").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")]  # no staging left behind


def _finetune(capsys, tmp_path, model, train, test=EXAMPLE / "test.tsv"):
    return _sip(capsys, ["finetune", "--model", model, "--train", train, "--test", test, "--out", tmp_path / "out",
                         "--epochs", "1", "--no-progress"])


def _train_file(tmp_path, data: bytes) -> Path:
    path = tmp_path / "train.tsv"
    path.write_bytes(data)
    return path


def test_missing_file(capsys, tmp_path, checkpoint):
    code, _, err = _finetune(capsys, tmp_path, checkpoint, tmp_path / "nope.tsv")
    _assert_one_line_error(code, err, "nope.tsv: no such file")
    _assert_nothing_written(tmp_path)


# Each malformed training file: its bytes and what the one-line error must say.
MALFORMED = {
    "empty file": (b"", ["train.tsv: empty file"]),
    "line without a tab": (b"ab\tba\nabba\n", ["train.tsv:2:", "found no tab"]),
    "line with too many tabs": (b"ab\tba\tx\n", ["train.tsv:1:", "found 2 tabs"]),
    "header only": (b"input\toutput\n", ["train.tsv: only a header"]),
    "non-UTF-8 bytes": (b"ab\tba\nca\xfe\tac\n", ["train.tsv:2: not valid UTF-8"]),
    "line too long for the model": (b"ab\tba\n" + b"a" * 3000 + b"\tb\n",
                                    ["train.tsv:2: line is 3002 bytes, longer than the limit"]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_training_file(capsys, tmp_path, checkpoint, case):
    content, expected = MALFORMED[case]
    code, _, err = _finetune(capsys, tmp_path, checkpoint, _train_file(tmp_path, content))
    _assert_one_line_error(code, err, *expected)
    _assert_nothing_written(tmp_path)


def test_checkpoint_that_is_not_a_sip_model(capsys, tmp_path):
    other = tmp_path / "bert"
    other.mkdir()
    (other / "config.json").write_text('{"model_type": "bert", "hidden_size": 8}')
    code, _, err = _finetune(capsys, tmp_path, other, EXAMPLE / "train.tsv")
    _assert_one_line_error(code, err, "not a SIP or T5/ByT5 checkpoint", "'bert'")
    _assert_nothing_written(tmp_path)


def test_directory_that_is_no_checkpoint(capsys, tmp_path):
    (tmp_path / "notes").mkdir()
    code, _, err = _finetune(capsys, tmp_path, tmp_path / "notes", EXAMPLE / "train.tsv")
    _assert_one_line_error(code, err, "is not a model checkpoint (no config.json)")
    _assert_nothing_written(tmp_path)


def test_corrupt_safetensors(capsys, tmp_path, checkpoint):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_bytes((checkpoint / "config.json").read_bytes())
    weights = (checkpoint / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(weights[: len(weights) // 2])  # truncated, as by a failed copy
    code, _, err = _finetune(capsys, tmp_path, broken, EXAMPLE / "train.tsv")
    _assert_one_line_error(code, err, "cannot load the checkpoint", "truncated or corrupt")
    _assert_nothing_written(tmp_path)


def test_default_model_absent(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(finetune, "RELEASED_MODEL", tmp_path / "models" / "sip-d4")
    code, _, err = _sip(capsys, ["finetune", "--train", EXAMPLE / "train.tsv", "--test", EXAMPLE / "test.tsv",
                                 "--out", tmp_path / "out"])
    _assert_one_line_error(code, err, "no --model given", "models/sip-d4", "does not exist yet")
    _assert_nothing_written(tmp_path)


def test_out_that_is_not_a_run_is_left_alone(capsys, tmp_path, checkpoint):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "thesis.tex").write_text("precious")
    code, _, err = _finetune(capsys, tmp_path, checkpoint, EXAMPLE / "train.tsv")
    _assert_one_line_error(code, err, "is a non-empty directory that is not a sip run")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["thesis.tex"]


@pytest.mark.parametrize("case", ["not_sip", "corrupt", "bad_stdin"])
def test_predict_bad_input(capsys, tmp_path, checkpoint, monkeypatch, case):
    model, stdin = checkpoint, b"ab\nba\n"
    if case == "not_sip":
        model = tmp_path / "bert"
        model.mkdir()
        (model / "config.json").write_text('{"model_type": "bert"}')
    elif case == "corrupt":
        model = tmp_path / "broken"
        model.mkdir()
        (model / "config.json").write_bytes((checkpoint / "config.json").read_bytes())
        (model / "model.safetensors").write_bytes(b"\x00" * 64)
    else:
        stdin = b"ab\nb\xffa\n"
    code, out, err = _sip(capsys, ["predict", "--model", model], stdin=stdin, monkeypatch=monkeypatch)
    expected = {"not_sip": "is not a SIP checkpoint", "corrupt": "cannot load the checkpoint",
                "bad_stdin": "<stdin>:2: not valid UTF-8"}[case]
    _assert_one_line_error(code, err, expected)
    assert out == ""  # no outputs for the good lines before the bad one


def test_default_model_without_its_weights(capsys, tmp_path, monkeypatch):
    """A checkout with models/sip-d4's config and card but not its weights (sparse, or weights deleted)."""
    released = tmp_path / "models" / "sip-d4"
    released.mkdir(parents=True)
    (released / "config.json").write_text("{}")
    monkeypatch.setattr(finetune, "RELEASED_MODEL", released)
    code, _, err = _sip(capsys, ["finetune", "--train", EXAMPLE / "train.tsv", "--test", EXAMPLE / "test.tsv",
                                 "--out", tmp_path / "out"])
    _assert_one_line_error(code, err, "no --model given", "are missing", "git checkout", "--model models/sip-d4-small")
    assert not (tmp_path / "out").exists()


def test_the_small_release_named_as_the_alternative_is_in_git_and_loads():
    from sip_core.model.loading import load_sip
    model = load_sip(finetune.SMALL_MODEL)
    assert model.fst_encoder is not None and sum(p.numel() for p in model.parameters()) == 2_991_552


@pytest.mark.parametrize("flags, fragment", [
    (["--prefix-pull", "0.5"], "need --prefix-codebook-states"),
    (["--prefix-codebook-states", "-1"], "at least 0"),
    (["--prefix-codebook-states", "4", "--prefix", "none"], "needs a tuned prefix"),
    (["--prefix-max-norm", "0"], "positive number or 'fst'"),
    (["--prefix-max-norm", "5", "--prefix", "none"], "--prefix-max-norm needs a tuned prefix"),
    (["--prefix-max-norm", "fst", "--prefix", "random"], "needs a SIP checkpoint with an FST sample"),
])
def test_codebook_prefix_options_are_checked_before_anything_runs(capsys, tmp_path, flags, fragment):
    code, _, err = _sip(capsys, ["finetune", "--model", "scratch", "--train", EXAMPLE / "train.tsv",
                                 "--test", EXAMPLE / "test.tsv", "--out", tmp_path / "out", *flags])
    _assert_one_line_error(code, err, fragment)
    assert not (tmp_path / "out").exists()


def test_a_codebook_needs_a_model_with_an_fst_encoder(capsys, tmp_path):
    code, _, err = _sip(capsys, ["finetune", "--model", "scratch", "--d-model", "32", "--d-ff", "64", "--layers", "1",
                                 "--decoder-layers", "1", "--heads", "2", "--d-kv", "16", "--prefix", "random",
                                 "--prefix-codebook-states", "4", "--epochs", "1", "--train", EXAMPLE / "train.tsv",
                                 "--test", EXAMPLE / "test.tsv", "--out", tmp_path / "out"])
    _assert_one_line_error(code, err, "needs a SIP pre-training checkpoint")
    assert not (tmp_path / "out").exists()
