"""What does gradient search put in a tuned prefix? Cosine geometry of prefix-only tuned prefixes (body frozen).

For each run (a sweep-26 archive unpacked: `<variant>-s<seed>--<task>` folders, or `.<run>.partial/prefix-epoch<N>/`
of a stopped one), against the frozen body's own encodings:
- moved: per slot, cosine of the tuned slot to its init slot (the mean of 32 pool FSTs, re-made from the seed);
- to gold: per slot, the best cosine to any transition of the task's gold FST (Figure 9's measure), and per gold
  transition the best cosine to any slot (how much of the machine is there);
- the init's own best cosine to gold, as the baseline the search started from;
- seeds: per slot of one seed's prefix, the best cosine to the other seed's slots (are two searches alike?).

    python experiments/read_prefixes.py SWEEP_DIR [MODEL]     (session 43: models/sip-d4, prefix-only at epoch 35)
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import torch
from torch.nn.functional import normalize

from partial_prefixes import latest_prefix_folder  # a sibling script: sys.path[0] is experiments/
from sip_core.analysis.prefix import fst_encodings
from sip_core.model.loading import load_prefix_init, load_sip, load_tuned_prefix, mean_prefix
from sip_core.train.data import fst_table_from_arrow, read_parquet

EVAL = "data/gpu/eval/iteration-s4"


def tuned_prefixes(sweep: Path) -> dict[tuple[int, str], torch.Tensor]:
    """(seed, task) -> the run's tuned prefix: the finished run's, else the stopped run's latest copy."""
    found = {}
    for run in sorted(sweep.iterdir()):
        m = re.fullmatch(r"\.?[\w.-]+-s(\d+)--([\w-]+?)(\.partial)?", run.name)
        if not m:
            continue
        folder = latest_prefix_folder(run)
        if folder is not None:
            found[(int(m[1]), m[2])] = load_tuned_prefix(folder).float()
    return found


def best_cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """For each row of a, the highest cosine to any row of b."""
    return (normalize(a, dim=-1) @ normalize(b, dim=-1).T).max(-1).values


def main() -> int:
    sweep, model_dir = Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "models/sip-d4"
    body = load_sip(model_dir).eval()
    arrow = read_parquet(f"{EVAL}/fsts.parquet")
    gold_table = fst_table_from_arrow(arrow, body.config.num_states, body.config.symbols)
    ids = arrow.column("task_id").to_pylist()
    sample = load_prefix_init(model_dir)
    prefixes = tuned_prefixes(sweep)
    seeds = sorted({s for s, _ in prefixes})
    print("seed task        slots | moved: cos(init) | slot->gold: init  tuned | gold->slot: init tuned  >0.9 | gold n")
    with torch.no_grad():
        for (seed, task), prefix in sorted(prefixes.items()):
            row = ids.index(task)
            n_gold = int(np.diff(gold_table.offsets)[row])
            gold = fst_encodings(body, gold_table, np.array([row]), n_gold)[0][0]
            init = mean_prefix(body.fst_encoder, sample, 32, len(prefix), torch.Generator().manual_seed(seed),
                               body.t5.shared)
            moved = (normalize(prefix, dim=-1) * normalize(init, dim=-1)).sum(-1)
            print(f"{seed:>7} {task:14s} {len(prefix):3d} | {moved.mean():.3f} (min {moved.min():.2f})"
                  f" | {best_cos(init, gold).mean():.3f} {best_cos(prefix, gold).mean():.3f}"
                  f" | {best_cos(gold, init).mean():.3f} {best_cos(gold, prefix).mean():.3f}"
                  f" {(best_cos(gold, prefix) > 0.9).sum().item():3d} | {n_gold}")
        if len(seeds) == 2:
            for task in sorted({t for _, t in prefixes}):
                a, b = prefixes.get((seeds[0], task)), prefixes.get((seeds[1], task))
                if a is not None and b is not None:
                    print(f"seeds {seeds[0]} vs {seeds[1]} {task}: best cosine slot to slot {best_cos(a, b).mean():.3f}, "
                          f"same slot {(normalize(a, dim=-1) * normalize(b, dim=-1)).sum(-1).mean():.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
