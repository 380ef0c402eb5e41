"""GPU hand-off (DESIGN §8): GPU hosts have no pynini, Snakemake or DVC, so

1. ``sip export TARGET``   (here) builds the target's data, then writes the `sip` commands of the jobs
   that need a GPU (``GPU_RULES``) in dependency order to ``handoff/jobs.json``;
2. ``sip handoff-run``      (GPU host) runs the pending jobs within a time budget and packs their outputs
   into archives of at most 15 MiB under ``$OUT`` (the device tool brings back 8 files of 16 MiB);
3. ``sip import ARCHIVE..`` (here) unpacks, marks the jobs complete (``snakemake --touch``) and records
   them (``dvc commit``).

Jobs are resumable: a job whose output exists is skipped, so a second GPU call continues the first.

Data too big to travel (the device carries 64 MiB; the gpu SIP-d4 pool is 150 MiB) is rebuilt on the host:
``export`` adds a ``host_data`` job with the pool's own command and the content digest of each file built
here, and ``handoff-run`` runs it first (without pynini: the pure-Python minimiser gives the same tables) and
refuses to go on if the rebuilt tables differ. Rebuilt data is not packed: it is already here.
The same holds for a released model a scale uses (``model.released``, e.g. the 37 MB ``models/sip-d4``): it
travels once, in git, and the host copies it into the scale's checkpoint directory (``use_release``) instead
of a second copy being carried.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path

import yaml

from sip_core import handoff_state, mps
from sip_core.errors import SipError
from sip_core.io import write_json
from sip_core.train.rundir import staging_path

# Rules whose jobs run on the GPU host, in the order they may run: pre-training (parents first), then the
# jobs that read its checkpoints (fine-tuning, the Section 7 probe, prefix tuning and its permutation test
# (prefix_table: 21 decodings of each test set), the T5 path).
GPU_RULES = ("pretrain", "t5_pretrain", "finetune", "probe_train", "probe_finetune", "probe_report", "prefix_tune",
             "prefix_table", "t5_finetune")
# Jobs that may run side by side under --parallel N; one that reads another's output waits for that job.
PARALLEL_RULES = ("pretrain", "finetune", "probe_finetune", "prefix_tune", "t5_finetune")
DECODE_REFERENCE_CHARS = 32  # test outputs of Table 1's length (<= 30) count once on a GPU (decode_weight)
# Outputs that stay on the host: read by a later job there, too big to bring back (the probe's five fine-tuned
# models, ~360 MB at gpu scale). Only their logs travel; the Snakefile marks them temp(), so their absence here
# leaves the report built from them up to date.
HOST_ONLY_RULES = ("probe_finetune",)
HOST_RULE = "host_data"  # a pool rebuilt on the GPU host, checked against the digests of the local copy
POOL_RULES = ("fst_pool", "set_pool")
RELEASE_RULE = "use_release"  # a released model (in git) copied to a scale's checkpoint directory
# Pools larger than this are rebuilt on the host instead of carried: the tracked tree (the released SIP-d4's
# 37 MB, experiments/results) already takes ~58 of the 64 MiB that travel, so even the Set pool (8 MB) is rebuilt.
HOST_BUILD_BYTES = 2 * 2**20
JOBS_FILE = Path("handoff/jobs.json")
PART_BYTES = 15 * 2**20
# What one device call brings back: 8 files and 64 MiB in all (a log beside the archive); two gpu-shape models do
# not fit. Within this budget the archive has at most 5 parts.
BACK_BYTES = 60 * 2**20
TRAVEL_BYTES = 64 * 2**20  # what one device call carries: the tracked tree and the carried paths together
ARCHIVE = "handoff.tar"
STARTED = time.monotonic()  # the hand-off's lines carry the time since the call began: where a call's minutes go
RESUME_DIR = "checkpoints"  # a pre-training's resume state (optimiser included): stays on the host
PACK_SECONDS = 20  # kept free at the end of the budget for packing the outputs
PRETRAIN_MARGIN = 90  # seconds a time-limited pre-training keeps for its checkpoint, evaluation and save
SAFETY_CHECKPOINT_MIN = 3  # ... and its checkpoints meanwhile (the gpu shape's resume state: ~2 s to write)
# a fine-tuning cut off at a call's end loses half of this on average, times the tasks running side by side
FINETUNE_CHECKPOINT_MIN = 1


def say(message: str) -> None:
    """One line of the hand-off's log, stamped with the minutes and seconds since this process started."""
    minutes, seconds = divmod(int(time.monotonic() - STARTED), 60)
    print(f"[handoff +{minutes}:{seconds:02d}] {message}", flush=True)


def parse_dry_run(text: str) -> list[dict]:
    """Jobs (rule, outputs, wildcards, shell command) from ``snakemake -n -p`` output."""
    jobs, job = [], None
    for line in text.splitlines():
        if m := re.match(r"^(?:local)?rule (\S+):$", line):
            job = {"rule": m.group(1), "output": [], "wildcards": {}, "cmd": None}
            jobs.append(job)
        elif job is None:
            continue
        elif line.startswith("    output: "):
            job["output"] = [p.strip() for p in line[len("    output: "):].split(",")]
        elif line.startswith("    input: "):
            job["input"] = [p.strip() for p in line[len("    input: "):].split(",")]
        elif line.startswith("    wildcards: "):
            pairs = (kv.split("=", 1) for kv in line[len("    wildcards: "):].split(", "))
            job["wildcards"] = {k: v for k, v in pairs}
        elif line.startswith("Shell command: "):
            job["cmd"] = line[len("Shell command: "):]
    return jobs


def _portable(cmd: str) -> str:
    """Replace this machine's interpreter with the GPU host's ``python3``."""
    return re.sub(r"^\S*python3? -m sip_core\.cli", "python3 -m sip_core.cli", cmd)


def order_jobs(jobs: list[dict], targets: list[str] = ()) -> list[dict]:
    """Dependency order without Snakemake: base, then pre-training parents before children, then fine-tuning;
    within a rule, the jobs of the first target given first (``handoff-run`` gives a free slot to the first
    ready job, so the targets' order is the priority), then by output."""
    from sip_core import pipeline

    def depth(model: str) -> int:
        parent = pipeline.MODELS[model].parent
        return 0 if parent is None else 1 + depth(parent)

    def rank(job) -> int:
        return next((i for i, t in enumerate(targets) for out in job["output"]
                     if out == t or out.startswith(t.rstrip("/") + "/")), len(targets))

    def key(job):
        if job["rule"] == HOST_RULE:
            return (-1, 0, 0, job["output"])
        model = job["wildcards"].get("model", "base")
        return (GPU_RULES.index(job["rule"]), depth(model) if job["rule"] == "pretrain" else 0, rank(job),
                job["output"])

    return sorted(jobs, key=key)


def snakemake(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], capture_output=True, text=True)


def jobs_path(out: Path) -> Path:
    """``sip export --out``: the job list itself, or ``jobs.json`` in a directory given."""
    return Path(out) / JOBS_FILE.name if Path(out).is_dir() else Path(out)


def export(targets: list[str], scale: str, out: Path = JOBS_FILE, jobs_n: int = 2) -> list[dict]:
    """Build everything CPU-side for ``targets``, then write the GPU jobs still pending (to ``out``, or to
    ``out/jobs.json`` where ``out`` is a directory)."""
    out = jobs_path(out)
    if not out.resolve().is_relative_to(Path.cwd().resolve()):  # the host runs a copy of this working tree
        raise SipError(f"--out {out}: the job list must lie inside the repository, which is what a device call "
                       f"carries (e.g. the default {JOBS_FILE})")
    config = ["--config", f"scale={scale}"]
    data = snakemake(["-j", str(jobs_n), *config, "--omit-from", *GPU_RULES, "--", *targets])
    if data.returncode != 0:
        raise SipError(f"building the data of {' '.join(targets)} failed:\n{data.stderr[-2000:]}")
    dry = snakemake(["-n", "-p", *config, "--", *targets])
    if dry.returncode != 0:
        raise SipError(f"snakemake dry run failed:\n{dry.stderr[-2000:]}")
    jobs = [j for j in parse_dry_run(dry.stdout + dry.stderr) if j["rule"] in GPU_RULES]
    jobs += host_data_jobs(jobs, config) + host_release_jobs(jobs, config)
    for job in jobs:
        job["cmd"] = _portable(job["cmd"])
    jobs = order_jobs(jobs, targets)
    write_json({"scale": scale, "targets": targets, "commit": source_commit(), "carry": carry_paths(jobs),
                "jobs": jobs}, out)
    return jobs


def carry_paths(jobs: list[dict]) -> list[str]:
    """The folders the host needs besides the tracked tree: those of the jobs' inputs that no job makes there
    and git does not hold (evaluation sets, small pools, a checkpoint pre-trained in an earlier session)."""
    made = {p for job in jobs for p in job["output"]}
    tracked = set(_git_files())
    return sorted({str(Path(p).parent) for job in jobs for p in job.get("input") or []
                   if p not in made and p not in tracked})


def travel_bytes(carry: list[str]) -> tuple[int, int]:
    """(tracked tree, carried paths) in bytes: what a device call would take along."""
    from sip_core.data.digest import tree_bytes
    tracked = sum(Path(f).stat().st_size for f in _git_files() if Path(f).is_file())
    return tracked, sum(tree_bytes(p) for p in carry if Path(p).exists())


def _git_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], capture_output=True, text=True)
    return [f for f in listed.stdout.split("\0") if f] if listed.returncode == 0 else []


def source_commit() -> str:
    """The commit the jobs run, for their metrics: a GPU host's copy of .git need not be this tree's (one
    recorded the session's first commit), so the export writes it and ``handoff-run`` passes it as
    $SIP_COMMIT; ``-dirty`` when tracked files differ from it (the host runs the working tree)."""
    from sip_core.train.runtime import git_commit
    commit = git_commit()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return f"{commit}-dirty" if status.returncode == 0 and status.stdout.strip() else commit


def host_data_jobs(gpu_jobs: list[dict], config: list[str]) -> list[dict]:
    """``host_data`` jobs for the pools the GPU jobs read that are too big to carry: the pool rule's command
    (all the host's cores) and the content digest of each file as built here."""
    from sip_core.data.digest import tree_bytes

    pools = sorted({str(Path(p).parent) for job in gpu_jobs for p in job.get("input", [])
                    if re.match(r"data/[^/]+/pretrain/[^/]+/[^/]+\.parquet$", p)})
    big = [d for d in pools if Path(d).exists() and tree_bytes(d) > HOST_BUILD_BYTES]
    if not big:
        return []
    files = [str(f) for d in big for f in sorted(Path(d).glob("*.parquet"))]
    dry = snakemake(["-n", "-p", *config, "--forcerun", *files, "--", *files])
    if dry.returncode != 0:
        raise SipError(f"snakemake dry run of the pools failed:\n{dry.stderr[-2000:]}")
    jobs = _as_host_jobs(dry, POOL_RULES)
    for job in jobs:
        job["cmd"] = re.sub(r"--workers \d+", "--workers $(nproc)", job["cmd"])
    return jobs


def host_release_jobs(gpu_jobs: list[dict], config: list[str]) -> list[dict]:
    """``host_data`` jobs that copy a released model (``models/``, which travels in git) to the checkpoint
    directory the GPU jobs read, so that the checkpoint need not be carried as well (64 MiB in all)."""
    checkpoints = sorted({p for job in gpu_jobs for p in job.get("input", [])
                          if re.match(r"data/[^/]+/checkpoints/[^/]+/model\.safetensors$", p) and Path(p).exists()})
    if not checkpoints:
        return []
    dry = snakemake(["-n", "-p", *config, "--forcerun", *checkpoints, "--", *checkpoints])
    if dry.returncode != 0:
        raise SipError(f"snakemake dry run of the checkpoints failed:\n{dry.stderr[-2000:]}")
    return _as_host_jobs(dry, (RELEASE_RULE,))


def _as_host_jobs(dry: subprocess.CompletedProcess, rules: tuple[str, ...]) -> list[dict]:
    """The jobs of ``rules`` in a dry run, as ``host_data`` jobs with the digest of each output built here."""
    from sip_core.data.digest import content_digest

    jobs = [j for j in parse_dry_run(dry.stdout + dry.stderr) if j["rule"] in rules]
    for job in jobs:
        job["rule"] = HOST_RULE
        job["digests"] = {p: content_digest(p) for p in job["output"]}
    return jobs


def verify_host_data(job: dict) -> list[str]:
    """The outputs of a ``host_data`` job whose content differs from the digests taken where it was exported."""
    from sip_core.data.digest import content_digest

    return [p for p, digest in job["digests"].items() if not Path(p).exists() or content_digest(p) != digest]


def _done(job: dict) -> bool:
    """All outputs exist, and a pre-training the hand-off limited in time (it writes its model also when
    stopped) has finished."""
    if not all(Path(p).exists() for p in job["output"]):
        return False
    return _pretrain_status(job) in (None, "finished")


def _pretrain_status(job: dict) -> str | None:
    """The recorded status of a pre-training job that runs under the hand-off's time limit (None otherwise)."""
    if job["rule"] != "pretrain" or "--max-minutes" in job["cmd"]:  # its own limit is part of its recipe
        return None
    metrics = Path(job["output"][0]).parent / "pretrain_metrics.json"
    return json.loads(metrics.read_text()).get("status") if metrics.exists() else "absent"


def run(jobs_file: Path, out_dir: Path, budget_min: float, parallel: int = 1, allow_rerun: bool = False,
        gpus: int = 1, gpu_procs: int | None = None) -> dict:
    """Run pending jobs in order until the budget is spent; pack what they produced into out_dir.
    ``parallel`` > 1 runs up to that many pre-training and fine-tuning jobs at once on each of ``gpus`` GPUs
    (one small model leaves most of a GPU idle), each as soon as what it reads is made: a job waiting for a
    checkpoint lets later ready jobs go first, and is skipped if that checkpoint did not finish (or, made by
    no job, is not on the host: a later call may carry it). A GPU runs pre-trainings side by side only with
    each other (see _gpu_for). A free slot goes to the first ready job in the jobs file, so its order is the
    priority. Every other job (host data) runs alone, with every GPU. ``gpu_procs`` caps the processes a GPU
    runs at once (a fine-tuning job counts one per task it runs at the same time, a task with long test
    outputs as several: ``decode_weight``).
    Refuses to start if fine-tuning jobs have fewer finished tasks than this host's last call left (handoff_state)."""
    spec = json.loads(Path(jobs_file).read_text())
    if not allow_rerun:
        handoff_state.check(_progress(spec["jobs"]))
    deadline = time.monotonic() + budget_min * 60
    producer = {p: job for job in spec["jobs"] for p in job["output"]}

    def upstream(job):
        return [producer[p] for p in job.get("input", []) if producer.get(p) not in (None, job)]

    done, failed, running = [], [], []
    placed = {}  # a concurrent job's process id -> (its GPU 0..gpus-1, its load there: processes x decode_weight)
    devices = (visible_gpus() or [str(g) for g in range(gpus)]) if gpus > 1 else []
    if gpus > 1 and gpus > len(devices):
        raise SipError(f"--gpus {gpus}: this host shows {len(devices)} GPUs")
    pending = [job for job in spec["jobs"] if _needs_run(job)]
    while pending:
        # the first job that reads nothing still to be made; with none, wait for a running one to end
        unmade = pending + [r for r, _ in running]
        ready = [j for j in pending if not any(u in unmade for u in upstream(j))]
        if not ready:  # (a cycle cannot occur: the jobs come from Snakemake's DAG)
            if not running or not _settle(running, len(running) - 1, deadline, done, failed):
                break
            continue
        job = ready[0]
        concurrent = (parallel > 1 or gpus > 1) and job["rule"] in PARALLEL_RULES
        procs = job_processes(job) if concurrent else 1
        load = procs * decode_weight(job) if concurrent else 1
        gpu = _gpu_for(job, running, placed, gpus, parallel, load, gpu_procs) if concurrent else None
        if running and gpu is None:
            # wait for a job to end, then choose again: a checkpoint made meanwhile readies its fine-tunings,
            # and the jobs file's order, not the moment, decides which job the free slot gets
            if not _settle(running, len(running) - 1 if concurrent else 0, deadline, done, failed):
                break
            continue
        pending.remove(job)
        if unfinished := [u["output"][0] for u in upstream(job) if not _done(u)]:
            say(f"skipped {job['output'][0]}: {', '.join(unfinished)} not finished")
            continue
        if absent := [p for p in job.get("input") or [] if p not in producer and not Path(p).exists()]:
            # carried by another call (one 36 MB checkpoint fits a call): the job waits for it
            say(f"skipped {job['output'][0]}: {', '.join(absent)} not on this host (carry it)")
            continue
        cmd = _command(job, remaining=deadline - time.monotonic())
        if cmd is None:  # too little budget left to start it
            break
        for p in job["output"] + _log(job):
            Path(p).parent.mkdir(parents=True, exist_ok=True)
        resumed = _finished_tasks(job) if job["rule"] == "finetune" else 0
        note = f" (resuming after {resumed} finished task{'s' if resumed > 1 else ''})" if resumed else ""
        weighed = f", load {load}" if load != procs else ""
        where = f" (GPU {gpu}, {procs} process{'es' if procs > 1 else ''}{weighed})" if concurrent and gpus > 1 else ""
        say(f"{job['rule']} -> {job['output'][0]}{note}{where}")
        proc = _start(cmd, threads=max(1, (os.cpu_count() or 1) // (parallel * gpus)) if concurrent else None,
                      commit=spec.get("commit"), gpu=devices[gpu] if concurrent and gpus > 1 else None)
        if concurrent:
            running.append((job, proc))
            placed[proc.pid] = gpu, load
            continue
        returncode = _wait(proc, deadline - PACK_SECONDS)
        if returncode is None or (returncode == 0 and _pretrain_status(job) == "time_limit"):
            # out of time: its checkpoint or staging directory stays for the next call on this host
            say(f"stopped at the budget: {job['output'][0]} (rerun handoff-run to resume)")
            break
        if job["rule"] == HOST_RULE:
            if not _host_data_ok(job, returncode):  # every later job reads this data: stop here
                failed.append(job)
                break
            continue
        (done if returncode == 0 and _done(job) else failed).append(job)
    _settle(running, 0, deadline, done, failed)
    host_only = [p for job in spec["jobs"] if job["rule"] in HOST_ONLY_RULES for p in job["output"]]
    pending = [j for j in spec["jobs"] if not _done(j)]
    pack([p for job in done for p in job["output"] + _log(job)] + finished_tasks(pending), out_dir, host_only)
    handoff_state.record(_progress(spec["jobs"]))
    summary = {"done": len(done), "failed": len(failed), "pending": len(pending)}
    say(f"{summary}")
    return summary


def _gpu_for(job: dict, running: list, placed: dict, gpus: int, parallel: int, load: int,
             gpu_procs: int | None) -> int | None:
    """The least busy GPU (lowest load, then fewest jobs) that can take ``job`` (``load``: its processes x
    decode_weight) now, or None. A GPU holds at most ``parallel`` jobs and, with ``gpu_procs``, a load of at most
    that many processes (a job larger than that runs on an idle GPU alone); pre-trainings share one only with each
    other: the card is time-sliced by process, so a pre-training (which fills it alone and gates its fine-tunings)
    ran at 1.1 instead of 8.5 steps/s beside ten fine-tunings (session 18). Two 8-task jobs on one card next to an
    idle slot on the other finished no task in 7.8 min (session 30): hence processes, not jobs, decide."""
    rules = {g: [] for g in range(gpus)}
    busy = dict.fromkeys(range(gpus), 0)
    for r, proc in running:
        gpu, its_load = placed[proc.pid]
        rules[gpu].append(r["rule"])
        busy[gpu] += its_load
    pretraining = job["rule"] == "pretrain"
    for g in sorted(rules, key=lambda g: (busy[g], len(rules[g]))):
        fits = gpu_procs is None or not rules[g] or busy[g] + load <= gpu_procs
        if len(rules[g]) < parallel and fits and all((rule == "pretrain") == pretraining for rule in rules[g]):
            return g
    return None


def job_processes(job: dict) -> int:
    """The processes a job runs at once: a fine-tuning job one per task it trains side by side, i.e.
    min(its task workers, its tasks not yet finished); any other job one."""
    if job["rule"] != "finetune":
        return 1
    value = _flag_reader(job)
    workers = int(value("--task-workers", os.environ.get("SIP_TASK_WORKERS", "1") or "1"))
    tasks = 1
    if value("--task-id", "all") == "all":
        tasks = len(set(_task_column(value("--tasks", ""), "task_id") or [None]))
    return max(1, min(workers, tasks - _finished_tasks(job)))


def decode_weight(job: dict) -> int:
    """How many ordinary processes one of a fine-tuning job's processes counts as on a GPU: ceil(mean test output
    length / DECODE_REFERENCE_CHARS), at least 1. A task's evaluation decodes one token per output character, so
    Table 11's 90-110 character tasks keep a card far busier than Table 1's (<= 30): SIP-d4's one remaining 90-110
    task finished in none of three calls beside two 5-task jobs (session 32)."""
    if job["rule"] != "finetune":
        return 1
    outputs = _task_column(_flag_reader(job)("--tasks", ""), "output", split="test")
    if not outputs:
        return 1
    mean = sum(map(len, outputs)) / len(outputs)
    return max(1, math.ceil(mean / DECODE_REFERENCE_CHARS))


def _flag_reader(job: dict):
    """``value(flag, default)`` for a job's command line (before its log redirect)."""
    args = shlex.split(job["cmd"].partition(" > ")[0])
    return lambda flag, default: args[args.index(flag) + 1] if flag in args[:-1] else default


def _task_column(path: str, column: str, split: str | None = None) -> list:
    """A column of an evaluation Parquet file (only ``split``'s rows, if given); [] for anything else (a TSV)."""
    if not Path(path).is_file():
        return []
    import pyarrow.parquet as pq
    with contextlib.suppress(OSError, ValueError, KeyError):  # not Parquet (a TSV), or no such column
        table = pq.read_table(path, columns=[column] + (["split"] if split else []))
        values = table.column(column).to_pylist()
        if split:
            values = [v for v, s in zip(values, table.column("split").to_pylist()) if s == split]
        return values
    return []


def visible_gpus() -> list[str]:
    """The GPUs this process may use ($CUDA_VISIBLE_DEVICES, else those `nvidia-smi -L` lists; none without)."""
    if (env := os.environ.get("CUDA_VISIBLE_DEVICES")) is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, _ in enumerate(line for line in listed.splitlines() if line.startswith("GPU "))]


def _progress(jobs: list[dict]) -> dict[str, int]:
    """Each fine-tuning job's finished tasks, complete (in its output) or staged (a job cut off by the budget)."""
    return {handoff_state.job_key(job): _finished_tasks(job) for job in jobs if job["rule"] == "finetune"}


def _finished_tasks(job: dict) -> int:
    out = Path(job["output"][0])
    return len(list(out.glob("*/metrics.json"))) + len(_staged_tasks(out))


def _staged_tasks(out: Path) -> list[Path]:
    """The finished tasks in a fine-tuning job's staging directory (complete once their metrics.json exists)."""
    return [m.parent for m in sorted(staging_path(out).glob("*/metrics.json"))]


def _settle(running: list, limit: int, deadline: float, done: list, failed: list) -> bool:
    """Wait until at most ``limit`` concurrent jobs still run, sorting the finished ones into done / failed
    (a pre-training stopped by its time limit is neither: it resumes).
    At the budget's end stop the rest (they resume in the next call) and return False."""
    while len(running) > limit:
        for job, proc in list(running):
            if (returncode := proc.poll()) is not None:
                running.remove((job, proc))
                if returncode == 0 and _pretrain_status(job) == "time_limit":
                    say(f"stopped at the budget: {job['output'][0]} (rerun handoff-run to resume)")
                    continue
                finished = returncode == 0 and _done(job)
                (done if finished else failed).append(job)
                say(f"{'finished' if finished else f'failed (exit {returncode})'}: {job['output'][0]}")
        if len(running) > limit and time.monotonic() >= deadline - PACK_SECONDS:
            for job, proc in running:
                _stop(proc)
                say(f"stopped at the budget: {job['output'][0]} (rerun handoff-run to resume)")
            running.clear()
            return False
        time.sleep(0.2)
    return True


def _needs_run(job: dict) -> bool:
    if job["rule"] != HOST_RULE:
        return not _done(job)
    if not verify_host_data(job):  # present and identical to the exported copy
        return False
    _remove_outputs(job)  # absent, or left half-way by a stopped call: rebuild
    return True


def _command(job: dict, remaining: float) -> str | None:
    """The job's command; a pre-training gets the budget as its time limit and checkpoints meanwhile.
    None if the budget left is too short to start it."""
    if _pretrain_status(job) is None:
        if remaining < 30:
            return None
        if job["rule"] == "finetune" and "--checkpoint-minutes" not in job["cmd"]:  # a task cut off resumes
            return _with_flags(job["cmd"], f"--checkpoint-minutes {FINETUNE_CHECKPOINT_MIN}")
        return job["cmd"]
    if remaining < PRETRAIN_MARGIN + 30:
        return None
    return _with_flags(job["cmd"], f"--max-minutes {(remaining - PRETRAIN_MARGIN) / 60:.1f}"
                                   f" --checkpoint-minutes {SAFETY_CHECKPOINT_MIN}")


def _with_flags(cmd: str, flags: str) -> str:
    """``flags`` added to a job's `sip` command, before its log redirection."""
    head, sep, log = cmd.partition(" > ")
    return f"{head} {flags}{sep}{log}"


def _host_data_ok(job: dict, returncode: int) -> bool:
    """A rebuilt pool is kept only if its content equals the exported copy's; otherwise it is deleted, so
    that nothing reads it by mistake later."""
    differ = verify_host_data(job) if returncode == 0 else job["output"]
    if not differ:
        say(f"{job['output'][0]}: rebuilt, content identical to the exported copy")
        return True
    say(f"{job['output'][0]}: {'rebuilt data differs from' if returncode == 0 else 'failed to rebuild'}"
        f" the exported copy ({', '.join(differ)}); stopping")
    _remove_outputs(job)
    return False


def _remove_outputs(job: dict) -> None:
    for p in job["output"]:
        Path(p).unlink(missing_ok=True)


def _start(cmd: str, threads: int | None = None, commit: str | None = None, gpu: str | None = None) -> subprocess.Popen:
    """A job's shell command in its own process group; ``threads``: its CPU threads ($SIP_THREADS);
    ``commit``: the exported tree's, recorded in its metrics ($SIP_COMMIT, see source_commit); ``gpu``: the
    one GPU it sees ($CUDA_VISIBLE_DEVICES)."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    if threads is not None:
        env.setdefault("SIP_THREADS", str(threads))
    if commit:
        env["SIP_COMMIT"] = commit
    return subprocess.Popen(cmd, shell=True, start_new_session=True, env=env)


def _wait(proc: subprocess.Popen, deadline: float) -> int | None:
    """The job's exit status; at ``deadline`` it is stopped and the result is None."""
    try:
        return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _stop(proc)
        return None


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the job's process group, then SIGKILL if it has not ended within 10 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def finished_tasks(jobs: list[dict]) -> list[str]:
    """The finished tasks of unfinished fine-tuning jobs: each task's directory in the job's staging directory
    (``.<out>.partial/<task>/``, complete once its metrics.json exists) and the staging settings. They come back
    with the archive; carried to the next GPU call (``data/<scale>/runs``), the job resumes after them, so a job
    of many tasks (35 g2p draws) may span calls and machines. Unfinished tasks' checkpoints stay behind."""
    paths = []
    for job in jobs:
        if job["rule"] != "finetune":
            continue
        staging = staging_path(Path(job["output"][0]))
        tasks = _staged_tasks(Path(job["output"][0]))
        if tasks:
            paths += [str(staging / "settings.json")] + [str(t) for t in tasks]
    return paths


def _log(job: dict) -> list[str]:
    """The log file a job's command writes (``> LOG 2>&1``), if any."""
    log = re.search(r"> (\S+) 2>&1$", job["cmd"])
    return [log.group(1)] if log else []


def pack(paths: list[str], out_dir: Path, host_only: list[str] = ()) -> list[Path]:
    """Tar the outputs (a checkpoint's whole directory, without its resume state) into one archive, written
    as parts of at most PART_BYTES each (``handoff.tar.00``, ``.01``, ...): a bf16 model of the gpu scale
    (~37 MB) is larger than one part. Nothing under ``host_only`` is packed, whether named in ``paths`` or
    found inside a packed checkpoint directory (the probe's fine-tuned models, ~345 MB, live under the probe's own
    directory)."""
    stay = [Path(p) for p in host_only]
    files = []
    for p in map(Path, paths):
        if any(p.is_relative_to(s) for s in stay):  # a host-only output itself
            continue
        if p.is_file() and p.suffix != ".safetensors":  # a log, a table: itself
            files.append(p)
            continue
        root = p.parent if p.is_file() else p  # a model: its checkpoint directory
        files += [f for f in root.rglob("*") if f.is_file() and RESUME_DIR not in f.relative_to(root).parts
                  and not any(f.is_relative_to(s) for s in stay)]
    files = _within_budget(sorted(set(files)))
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob(f"{ARCHIVE}.*"):
        old.unlink()
    if not files:
        return []
    whole = out_dir / f".{ARCHIVE}.partial"
    with tarfile.open(whole, "w") as tar:
        for f in files:
            tar.add(f)
    parts = []
    with open(whole, "rb") as src:
        while chunk := src.read(PART_BYTES):
            parts.append(out_dir / f"{ARCHIVE}.{len(parts):02d}")
            parts[-1].write_bytes(chunk)
    whole.unlink()
    return parts


def _within_budget(files: list[Path]) -> list[Path]:
    """The files that fit into what one call brings back: everything but model weights first (runs, logs,
    metrics), then weights while they fit. Weights that do not fit stay on the host, named in a warning."""
    small = [f for f in files if f.suffix != ".safetensors"]
    total = sum(f.stat().st_size for f in small) + 2048 * len(files)  # tar headers and padding, generously
    kept, left = list(small), []
    for f in (f for f in files if f.suffix == ".safetensors"):
        if total + f.stat().st_size <= BACK_BYTES:
            kept.append(f)
            total += f.stat().st_size
        else:
            left.append(f)
    if left:
        say(f"warning: left on the host, over the {BACK_BYTES >> 20} MiB a call brings back: "
            + ", ".join(map(str, left)))
    return sorted(kept)


WHOLE_ARCHIVES = (".tar", ".tar.xz", ".tar.gz", ".tgz")


def _joined(parts: list[Path], tmp_dir: Path) -> Path:
    """One archive from its parts (given in any order). A whole archive passes through: a plain .tar, or one
    compressed to be kept in git (.tar.xz, .tar.gz, .tgz; tarfile reads the compression)."""
    if len(parts) == 1 and parts[0].name.endswith(WHOLE_ARCHIVES):
        return parts[0]
    names = sorted(parts, key=lambda p: p.name)
    expected = [f"{ARCHIVE}.{i:02d}" for i in range(len(names))]
    if [p.name for p in names] != expected:
        raise SipError(f"hand-off parts must be {ARCHIVE}.00 .. .{len(names) - 1:02d} of one call, "
                       f"got {', '.join(p.name for p in names)}")
    # a call's parts lie side by side: one left out would truncate the archive
    missing = names[-1].with_name(f"{ARCHIVE}.{len(names):02d}")
    if missing.is_file():
        raise SipError(f"{missing} lies beside the given part(s): give all parts of the call "
                       f"({names[0].parent}/{ARCHIVE}.*)")
    whole = tmp_dir / ARCHIVE
    with open(whole, "wb") as out:
        for part in names:
            out.write(part.read_bytes())
    return whole


def import_archives(archives: list[Path], scale: str, targets: list[str]) -> None:
    """Unpack returned outputs, then tell Snakemake and DVC they are complete."""
    import tempfile
    for path in archives:
        if not path.is_file():
            raise SipError(f"{path}: no such archive")
    with tempfile.TemporaryDirectory() as tmp:
        archive = _joined(archives, Path(tmp))
        try:
            tar = tarfile.open(archive)
            members = tar.getmembers()  # reads to the end: a truncated archive fails here, before anything is written
        except tarfile.TarError as err:
            raise SipError(f"{archive.name}: not a complete hand-off archive ({err}); were all parts given?") from None
        with tar:
            for member in members:
                if member.name.startswith("/") or ".." in Path(member.name).parts:
                    raise SipError(f"{archive.name}: unsafe path {member.name!r}")
            tar.extractall(".", filter="data")
            # finished tasks per staging directory (one travels only with at least one finished task)
            staged = Counter(Path(m.name).parents[1] for m in members
                             if m.name.endswith("/metrics.json") and Path(m.name).parents[1].name.endswith(".partial"))
            _drop_superseded_staging([m.name for m in members])
    if staged:
        jobs = ", ".join(f"{_job_of_staging(d)}: {count}" for d, count in sorted(staged.items()))
        print(f"import: the finished tasks of {len(staged)} unfinished fine-tuning job(s) restored ({jobs}); "
              f"carry data/{scale}/runs to the next GPU call and they resume after them")
    if not targets:  # only partial work came back: nothing is complete yet
        return
    touch = snakemake(["--touch", "-j1", "--config", f"scale={scale}", "--", *targets])
    if touch.returncode != 0:
        raise SipError(f"snakemake --touch failed:\n{touch.stderr[-2000:]}")
    if stages := _dvc_stages_present(scale):
        # the interpreter's own dvc, as for snakemake: a bare "dvc" depends on PATH (an unactivated venv has none)
        commit = subprocess.run([sys.executable, "-m", "dvc", "commit", "--force", "--quiet", *stages],
                                capture_output=True, text=True)
        if commit.returncode != 0:
            raise SipError(f"dvc commit failed (outputs are imported; run 'dvc commit' by hand):\n"
                           f"{commit.stderr[-2000:]}")


def _dvc_stages_present(scale: str) -> list[str]:
    """The dvc.yaml stages of ``scale`` whose dependencies and outputs all exist here: a bare ``dvc commit``
    fails on the first stage that was never built here (another scale's, say) and then commits nothing."""
    if not Path("dvc.yaml").exists():
        return []
    stages = yaml.safe_load(Path("dvc.yaml").read_text()).get("stages", {})
    # a stage's scale is in its command (sip_core.dvcstages.SNAKEMAKE); its name puts it mid-name for checkpoints
    present = [name for name, stage in stages.items() if f"--config scale={scale} " in stage.get("cmd", "") and all(
        Path(next(iter(path)) if isinstance(path, dict) else path).exists()
        for path in [*stage.get("deps", []), *stage.get("outs", [])])]
    if not present:
        print(f"import: no dvc.yaml stage of scale {scale} has all its inputs here; dvc commit skipped")
    return present


def _drop_superseded_staging(names: list[str]) -> None:
    """A run that came back whole replaces the finished tasks an earlier call left here in its staging directory
    (``.<out>.partial``): left behind, they would look like an unfinished job."""
    runs = {Path(*Path(n).parts[:5]) for n in names if len(Path(n).parts) > 5 and Path(n).parts[2] == "runs"
            and not any(part.endswith(".partial") for part in Path(n).parts)}
    for out in runs:
        if (staging := staging_path(out)).is_dir():
            shutil.rmtree(staging)
            print(f"import: {out} came back whole; its earlier partial work ({staging}) removed")


def _job_of_staging(staging: Path) -> str:
    """The output a staging directory belongs to: data/gpu/runs/base/.g2p.partial -> data/gpu/runs/base/g2p."""
    return str(staging.parent / staging.name[1:-len(".partial")])


def register(commands, data_commands) -> None:
    exp = commands.add_parser("export", help="build a target's data here and list its GPU jobs (handoff/jobs.json)")
    exp.add_argument("targets", nargs="+")
    exp.add_argument("--scale", default="gpu")
    exp.add_argument("--out", type=Path, default=JOBS_FILE,
                     help=f"the job list to write (default {JOBS_FILE}; a directory: {JOBS_FILE.name} in it)")
    exp.set_defaults(func=lambda a: _print_export(export(a.targets, a.scale, a.out), jobs_path(a.out)))
    run_p = commands.add_parser("handoff-run", help="on the GPU host: run pending hand-off jobs, pack outputs")
    run_p.add_argument("--jobs", type=Path, default=JOBS_FILE)
    run_p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "handoff/out")))
    run_p.add_argument("--budget-min", type=float, default=9.0)
    run_p.add_argument("--parallel", type=int, default=1,
                       help="fine-tuning jobs at once on each GPU (default 1; 5-10 fill an H100 at the gpu shape)")
    run_p.add_argument("--gpus", type=int, default=None, metavar="N",
                       help="spread the jobs over N GPUs, --parallel on each (default: every GPU the host shows)")
    run_p.add_argument("--task-workers", type=int, default=None, metavar="N",
                       help="each fine-tuning job runs N of its tasks at once, one process each ($SIP_TASK_WORKERS "
                            "for the jobs; sweeps ran 18-25 gpu-shape fine-tunes side by side on one H100)")
    run_p.add_argument("--gpu-procs", type=int, default=None, metavar="N",
                       help="at most N processes on a GPU at once, a fine-tuning job counting one per task it runs "
                            "side by side (default: no limit but --parallel; 10 bimachine tasks fill an H200)")
    run_p.add_argument("--mps", action=argparse.BooleanOptionalAction, default=None,
                       help="run the jobs under a CUDA MPS control daemon, so that jobs sharing a GPU run their "
                            "kernels at once instead of taking turns. Default: on where the host shows a GPU "
                            "(best effort: without MPS, a warning)")
    run_p.add_argument("--allow-rerun", action="store_true",
                       help="start even if the outputs here are older than this host's last call left them")
    run_p.set_defaults(func=lambda a: _handoff_run(a))
    imp = commands.add_parser("import", help="unpack hand-off archives, snakemake --touch, dvc commit")
    imp.add_argument("archives", nargs="+", type=Path)
    imp.add_argument("--scale", default="gpu")
    imp.add_argument("--targets", nargs="*", default=[],
                     help="targets the archive completes (snakemake --touch, dvc commit); none: only unpack")
    imp.set_defaults(func=lambda a: import_archives(a.archives, a.scale, a.targets))


def _handoff_run(a) -> int:
    if a.parallel < 1 or any(n is not None and n < 1 for n in (a.task_workers, a.gpus, a.gpu_procs)):
        raise SipError("--parallel, --gpus, --task-workers and --gpu-procs must be at least 1")
    if a.task_workers is not None:
        os.environ["SIP_TASK_WORKERS"] = str(a.task_workers)  # the jobs' environment (_start copies it)
    shown = visible_gpus()
    gpus = a.gpus or max(1, len(shown))
    with mps.daemon(bool(shown) if a.mps is None else a.mps):
        summary = run(a.jobs, a.out, a.budget_min, a.parallel, a.allow_rerun, gpus, a.gpu_procs)
    return 0 if summary["failed"] == 0 else 1


def _print_export(jobs: list[dict], out: Path) -> int:
    host = sum(job["rule"] == HOST_RULE for job in jobs)
    print(f"{len(jobs) - host} GPU jobs" + (f" and {host} input(s) to rebuild there (pools, released models)" if host else "") +
          f" -> {out}; on the GPU host: python3 -m sip_core.cli handoff-run --budget-min 9"
          + ("" if out == JOBS_FILE else f" --jobs {out}"))
    for job in jobs:
        print("  " + shlex.split(job["cmd"])[3] + " -> " + job["output"][0])
    carry = [str(out.parent)] + json.loads(out.read_text())["carry"]
    tracked, carried = travel_bytes(carry)
    print(f"carry: {' '.join(carry)} ({carried / 2**20:.1f} MiB; with the tracked tree's {tracked / 2**20:.1f} MiB, "
          f"{(tracked + carried) / 2**20:.1f} of the {TRAVEL_BYTES / 2**20:.0f} MiB a device call takes)")
    if tracked + carried > TRAVEL_BYTES:
        print("warning: over what a device call takes; export fewer targets, or leave out of git's index what "
              "no job reads (docs/EXPERIMENTS.md, session 18)", file=sys.stderr)
    return 0
