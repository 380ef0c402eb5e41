"""The natural-task Parquet file (``examples.parquet``, DESIGN §5), written deterministically."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pyarrow as pa

from sip_core.io import write_parquet
from sip_core.tasks.draws import Row

SCHEMA = pa.schema([
    ("task_id", pa.string()),
    ("group", pa.string()),
    ("draw", pa.int32()),
    ("split", pa.string()),
    ("input", pa.string()),
    ("output", pa.string()),
])


def write_tasks(rows: Sequence[Row], path: str | Path) -> None:
    columns = list(zip(*rows)) if rows else [[] for _ in SCHEMA]
    table = pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, SCHEMA)],
                                 schema=SCHEMA)
    write_parquet(table, path)

