#!/usr/bin/env bash
# Candidate small SIP-d4 models for the cpu scale (fine-tuned on 2 CPU cores in ~1 min a task), trained side
# by side on one GPU from the gpu scale's d4 pool (rebuilt on the host: 150 MiB does not travel), with the gpu
# recipe's levers and a time budget instead of a step count (wsd: the LR decays over the last COOL minutes).
# Usage (GPU host, repo root): MINUTES=7 COOL=2 bash experiments/small_sip.sh "name|shape and LR flags" ...
# Brings back each model in bf16 with its metrics as $OUT/<name>.tgz.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
if [ ! -f data/gpu/pretrain/d4/examples.parquet ]; then
  python3 -m sip_core.cli data d4 --n-train 500000 --n-dev 1000 --seed 55 --n-test 1000 --per-fst 5 --with-states \
    --workers "$(nproc)" --out data/gpu/pretrain/d4 --quiet || exit 1
fi
common="--variant sip --data data/gpu/pretrain/d4 --init scratch --dropout 0.0 --rel-buckets 128 --rel-max-distance 256
  --epochs 100 --batch-size 1024 --warmup 300 --schedule wsd --precision bf16 --adam-beta2 0.98 --clip 1.0
  --state-loss 1.0 --curriculum-steps 2000 --curriculum-start 3 --seed 55 --save-dtype bf16 --no-progress
  --eval-every 1000 --max-minutes ${MINUTES:-7} --cooldown-minutes ${COOL:-2}"
pids=()
for variant in "$@"; do
  name=${variant%%|*}; flags=${variant#*|}
  python3 -m sip_core.cli pretrain $common $flags --out /tmp/small/$name > "${OUT:-/tmp}/$name.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
for variant in "$@"; do
  name=${variant%%|*}
  tar -C /tmp/small/$name -czf "${OUT:-/tmp}/$name.tgz" --exclude=checkpoints . && tail -n 2 "${OUT:-/tmp}/$name.log"
done
