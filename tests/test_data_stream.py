"""The pynini-free stream of fresh pre-training examples (sip_core.data.stream)."""
from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pytest

from sip_core.errors import SipError
from sip_core.fst import vocab as V
from sip_core.fst.iso import key
from sip_core.fst.machine import Machine
from sip_core.data.stream import ExampleStream, exclusion_keys, fresh_fst
from sip_core.data.tables import fst_table
from sip_core.io import write_parquet


def _take(stream, n):
    return list(itertools.islice(iter(stream), n))


def _outputs(m: Machine, x: str) -> set[str]:
    """All outputs of x by a plain search over the shorthand-level transitions (not Machine.path,
    not the Walker): the independent check that an example is produced by its machine."""
    def pairs(il, ol, c):
        return [b for a, b in V.expand_label(il, ol, m.vocab) if a == c]

    layer = {(m.start, "")}
    for c in x:
        layer = {(d, out + b) for q, out in layer for s, il, ol, d in m.transitions if s == q for b in pairs(il, ol, c)}
    return {out for q, out in layer if q in m.final_set}


def test_same_seed_same_items_and_chunks_are_pure():
    a = _take(ExampleStream("d4", seed=3, worker=1), 300)
    b = _take(ExampleStream("d4", seed=3, worker=1), 300)
    assert a == b
    assert a != _take(ExampleStream("d4", seed=3, worker=2), 300)
    assert a != _take(ExampleStream("d4", seed=4, worker=1), 300)
    # a chunk depends only on (pool, seed, worker, chunk): resuming at chunk 2 gives chunk 2
    s = ExampleStream("d4", seed=3, worker=1, chunk_size=16)
    resumed = ExampleStream("d4", seed=3, worker=1, chunk_size=16, start_chunk=2)
    assert next(resumed.fsts()) == s.chunk(2)[0]


@pytest.mark.parametrize("pool,lo,hi", [("d4", 1, 35), ("d4long", 1, 110), ("probe", 1, 35)])
def test_examples_come_from_their_machines(pool, lo, hi):
    items = _take(ExampleStream(pool, seed=0, per_fst=3), 150)
    machines = {id(it[0]) for it in items}
    assert len(machines) >= 150 // 3
    symbols = set(V.ASCII_V if pool == "probe" else V.V)
    for m, x, y, *states in items:
        assert 1 <= m.n_states <= 4 and m.is_cyclic() and set(m.vocab) <= symbols
        assert lo <= len(x) <= hi
        assert _outputs(m, x) == {y}
        if pool == "probe":
            assert states[0] == m.state_sequence(x)
        else:
            assert not states


def test_fresh_fst_equals_the_pynini_sampler():
    pytest.importorskip("pynini")
    from sip_core.fst.sample import pretrain_fst

    for seed in range(300):
        assert fresh_fst(random.Random(seed), V.V) == pretrain_fst(random.Random(seed), V.V)


def test_exclusion(tmp_path):
    base = list(itertools.islice(ExampleStream("d4", seed=5, per_fst=1).fsts(), 60))
    held = [m for m, _ in base[::3]]  # pretend these are dev/test FSTs of a pool
    rows = [{"fst_id": i + 1, "split": "dev" if i % 2 else "test", "machine": m} for i, m in enumerate(held)]
    rows.append({"fst_id": 99, "split": "train", "machine": base[1][0]})
    write_parquet(fst_table(rows), tmp_path / "fsts.parquet")
    keys = exclusion_keys([tmp_path])
    assert keys == {key(m) for m in held}  # the train FST is not excluded by default
    stream = ExampleStream("d4", seed=5, per_fst=1, exclude=keys)
    kept = list(itertools.islice(stream.fsts(), 40))
    assert all(key(m) not in keys for m, _ in kept)
    # excluding only removes FSTs: the others come unchanged and in order
    expected = [fe for fe in base if key(fe[0]) not in keys][:40]
    assert kept == expected and stream.stats["excluded"] >= len(held)


def test_rows_and_bad_pool():
    (row, x, y), = _take(ExampleStream("d4", seed=1, per_fst=1, rows=True), 1)
    m = Machine.from_row(row)
    assert _outputs(m, x) == {y}
    with pytest.raises(SipError):
        ExampleStream("nd7")


def test_runs_without_pynini_and_torch():
    code = ("import sys; sys.modules['pynini'] = None; sys.modules['torch'] = None\n"
            "import itertools\nfrom sip_core.data.stream import ExampleStream\n"
            "print(len(list(itertools.islice(iter(ExampleStream('d4')), 50))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "50"
