"""Something is learned: a tiny SIP model, pre-trained briefly on seen 2-state FSTs, uses the FST.

The brief's target (≥95% exact match on 50 seen 2-state FSTs within 60 s) is NOT reached on the shared
2-core CPU: after ~2.4k steps (48 s) a d64 model sits at ~26% with the loss at ~0.68. This test checks
what does hold in ~20 s: the loss falls well below its start, and the model relies on the FST (its loss
with the right FST is clearly lower than with another example's FST).
"""
from __future__ import annotations

import numpy as np
import torch

from sip_core.model.loading import load_sip
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import load_pool
from sip_core.train.pretrain import PretrainOptions, run
from tests.fixtures.tiny_fsts import write_pool


def test_tiny_sip_model_learns_to_use_the_fst(tmp_path):
    pool_dir = write_pool(tmp_path / "pool", n_train_fsts=50, alphabet="ab", max_len=5, per_fst=30, easy_dev_per_fst=2)
    opts = PretrainOptions(variant="sip", data=str(pool_dir), out=str(tmp_path / "ck"), d_model=64, d_ff=256,
                           layers=2, heads=4, d_kv=16, dropout=0.0, lr=2e-3, warmup=30, max_steps=700,
                           batch_size=16, log_every=50, eval_max=100, progress=False, seed=3, threads=1)
    metrics = run(opts)
    curve = metrics["curve"]
    assert curve[-1]["loss"] < 0.5 * curve[0]["loss"]
    model = load_sip(tmp_path / "ck").eval()
    pool = load_pool(pool_dir, True, 16)
    data = DeviceSplit(pool.splits["easy_dev"], "cpu", pool.fsts, True)
    batch = data.batch(np.arange(len(data)))
    with torch.no_grad():
        right = model(**batch).loss.item()
        shuffled = dict(batch, fst=batch["fst"][torch.roll(torch.arange(len(data)), 7)])
        wrong = model(**shuffled).loss.item()
    assert right < 0.85 * wrong, (right, wrong)
