"""How strong is a codebook pull (`sip finetune --prefix-pull W`) beside the task loss, at the start and the end of a
fine-tune? Calibrates sweep 29's weights (session 44).

For each task: on a batch of 64 training pairs, the gradient norm on the prefix of the task loss and of the pull at
W = 1 (MSE of each slot to its nearest single-transition encoding over 4 states and the task's symbols), with the
prefix at the mean init and at a run's tuned prefix (the body frozen at MODEL). The ratio times W is the pull's
strength relative to the task loss.

    python experiments/pull_scale.py SWEEP_DIR VARIANT TASK...     (e.g. /tmp/s25 e50-hold-s762354 iteration-s4-0)
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch

from sip_core.model.codebook import nearest, task_symbol_ids, transition_codebook
from sip_core.model.loading import load_prefix_init, load_sip, load_tuned_prefix, mean_prefix, with_prefix_mode
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import load_task_examples, make_split, task_pairs

MODEL, EVAL = os.environ.get("MODEL", "models/sip-d4"), "data/gpu/eval/iteration-s4"


def gradient_norms(model, batch, prefix: torch.Tensor, codebook: torch.Tensor) -> tuple[float, float, float, float]:
    """(task loss, its gradient norm on the prefix, pull MSE, the pull's gradient norm at W = 1)."""
    with torch.no_grad():
        model.prefix.copy_(prefix)
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    grad_task = model.prefix.grad.norm().item()
    slots = model.prefix.detach().clone().requires_grad_(True)
    pull = torch.nn.functional.mse_loss(slots, nearest(slots, codebook))
    pull.backward()
    return loss.item(), grad_task, pull.item(), slots.grad.norm().item()


def main(sweep: str, variant: str, tasks: list[str]) -> None:
    torch.set_num_threads(2)
    base = load_sip(MODEL).eval()
    examples = load_task_examples(f"{EVAL}/examples.parquet")
    init = mean_prefix(base.fst_encoder, load_prefix_init(MODEL), 32, 80, torch.Generator().manual_seed(762354),
                       base.t5.shared)
    model = with_prefix_mode(base, "tuned", prefix_length=80).eval()
    for task in tasks:
        train = task_pairs(examples, task, "train")
        with torch.no_grad():
            codebook = transition_codebook(base.fst_encoder, base.t5.shared, 4, task_symbol_ids(train, base.config.symbols))
        batch = DeviceSplit(make_split(*zip(*train)), torch.device("cpu")).batch(
            np.random.default_rng(0).choice(len(train), 64, replace=False))
        tuned = load_tuned_prefix(f"{sweep}/{variant}--{task}").float()
        for name, prefix in (("mean init", init), (f"tuned ({variant})", tuned)):
            loss, g_task, pull, g_pull = gradient_norms(model, batch, prefix, codebook)
            print(f"{task} {name:28s} task loss {loss:.3f} |grad| {g_task:.2e}   pull MSE {pull:.2f} |grad| {g_pull:.2e}"
                  f"   pull/task {g_pull / g_task:.1f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
