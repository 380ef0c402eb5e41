"""Parquet/TSV → integer arrays, once per run: byte ids + offsets per split, transitions per FST.

Nothing here runs per example in Python except reading the files; the training loop only gathers
slices of these arrays (see ``batching``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sip_core.errors import SipError
from sip_core.fst import vocab
from sip_core.model import tokenizer

_STATE_KEY = np.int64(1 << 20)


@dataclass
class FstTable:
    """Transitions of many FSTs as one (N, 5) int array [src, in, out, dst, final flag] plus offsets."""

    fst_ids: np.ndarray          # int64, one per FST, in file order
    transitions: np.ndarray      # int32 (N, 5)
    offsets: np.ndarray          # int64 (n_fsts + 1)

    @property
    def n_transitions(self) -> np.ndarray:
        return np.diff(self.offsets)

    def rows_of(self, fst_ids: np.ndarray) -> np.ndarray:
        """Row of each fst_id; SipError for ids without an FST."""
        order = np.argsort(self.fst_ids, kind="stable")
        sorted_ids = self.fst_ids[order]
        pos = np.searchsorted(sorted_ids, fst_ids)
        pos_clipped = np.minimum(pos, len(sorted_ids) - 1)
        if len(sorted_ids) == 0 or not np.all(sorted_ids[pos_clipped] == fst_ids):
            missing = np.asarray(fst_ids)[sorted_ids[pos_clipped] != fst_ids][:5] if len(sorted_ids) else fst_ids[:5]
            raise SipError(f"examples refer to fst_id(s) {missing.tolist()} missing from fsts.parquet")
        return order[pos_clipped]

    def padded(self, rows: np.ndarray, width: int) -> np.ndarray:
        """(len(rows), width, 5) transitions, truncated or zero-padded to ``width`` slots."""
        starts = self.offsets[rows]
        counts = np.minimum(np.diff(self.offsets)[rows], width)
        pos = starts[:, None] + np.arange(width)[None, :]
        valid = np.arange(width)[None, :] < counts[:, None]
        out = self.transitions[np.where(valid, pos, 0)] if len(self.transitions) else np.zeros((len(rows), width, 5), np.int32)
        return np.where(valid[..., None], out, 0).astype(np.int32)


def _label_ids(labels: pa.Array, symbols: list[str]) -> np.ndarray:
    encoded = pc.dictionary_encode(labels).combine_chunks() if isinstance(labels, pa.ChunkedArray) else pc.dictionary_encode(labels)
    table = {s: i for i, s in enumerate(symbols)}
    lookup = []
    for label in encoded.dictionary.to_pylist():
        if label not in table:
            raise SipError(f"transition label {label!r} is not in the model's symbol map")
        lookup.append(table[label])
    return np.asarray(lookup, dtype=np.int32)[encoded.indices.to_numpy(zero_copy_only=False)]


def fst_table_from_arrow(table: pa.Table, num_states: int | None = None,
                         symbols: list[str] | None = None) -> FstTable:
    """Encode ``fsts.parquet`` rows (DESIGN §5) into transition arrays, vectorised."""
    symbols = list(vocab.SYMBOLS) if symbols is None else symbols
    for col in ("fst_id", "finals", "transitions"):
        if col not in table.column_names:
            raise SipError(f"fsts table lacks column {col!r}")
    trans = table.column("transitions").combine_chunks()
    offsets = trans.offsets.to_numpy().astype(np.int64)
    offsets = offsets - offsets[0]
    flat = trans.flatten()
    src = flat.field("src").to_numpy(zero_copy_only=False).astype(np.int64)
    dst = flat.field("dst").to_numpy(zero_copy_only=False).astype(np.int64)
    ilab = _label_ids(flat.field("ilabel"), symbols)
    olab = _label_ids(flat.field("olabel"), symbols)
    n = len(table)
    parent = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    finals = table.column("finals").combine_chunks()
    f_parent = np.repeat(np.arange(n, dtype=np.int64), np.diff(finals.offsets.to_numpy()))
    f_states = finals.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    is_final = np.isin(parent * _STATE_KEY + dst, f_parent * _STATE_KEY + f_states)
    if num_states is not None and len(src) and max(src.max(), dst.max()) >= num_states:
        raise SipError(f"an FST has state id {max(src.max(), dst.max())} but the model embeds only "
                       f"{num_states} states (raise --num-states)")
    transitions = np.stack([src, ilab, olab, dst, np.where(is_final, 2, 1)], axis=1).astype(np.int32)
    fst_ids = table.column("fst_id").to_numpy().astype(np.int64)
    return FstTable(fst_ids=fst_ids, transitions=transitions, offsets=offsets)


@dataclass
class Seq2SeqSplit:
    """One split, tokenised: inputs and labels as flat ids + offsets; optional FST row / task row per example.

    ``states``/``state_offsets``: each example's FST state sequence q0..qn (n = input characters), when the
    pool stores them (auxiliary state supervision).
    """

    inputs: list[str]
    outputs: list[str]
    input_ids: np.ndarray
    input_offsets: np.ndarray
    label_ids: np.ndarray
    label_offsets: np.ndarray
    fst_rows: np.ndarray | None = None
    task_rows: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
    states: np.ndarray | None = None
    state_offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.inputs)

    @property
    def input_lengths(self) -> np.ndarray:
        return np.diff(self.input_offsets)

    @property
    def label_lengths(self) -> np.ndarray:
        return np.diff(self.label_offsets)

    def _char_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Flat positions (in ``input_ids``) of the last byte of every input character, and characters per row."""
        ids = self.input_ids
        byte = ids.astype(np.int64) - tokenizer.BYTE_OFFSET
        is_byte = ids >= tokenizer.BYTE_OFFSET
        cont = is_byte & (byte >= 0x80) & (byte < 0xC0)  # UTF-8 continuation bytes
        # a byte ends its character unless a continuation byte follows (every row ends with EOS)
        ends = np.flatnonzero(is_byte & ~np.append(cont[1:], False))
        rows = np.searchsorted(self.input_offsets, ends, side="right") - 1
        return ends, np.bincount(rows, minlength=len(self)).astype(np.int64)

    @property
    def input_char_lengths(self) -> np.ndarray:
        return self._char_ends()[1]

    def state_labels(self) -> np.ndarray:
        """Per input id (aligned with ``input_ids``): the state after the character that this byte ends, else -100."""
        if self.states is None:
            raise SipError("this split has no state sequences")
        ends, n_chars = self._char_ends()
        n_states = np.diff(self.state_offsets)
        bad = np.flatnonzero(n_states != n_chars + 1)
        if len(bad):
            raise SipError(f"example {int(bad[0])} has {int(n_states[bad[0]])} states for "
                           f"{int(n_chars[bad[0]])} input characters (expected characters + 1)")
        keep = np.ones(len(self.states), bool)
        keep[self.state_offsets[:-1]] = False  # drop q0: character j is labelled with q_{j+1}
        labels = np.full(len(self.input_ids), -100, np.int64)
        labels[ends] = self.states[keep]
        return labels

    def subset(self, idx: np.ndarray) -> "Seq2SeqSplit":
        states = None
        if self.states is not None:
            states = _take_ragged(self.states, self.state_offsets, np.asarray(idx, np.int64))
        return make_split([self.inputs[i] for i in idx], [self.outputs[i] for i in idx],
                          None if self.fst_rows is None else self.fst_rows[idx],
                          None if self.task_rows is None else self.task_rows[idx], states)


def _take_ragged(values: np.ndarray, offsets: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``idx`` of a ragged (values, offsets) array, as a new (values, offsets)."""
    starts = offsets[idx]
    lengths = offsets[idx + 1] - starts
    new_off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    pos = np.repeat(starts - new_off[:-1], lengths) + np.arange(new_off[-1], dtype=np.int64)
    return values[pos], new_off


def make_split(inputs: list[str], outputs: list[str], fst_rows=None, task_rows=None, states=None) -> Seq2SeqSplit:
    """``states``: optional (flat int values, int64 offsets) state sequences, one row per example."""
    in_ids, in_off = tokenizer.encode_many(inputs)
    out_ids, out_off = tokenizer.encode_many(outputs)
    st, st_off = (None, None) if states is None else (np.asarray(states[0], np.int64), np.asarray(states[1], np.int64))
    return Seq2SeqSplit(list(inputs), list(outputs), in_ids, in_off, out_ids, out_off,
                        None if fst_rows is None else np.asarray(fst_rows, np.int64),
                        None if task_rows is None else np.asarray(task_rows, np.int64),
                        states=st, state_offsets=st_off)


def read_parquet(path: str | Path, columns=None) -> pa.Table:
    path = Path(path)
    if not path.exists():
        raise SipError(f"{path} does not exist")
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowInvalid, OSError) as err:
        raise SipError(f"cannot read {path} as Parquet: {err}") from None


def _require(table: pa.Table, columns, path) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise SipError(f"{path} lacks column(s) {missing}")


@dataclass
class Pool:
    """A pre-training pool: splits of examples, and the FSTs they come from (absent for the Set task)."""

    splits: dict[str, Seq2SeqSplit]
    fsts: FstTable | None
    train_fst_ids: np.ndarray | None = None  # TE: row r+1 of the task table is train FST r


def _first_fsts(examples: pa.Table, n: int, path: Path) -> pa.Table:
    """The table without the train / easy-dev rows of training FSTs beyond the first ``n`` (by id)."""
    if n < 1:
        raise SipError(f"--max-fsts must be at least 1, not {n}")
    split = examples.column("split").to_numpy(zero_copy_only=False).astype(str)
    fst_ids = examples.column("fst_id").to_numpy().astype(np.int64)
    seen_split = np.isin(split, ["train", "easy_dev"])
    train_ids = np.unique(fst_ids[split == "train"])
    if n > len(train_ids):
        raise SipError(f"--max-fsts {n}: {path} has only {len(train_ids)} training FSTs")
    keep = ~seen_split | np.isin(fst_ids, train_ids[:n])
    return examples.filter(pa.array(keep))


def load_pool(data_dir: str | Path, with_fsts: bool, num_states: int | None = None,
              symbols: list[str] | None = None, te: bool = False, max_fsts: int | None = None) -> Pool:
    """A pool's splits; ``max_fsts``: only the examples (train and easy-dev) of the first N training FSTs by id."""
    data_dir = Path(data_dir)
    ex_path = data_dir / "examples.parquet"
    examples = read_parquet(ex_path)
    _require(examples, ["split", "input", "output"] + (["fst_id"] if with_fsts or te or max_fsts else []), ex_path)
    if max_fsts is not None:
        examples = _first_fsts(examples, max_fsts, ex_path)
    fsts = None
    if with_fsts:
        fst_path = data_dir / "fsts.parquet"
        fsts = fst_table_from_arrow(read_parquet(fst_path), num_states, symbols)
    split_col = examples.column("split").to_numpy(zero_copy_only=False).astype(str)
    inputs_all = examples.column("input").to_pylist()
    outputs_all = examples.column("output").to_pylist()
    fst_ids_all = examples.column("fst_id").to_numpy().astype(np.int64) if "fst_id" in examples.column_names else None
    states_all = examples.column("states").combine_chunks() if "states" in examples.column_names else None
    train_fst_ids = None
    if te:
        train_fst_ids = np.unique(fst_ids_all[split_col == "train"])
    splits = {}
    for name in ("train", "easy_dev", "dev", "test"):
        idx = np.flatnonzero(split_col == name)
        if len(idx) == 0:
            continue
        fst_rows = fsts.rows_of(fst_ids_all[idx]) if fsts is not None else None
        task_rows = None
        if te:  # unseen FSTs fall back to row 0, as in the original
            pos = np.searchsorted(train_fst_ids, fst_ids_all[idx])
            pos_c = np.minimum(pos, len(train_fst_ids) - 1)
            task_rows = np.where(train_fst_ids[pos_c] == fst_ids_all[idx], pos_c + 1, 0)
        states = None
        if states_all is not None:
            taken = states_all.take(pa.array(idx))
            offsets = taken.offsets.to_numpy().astype(np.int64)
            states = (taken.values.to_numpy(zero_copy_only=False)[offsets[0]:offsets[-1]], offsets - offsets[0])
        splits[name] = make_split([inputs_all[i] for i in idx], [outputs_all[i] for i in idx], fst_rows, task_rows,
                                  states)
    if "train" not in splits:
        raise SipError(f"{ex_path} has no rows with split == 'train'")
    return Pool(splits=splits, fsts=fsts, train_fst_ids=train_fst_ids)


def read_tsv_pairs(path: str | Path) -> list[tuple[str, str]]:
    """input<TAB>output pairs; uses the shared validator (sip_core.tasks.tsv) when it exists."""
    try:
        from sip_core.tasks.tsv import read_pairs
    except ImportError:
        read_pairs = None
    if read_pairs is not None:
        return read_pairs(path)
    path = Path(path)
    if not path.exists():
        raise SipError(f"{path} does not exist")
    pairs = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise SipError(f"{path}:{lineno}: expected 'input<TAB>output', found {len(parts)} field(s)")
        pairs.append((parts[0], parts[1]))
    if not pairs:
        raise SipError(f"{path} has no examples")
    return pairs


def load_task_examples(path: str | Path) -> pa.Table:
    table = read_parquet(path)
    _require(table, ["task_id", "split", "input", "output"], path)
    return table


def task_ids_in(table: pa.Table) -> list[str]:
    seen = dict.fromkeys(table.column("task_id").to_pylist())
    return list(seen)


def task_pairs(table: pa.Table, task_id: str, split: str) -> list[tuple[str, str]]:
    mask = pc.and_(pc.equal(table.column("task_id"), task_id), pc.equal(table.column("split"), split))
    sub = table.filter(mask)
    return list(zip(sub.column("input").to_pylist(), sub.column("output").to_pylist()))


def split_longest(pairs: list[tuple[str, str]], fraction: float) -> tuple[list, list]:
    """(rest, held out): the ``fraction`` of pairs with the longest inputs held out (ties by position, so the
    split is deterministic), the rest in their original order. A dev set for length generalisation that needs
    no test data: train on the shorter inputs, measure on the longest."""
    n = round(len(pairs) * fraction)
    if fraction <= 0 or n == 0:
        return list(pairs), []
    by_length = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), i))
    held = set(by_length[-n:])
    return [p for i, p in enumerate(pairs) if i not in held], [pairs[i] for i in sorted(held)]


def read_pairs_any(path: str | Path, split: str | None = None) -> list[tuple[str, str]]:
    """Pairs from a TSV or a Parquet task file (optionally one split of it)."""
    path = Path(path)
    if path.suffix == ".parquet":
        table = read_parquet(path)
        _require(table, ["input", "output"], path)
        if split is not None and "split" in table.column_names:
            table = table.filter(pc.equal(table.column("split"), split))
        return list(zip(table.column("input").to_pylist(), table.column("output").to_pylist()))
    return read_tsv_pairs(path)
