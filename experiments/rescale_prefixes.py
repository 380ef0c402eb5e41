"""Does the frozen body use a tuned prefix's magnitude? Score prefix-only tuned prefixes as they are and rescaled
(session 44: tuned slots end at norms 89-153, the body's encodings at ~57), on the first 200 test strings of each task,
CPU, body frozen at models/sip-d4 (as it was when these prefixes were tuned).

    python experiments/rescale_prefixes.py SWEEP_DIR VARIANT TASK...   (session 43's prefix-only archive unpacked:
        /tmp/s26 po-plr0.3-s762354 iteration-s4-0 ... iteration-s4-4; ~25 s a task)
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from partial_prefixes import latest_prefix_folder  # a sibling script: sys.path[0] is experiments/
from sip_core.analysis.prefix import PrefixEvaluator
from sip_core.model.loading import load_sip, load_tuned_prefix
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import load_task_examples, make_split, task_pairs

EVAL, N_TEST, SLOTS = "data/gpu/eval/iteration-s4", 200, 80


def latest_prefix(sweep: Path, run: str) -> torch.Tensor:
    """A finished run's prefix, else the latest copy a time-limited run left (prefix-epoch<N>/)."""
    for folder in (sweep / run, sweep / f".{run}.partial"):
        if (prefix_folder := latest_prefix_folder(folder)) is not None:
            return load_tuned_prefix(prefix_folder).float()
    raise SystemExit(f"rescale_prefixes: no tuned prefix for {run} under {sweep}")


def rescaled(prefix: torch.Tensor) -> dict[str, torch.Tensor]:
    norms = prefix.norm(dim=-1, keepdim=True)
    return {"tuned": prefix, "each slot scaled to norm 57": prefix / norms * 57, "whole prefix x 0.5": prefix * 0.5,
            "slots capped at norm 80": prefix * (80 / norms).clamp(max=1)}


def main(sweep: Path, variant: str, tasks: list[str]) -> None:
    torch.set_num_threads(2)
    evaluator = PrefixEvaluator(load_sip("models/sip-d4").eval(), SLOTS, torch.device("cpu"), 256, None)
    examples = load_task_examples(f"{EVAL}/examples.parquet")
    for task in tasks:
        test = DeviceSplit(make_split(*zip(*task_pairs(examples, task, "test")[:N_TEST])), torch.device("cpu"))
        for name, prefix in rescaled(latest_prefix(sweep, f"{variant}--{task}")).items():
            print(f"{task} {name:28s} acc {evaluator.accuracy(prefix, test):5.1f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
