"""How much do perturbations of the gold FST's encoding cost the frozen SIP-d4 on the iteration tasks?

Session 40 (docs/EXPERIMENTS.md). A tuned prefix has 80 slots, all attended, for FSTs of 49-67 transitions, and it
starts from the mean of 32 pre-training FSTs, while pre-training showed the body exact encodings with padding
masked out. If the body were fragile to extra slots or to noise, that mismatch (not the gradient's search) could be
what a tuned prefix loses on long inputs. Each variant is the gold encoding changed one way, scored on the first N
test strings of each task (CPU, ~25 s a task at N = 200):

    PYTHONPATH=. python3 experiments/junk_slots.py 200 iteration-s4-0 iteration-s4-1
    MODEL=runs/search-aware-a ONLY=gold PYTHONPATH=. python3 experiments/junk_slots.py 200 ...   (another body, gold only)
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch

from sip_core.analysis.prefix import PrefixEvaluator, fst_encodings
from sip_core.model.loading import load_prefix_init, load_sip, mean_prefix
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import fst_table_from_arrow, load_task_examples, make_split, read_parquet, task_pairs

MODEL, EVAL = os.environ.get("MODEL", "models/sip-d4"), "data/gpu/eval/iteration-s4"
SLOTS, SEED = 80, 762354  # the gpu prefix length; Table 1's seed picks the 32 FSTs of the mean init


def variants(gold: torch.Tensor, init: torch.Tensor) -> dict[str, torch.Tensor]:
    n = gold.shape[0]
    noise = torch.randn(gold.shape, generator=torch.Generator().manual_seed(0)) * gold.std()
    return {
        "gold": gold,
        "gold + the mean init's slots n..80": torch.cat([gold, init[n:]]),
        "gold + all 80 mean-init slots": torch.cat([gold, init]),
        "gold + 20 copies of the overall mean": torch.cat([gold, init[-1:].expand(20, -1)]),
        "gold + noise of 0.1 sd": gold + 0.1 * noise,
        "gold + noise of 0.3 sd": gold + 0.3 * noise,
        "0.8 gold + 0.2 mean init": 0.8 * gold + 0.2 * init[:n],
    }


def main(n_test: int, tasks: list[str]) -> None:
    torch.set_num_threads(2)
    base = load_sip(MODEL).eval()
    arrow = read_parquet(f"{EVAL}/fsts.parquet")
    fsts = fst_table_from_arrow(arrow, base.config.num_states, base.config.symbols)
    examples = load_task_examples(f"{EVAL}/examples.parquet")
    ids = arrow.column("task_id").to_pylist()
    init = mean_prefix(base.fst_encoder, load_prefix_init(MODEL), 32, SLOTS, torch.Generator().manual_seed(SEED),
                       base.t5.shared)
    with torch.no_grad():
        for task in tasks:
            row = ids.index(task)
            gold = fst_encodings(base, fsts, np.array([row]), int(np.diff(fsts.offsets)[row]))[0][0]
            test = DeviceSplit(make_split(*zip(*task_pairs(examples, task, "test")[:n_test])), torch.device("cpu"))
            for name, prefix in variants(gold, init).items():
                if os.environ.get("ONLY") and name != os.environ["ONLY"]:
                    continue
                evaluator = PrefixEvaluator(base, prefix.shape[0], torch.device("cpu"), 256, None)
                print(f"{task} ({gold.shape[0]} transitions)  {name:38s} acc {evaluator.accuracy(prefix, test):5.1f}",
                      flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
