"""Synthetic evaluation tasks → `fsts.parquet` + `examples.parquet` keyed by task_id.

Settings: iteration-s{n}, uc-s{n} (deterministic FSTs with exactly n states), bimachine-iteration,
bimachine-uc (5 x 4 bimachines), and the Table 11 length tasks (`build_length`). Each task has its own
RNG seeded from (setting, seed, task index), so tasks can be built in parallel and in any order.
Evaluation FSTs are redrawn (never an error) while isomorphic to a train FST of an `exclude` pool.
"""
from __future__ import annotations

import time
from pathlib import Path

from sip_core.errors import SipError
from sip_core.fst.iso import IsoIndex
from sip_core.io import write_parquet
from sip_core.data.parallel import candidate_rng, map_ordered
from sip_core.data.tables import examples_table, fst_table, read_machines

MAX_TASK_TRIES = 100
LENGTH_TRAIN = (1, 15)
LENGTH_BUCKETS = ((40, 70), (90, 110))

_EXCLUDED = IsoIndex()  # set in the parent before forking; workers read their inherited copy


def parse_setting(setting: str) -> tuple[str, str, int]:
    """'iteration-s4' -> ('iteration', 'det', 4); 'bimachine-uc' -> ('uc', 'bimachine', 21)."""
    parts = setting.split("-")
    if len(parts) == 2 and parts[0] == "bimachine" and parts[1] in ("iteration", "uc"):
        return parts[1], "bimachine", 21
    if len(parts) == 2 and parts[0] in ("iteration", "uc") and parts[1][:1] == "s" and parts[1][1:].isdigit():
        n = int(parts[1][1:])
        if n < 2:
            raise SipError(f"{setting}: evaluation FSTs need at least 2 states")
        if n > 14:
            raise SipError(f"{setting}: SIP models embed at most 14 states")
        return parts[0], "det", n
    raise SipError(f"unknown evaluation setting {setting!r} (e.g. iteration-s4, uc-s7, bimachine-uc)")


def _load_excluded(exclude: tuple[str, ...]) -> int:
    global _EXCLUDED
    _EXCLUDED = IsoIndex()
    for path in exclude:
        for m in read_machines(path):
            _EXCLUDED.add(m)
    return len(_EXCLUDED)


def _sample_machine(rng, machine: str, n: int):
    from sip_core.fst.bimachine import eval_bimachine
    from sip_core.fst.evalfst import eval_fst

    for _ in range(MAX_TASK_TRIES):
        m = eval_bimachine(rng) if machine == "bimachine" else eval_fst(rng, n)
        if not _EXCLUDED.contains(m):
            return m
    raise SipError(f"every sampled {machine} FST was isomorphic to an excluded pre-training FST")


def _task_job(args):
    from sip_core.fst.iteration import TEST_MIN_COUNT, TRAIN_MAX_COUNT, iteration_split
    from sip_core.fst.uc import uc_split

    setting, seed, i, n_train, n_test, draws = args
    task_type, machine, n = parse_setting(setting)
    rng = candidate_rng(f"eval-{setting}", seed, i)
    prefix = setting if machine == "bimachine" else f"{task_type}-s{n}"
    task_id = f"{prefix}-{i}"
    for _ in range(MAX_TASK_TRIES):
        m = _sample_machine(rng, machine, n)
        row = {"task_id": task_id, "task_type": task_type, "fst_id": i, "split": "eval", "machine": m}
        if task_type == "iteration":
            res = iteration_split(m, rng, n_train, n_test, draws)
            if res is None:
                continue
            row.update(train_max_count=TRAIN_MAX_COUNT, test_min_count=TEST_MIN_COUNT)
            train, test = res
        else:
            res = uc_split(m, rng, n_train, n_test)
            if res is None:
                continue
            pairs, train, test = res
            row["withheld"] = [{"left": a, "right": b} for a, b in pairs]
        examples = [(task_id, i, "train", x, y) for x, y in train] + [(task_id, i, "test", x, y) for x, y in test]
        return row, examples
    raise SipError(f"{task_id}: no FST gave a {task_type} split of {n_train}/{n_test} in {MAX_TASK_TRIES} "
                   f"draws (for iteration tasks, raise --draws-per-length)")


def _check_sizes(tasks: int, n_train: int, n_test: int) -> None:
    if tasks < 1:
        raise SipError(f"--tasks must be >= 1, got {tasks}")
    if n_train < 1:
        raise SipError(f"--n-train must be >= 1, got {n_train}")
    if n_test < 1:
        raise SipError(f"--n-test must be >= 1, got {n_test}")


def build_eval(setting: str, out, tasks: int = 5, n_train: int = 5000, n_test: int = 1000, seed: int = 0,
               workers: int = 1, exclude: tuple[str, ...] = (), draws_per_length: int = 5000,
               progress: bool = True) -> dict:
    task_type, machine, n = parse_setting(setting)
    _check_sizes(tasks, n_train, n_test)
    if task_type == "iteration":
        if draws_per_length < 1:
            raise SipError(f"--draws-per-length must be >= 1, got {draws_per_length}")
        if n_train + n_test > 29 * draws_per_length:
            raise SipError(f"{n_train}+{n_test} strings cannot come from 29 lengths x {draws_per_length} draws; "
                           f"raise --draws-per-length")
    t0 = time.time()
    n_excluded = _load_excluded(exclude)
    jobs = [(setting, seed, i, n_train, n_test, draws_per_length) for i in range(tasks)]
    results = _run(jobs, workers, progress, f"sip data eval {setting}")
    rows = [r for r, _ in results]
    examples = [e for _, ex in results for e in ex]
    extra = ("train_max_count", "test_min_count") if task_type == "iteration" else ("withheld",)
    out = Path(out)
    write_parquet(fst_table(rows, task=True, extra=extra), out / "fsts.parquet")
    write_parquet(examples_table(examples, task=True), out / "examples.parquet")
    return {"setting": setting, "tasks": len(rows), "examples": len(examples), "excluded": n_excluded,
            "seconds": round(time.time() - t0, 2), "out": str(out)}


def _run(jobs, workers, progress, desc):
    from tqdm import tqdm

    if workers <= 1:
        return [_task_job_or_length(j) for j in tqdm(jobs, desc=desc, unit="task", disable=not progress, leave=False)]
    return map_ordered(_task_job_or_length, jobs, workers)


def _task_job_or_length(job):
    return _length_job(job) if job[0] == "length" else _task_job(job)


# ---------------------------------------------------------------- Table 11 (length generalisation)
def _length_job(args):
    from sip_core.fst.walk import Walker

    _, seed, i, n_train, n_test, _ = args
    rng = candidate_rng("length", seed, i)
    task_id = f"length-{i}"
    for _ in range(MAX_TASK_TRIES):
        m = _sample_machine(rng, "det", 4)
        walkers = [Walker(m, *LENGTH_TRAIN)] + [Walker(m, lo, hi) for lo, hi in LENGTH_BUCKETS]
        if any(w.empty for w in walkers) or not m.is_cyclic():
            continue
        ex = [(task_id, i, "train") + walkers[0].sample(rng) for _ in range(n_train)]
        for (lo, hi), w in zip(LENGTH_BUCKETS, walkers[1:]):
            ex += [(task_id, i, f"test-{lo}-{hi}") + w.sample(rng) for _ in range(n_test)]
        row = {"task_id": task_id, "task_type": "length", "fst_id": i, "split": "eval", "machine": m}
        return row, ex
    raise SipError(f"{task_id}: no 4-state FST with strings in every length bucket")


def build_length(out, tasks: int = 5, n_train: int = 5000, n_test: int = 1000, seed: int = 1101,
                 workers: int = 1, exclude: tuple[str, ...] = (), progress: bool = True) -> dict:
    """Table 11: fresh 4-state FSTs; train lengths 1..15, test buckets 40..70 and 90..110 (split
    values `test-40-70`, `test-90-110`)."""
    _check_sizes(tasks, n_train, n_test)
    t0 = time.time()
    n_excluded = _load_excluded(exclude)
    jobs = [("length", seed, i, n_train, n_test, 0) for i in range(tasks)]
    results = _run(jobs, workers, progress, "sip data length")
    rows = [r for r, _ in results]
    examples = [e for _, ex in results for e in ex]
    out = Path(out)
    write_parquet(fst_table(rows, task=True), out / "fsts.parquet")
    write_parquet(examples_table(examples, task=True), out / "examples.parquet")
    return {"setting": "length", "tasks": len(rows), "examples": len(examples), "excluded": n_excluded,
            "seconds": round(time.time() - t0, 2), "out": str(out)}
