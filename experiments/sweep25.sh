#!/usr/bin/env bash
# Sweep 25 (planned in session 39, docs/EXPERIMENTS.md): where along a fine-tuning does SIP-d4's Table 1 iteration
# accuracy peak, and would stopping where the held-out longest training strings score best find it? The gpu settings
# with `--holdout-longest 0.05` and a test and holdout evaluation every 5 epochs (`--eval-every 5`; the last 10 epochs
# as before). EPOCHS (default 100: sweep 24's length) and SEEDS (default 762354) pick the runs; session 44 ran
# EPOCHS=50 SEEDS="762354 1" EXTRA=--save-prefix: 10 runs at ~21 s an epoch each, ~1,300 s in three calls of LIMIT_S,
# the later ones with RESUME=1 on the warm host (checkpoints every minute). 5 runs alone: ~15 s an epoch.
# Carry data/gpu/eval/iteration-s4; models/sip-d4 is in git. Afterwards, here:
#   tar -xzf finetune-sweep.tgz -C /tmp/s25 && python experiments/stop_by_holdout.py /tmp/s25
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --checkpoint-minutes 1 --holdout-longest 0.05"
epochs=${EPOCHS:-100}
variants=(); for seed in ${SEEDS:-762354}; do
  variants+=("e$epochs-hold-s$seed|$P --eval-every 5 --seed $seed ${EXTRA:-}")
done
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=$epochs LIMIT_S=${LIMIT_S:-555} \
  PER_GPU=${PER_GPU:-10} bash experiments/finetune_sweep.sh "${variants[@]}"
