"""A small SMT-LIB s-expression reader (enough for SyGuS-IF ``.sl`` files).

It tokenises properly instead of matching lines with a regex, so a ``"`` or ``;`` inside a string
literal, a constraint spread over several lines, or a comment never corrupts an example.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from sip_core.errors import SipError


class Str(str):
    """A string literal (distinguishes ``"x"`` from the symbol ``x`` after parsing)."""


class Symbol(str):
    """A symbol, keyword or numeral; ``|quoted symbols|`` lose their bars."""


@dataclass(frozen=True)
class Node:
    """A parenthesised list, with the 1-based line where it opens (for error messages)."""
    items: tuple
    line: int


_ESCAPE = re.compile(r"\\u(?:\{([0-9A-Fa-f]{1,5})\}|([0-9A-Fa-f]{4}))")


def unescape(raw: str) -> str:
    r"""SMT-LIB 2.6 string literal body → text: ``""`` is one quote; ``\uXXXX`` and ``\u{X..}`` are code points.

    Any other backslash stays literal, as the standard says.
    """
    return _ESCAPE.sub(_codepoint, raw.replace('""', '"'))  # one pass: no escape is read twice


def _codepoint(match: re.Match) -> str:
    value = int(match.group(1) or match.group(2), 16)
    if value > 0x2FFFF:  # SMT-LIB caps string characters at 0x2FFFF; keep the text as written
        return match.group(0)
    return chr(value)


def parse(text: str, source: str = "<string>") -> list:
    """Parse every top-level expression; atoms are ``Str`` or ``Symbol``, lists are ``Node``."""
    stack: list[tuple[list, int]] = []
    top: list = []
    i, n, line = 0, len(text), 1

    def emit(item) -> None:
        (stack[-1][0] if stack else top).append(item)

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif c == ";":  # comment to end of line
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "(":
            stack.append(([], line))
            i += 1
        elif c == ")":
            if not stack:
                raise SipError(f"{source}:{line}: unbalanced ')'")
            items, start = stack.pop()
            emit(Node(tuple(items), start))
            i += 1
        elif c == '"':
            j, start = i + 1, line
            while True:
                k = text.find('"', j)
                if k < 0:
                    raise SipError(f"{source}:{start}: unterminated string literal")
                if k + 1 < n and text[k + 1] == '"':  # doubled quote = escaped quote
                    j = k + 2
                    continue
                break
            raw = text[i + 1:k]
            line += raw.count("\n")
            emit(Str(unescape(raw)))
            i = k + 1
        elif c == "|":
            k = text.find("|", i + 1)
            if k < 0:
                raise SipError(f"{source}:{line}: unterminated quoted symbol")
            raw = text[i + 1:k]
            line += raw.count("\n")
            emit(Symbol(raw))
            i = k + 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '()";|':
                j += 1
            emit(Symbol(text[i:j]))
            i = j
    if stack:
        raise SipError(f"{source}:{stack[-1][1]}: '(' is never closed")
    return top
