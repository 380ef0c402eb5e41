#!/usr/bin/env bash
# Sweep 18 (planned, docs/EXPERIMENTS.md session 12): is the default seed's edge its prefix init or its data order?
# Seed 762354 gave 78.6 / 85.2 / 86.0% in three runs, seeds 1-4 gave 69.5-73.7% (sweep 17). --prefix-init-seed
# splits the two: the 762354 init with data seeds 1-2, and inits 1-2 with the 762354 data order; plus the mean of all
# 400 sampled pre-training FSTs as the init (seed-free) at seed 1. 25 runs of 20 epochs, ~1,200 s of one H100:
# three calls, the later ones with RESUME=1.
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine"
variants=()
for s in ${SEEDS:-1 2}; do
  variants+=("init762354-data$s|$P --seed $s --prefix-init-seed 762354" "init$s-data762354|$P --seed 762354 --prefix-init-seed $s")
done
variants+=("initall-data1|$P --seed 1 --prefix-init-fsts 400")  # all 400 FSTs of models/sip-d4's sample
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=${EPOCHS:-20} LIMIT_S=${LIMIT_S:-540} \
  bash experiments/finetune_sweep.sh "${variants[@]}"
