#!/usr/bin/env bash
# Sweep 25 (planned in session 39, docs/EXPERIMENTS.md): where along a 100-epoch fine-tuning does SIP-d4's Table 1
# iteration accuracy peak, and would stopping where the held-out longest training strings score best find it? Sweep
# 24's 100 epochs at seed 762354 (80.9%, against 87.0 at 50), now with `--holdout-longest 0.05` and a test and holdout
# evaluation every 5 epochs (`--eval-every 5`; the last 10 epochs as before). 5 runs alone on one H200: ~15 s an
# epoch each plus ~20 extra evaluations, ~1,600 s of wall: three calls of LIMIT_S, the later ones with RESUME=1 on
# the warm host (checkpoints every minute). EPOCHS=50 asks the same at the paper's length (two calls).
# Carry data/gpu/eval/iteration-s4; models/sip-d4 is in git. Afterwards, here:
#   tar -xzf finetune-sweep.tgz -C /tmp/s25 && python experiments/stop_by_holdout.py /tmp/s25
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --checkpoint-minutes 1 --holdout-longest 0.05"
epochs=${EPOCHS:-100}
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=$epochs LIMIT_S=${LIMIT_S:-555} \
  PER_GPU=${PER_GPU:-10} bash experiments/finetune_sweep.sh "e$epochs-hold-s762354|$P --eval-every 5 --seed 762354"
