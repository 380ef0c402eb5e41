#!/usr/bin/env bash
# Sweep 22 (planned in session 19, docs/EXPERIMENTS.md): how many fine-tuning runs does the from-scratch SIP-d4 need
# to pass the Table 1 gate if one is chosen by its held-out longest training strings? The gpu settings (strict
# determinism, the default) at seeds 1..16 with `--holdout-longest 0.05`, on the 5 iteration-s4 tasks: 80 runs of 20
# epochs (~45 s of GPU each at 10 per GPU: ~1,800 s of GPU, one call on 4 H200s or two on 2). Afterwards, here:
#   tar -xzf finetune-sweep.tgz -C /tmp/s22 && python experiments/best_of_k.py /tmp/s22 --variants $(printf 's%s ' $(seq 1 16))
# Carry data/gpu/eval/iteration-s4; models/sip-d4 is in git. RESUME=1 continues on the same warm host.
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --holdout-longest 0.05"
seeds=${SEEDS:-$(seq 1 16)}
variants=(); for s in $seeds; do variants+=("s$s|$P --seed $s"); done
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=${EPOCHS:-20} LIMIT_S=${LIMIT_S:-540} \
  PER_GPU=${PER_GPU:-10} bash experiments/finetune_sweep.sh "${variants[@]}"
