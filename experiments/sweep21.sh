#!/usr/bin/env bash
# Sweep 21 (planned, docs/EXPERIMENTS.md session 15; issues 5 and 6): which prefix LR suits SIP-d4 on g2p?
# The gpu Table 3 (prefix LR 0.3, 80 vectors: the synthetic tasks' settings) gives SIP-d4 13.6 against 14.2 without
# a prefix (p = 0.72): the prefix wins on tel/syl/tzm and loses on got/ban. g2p trains the body at 3e-4, 30x the
# synthetic body LR the prefix LR was tuned with. Prefix LR 0.03 / 0.1 / 1.0 (the paper's) with the gpu g2p
# settings otherwise, draws 0 and 1 of the six languages without Lao (Lao is ~1% for every model and 2x slower):
# 36 runs. The bars are the committed Table 3 runs of the same draws: SIP-d4 at 0.3 and no prefix
# (results/gpu/table3.*, experiments/results/table3-gpu/). Prefix runs move ~1-4 points between repeats (session 15),
# so read the means over the 12 tasks, not single tasks.
# Needs data/gpu/natural/g2p (carry it). ~36 runs side by side, ~150-330 s each at 18 at once (session 14): one call.
# PLRS picks the prefix LRs, DET sets SIP_DETERMINISTIC of every run (session 16: strict, with 0.3 as the in-sweep bar).
set -u
P="--prefix-length 80 --schedule cosine --batch-size 16 --lr 3e-4"
ids=""; for lang in ${LANGS:-ban cop got syl tel tzm}; do for d in ${DRAWS:-0 1}; do ids+=" g2p-$lang-d$d"; done; done
variants=(); for lr in ${PLRS:-0.03 0.1 1.0}; do variants+=("plr$lr|$P --prefix-lr $lr|SIP_DETERMINISTIC=${DET:-0}"); done
TASK_FILE=data/gpu/natural/g2p/examples.parquet TASK_IDS=$ids SIP_MODEL=${SIP_MODEL:-models/sip-d4} \
  EPOCHS=${EPOCHS:-150} LIMIT_S=${LIMIT_S:-540} bash experiments/finetune_sweep.sh \
  "${variants[@]}"
