"""Table 11 settings from the length tasks: one task file per test bucket (``len-40-70``, ``len-90-110``).

`sip data length` keeps one train split and two test splits per task. Fine-tuning and the tables read
``train``/``test`` splits and take the setting from the task id, so each bucket becomes its own task
file: train kept, the bucket's split renamed ``test``, tasks renamed ``len-40-70-<i>``. Fine-tuning is
seeded, so both buckets of a task train the same model and differ only in what it is tested on.
"""
from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from sip_core.errors import SipError
from sip_core.io import write_parquet
from sip_core.train.data import read_parquet

BUCKET = re.compile(r"^(?:len-)?(\d+)-(\d+)$")


def bucket_setting(bucket: str) -> tuple[str, str]:
    """'40-70' or 'len-40-70' -> (setting 'len-40-70', source split 'test-40-70')."""
    match = BUCKET.match(bucket)
    if not match:
        raise SipError(f"bucket {bucket!r}: expected LO-HI such as 40-70")
    lo, hi = match.groups()
    return f"len-{lo}-{hi}", f"test-{lo}-{hi}"


def _rename_tasks(table: pa.Table, setting: str) -> pa.Table:
    ids = [f"{setting}-{t.rpartition('-')[2]}" for t in table.column("task_id").to_pylist()]
    return table.set_column(table.schema.get_field_index("task_id"), "task_id", pa.array(ids, pa.string()))


def build_bucket(length_dir: str | Path, bucket: str, out: str | Path) -> dict:
    setting, source = bucket_setting(bucket)
    length_dir = Path(length_dir)
    examples = read_parquet(length_dir / "examples.parquet")
    splits = set(examples.column("split").to_pylist())
    if source not in splits:
        raise SipError(f"{length_dir}/examples.parquet has no split {source!r} (has {sorted(splits)})")
    keep = examples.filter(pc.is_in(examples.column("split"), pa.array(["train", source])))
    split = pc.if_else(pc.equal(keep.column("split"), source), "test", keep.column("split"))
    keep = keep.set_column(keep.schema.get_field_index("split"), "split", split.cast(pa.string()))
    out = Path(out)
    write_parquet(_rename_tasks(keep, setting), out / "examples.parquet")
    fsts = length_dir / "fsts.parquet"
    if fsts.exists():
        write_parquet(_rename_tasks(read_parquet(fsts), setting), out / "fsts.parquet")
    return {"setting": setting, "examples": keep.num_rows, "out": str(out)}
