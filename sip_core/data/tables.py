"""Arrow schemas and table builders for `fsts.parquet` and `examples.parquet` (DESIGN §5)."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sip_core.errors import SipError
from sip_core.fst.machine import Machine

TRANSITION = pa.struct([("src", pa.int32()), ("ilabel", pa.string()), ("olabel", pa.string()), ("dst", pa.int32())])
WITHHELD = pa.struct([("left", pa.int32()), ("right", pa.int32())])

FST_FIELDS = [
    ("fst_id", pa.int64()), ("split", pa.string()), ("n_states", pa.int32()), ("start", pa.int32()),
    ("finals", pa.list_(pa.int32())), ("vocab", pa.string()), ("transitions", pa.list_(TRANSITION)),
    ("kind", pa.string()),
]
TASK_FIELDS = [("task_id", pa.string()), ("task_type", pa.string())]
EXTRA_FIELDS = {
    "withheld": pa.list_(WITHHELD),
    "train_max_count": pa.int32(),
    "test_min_count": pa.int32(),
}


def fst_table(rows: list[dict], task: bool = False, extra: tuple[str, ...] = ()) -> pa.Table:
    """rows: dicts with fst_id, split, machine (a Machine) and any task/extra columns.

    The nested columns are assembled from flat arrays (much faster than per-transition dicts).
    """
    fields = ([TASK_FIELDS[0]] if task else []) + FST_FIELDS + ([TASK_FIELDS[1]] if task else [])
    fields += [(name, EXTRA_FIELDS[name]) for name in extra]
    schema = pa.schema(fields)
    machines: list[Machine] = [r["machine"] for r in rows]
    src, il, ol, dst, t_off = [], [], [], [], [0]
    fin, f_off = [], [0]
    for m in machines:
        for s_, i_, o_, d_ in m.transitions:
            src.append(s_)
            il.append(i_)
            ol.append(o_)
            dst.append(d_)
        t_off.append(len(src))
        fin.extend(m.finals)
        f_off.append(len(fin))
    trans = pa.StructArray.from_arrays(
        [pa.array(src, pa.int32()), pa.array(il, pa.string()), pa.array(ol, pa.string()), pa.array(dst, pa.int32())],
        fields=list(TRANSITION))
    cols = {
        "n_states": pa.array([m.n_states for m in machines], pa.int32()),
        "start": pa.array([m.start for m in machines], pa.int32()),
        "finals": pa.ListArray.from_arrays(pa.array(f_off, pa.int32()), pa.array(fin, pa.int32())),
        "vocab": pa.array([m.vocab for m in machines], pa.string()),
        "transitions": pa.ListArray.from_arrays(pa.array(t_off, pa.int32()), trans),
        "kind": pa.array([m.kind for m in machines], pa.string()),
    }
    arrays = [cols[name] if name in cols else pa.array([r.get(name) for r in rows], typ) for name, typ in fields]
    return pa.Table.from_arrays(arrays, schema=schema)


def examples_table(rows: list[tuple], task: bool = False, states: bool = False) -> pa.Table:
    """rows: (fst_id, split, input, output[, states]) or with a leading task_id if `task`."""
    fields = [("task_id", pa.string())] if task else []
    fields += [("fst_id", pa.int64()), ("split", pa.string()), ("input", pa.string()), ("output", pa.string())]
    if states:
        fields.append(("states", pa.list_(pa.int32())))
    schema = pa.schema(fields)
    cols = list(zip(*rows)) if rows else [[] for _ in fields]
    return pa.table({name: list(col) for (name, _), col in zip(fields, cols)}, schema=schema)


def read_machines(path: str | Path, splits: tuple[str, ...] | None = ("train",)) -> list[Machine]:
    """Machines of an `fsts.parquet` (by default only its train split, as used for --exclude)."""
    path = Path(path)
    if path.is_dir():
        path = path / "fsts.parquet"
    if not path.exists():
        raise SipError(f"no FST file at {path}")
    try:
        table = pq.read_table(path)
    except Exception as err:  # noqa: BLE001 - any unreadable file is a user error here
        raise SipError(f"cannot read {path}: {err}") from None
    missing = {"n_states", "finals", "transitions", "vocab"} - set(table.column_names)
    if missing:
        raise SipError(f"{path} is not an fsts.parquet (missing {', '.join(sorted(missing))})")
    out = []
    for row in table.to_pylist():
        if splits is None or row.get("split") in splits:
            out.append(Machine.from_row(row))
    return out
