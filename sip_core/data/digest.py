"""Content digests of Parquet tables: equal for equal data, whatever wrote the file.

A file's bytes carry its writer (``created_by``: the pyarrow version) and row-group layout, so a pool rebuilt
on a GPU host hashes differently from the one built here even when every value is the same. The digest
hashes the Arrow IPC stream of the table's values instead: schema without metadata, one chunk per column.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def table_digest(path: str | Path) -> str:
    """sha256 of a Parquet file's values (column order and types included, metadata and layout not)."""
    table = pq.read_table(path)
    table = table.replace_schema_metadata(None).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=1 << 16):
            writer.write_batch(batch)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def content_digest(path: str | Path) -> str:
    """A Parquet table's value digest (``table_digest``); any other file's sha256."""
    if Path(path).suffix == ".parquet":
        return table_digest(path)
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def tree_bytes(path: str | Path) -> int:
    """Total size of the files under ``path`` (a file: its size)."""
    p = Path(path)
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
