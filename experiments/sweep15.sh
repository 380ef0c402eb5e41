#!/usr/bin/env bash
# Sweep 15 (session 11, docs/EXPERIMENTS.md): 4 seeds with the length dev set, and length weighting 1 at 2 seeds.
C="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --holdout-longest 0.05"
SIP_MODEL=models/sip-d4 SETTINGS=iteration-s4 TASKS=5 EPOCHS=20 LIMIT_S=${LIMIT_S:-540} bash experiments/finetune_sweep.sh \
 "s1|$C --seed 1" "s2|$C --seed 2" "s3|$C --seed 3" "s4|$C --seed 4" "lw1s1|$C --length-weighting 1 --seed 1" "lw1s2|$C --length-weighting 1 --seed 2"
