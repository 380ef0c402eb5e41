"""Simulation exact match of a pre-trained SIP checkpoint on a pool's unseen FSTs, per input-length band.

Session 28 (docs/EXPERIMENTS.md): where SIP-d4 and SIP-d4-long stop simulating, on the d4-long pool's dev FSTs
(lengths 1-110), read beside Table 11. Runs on a CPU in a few minutes for a few hundred examples:

    PYTHONPATH=. python3 experiments/simulation_by_length.py data/gpu/checkpoints/sip-d4-long \
        --pool data/gpu/pretrain/d4long --n 300 > sip-d4-long.json
"""
from __future__ import annotations

import argparse
import contextlib
import json

import torch

from sip_core.model.loading import load_sip
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import load_pool
from sip_core.train.pretrain import _eval_subset, exact_match


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("--pool", default="data/gpu/pretrain/d4long")
    p.add_argument("--split", default="dev")
    p.add_argument("--n", type=int, default=300, help="examples drawn from the split (pre-training's own subset rule)")
    p.add_argument("--seed", type=int, default=55)
    p.add_argument("--batch-size", type=int, default=64)
    a = p.parse_args()
    model = load_sip(a.checkpoint).float().eval()
    pool = load_pool(a.pool, with_fsts=True, num_states=model.config.num_states, te=False, max_fsts=None)
    split = _eval_subset(pool.splits[a.split], a.n, a.seed)
    data = DeviceSplit(split, torch.device("cpu"), pool.fsts, True)
    with torch.no_grad():
        scores = exact_match(model, data, a.batch_size, contextlib.nullcontext, by_length=True)
    lengths = split.input_char_lengths
    print(json.dumps({"checkpoint": a.checkpoint, "pool": a.pool, "split": a.split, "n": len(split),
                      "max_input_chars": int(lengths.max()), **{k: round(v, 1) for k, v in scores.items()}}))


if __name__ == "__main__":
    main()
