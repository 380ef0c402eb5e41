"""`sip` with every tuned-prefix slot's L2 norm capped after each optimiser step (an experiment: sweep 30).

Session 44 (docs/EXPERIMENTS.md) measured the tuned prefixes of the Table 1 iteration runs: their slots end with norms
of 89-153, where the frozen body's encodings of the gold FSTs have ~57 and the mean init ~42. The search inflates
the prefix off the encodings' sphere as well as off their directions. Capping each slot's norm (as `nn.Embedding`'s
`max_norm` does rows) keeps magnitudes in the range the body was pre-trained on and leaves directions free.

    SIP_PREFIX_MAX_NORM=57 python3 experiments/prefix_max_norm.py finetune ARGS...   (any `sip` command line)

Without SIP_PREFIX_MAX_NORM it is plain `sip`. The cap acts on the optimiser's parameter group named "prefix"
(`sip_core.train.finetune.finetune_param_groups`), so the body and every other mode are untouched; a resumed run caps
the same way (the cap has no state). If it helps, it belongs in `sip finetune` as a flag (and a ci `dvc repro`).
"""
from __future__ import annotations

import os
import sys

import torch


def cap_slot_norms(param: torch.Tensor, max_norm: float) -> None:
    """Scale every row (slot) whose L2 norm exceeds ``max_norm`` back onto the sphere of that radius, in place."""
    with torch.no_grad():
        norms = param.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        param.mul_((max_norm / norms).clamp(max=1.0))


def install(max_norm: float) -> None:
    """Wrap torch.optim.Adam.step (the optimiser `sip finetune` builds) so that it caps the prefix group after it."""
    step = torch.optim.Adam.step

    def capped_step(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        for group in self.param_groups:
            if group.get("name") == "prefix":
                for param in group["params"]:
                    cap_slot_norms(param, max_norm)
        return out

    torch.optim.Adam.step = capped_step


if __name__ == "__main__":
    if os.environ.get("SIP_PREFIX_MAX_NORM"):
        cap = float(os.environ["SIP_PREFIX_MAX_NORM"])
        if not cap > 0:
            raise SystemExit(f"SIP_PREFIX_MAX_NORM must be a positive number, not {os.environ['SIP_PREFIX_MAX_NORM']!r}")
        install(cap)
        print(f"prefix_max_norm: every prefix slot capped at L2 norm {cap:g} after each step", file=sys.stderr)
    from sip_core.cli import main

    sys.exit(main(sys.argv[1:]))
