#!/usr/bin/env bash
# Sweep 19 (planned, docs/EXPERIMENTS.md session 12; issue 5): which body LR suits the from-scratch SIP-d4 on g2p?
# The params' g2p LR (3e-4, the paper's) is the one that wiped out the FST bias on the synthetic tasks, where 1e-5
# works. SIP-d4 at body LR 1e-5 / 1e-4 / 3e-4 (prefix LR 0.3, 80 vectors, cosine, as the gpu synthetic settings),
# first draw of the 7 languages, the g2p protocol (150 epochs, batch 16, mean of the last 10 evaluations): 21 runs.
# Needs data/gpu/natural/g2p (here: snakemake -j2 --config scale=gpu -- data/gpu/natural/g2p/examples.parquet;
# carry it). Not timed yet: the largest test set (Lao, ~4,000 words) is decoded 10 times per run.
P="--prefix-length 80 --prefix-lr 0.3 --schedule cosine --batch-size 16"
ids=""; for lang in ${LANGS:-ban cop got lao syl tel tzm}; do ids+=" g2p-$lang-d0"; done
TASK_FILE=data/gpu/natural/g2p/examples.parquet TASK_IDS=$ids SIP_MODEL=${SIP_MODEL:-models/sip-d4} \
  EPOCHS=${EPOCHS:-150} LIMIT_S=${LIMIT_S:-540} bash experiments/finetune_sweep.sh \
  "lr1e-5|$P --lr 1e-5" "lr1e-4|$P --lr 1e-4" "lr3e-4|$P --lr 3e-4"
