#!/usr/bin/env bash
# Sweep 33 (session 52): `--prefix search`, the tuned prefix started at the machine a local search finds with the
# frozen body as its only judge (sip_core/train/prefix_search.py): single edits of a 4-state machine, each scored by
# the body's loss on a minibatch of training pairs through the machine's encoding; output edits proposed by the
# gradient at the slot. Then fine-tuned as --prefix induced is (induced prefix LR 0.01). Why: only a prefix that starts
# at the right machine extrapolates (induced: 98.2%), and gradient steps from the mean init do not find one (sessions
# 43, 51). Variants: c64b32 (64 candidates a step, 32 pairs each), c32b16 (cheaper steps, more of them).
# The gpu protocol otherwise (body LR 1e-5, cosine, 20 epochs, strict determinism without the NaN fill), seed 762354.
# Carry data/gpu/eval/iteration-s4.
# Session 55's run: 4 states over the tasks' ~25 input symbols make 92-100 transitions, more than 80 slots, so every
# run fell back to the mean init; the second call: ONE=1 PREFIX_LENGTH=112 MINUTES=5 (c64b32 only, 5 runs at once).
# CPU dry run: TASKS=1 EPOCHS=1 LIMIT_S=60 MINUTES=0.3 SIP_MODEL=models/sip-d4-small PATH=.venv/bin:$PATH bash experiments/sweep33.sh
[[ ${MPS:-0} == 1 ]] && exec env MPS=0 PYTHONPATH=$PWD python3 -m sip_core.mps bash "$0" "$@"
s=${SEED:-762354}
P="--prefix search --prefix-search-minutes ${MINUTES:-4} --prefix-length ${PREFIX_LENGTH:-80} --prefix-lr 0.3 --induced-prefix-lr 0.01 --lr 1e-5 --schedule cosine --checkpoint-minutes 1 --save-prefix --seed $s"
E="SIP_FILL_UNINITIALIZED=0"
tag="p${PREFIX_LENGTH:-80}-s$s"  # both run names say the prefix length (session 55's first call predates the p-tag)
runs=("search-c64b32-$tag|$P --prefix-search-candidates 64 --prefix-search-batch 32|$E")
[[ -n ${ONE:-} ]] || runs+=("search-c32b16-$tag|$P --prefix-search-candidates 32 --prefix-search-batch 16|$E")
SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=${EPOCHS:-20} LIMIT_S=${LIMIT_S:-560} SIP_MODEL=${SIP_MODEL:-models/sip-d4} \
  bash experiments/finetune_sweep.sh "${runs[@]}"
