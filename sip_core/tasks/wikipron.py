"""WikiPron grapheme-to-phoneme files → (word, phones) pairs.

A WikiPron file has no header and one ``word<TAB>phones`` entry per line, phones separated by single
spaces. The target is the phone string with the separating spaces removed (DESIGN §7), so PER is a
character-level edit distance over the IPA string. Malformed lines stop the read with file:line
(the raw files are pinned by checksum, so a malformed line means a wrong file, not noise to skip).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sip_core.errors import SipError

# The paper's seven languages (ISO 639-3 code → WikiPron file). Broad transcription except Telugu and
# Tamazight (narrow, as in the paper) and Lao (narrow: the pinned WikiPron commit has no broad Lao file).
LANGUAGES = {
    "ban": "ban_bali_broad",
    "cop": "cop_copt_broad",
    "got": "got_goth_broad",
    "lao": "lao_laoo_narrow",
    "syl": "syl_sylo_broad",
    "tel": "tel_telu_narrow",
    "tzm": "tzm_tfng_narrow",
}
HEADER = "input\toutput"


def source_name(lang: str) -> str:
    """The registry name (and relative path under ``--raw``) of a language's file."""
    if lang not in LANGUAGES:
        raise SipError(f"unknown g2p language {lang!r}; known: {', '.join(LANGUAGES)}")
    return f"wikipron/{LANGUAGES[lang]}.tsv"


@dataclass(frozen=True)
class WikipronFile:
    path: str
    pairs: list[tuple[str, str]]
    lines: int             # physical lines in the file
    blank: int             # empty lines skipped (the original reader skips them too)
    header: bool           # an ``input<TAB>output`` first line was skipped (the original's lenient mode)
    duplicate_words: int   # words with more than one entry (kept: the paper does not de-duplicate)
    duplicate_pairs: int   # extra copies of an identical (word, target) pair after removing spaces (kept)

    def summary(self) -> str:
        return (f"{self.path}: {self.lines} lines → {len(self.pairs)} examples "
                f"({self.blank} blank, header {'skipped' if self.header else 'none'}, "
                f"{self.duplicate_words} words with several pronunciations, "
                f"{self.duplicate_pairs} duplicate pairs; none dropped)")


def parse_line(line: str, where: str) -> tuple[str, str]:
    fields = line.split("\t")
    if len(fields) != 2:
        raise SipError(f"{where}: expected 'word<TAB>phones' (2 fields), found {len(fields)}")
    word, phones = fields
    if not word:
        raise SipError(f"{where}: empty word")
    tokens = phones.split(" ")
    if not phones or "" in tokens:
        raise SipError(f"{where}: phones must be non-empty and separated by single spaces: {phones!r}")
    return word, "".join(tokens)


def read_wikipron(path: str | Path) -> WikipronFile:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SipError(f"{path}: cannot read WikiPron file ({err.strerror or err})") from None
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the final newline ends the last line; it does not start a new one
    pairs: list[tuple[str, str]] = []
    blank, header = 0, False
    for number, raw in enumerate(raw_lines, start=1):
        where = f"{path}:{number}"
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as err:
            raise SipError(f"{where}: not valid UTF-8 (byte {err.start})") from None
        if number == 1 and line.strip() == HEADER:
            header = True
        elif not line:
            blank += 1
        else:
            pairs.append(parse_line(line, where))
    words = Counter(w for w, _ in pairs)
    return WikipronFile(
        path=str(path), pairs=pairs, lines=len(raw_lines), blank=blank, header=header,
        duplicate_words=sum(1 for c in words.values() if c > 1),
        duplicate_pairs=len(pairs) - len(set(pairs)),
    )
