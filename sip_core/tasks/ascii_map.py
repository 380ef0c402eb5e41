"""g2p with every non-ASCII code point mapped to an ASCII character, reversibly (paper Table 10: T5-SIP-d4
"did not perform well on completely unseen scripts, so we mapped all Unicode code points to arbitrary
ASCII characters ... completely reversible"). The paper does not give its mapping; ours:

* one mapping per language (the task file's ``group``), shared by its draws and splits, one per side:
  inputs (graphemes) and outputs (phones) are different alphabets, and each side alone fits into ASCII;
* a side's non-ASCII code points, in code-point order, take the printable ASCII characters (``!``..``~``)
  that the side does not already use, in order; ASCII already present stays as it is.

A bijection per side, one character for one character: exact match, edit distance and PER are the same
before and after mapping, and ``unmap`` restores the original strings.
"""
from __future__ import annotations

from pathlib import Path

from sip_core.errors import SipError

ASCII_TARGETS = tuple(chr(c) for c in range(33, 127))  # printable ASCII without the space
SIDES = ("input", "output")


def _is_ascii(ch: str) -> bool:
    return 32 <= ord(ch) < 127


def side_mapping(texts) -> dict[str, str]:
    used = set("".join(texts))
    foreign = sorted(c for c in used if not _is_ascii(c))
    free = [c for c in ASCII_TARGETS if c not in used]
    if len(foreign) > len(free):
        raise SipError(f"{len(foreign)} non-ASCII characters but only {len(free)} unused ASCII characters")
    return dict(zip(foreign, free))


def build_mappings(rows: list[dict], group_key: str = "group") -> dict[str, dict[str, dict[str, str]]]:
    """{group: {'input': {char: ascii}, 'output': {char: ascii}}} over every row of each group."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r[group_key], []).append(r)
    out = {}
    for group, members in sorted(groups.items()):
        try:
            out[group] = {side: side_mapping(r[side] for r in members) for side in SIDES}
        except SipError as err:
            raise SipError(f"group {group!r}: {err}") from None
    return out


def apply(text: str, mapping: dict[str, str]) -> str:
    return "".join(mapping.get(c, c) for c in text)


def unmap(text: str, mapping: dict[str, str]) -> str:
    back = {v: k for k, v in mapping.items()}
    return "".join(back.get(c, c) for c in text)


def ascii_task_file(src: str | Path, out: str | Path, mapping_out: str | Path) -> dict:
    """Write the mapped task file (same columns and task ids) and the mappings as JSON."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sip_core.io import write_json, write_parquet

    src = Path(src)
    if not src.exists():
        raise SipError(f"{src} does not exist")
    table = pq.read_table(src)
    if "group" not in table.column_names:
        raise SipError(f"{src} has no 'group' column (one mapping per language needs it)")
    rows = table.to_pylist()
    mappings = build_mappings(rows)
    for r in rows:
        for side in SIDES:
            r[side] = apply(r[side], mappings[r["group"]][side])
    write_parquet(pa.Table.from_pylist(rows, schema=table.schema), out)
    write_json({"scheme": "per group and side: non-ASCII code points in code-point order -> unused "
                          "printable ASCII in order", "mappings": mappings}, mapping_out)
    return {"rows": len(rows), "groups": len(mappings),
            "mapped": {g: {s: len(m[s]) for s in SIDES} for g, m in mappings.items()}}
