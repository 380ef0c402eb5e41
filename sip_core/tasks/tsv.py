"""Reading the user's own data for ``sip finetune --train/--test`` and ``sip predict``.

Pairs come from a TSV (``input<TAB>output`` per line, optional ``input<TAB>output`` header) or from one
of our task Parquet files (by suffix). Every problem is one SipError naming the file and line (or row):
the CLI prints it as one line and exits non-zero, before any model is loaded. Characters the model has
never seen are fine (ByT5 reads bytes); empty outputs are allowed (deletion is a transduction).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Iterable, Iterator

import pyarrow.parquet as pq

from sip_core.errors import SipError

HEADER = "input\toutput"
MAX_BYTES = 1024  # per line (TSV, stdin) or per field (Parquet); guards against passing a binary file
_BOM = b"\xef\xbb\xbf"


def read_pairs(path: str | Path, task_id: str | None = None, split: str | None = None,
               max_bytes: int = MAX_BYTES) -> list[tuple[str, str]]:
    """(input, output) pairs of a TSV file, or of a ``.parquet`` task file filtered by task_id/split."""
    path = Path(path)
    if not path.exists():
        raise SipError(f"{path}: no such file")
    if not path.is_file():
        raise SipError(f"{path}: not a file")
    if path.suffix == ".parquet":
        return _parquet_pairs(path, task_id, split, max_bytes)
    if task_id is not None or split is not None:
        raise SipError(f"{path}: a task id or split can only select from a .parquet task file")
    with open(path, "rb") as f:
        return _tsv_pairs(f, str(path), max_bytes)


def read_inputs(stream: IO, source: str = "<stdin>", max_bytes: int = MAX_BYTES) -> list[str]:
    """One input per line (text or binary stream); blank lines are allowed only at the end."""
    inputs: list[str] = []
    blank_at = None
    for number, line in _lines(_binary(stream), source, max_bytes):
        if not line:
            blank_at = blank_at or number
            continue
        if blank_at is not None:
            raise SipError(f"{source}:{blank_at}: empty input (one input per line; remove blank lines)")
        if "\t" in line:
            raise SipError(f"{source}:{number}: input contains a tab; sip predict reads one input per "
                           "line (give it only the input column)")
        inputs.append(line)
    if not inputs:
        raise SipError(f"{source}: no inputs (expected one input per line)")
    return inputs


def _binary(stream: IO) -> Iterable[bytes]:
    """Bytes lines of a stream; text streams are re-read as bytes so decoding errors get a line number."""
    if hasattr(stream, "buffer"):
        return stream.buffer
    return (line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line for line in stream)


def _lines(raw_lines: Iterable[bytes], source: str, max_bytes: int) -> Iterator[tuple[int, str]]:
    """Decoded lines without line ends, checked for length and UTF-8; a leading BOM is dropped."""
    for number, raw in enumerate(raw_lines, start=1):
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        if len(raw) > max_bytes:
            raise SipError(f"{source}:{number}: line is {len(raw)} bytes, longer than the limit of "
                           f"{max_bytes}")
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SipError(f"{source}:{number}: not valid UTF-8 (byte {err.start + 1} of the line)") from None


def _tsv_pairs(raw_lines: Iterable[bytes], source: str, max_bytes: int) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    seen_header = seen_any = False
    for number, line in _lines(raw_lines, source, max_bytes):
        seen_any = True
        if number == 1 and line.strip() == HEADER:
            seen_header = True
            continue
        if not line:  # blank lines carry no example (the original reader skips them too)
            continue
        tabs = line.count("\t")
        if tabs != 1:
            found = "no tab" if tabs == 0 else f"{tabs} tabs"
            raise SipError(f"{source}:{number}: expected input<TAB>output (exactly one tab), found {found}")
        source_text, target = line.split("\t")
        if not source_text:
            raise SipError(f"{source}:{number}: empty input")
        pairs.append((source_text, target))
    if not seen_any:
        raise SipError(f"{source}: empty file (expected input<TAB>output lines)")
    if not pairs:
        what = "only a header" if seen_header else "no examples"
        raise SipError(f"{source}: {what} (expected input<TAB>output lines)")
    quoted = sum(_csv_quoted(x) or _csv_quoted(y) for x, y in pairs)
    if quoted:  # kept as they are (a quote is a symbol like any other), but rarely what was meant
        print(f"sip: warning: {source}: {quoted} of {len(pairs)} lines hold CSV-quoted fields (\"a\"\"b\" for a\"b); "
              "sip reads TSV fields as they are, quotes included (write them unquoted, e.g. pandas "
              "to_csv(..., quoting=csv.QUOTE_NONE))", file=sys.stderr)
    return pairs


def _csv_quoted(field: str) -> bool:
    """A field as a CSV writer quotes it (pandas' to_csv does for any field holding a quote): wrapped in quotes,
    with every quote inside doubled (session 29 trained on such a file by mistake)."""
    inner = field[1:-1]
    return len(field) > 2 and field[0] == field[-1] == '"' and '""' in inner and '"' not in inner.replace('""', "")


def _parquet_pairs(path: Path, task_id: str | None, split: str | None, max_bytes: int) -> list[tuple[str, str]]:
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several unrelated types for a non-Parquet file
        raise SipError(f"{path}: not a readable Parquet file ({type(err).__name__}: {err})") from None
    missing = [c for c in ("input", "output") if c not in table.column_names]
    if missing:
        raise SipError(f"{path}: missing column(s) {', '.join(missing)}; a task file needs input and output")
    rows = list(range(table.num_rows))
    if "task_id" in table.column_names:
        ids = table.column("task_id").to_pylist()
        known = sorted(set(ids) - {None})
        if task_id is None and len(known) > 1:
            raise SipError(f"{path}: holds {len(known)} tasks ({', '.join(known[:3])}, ...); choose one by task id")
        if task_id is not None:
            if task_id not in known:
                raise SipError(f"{path}: no task {task_id!r} (has {', '.join(known[:5])}"
                               f"{', ...' if len(known) > 5 else ''})")
            rows = [i for i in rows if ids[i] == task_id]
    elif task_id is not None:
        raise SipError(f"{path}: has no task_id column to select {task_id!r} from")
    if split is not None:
        if "split" not in table.column_names:
            raise SipError(f"{path}: has no split column to select {split!r} from")
        splits = table.column("split").to_pylist()
        rows = [i for i in rows if splits[i] == split]
    inputs, outputs = table.column("input").to_pylist(), table.column("output").to_pylist()
    pairs = []
    for i in rows:
        x, y = inputs[i], outputs[i]
        where = f"{path}: row {i}"
        if x is None or y is None:
            raise SipError(f"{where}: missing {'input' if x is None else 'output'}")
        if not x:
            raise SipError(f"{where}: empty input")
        for name, value in (("input", x), ("output", y)):
            if len(value.encode("utf-8")) > max_bytes:
                raise SipError(f"{where}: {name} is longer than the limit of {max_bytes} bytes")
        pairs.append((x, y))
    if not pairs:
        sel = ", ".join(f"{k}={v}" for k, v in (("task_id", task_id), ("split", split)) if v is not None)
        raise SipError(f"{path}: no examples{f' for {sel}' if sel else ''}")
    return pairs
