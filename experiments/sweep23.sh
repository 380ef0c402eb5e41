#!/usr/bin/env bash
# Sweep 23 (session 38, docs/EXPERIMENTS.md): the paper's 50 fine-tuning epochs against the gpu protocol's 20, with
# the gpu settings otherwise, on the 5 iteration-s4 tasks at seeds 762354 (Table 1's) and 1 (sweep 17's first).
# 10 runs at once on one H200 took ~990 s each: two calls, the second with RESUME=1 on the still-warm host
# (checkpoints every minute, so a run cut off by LIMIT_S loses at most one). Carry data/gpu/eval/iteration-s4;
# models/sip-d4 is in git. EPOCHS=100 SEEDS="762354" asks the next question (is the rise still going?).
# Afterwards, here (iteration_errors.py reads <runs>/iteration-s4-<t>/, so link one variant's runs to those names):
#   tar -xzf finetune-sweep.tgz -C /tmp/s23 && mkdir -p /tmp/s23/e50-s1 && for t in 0 1 2 3 4; do
#     ln -s /tmp/s23/e50-s1--iteration-s4-$t /tmp/s23/e50-s1/iteration-s4-$t; done
#   python experiments/iteration_errors.py --runs /tmp/s23/e50-s1
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --checkpoint-minutes 1"
epochs=${EPOCHS:-50}
variants=(); for s in ${SEEDS:-762354 1}; do variants+=("e$epochs-s$s|$P --seed $s"); done
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=$epochs LIMIT_S=${LIMIT_S:-555} \
  PER_GPU=${PER_GPU:-10} bash experiments/finetune_sweep.sh "${variants[@]}"
