"""WikiPron reader: targets without phone spaces, errors with file:line, counts, the real files."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from sip_core.errors import SipError
from sip_core.tasks.wikipron import LANGUAGES, read_wikipron, source_name

SHARED = Path(os.environ.get("SIP_DATA_MIRROR", Path(__file__).resolve().parents[2] / "shared" / "data"))


def _file(tmp_path, data: bytes) -> Path:
    path = tmp_path / "x.tsv"
    path.write_bytes(data)
    return path


def test_targets_drop_phone_spaces_and_keep_duplicates(tmp_path):
    data = "ᬅᬃᬣ\ta r t ə\nkat\tk a t\nkat\tk æ t\nkat\tk a t\n\n".encode()
    got = read_wikipron(_file(tmp_path, data))
    assert got.pairs == [("ᬅᬃᬣ", "artə"), ("kat", "kat"), ("kat", "kæt"), ("kat", "kat")]
    assert (got.lines, got.blank, got.header, got.duplicate_words, got.duplicate_pairs) == (5, 1, False, 1, 1)
    assert "4 examples" in got.summary() and "none dropped" in got.summary()


def test_multi_character_phones_stay_intact(tmp_path):
    assert read_wikipron(_file(tmp_path, "x\tt͡ʃ ɔː ˩˧\n".encode())).pairs == [("x", "t͡ʃɔː˩˧")]


def test_optional_header_and_crlf(tmp_path):
    got = read_wikipron(_file(tmp_path, b"input\toutput\r\nab\ta b\r\n"))
    assert got.header and got.pairs == [("ab", "ab")]


@pytest.mark.parametrize("data, message", [
    (b"ok\to k\nbroken line\n", r"x.tsv:2: expected 'word<TAB>phones' \(2 fields\), found 1"),
    (b"ok\to k\na\tb\tc\n", r"x.tsv:2: .*found 3"),
    (b"\ta b\n", r"x.tsv:1: empty word"),
    (b"ab\t\n", r"x.tsv:1: phones must be non-empty"),
    (b"ab\ta  b\n", r"x.tsv:1: phones must be .*single spaces"),
    (b"ok\to k\nab\t\xff b\n", r"x.tsv:2: not valid UTF-8"),
])
def test_malformed_lines_name_file_and_line(tmp_path, data, message):
    with pytest.raises(SipError, match=message):
        read_wikipron(_file(tmp_path, data))


def test_unknown_language_and_missing_file(tmp_path):
    with pytest.raises(SipError, match="unknown g2p language 'xxx'"):
        source_name("xxx")
    with pytest.raises(SipError, match="cannot read WikiPron file"):
        read_wikipron(tmp_path / "absent.tsv")


@pytest.mark.skipif(not SHARED.is_dir(), reason="no local data mirror")
def test_real_files_read_completely():
    expected = {"ban": 410, "cop": 820, "got": 1785, "lao": 4180, "syl": 292, "tel": 1146, "tzm": 728}
    for lang in LANGUAGES:
        got = read_wikipron(SHARED / source_name(lang))
        assert len(got.pairs) == got.lines == expected[lang]  # every line is one example
        assert all(" " not in y and y for _, y in got.pairs)
