"""S-expression reader and SyGuS constraint extraction, including all 19 real benchmark files."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from sip_core.errors import SipError
from sip_core.tasks.sexpr import Node, Str, Symbol, parse, unescape
from sip_core.tasks.sygus import EXCLUDED, TASKS, group_of, read_sygus, source_name

SHARED = Path(os.environ.get("SIP_DATA_MIRROR", Path(__file__).resolve().parents[2] / "shared" / "data"))

HEADER = '(set-logic SLIA)\n(synth-fun f ((a String) (b String)) String ((Start String (a b " "))))\n'


def test_parse_atoms_lists_comments_and_lines():
    exprs = parse('; a comment with "quote and (paren\n(f "x;y" |a b| 12)\n\n(g\n "multi\nline")')
    assert [type(e) for e in exprs] == [Node, Node]
    assert exprs[0].items == ("f", "x;y", "a b", "12") and exprs[0].line == 2
    assert isinstance(exprs[0].items[1], Str) and isinstance(exprs[0].items[2], Symbol)
    assert exprs[1].line == 4 and exprs[1].items[1] == "multi\nline"


def test_smtlib_string_escapes():
    assert parse('("say ""hi""")')[0].items == ('say "hi"',)
    assert unescape(r"\u0041\u{1F600}\u{42}") == "A\U0001F600B"
    assert unescape(r"a\nb\u{FFFFF}") == r"a\nb\u{FFFFF}"  # not SMT-LIB escapes: kept as written
    assert unescape(r"\u{5C}u0041") == "\\u0041"  # one pass: a produced backslash is not re-read


@pytest.mark.parametrize("text, message", [
    ("(a (b)", r"src:1: '\(' is never closed"),
    ("(a))", r"src:1: unbalanced '\)'"),
    ('(a\n "open)', r"src:2: unterminated string literal"),
])
def test_parse_errors(text, message):
    with pytest.raises(SipError, match=message):
        parse(text, "src")


def test_extracts_constraints_and_joins_arguments(tmp_path):
    path = tmp_path / "t-long.sl"
    path.write_text(HEADER + '(declare-var a String)\n'
                    '(constraint (= (f "Jane" "Doe") "Doe Jane"))\n'
                    '(constraint\n  (= "Roe, J." (f "John" "Roe")))  ; reversed sides, same meaning\n'
                    '(check-synth)\n')
    got = read_sygus(path)
    assert got.function == "f" and got.params == ("a", "b")
    assert got.pairs == [("Jane Doe", "Doe Jane"), ("John Roe", "Roe, J.")]


@pytest.mark.parametrize("constraint, message", [
    ('(constraint (= (f "x") "y"))', r":4: expected 2 string literal argument"),
    ('(constraint (= (g "x" "y") "z"))', r":4: constraint is not \(= \(f \.\.\.\)"),
    ('(constraint (str.prefixof "a" "b"))', r":4: constraint is not"),
    ('(constraint (= (f "x" a) "z"))', r":4: expected 2 string literal"),
])
def test_unsupported_constraints_are_errors(tmp_path, constraint, message):
    path = tmp_path / "t-long.sl"
    path.write_text(HEADER + "\n" + constraint + "\n")
    with pytest.raises(SipError, match=message):
        read_sygus(path)


def test_task_registry():
    assert len(TASKS) == 19 and not set(TASKS) & set(EXCLUDED)
    assert group_of("reverse-name") == "rev-name" and group_of("name-combine-4") == "sur-initial"
    assert sum(group_of(t) == "fst" for t in TASKS) == 17
    assert source_name("phone-3") == "sygus_pbe_strings_2017/phone-3-long.sl"
    with pytest.raises(SipError, match="unknown SyGuS task"):
        source_name("phone-11")


@pytest.mark.skipif(not SHARED.is_dir(), reason="no local data mirror")
def test_all_real_constraints_parsed():
    sizes = {"dr-name": 50, "name-combine-3": 50, "name-combine-4": 50, "reverse-name": 50,
             "firstname": 54, "initials": 54, "lastname": 54, "name-combine-2": 54}
    for task in TASKS:
        path = SHARED / source_name(task)
        got = read_sygus(path)
        # Independent count: every constraint opens on its own line in these files.
        assert len(got.pairs) == path.read_text().count("(constraint ") == sizes.get(task, 100), task
        assert got.duplicates == 0
        assert max(len(x) for x, _ in got.pairs) <= 18
    assert read_sygus(SHARED / source_name("reverse-name")).pairs[0] == ("Launa Withers", "Withers Launa")
    assert read_sygus(SHARED / source_name("name-combine-4")).pairs[0] == ("Launa Withers", "Withers, L.")
