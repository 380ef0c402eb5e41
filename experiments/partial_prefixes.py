"""Tuned prefixes of fine-tuning runs that a time limit stopped, for the sweep archives.

`sip finetune --save-prefix` writes `prefix.safetensors` when a run ends; a run that `LIMIT_S` stopped leaves only its
epoch checkpoint (weights and optimiser, too big to travel). This copies the prefix out of each stopped run's latest
checkpoint into `prefix-epoch<N>/` beside its `progress.json` (as `sip finetune` writes it, so `load_tuned_prefix` reads
the folder), and the archive brings it back (session 42 lost ten prefix-only runs' prefixes this way). Checkpoints are
this harness's own files on the GPU host.

    python experiments/partial_prefixes.py WORK_DIR
"""
from __future__ import annotations

import sys
from pathlib import Path

from sip_core.model.loading import save_tuned_prefix
from sip_core.train import checkpoint as ckpt


def latest_prefix_folder(run: Path) -> Path | None:
    """Where a run's tuned prefix is: the run's own folder (a finished run), else its latest `prefix-epoch<N>/` copy
    (a stopped one), else None."""
    if (run / "prefix.safetensors").exists():
        return run
    copies = sorted(run.glob("prefix-epoch*"), key=lambda p: int(p.name.removeprefix("prefix-epoch")))
    return copies[-1] if copies else None


def copy_partial_prefixes(work: Path) -> list[Path]:
    written = []
    for run in sorted(work.glob(".*.partial")):
        latest = ckpt.latest_checkpoint(run)
        if latest is None:
            continue
        payload, _ = ckpt.load_checkpoint(latest)
        prefix = payload["model"].get("prefix")
        if prefix is None:  # not a tuned-prefix run
            continue
        target = run / f"prefix-epoch{payload['epoch']}"
        target.mkdir(exist_ok=True)
        save_tuned_prefix(prefix, target)
        written.append(target)
    return written


if __name__ == "__main__":
    for path in copy_partial_prefixes(Path(sys.argv[1])):
        print(f"partial prefix: {path}")
