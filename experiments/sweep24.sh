#!/usr/bin/env bash
# Sweep 24 (session 39, docs/EXPERIMENTS.md): does SIP-d4's Table 1 iteration accuracy keep rising past the paper's
# 50 fine-tuning epochs (100 at seed 762354, where 50 gave 87.0), and how wide is the seed spread at 50 epochs (a third
# seed, 2, beside sweep 23's 762354 and 1)? The gpu settings otherwise (strict determinism), the 5 iteration-s4 tasks,
# 10 runs at once on one H200. A variant's --epochs overrides the sweep's. Calls of LIMIT_S each, the later ones with
# RESUME=1 on the warm host (checkpoints every minute); VARIANTS="e100" keeps only the 100-epoch runs in a later call
# (the others then stay unfinished). Carry data/gpu/eval/iteration-s4; models/sip-d4 is in git.
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --checkpoint-minutes 1"
all=("e100-s762354|$P --seed 762354 --epochs 100" "e50-s2|$P --seed 2 --epochs 50")
variants=(); for v in "${all[@]}"; do for want in ${VARIANTS:-e100 e50}; do [[ $v == "$want"-* ]] && variants+=("$v"); done; done
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 TASKS=${TASKS:-5} LIMIT_S=${LIMIT_S:-555} \
  PER_GPU=${PER_GPU:-10} bash experiments/finetune_sweep.sh "${variants[@]}"
