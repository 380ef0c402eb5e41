"""Set task pre-training data → `examples.parquet` (no FSTs; fst_id is 0)."""
from __future__ import annotations

import time
from pathlib import Path

from sip_core.errors import SipError
from sip_core.io import write_parquet
from sip_core.data.parallel import candidate_rng
from sip_core.data.tables import examples_table


def build_set(out, n_train: int = 200_000, n_dev: int = 1000, seed: int = 3293345) -> dict:
    """Draw 2 x (n_train + n_dev) inputs, de-duplicate, sort, shuffle, cut (the original: 400k draws)."""
    from sip_core.fst.settask import set_input, set_output

    if n_train < 0 or n_dev < 0 or n_train + n_dev == 0:
        raise SipError(f"need n_train >= 0, n_dev >= 0 and some data (got {n_train}, {n_dev})")
    t0 = time.time()
    rng = candidate_rng("set", seed, 0)
    need = n_train + n_dev
    inputs = sorted({set_input(rng) for _ in range(2 * need)})
    if len(inputs) < need:
        raise SipError(f"only {len(inputs)} distinct Set inputs for {need} requested")
    rng.shuffle(inputs)
    rows = [(0, "train" if i < n_train else "dev", x, set_output(x)) for i, x in enumerate(inputs[:need])]
    write_parquet(examples_table(rows), Path(out) / "examples.parquet")
    return {"pool": "set", "examples": len(rows), "seconds": round(time.time() - t0, 2), "out": str(out)}
