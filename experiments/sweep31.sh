#!/usr/bin/env bash
# Sweep 31 (session 51): the two never-run plan items of session 44 on top of what has worked since.
#   capull W: sweep 29's weak pull of each slot towards its nearest single-transition encoding (--prefix-pull W over
#             the codebook of 4 states and the task's symbols), now under sweep 30's slot-norm cap (57, the body's
#             encoding norm; cap alone at this seed: 86.1%). Question: does a pull keep the capped search nearer the
#             manifold, or lock it (sweep 9 at 0.25-1.0: 5-20%)?
#   soft LR:  the soft prefix (distributions over each transition's labels, read through the FST encoder) at a logit
#             LR below sweep 4's 0.1-1.0, at today's body LR 1e-5. The cap does not apply (a soft prefix is an encoding
#             mixture by construction).
# The gpu protocol otherwise (80 vectors, body LR 1e-5, prefix LR 0.3, cosine, 20 epochs, strict determinism without
# the NaN fill: the same bits, session 50), seed 762354 (Table 1: 81.1; capped 86.1 / Table 1 capped 91.6 on task 1).
# 15 runs at once: run under MPS=1 (one daemon for the sweep). Carry data/gpu/eval/iteration-s4.
# CPU dry run: TASKS=1 EPOCHS=1 LIMIT_S=45 SIP_MODEL=models/sip-d4-small PATH=.venv/bin:$PATH bash experiments/sweep31.sh
[[ ${MPS:-0} == 1 ]] && exec env MPS=0 PYTHONPATH=$PWD python3 -m sip_core.mps bash "$0" "$@"
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --checkpoint-minutes 1 --save-prefix --seed ${SEED:-762354}"
C="--prefix-max-norm 57 --prefix-codebook-states 4"
E="SIP_FILL_UNINITIALIZED=0"
variants=()
for w in ${PULLS:-0.01 0.03}; do variants+=("capull$w-s${SEED:-762354}|$P $C --prefix-pull $w|$E"); done
for lr in ${SOFT:-0.03}; do variants+=("soft$lr-s${SEED:-762354}|$P --prefix soft --prefix-lr $lr|$E"); done
SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=${EPOCHS:-20} LIMIT_S=${LIMIT_S:-560} SIP_MODEL=${SIP_MODEL:-models/sip-d4} \
  bash experiments/finetune_sweep.sh "${variants[@]}"
