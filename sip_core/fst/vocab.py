"""The one fixed symbol map shared by every dataset and every model.

V is printable ASCII (32..126) plus the IPA Extensions block (U+0250..U+02AF), without the OpenFst
special characters ``[``, ``]`` and backslash: 188 symbols. Labels in Parquet are strings: one
character, ``""`` for epsilon, or one of the shorthands ``<id>``, ``<upper>``, ``<lower>``.

Ids (stored in every model config, so a model and its data always agree):
    0 padding, 1 epsilon, 2 <id>, 3 <upper>, 4 <lower>, 5.. the 188 symbols of V in code-point order.
"""
from __future__ import annotations

PAD = "<pad>"
EPS = ""
ID = "<id>"
UPPER = "<upper>"
LOWER = "<lower>"
SHORTHANDS = (ID, LOWER, UPPER)  # the original's draw order: [ID, TO_LOWER, TO_UPPER]

_EXCLUDED = {"[", "]", "\\"}
ASCII_V: tuple[str, ...] = tuple(c for c in map(chr, range(32, 127)) if c not in _EXCLUDED)
IPA_V: tuple[str, ...] = tuple(map(chr, range(0x250, 0x2B0)))
V: tuple[str, ...] = tuple(sorted(ASCII_V + IPA_V))
assert len(V) == 188 and len(ASCII_V) == 92

SPECIALS: tuple[str, ...] = (PAD, EPS, ID, UPPER, LOWER)
SYMBOLS: tuple[str, ...] = SPECIALS + V
SYMBOL_TO_ID: dict[str, int] = {s: i for i, s in enumerate(SYMBOLS)}
PAD_ID = 0
N_SYMBOLS = len(SYMBOLS)  # 193

_V_SET = frozenset(V)


def symbol_id(label: str) -> int:
    """Id of a Parquet label; raises KeyError with the label for anything outside the map."""
    try:
        return SYMBOL_TO_ID[label]
    except KeyError:
        raise KeyError(f"label {label!r} is not in the SIP symbol map") from None


def upper_pairs(vocab: str | list[str]) -> list[tuple[str, str]]:
    """Concrete arcs of ``<upper>`` over V_T: letters whose upper-case form is itself in V (DESIGN §7)."""
    return [(a, a.upper()) for a in vocab if a != a.upper() and a.upper() in _V_SET]


def lower_pairs(vocab: str | list[str]) -> list[tuple[str, str]]:
    """Concrete arcs of ``<lower>`` over V_T: letters whose lower-case form is itself in V."""
    return [(a, a.lower()) for a in vocab if a != a.lower() and a.lower() in _V_SET]


def expand_label(ilabel: str, olabel: str, vocab: str | list[str]) -> list[tuple[str, str]]:
    """Concrete (input, output) pairs one transition stands for; ordinary arcs stand for themselves."""
    if ilabel == ID:
        return [(a, a) for a in vocab]
    if ilabel == UPPER:
        return upper_pairs(vocab)
    if ilabel == LOWER:
        return lower_pairs(vocab)
    return [(ilabel, olabel)]


def to_state_config() -> dict:
    """What a model config stores so that checkpoints carry their own symbol map."""
    return {"symbols": list(SYMBOLS), "pad_id": PAD_ID}
