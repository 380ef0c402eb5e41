"""ByT5 byte tokenizer (ids = byte + 3; pad 0, eos 1, unk 2; vocab 384), vectorised over whole splits.

The original tokenised example by example through HF ``datasets.map``; here a split is turned into one
flat id array plus offsets in a few numpy operations, once, so that training never touches Python strings.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
BYTE_OFFSET = 3
VOCAB_SIZE = 384


def encode_many(texts: Sequence[str] | pa.Array, add_eos: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of many strings as (flat int32 ids, int64 offsets of length n+1); EOS appended to each."""
    arr = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(list(texts), type=pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.large_string())
    if arr.null_count:
        raise ValueError("missing strings (nulls) cannot be tokenised")
    n = len(arr)
    raw_offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + n + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    data = data[raw_offsets[0]: raw_offsets[-1]]
    offsets = raw_offsets - raw_offsets[0]
    lengths = np.diff(offsets)
    if not add_eos:
        return data.astype(np.int32) + BYTE_OFFSET, offsets.copy()
    new_offsets = offsets + np.arange(n + 1, dtype=np.int64)
    out = np.full(len(data) + n, EOS_ID, dtype=np.int32)
    row_of_byte = np.repeat(np.arange(n, dtype=np.int64), lengths)
    out[np.arange(len(data), dtype=np.int64) + row_of_byte] = data.astype(np.int32) + BYTE_OFFSET
    return out, new_offsets


def encode(text: str, add_eos: bool = True) -> list[int]:
    ids = [b + BYTE_OFFSET for b in text.encode("utf-8")]
    return ids + [EOS_ID] if add_eos else ids


def decode(ids) -> str:
    """Text of one id sequence: stops at EOS, drops specials, ignores invalid partial UTF-8 (as HF does)."""
    out = bytearray()
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if BYTE_OFFSET <= i < BYTE_OFFSET + 256:
            out.append(i - BYTE_OFFSET)
    return out.decode("utf-8", errors="ignore")


def decode_batch(rows) -> list[str]:
    return [decode(r) for r in rows]


def byte_lengths(texts: Sequence[str]) -> np.ndarray:
    """UTF-8 byte length of each string (the decoding cap is counted in bytes)."""
    arr = pa.array(list(texts), type=pa.large_string())
    return np.diff(np.frombuffer(arr.buffers()[1], dtype=np.int64)[: len(arr) + 1])
