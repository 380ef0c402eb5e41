"""Fine-tuning losses that ask the body to stay a state machine simulator (research levers of issue 6).

A fine-tuned SIP-d4 fits its short training strings but not the longer test strings, where the pre-trained
state head shows its states blurring (docs/EXPERIMENTS.md, session 8), although the same body with the gold FST
as its prefix keeps them crisp. Two ways to push back, both unsupervised beyond the task's training pairs:

- ``state_entropy`` (``sip finetune --state-entropy W``): the entropy of the frozen state head at every input
  byte. Low entropy means that the tuned prefix drives the body into states it knows from pre-training.
- ``Rehearsal`` (``sip finetune --rehearsal W --rehearsal-data POOL``): beside each task batch, a batch of
  pre-training pairs, each read through its own FST's encoding as in pre-training, so that the body's small
  adaptation to the task does not cost the simulation it is meant to bring (session 40: the body drifts).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sip_core.errors import SipError
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import load_pool


def state_entropy(model, hidden: torch.Tensor, byte_mask: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of the state head's distribution over the input bytes of a batch whose encoder
    rows are [fixed-length prefix | bytes | padding] (a tuned prefix): ``hidden`` (B, P + T, d), ``byte_mask``
    (B, T)."""
    n_prefix = hidden.shape[1] - byte_mask.shape[1]
    logits = model.state_logits(hidden[:, n_prefix:].to(model.state_head.weight.dtype)).float()
    log_p = torch.log_softmax(logits, -1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    mask = byte_mask.bool()
    return (entropy * mask).sum() / mask.sum().clamp(min=1)


class Rehearsal:
    """The training pairs of a pre-training pool (``examples.parquet`` + ``fsts.parquet``, as `sip data d4`
    writes them), replayed a batch a step through the frozen FST encoder of the checkpoint."""

    def __init__(self, pool_dir: str | Path, model, encoder, device, batch_size: int, seed: int):
        if not (Path(pool_dir) / "fsts.parquet").is_file():
            raise SipError(f"--rehearsal-data {pool_dir} is not a pre-training pool (no fsts.parquet; build one with "
                           f"`sip data d4 --out DIR`)")
        config = model.config
        pool = load_pool(pool_dir, with_fsts=True, num_states=config.num_states, symbols=getattr(config, "symbols", None))
        if len(pool.fsts.transitions) and int(pool.fsts.transitions[:, [0, 3]].max()) >= config.num_states:
            raise SipError(f"--rehearsal-data {pool_dir} has FSTs with more states than the model's {config.num_states}")
        self.data = DeviceSplit(pool.splits["train"], device, pool.fsts, use_fsts=True)
        self.encoder = encoder.to(device=device, dtype=torch.float32).requires_grad_(False)
        self.batch_size, self.seed = batch_size, seed

    def __len__(self) -> int:
        return len(self.data)

    def loss(self, model, step: int) -> torch.Tensor:
        """The token loss of step ``step``'s batch (drawn from the step alone, so that a resumed run draws the same)."""
        idx = np.random.default_rng([self.seed, 13, step]).integers(len(self.data), size=self.batch_size)
        with model.reading_fsts(self.encoder):
            return model(**self.data.batch(idx)).loss
