#!/usr/bin/env bash
# Sweep 21 (docs/EXPERIMENTS.md sessions 15-16; issues 5 and 6): which prefix LR suits SIP-d4 on g2p?
# The gpu Table 3 (prefix LR 0.3, 80 vectors: the synthetic tasks' settings) gives SIP-d4 13.6 against 14.2 without
# a prefix (p = 0.72): the prefix wins on tel/syl/tzm and loses on got/ban. g2p trains the body at 3e-4, 30x the
# synthetic body LR the prefix LR was tuned with. Prefix LR 0.03 / 0.1 / 1.0 (the paper's) with the gpu g2p
# settings otherwise, draws 0 and 1 of the six languages without Lao (Lao is ~1% for every model and 2x slower):
# 36 runs. The bars are the committed Table 3 runs of the same draws: SIP-d4 at 0.3 and no prefix
# (results/gpu/table3.*, experiments/results/table3-gpu/). Prefix runs move ~1-4 points between repeats (session 15),
# so read the means over the 12 tasks, not single tasks.
# Needs data/gpu/natural/g2p (carry it). 208-307 s per run at 18 at once on an H200 (session 16).
# PLRS picks the prefix LRs, DET sets SIP_DETERMINISTIC of every run. Run in session 16 as two calls of 18 runs (36 at
# once on 16 cores finished nothing in 535 s): DET=strict PLRS="0.03 0.3 1.0" DRAWS=0, then the same with DRAWS=1.
# Result (docs/EXPERIMENTS.md session 16): 0.03 / 0.3 / 1.0 -> 11.3 / 19.4 / 19.5 mean acc over the 12 tasks.
set -u
P="--prefix-length 80 --schedule cosine --batch-size 16 --lr 3e-4"
ids=""; for lang in ${LANGS:-ban cop got syl tel tzm}; do for d in ${DRAWS:-0 1}; do ids+=" g2p-$lang-d$d"; done; done
variants=(); for lr in ${PLRS:-0.03 0.3 1.0}; do variants+=("plr$lr|$P --prefix-lr $lr|SIP_DETERMINISTIC=${DET:-strict}"); done
TASK_FILE=data/gpu/natural/g2p/examples.parquet TASK_IDS=$ids SIP_MODEL=${SIP_MODEL:-models/sip-d4} \
  EPOCHS=${EPOCHS:-150} LIMIT_S=${LIMIT_S:-540} bash experiments/finetune_sweep.sh \
  "${variants[@]}"
