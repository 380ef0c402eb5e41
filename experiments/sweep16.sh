#!/usr/bin/env bash
# Sweep 16 (planned, docs/EXPERIMENTS.md session 11): --restarts 4 chosen by the longest training inputs, then
# the real run on all pairs at two LR scales. 10 runs of 4x8 + 10 epochs (~1,000 s of one H100: two calls, the
# second with RESUME=1). PLAIN=1 adds the plain gpu settings at seed 1 (5 runs of 20 epochs, ~240 s) as a
# same-session control.
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine"
C="$P --restarts ${RESTARTS:-4} --restart-epochs ${RESTART_EPOCHS:-8}"
variants=("rs4s01|$C --continue-lr-scale 0.1" "rs4s03|$C --continue-lr-scale 0.3")
[[ ${PLAIN:-0} == 1 ]] && variants+=("plain|$P --epochs 20 --seed 1")
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=${EPOCHS:-10} LIMIT_S=${LIMIT_S:-540} \
  bash experiments/finetune_sweep.sh "${variants[@]}"
