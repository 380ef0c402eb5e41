#!/usr/bin/env bash
# Continue a released small SIP model on another pool (SIP-d4plus / SIP-nd7 style), with the continuation recipe of
# the gpu scale (params.yaml: 2 epochs, batch 256, LR 5e-4, cosine) and the small model's own shape. Runs on the
# GPU host beside `handoff-run`, which builds the pool: it waits for the pool's examples to appear.
# Usage (GPU host, repo root): POOL=nd7 INIT=models/sip-d4-small NAME=sip-nd7-small bash experiments/small_continue.sh
# Brings back the model in bf16 with its metrics as $OUT/$NAME.tgz.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pool=${POOL_DIR:-data/gpu/pretrain/${POOL:?}} init=${INIT:?} name=${NAME:?}
for _ in $(seq "${WAIT_S:-400}"); do [ -f "$pool/examples.parquet" ] && break; sleep 1; done
[ -f "$pool/examples.parquet" ] || { echo "no pool at $pool" >&2; exit 1; }
shape=$(python3 -c "import json; t = json.load(open('$init/config.json'))['t5']
print(f\"--d-model {t['d_model']} --d-ff {t['d_ff']} --layers {t['num_layers']} --decoder-layers {t['num_decoder_layers']}\",
      f\"--heads {t['num_heads']} --d-kv {t['d_kv']}\")")
python3 -m sip_core.cli pretrain --variant sip --data "$pool" --init "$init" $shape --dropout 0.0 --rel-buckets 128 \
  --rel-max-distance 256 --epochs 2 --batch-size 256 --lr 0.0005 --warmup 200 --schedule cosine --precision bf16 \
  --save-dtype bf16 --seed 55 --no-progress --out "/tmp/small/$name" || exit 1
tar -C "/tmp/small/$name" -czf "${OUT:-/tmp}/$name.tgz" --exclude=checkpoints .
