"""Distractor FSTs for the prefix-similarity analysis: for each task's gold FST, random deterministic FSTs
with the same number of states and the same vocabulary (paper Appendix; 10,000 per task).

Drawn with the evaluation sampler's generator (random f, the gold V_T, minimised, exactly n states) and
never isomorphic to the gold FST. Candidate i of task t has its own RNG, so 1 or 2 workers give the same
file. Runs where the FST code runs (pynini, or its pure-Python port).
"""
from __future__ import annotations

import random
from pathlib import Path

from sip_core.data.parallel import candidate_rng, map_ordered
from sip_core.errors import SipError
from sip_core.fst.machine import Machine

MAX_TRIES = 2000  # draws per distractor before giving up (exactly-n-states FSTs are common: ~1 in 1.2)


def distractor(rng: random.Random, gold: Machine) -> Machine:
    """One random FST with gold's state count and vocabulary, not isomorphic to gold."""
    from sip_core.fst.iso import isomorphic
    from sip_core.fst.sample import random_fst

    n = gold.n_states
    for _ in range(MAX_TRIES):
        m = random_fst(rng, n, rng.randint(1, n), gold.vocab)
        if m.n_states == n and not isomorphic(m, gold):
            return m
    raise SipError(f"no {n}-state distractor over {gold.vocab!r} in {MAX_TRIES} draws")


def _job(args) -> list[Machine]:
    task_id, row, seed, start, stop = args
    gold = Machine.from_row(row)
    return [distractor(candidate_rng(f"distractor-{task_id}", seed, i), gold) for i in range(start, stop)]


def build_distractors(gold_fsts: str | Path, out: str | Path, per_task: int, seed: int, workers: int = 1,
                      chunk: int = 500) -> dict:
    """fsts.parquet of distractors: task_id (the gold task), fst_id 0..per_task-1, split 'distractor'."""
    import pyarrow.parquet as pq

    from sip_core.data.tables import fst_table
    from sip_core.io import write_parquet

    if per_task < 1:
        raise SipError(f"--per-task must be >= 1, got {per_task}")
    path = Path(gold_fsts)
    if not path.exists():
        raise SipError(f"{path} does not exist")
    golds = pq.read_table(path).to_pylist()
    if not golds or "task_id" not in golds[0]:
        raise SipError(f"{path} has no task FSTs (task_id column)")
    jobs = [(g["task_id"], g, seed, a, min(a + chunk, per_task)) for g in golds for a in range(0, per_task, chunk)]
    parts = map_ordered(_job, jobs, workers)
    rows = []
    for (task_id, _, _, start, _), machines in zip(jobs, parts):
        rows += [{"task_id": task_id, "task_type": "distractor", "fst_id": start + k, "split": "distractor",
                  "machine": m} for k, m in enumerate(machines)]
    write_parquet(fst_table(rows, task=True), out)
    return {"tasks": len(golds), "per_task": per_task, "fsts": len(rows)}
