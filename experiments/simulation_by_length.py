"""Simulation exact match of a pre-trained SIP checkpoint on a pool's unseen FSTs, per input-length band and per
FST size (transitions).

Session 28 (docs/EXPERIMENTS.md): where SIP-d4 and SIP-d4-long stop simulating, on the d4-long pool's dev FSTs
(lengths 1-110), read beside Table 11. Runs on a CPU in a few minutes for a few hundred examples:

    PYTHONPATH=. python3 experiments/simulation_by_length.py data/gpu/checkpoints/sip-d4-long \
        --pool data/gpu/pretrain/d4long --n 300 > sip-d4-long.json

Session 41: did search-aware continued pre-training (experiments/search_aware.py) lose the large FSTs only?
    PYTHONPATH=. python3 experiments/simulation_by_length.py runs/search-aware-a --pool data/gpu/pretrain/d4 --n 1000
"""
from __future__ import annotations

import argparse
import contextlib
import json

import numpy as np
import torch

from sip_core.eval.decode import predict_split
from sip_core.model.loading import load_sip
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import load_pool
from sip_core.train.pretrain import LENGTH_BANDS, _eval_subset

SIZE_BANDS = ((1, 15), (16, 30), (31, 45), (46, 60), (61, 200))  # transitions; Table 1's FSTs have 49-67


def by_band(hits: np.ndarray, values: np.ndarray, bands, name: str) -> dict:
    """{"acc_<name>lo-hi": exact match %, "n_<name>lo-hi": examples} for each band of ``values`` with examples."""
    out = {}
    for lo, hi in bands:
        band = (values >= lo) & (values <= hi)
        if band.any():
            out[f"acc_{name}{lo}-{hi}"] = 100.0 * hits[band].mean()
            out[f"n_{name}{lo}-{hi}"] = int(band.sum())
    return out


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
        preds = predict_split(model, data, a.batch_size, contextlib.nullcontext)
    hits = np.array([p == g for p, g in zip(preds, split.outputs)], dtype=bool)
    scores = {"acc": 100.0 * hits.mean(), **by_band(hits, split.input_char_lengths, LENGTH_BANDS, "len"),
              **by_band(hits, pool.fsts.n_transitions[split.fst_rows], SIZE_BANDS, "trans")}
    print(json.dumps({"checkpoint": a.checkpoint, "pool": a.pool, "split": a.split, "n": len(split),
                      "max_input_chars": int(split.input_char_lengths.max()), **{k: round(v, 1) for k, v in scores.items()}}))


if __name__ == "__main__":
    main()
