#!/usr/bin/env bash
# Sweep 30 (planned in session 44, docs/EXPERIMENTS.md): cap every tuned-prefix slot's L2 norm after each step
# (`sip finetune --prefix-max-norm R`; session 45 ran it through an equivalent launcher script, since replaced by the
# flag: the same prefixes bit for bit on CPU). Session 44 found the Table 1 runs'
# tuned slots at norms 89-153 against ~57 for the body's encodings of the gold FSTs (the mean init: ~42), and in the
# joint runs the smaller-norm seed the better on 4 of 5 tasks (r = -0.59 over 10 runs; prefix-only runs: r = 0.05).
# Question: does keeping the magnitudes where the body was pre-trained keep the search nearer machines that extrapolate?
# The gpu protocol otherwise (80 vectors, body LR 1e-5, prefix LR 0.3, cosine, 20 epochs, strict determinism); seed
# 762354 pairs with Table 1's run (81.1%; strict determinism repeats across sessions, session 42). CAPS picks the caps
# (default "57 80"), SEEDS the seeds; prefixes come back for experiments/read_prefixes.py. 10 runs: ~470 s, one call.
# Carry data/gpu/eval/iteration-s4; models/sip-d4 is in git.
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --checkpoint-minutes 1 --save-prefix"
variants=()
for seed in ${SEEDS:-762354}; do
  for cap in ${CAPS:-57 80}; do variants+=("cap$cap-s$seed|$P --prefix-max-norm $cap --seed $seed"); done
done
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 \
  TASKS=${TASKS:-5} EPOCHS=${EPOCHS:-20} LIMIT_S=${LIMIT_S:-555} PER_GPU=${PER_GPU:-16} \
  bash experiments/finetune_sweep.sh "${variants[@]}"
