#!/usr/bin/env bash
# Fine-tune the from-scratch SIP-d4 and the base model (same shape, random init) on the first TASKS tasks of
# the 4-state iteration and UC settings, all concurrently on one GPU, with the gpu scale's Table 1 commands
# (`snakemake -n -p --config scale=gpu`) restricted to one task per process. Returns metrics as one archive.
# Usage (GPU host, repo root; data/gpu/eval/{iteration,uc}-s4 and data/gpu/checkpoints/sip-d4 carried):
#   TASKS=2 EPOCHS=20 bash experiments/finetune_check.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 SIP_THREADS=1
tasks=${TASKS:-2}; epochs=${EPOCHS:-20}
common="--epochs $epochs --eval-last 10 --report-last 10 --eval-batch-size 64 --prefix-lr 1.0 --prefix-length 50 --clip 1.0 --seed 762354 --no-progress"
base="--model scratch --d-model 256 --d-ff 1024 --layers 12 --decoder-layers 4 --heads 4 --d-kv 64 --dropout 0.0 --rel-buckets 128 --rel-max-distance 256 --model-name base --prefix none --batch-size 48 --lr 0.0005"
sip="--model data/gpu/checkpoints/sip-d4 --model-name sip-d4 --prefix mean --batch-size 32 --lr 0.0003"
mkdir -p /tmp/check "${OUT:-/tmp}"
for setting in iteration-s4 uc-s4; do
  for ((t = 0; t < tasks; t++)); do
    for model in base sip; do
      flags=${!model}
      name=$model-$setting-$t
      python3 -m sip_core.cli finetune $flags $common --tasks data/gpu/eval/$setting/examples.parquet \
        --task-id $setting-$t --out /tmp/check/$name > /tmp/check/$name.log 2>&1 &
    done
  done
done
wait
tar -C /tmp/check -czf "${OUT:-/tmp}/finetune-check.tgz" --exclude='*.safetensors' --exclude='checkpoints' .
for f in /tmp/check/*.log; do echo "== $f"; tail -n 1 "$f"; done
