"""User data for sip finetune/predict: one clear error per malformed input, a test per case."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from sip_core.errors import SipError
from sip_core.tasks.draws import task_rows
from sip_core.tasks.taskfile import write_tasks
from sip_core.tasks.tsv import read_inputs, read_pairs

EXAMPLE = Path(__file__).parent / "data" / "example_task"


def _tsv(tmp_path, data: bytes) -> Path:
    path = tmp_path / "train.tsv"
    path.write_bytes(data)
    return path


def test_pairs_with_and_without_header(tmp_path):
    assert read_pairs(_tsv(tmp_path, b"input\toutput\nab\tba\n")) == [("ab", "ba")]
    assert read_pairs(_tsv(tmp_path, b"ab\tba\ncd\t\n")) == [("ab", "ba"), ("cd", "")]  # empty output is fine


def test_crlf_bom_blank_lines_and_unseen_characters(tmp_path):
    data = "\ufeffinput\toutput\r\nжук\t甲虫\r\n\r\nz\tq".encode()
    assert read_pairs(_tsv(tmp_path, data)) == [("жук", "甲虫"), ("z", "q")]


def test_a_csv_quoted_file_is_read_as_it_is_with_one_warning(tmp_path, capsys):
    """pandas' to_csv(sep="\t") quotes every field holding a quote and doubles the quotes inside; those fields are
    read literally (a quote is a symbol), with a warning naming how many lines look quoted."""
    import pandas as pd
    pairs = [('a"b', 'x"y'), ("cd", "dc"), ('"e"', "e")]
    path = tmp_path / "quoted.tsv"
    pd.DataFrame(pairs).to_csv(path, sep="\t", header=False, index=False)
    read = read_pairs(path)
    assert read[0] == ('"a""b"', '"x""y"') and read[1] == ("cd", "dc")  # as written, not unquoted
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith(f"sip: warning: {path}: 2 of 3 lines hold CSV-quoted fields")
    read_pairs(_tsv(tmp_path, 'a"b\tx""y\n"q"\tq\n""\t"\n'.encode()))  # quotes, none of them CSV quoting
    assert capsys.readouterr().err == ""


def test_missing_file(tmp_path):
    with pytest.raises(SipError, match=r"nope.tsv: no such file"):
        read_pairs(tmp_path / "nope.tsv")


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(SipError, match="not a file"):
        read_pairs(tmp_path)


def test_empty_file(tmp_path):
    with pytest.raises(SipError, match=r"train.tsv: empty file"):
        read_pairs(_tsv(tmp_path, b""))


def test_header_only(tmp_path):
    with pytest.raises(SipError, match=r"train.tsv: only a header"):
        read_pairs(_tsv(tmp_path, b"input\toutput\n"))


def test_blank_lines_only(tmp_path):
    with pytest.raises(SipError, match=r"train.tsv: no examples"):
        read_pairs(_tsv(tmp_path, b"\n\n"))


def test_line_without_tab(tmp_path):
    with pytest.raises(SipError, match=r"train.tsv:2: expected input<TAB>output \(exactly one tab\), found no tab"):
        read_pairs(_tsv(tmp_path, b"a\tb\njust text\n"))


def test_line_with_too_many_tabs(tmp_path):
    with pytest.raises(SipError, match=r"train.tsv:3: .*found 2 tabs"):
        read_pairs(_tsv(tmp_path, b"input\toutput\na\tb\na\tb\tc\n"))


def test_non_utf8_bytes(tmp_path):
    with pytest.raises(SipError, match=r"train.tsv:2: not valid UTF-8 \(byte 3 of the line\)"):
        read_pairs(_tsv(tmp_path, b"a\tb\nab\xe9\tc\n"))


def test_line_too_long(tmp_path):
    path = _tsv(tmp_path, b"a\tb\n" + b"x" * 30 + b"\ty\n")
    with pytest.raises(SipError, match=r"train.tsv:2: line is 32 bytes, longer than the limit of 20"):
        read_pairs(path, max_bytes=20)
    assert len(read_pairs(path, max_bytes=32)) == 2


def test_empty_input(tmp_path):
    with pytest.raises(SipError, match=r"train.tsv:2: empty input"):
        read_pairs(_tsv(tmp_path, b"a\tb\n\tb\n"))


def test_selection_only_for_parquet(tmp_path):
    with pytest.raises(SipError, match="only select from a .parquet"):
        read_pairs(_tsv(tmp_path, b"a\tb\n"), split="train")


def test_example_task_files():
    train, test = read_pairs(EXAMPLE / "train.tsv"), read_pairs(EXAMPLE / "test.tsv")
    assert len(train) == len(test) == 40 and not {x for x, _ in train} & {x for x, _ in test}
    rule = str.maketrans("aeiouc", "eiouak")
    assert all(y == x.translate(rule) for x, y in train + test)


@pytest.fixture
def tasks(tmp_path):
    path = tmp_path / "examples.parquet"
    pairs = [(f"in{i}", f"out{i}") for i in range(8)]
    write_tasks(task_rows("sygus-t", "fst", pairs, draws=2, seed=0, n_train=5), path)
    return path


def test_parquet_task_selection(tasks):
    assert len(read_pairs(tasks, task_id="sygus-t-d1", split="train")) == 5
    assert len(read_pairs(tasks, task_id="sygus-t-d1", split="test")) == 3
    with pytest.raises(SipError, match=r"holds 2 tasks .*choose one by task id"):
        read_pairs(tasks)
    with pytest.raises(SipError, match=r"no task 'sygus-t-d9' \(has sygus-t-d0, sygus-t-d1\)"):
        read_pairs(tasks, task_id="sygus-t-d9")
    with pytest.raises(SipError, match=r"no examples for task_id=sygus-t-d0, split=dev"):
        read_pairs(tasks, task_id="sygus-t-d0", split="dev")


def test_parquet_bad_files(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(SipError, match="not a readable Parquet file"):
        read_pairs(bad)
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"input": ["a"]}), bad)
    with pytest.raises(SipError, match="missing column.* output"):
        read_pairs(bad)
    pq.write_table(pa.table({"input": ["a", ""], "output": ["b", "c"]}), bad)
    with pytest.raises(SipError, match="bad.parquet: row 1: empty input"):
        read_pairs(bad)
    pq.write_table(pa.table({"input": ["a"], "output": ["b" * 40]}), bad)
    with pytest.raises(SipError, match="row 0: output is longer than the limit of 32 bytes"):
        read_pairs(bad, max_bytes=32)


def test_read_inputs_text_and_binary_streams():
    assert read_inputs(io.StringIO("ab\nжук\n\n")) == ["ab", "жук"]  # trailing blank lines are harmless
    assert read_inputs(io.BytesIO(b"ab\r\ncd")) == ["ab", "cd"]
    wrapped = io.TextIOWrapper(io.BytesIO(b"ok\n\xff\n"), encoding="utf-8")  # like sys.stdin
    with pytest.raises(SipError, match=r"<stdin>:2: not valid UTF-8"):
        read_inputs(wrapped)


@pytest.mark.parametrize("data, message", [
    (b"", r"<stdin>: no inputs"),
    (b"a\n\nb\n", r"<stdin>:2: empty input"),
    (b"a\tb\n", r"<stdin>:1: input contains a tab"),
    (b"x" * 2000 + b"\n", r"<stdin>:1: line is 2000 bytes, longer than the limit of 1024"),
])
def test_read_inputs_errors(data, message):
    with pytest.raises(SipError, match=message):
        read_inputs(io.BytesIO(data))
