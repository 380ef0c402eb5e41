"""Few-shot draws (the original RandomSplit) and the natural-task Parquet files built by the CLI."""
from __future__ import annotations

import random

import pyarrow.parquet as pq
import pytest
from hypothesis import given, strategies as st

from sip_core.cli import main
from sip_core.errors import SipError
from sip_core.tasks.draws import random_split, task_rows

PAIRS = [(f"w{i}", f"p{i}") for i in range(10)]


def _original(pairs, seed, n_train):
    """The original's steps on the module-level generator (config seeds it, RandomSplit draws and shuffles)."""
    random.seed(seed)
    random.randint(0, 100_000_000)
    data = list(pairs)
    random.shuffle(data)
    return data[:n_train], data[n_train:]


@pytest.mark.parametrize("seed", [0, 1, 42, 2**40])
def test_matches_original_random_split(seed):
    assert random_split(PAIRS, seed, 3) == _original(PAIRS, seed, 3)


def test_pinned_draw():
    # Guards the exact stream (throw-away randint, then shuffle) across Python versions.
    train, test = random_split(PAIRS, 0, 3)
    assert [x for x, _ in train] == ["w8", "w9", "w1"]
    assert [x for x, _ in test] == ["w2", "w5", "w3", "w7", "w4", "w0", "w6"]


@given(st.lists(st.tuples(st.text(max_size=3), st.text(max_size=3)), min_size=2, max_size=30),
       st.integers(0, 2**32), st.integers(1, 5), st.one_of(st.none(), st.integers(1, 10)))
def test_split_is_a_permutation_prefix(pairs, seed, n_train, max_test):
    train, test = random_split(pairs, seed, n_train, max_test)
    full_train, full_test = random_split(pairs, seed, n_train)
    assert train == full_train and test == full_test[:max_test]  # the cap keeps the train draw intact
    assert sorted(full_train + full_test) == sorted(pairs)  # nothing dropped, nothing de-duplicated


def test_task_rows_draws_and_errors():
    rows = task_rows("g2p-x", "x", PAIRS, draws=3, seed=5, n_train=2, max_test=4)
    assert {r[0] for r in rows} == {"g2p-x-d0", "g2p-x-d1", "g2p-x-d2"}
    assert [r[3] for r in rows if r[2] == 1] == ["train"] * 2 + ["test"] * 4
    assert [r[4] for r in rows if r[2] == 1 and r[3] == "train"] == [x for x, _ in random_split(PAIRS, 6, 2)[0]]
    with pytest.raises(SipError, match="only 10 examples"):
        task_rows("g2p-x", "x", PAIRS, draws=1, seed=0, n_train=10)


@pytest.fixture
def raw(tmp_path):
    root = tmp_path / "raw"
    (root / "wikipron").mkdir(parents=True)
    (root / "sygus_pbe_strings_2017").mkdir()
    for file, n in (("ban_bali_broad", 12), ("lao_laoo_narrow", 9)):
        lines = "".join(f"w{i}\tp {i}\n" for i in range(n))
        (root / f"wikipron/{file}.tsv").write_text(lines, encoding="utf-8")
    for task in ("reverse-name", "phone-3"):
        constraints = "".join(f'(constraint (= (f "A{i}") "B{i}"))\n' for i in range(8))
        (root / f"sygus_pbe_strings_2017/{task}-long.sl").write_text(
            f"(synth-fun f ((name String)) String ((Start String (name))))\n{constraints}(check-synth)\n")
    return root


def test_cli_g2p_parquet_is_deterministic(raw, tmp_path, capsys):
    args = ["data", "g2p", "--raw", str(raw), "--langs", "ban,lao", "--draws", "2", "--n-train", "3",
            "--max-test", "4", "--seed", "7"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    assert main(args + ["--out", str(tmp_path / "b")]) == 0
    a, b = tmp_path / "a/examples.parquet", tmp_path / "b/examples.parquet"
    assert a.read_bytes() == b.read_bytes()
    table = pq.read_table(a)
    assert table.column_names == ["task_id", "group", "draw", "split", "input", "output"]
    assert str(table.schema.field("draw").type) == "int32"
    df = table.to_pandas()
    assert sorted(df.task_id.unique()) == ["g2p-ban-d0", "g2p-ban-d1", "g2p-lao-d0", "g2p-lao-d1"]
    assert df[df.task_id == "g2p-ban-d1"].split.tolist() == ["train"] * 3 + ["test"] * 4
    assert set(df.group) == {"ban", "lao"} and df.output.str.contains(" ").sum() == 0
    out = capsys.readouterr()
    assert out.out.strip().splitlines()[-1].startswith("g2p: 4 tasks (2 draws, seed 7), 12 train / 16 test")
    assert "ban_bali_broad.tsv: 12 lines → 12 examples" in out.err


def test_cli_sygus_groups(raw, tmp_path):
    assert main(["data", "sygus", "--raw", str(raw), "--tasks", "reverse-name,phone-3", "--draws", "2",
                 "--n-train", "5", "--seed", "0", "--out", str(tmp_path)]) == 0
    df = pq.read_table(tmp_path / "examples.parquet").to_pandas()
    assert dict(zip(df.task_id, df.group)) == {"sygus-reverse-name-d0": "rev-name", "sygus-reverse-name-d1": "rev-name",
                                               "sygus-phone-3-d0": "fst", "sygus-phone-3-d1": "fst"}
    assert (df.split == "test").sum() == 4 * 3


def test_cli_missing_raw_file_is_one_line_error(raw, tmp_path, capsys):
    assert main(["data", "g2p", "--raw", str(raw), "--langs", "cop", "--seed", "0", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().startswith("sip: error: ")


@pytest.mark.parametrize("args, message", [
    (["sygus", "--tasks", "phone-3,bikes"], "not among the paper's 19 SyGuS tasks: bikes"),
    (["g2p", "--langs", "ban,ban"], "listed twice"),
    (["g2p", "--langs", "ban", "--n-train", "12"], "g2p-ban: only 12 examples"),
])
def test_cli_argument_errors(raw, tmp_path, capsys, args, message):
    assert main(["data", *args, "--raw", str(raw), "--seed", "0", "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
