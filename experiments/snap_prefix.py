"""Does snapping a tuned prefix onto the transition-encoding manifold recover the gold FST?

For each prefix-only tuned prefix (data/<scale>/analysis/prefix/tuned/<task>/prefix.safetensors), every slot
is replaced by the nearest (cosine) encoding of a single transition (src, in, out, dst, final) over the
task's states and symbols; accuracy of the tuned vs the snapped prefix on 300 test pairs, and how many
snapped transitions are gold ones.
"""
import itertools
import sys

import numpy as np
import torch

from sip_core.analysis.prefix import PrefixEvaluator
from sip_core.model.loading import load_sip, load_tuned_prefix
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import fst_table_from_arrow, load_task_examples, make_split, read_parquet, task_pairs

model_dir, eval_dir, tuned_dir = sys.argv[1:4]
torch.set_num_threads(2)
base = load_sip(model_dir).eval()
symbols, num_states = base.config.symbols, base.config.num_states
arrow = read_parquet(f"{eval_dir}/fsts.parquet")
gold = fst_table_from_arrow(arrow, num_states, symbols)
examples = load_task_examples(f"{eval_dir}/examples.parquet")
ids = arrow.column("task_id").to_pylist()
ev = None
for task in sys.argv[4:]:
    row = ids.index(task)
    g = gold.transitions[gold.offsets[row]:gold.offsets[row + 1]]
    states = sorted(set(g[:, 0]) | set(g[:, 3]))
    syms = sorted(set(g[:, 1]) | set(g[:, 2]))
    cands = np.array([(s, i, o, d, f) for s, i, o, d, f in itertools.product(states, syms, syms, states, (1, 2))])
    with torch.no_grad():
        cv, _ = base.fst_encoder(torch.from_numpy(cands).long()[None], base.t5.shared)
    cv = torch.nn.functional.normalize(cv[0].float(), dim=-1)
    prefix = load_tuned_prefix(f"{tuned_dir}/{task}").float()
    sims = torch.nn.functional.normalize(prefix, dim=-1) @ cv.T
    best = sims.argmax(-1)
    snapped_t = cands[best.numpy()]
    with torch.no_grad():
        snapped, _ = base.fst_encoder(torch.from_numpy(snapped_t).long()[None], base.t5.shared)
    gset = {tuple(t) for t in g.tolist()}
    sset = {tuple(t) for t in snapped_t.tolist()}
    if ev is None:
        ev = PrefixEvaluator(base, prefix.shape[0], torch.device("cpu"), 256, None)
    test = DeviceSplit(make_split(*zip(*task_pairs(examples, task, "test")[:300])), torch.device("cpu"))
    print(f"{task}: gold {len(gset)} transitions; snapped distinct {len(sset)}, of them gold {len(sset & gset)}, "
          f"gold covered {len(gset & sset)}/{len(gset)}; max-sim mean {sims.max(-1).values.mean():.3f}", flush=True)
    print(f"  acc tuned {ev.accuracy(prefix, test):.1f} snapped {ev.accuracy(snapped[0], test):.1f}", flush=True)
