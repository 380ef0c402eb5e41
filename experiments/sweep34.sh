#!/usr/bin/env bash
# Sweep 34 (session 56): does a better simulator fine-tune better? The released SIP-d4 (99.0% on unseen FSTs,
# 97.9% on inputs of 21-35 characters) is pre-trained further on its own pool (the gpu d4 pool, seed 55, rebuilt on
# the host: every Table 1 FST is excluded from it), then fine-tuned on Table 1's iteration tasks beside the released
# model. Why: session 8's better simulator (98.5 against 97.9%) fine-tuned ~9 points higher (sweeps 7 and 10), the
# largest gain any single change has given, and every fine-tuning lever since has moved the mean by at most ~7.
# Two phases, chained on one warm host (the second finds the first's model at the same path as a carried one):
#   PHASE=pretrain MINUTES=7 COOL=2.5 bash experiments/sweep34.sh
#     continue models/sip-d4 (wsd: LR re-warmed to LR over 200 steps, decayed over the last COOL minutes); brings
#     back the model as $OUT/$NAME.tar.part-* (join with cat) and its log
#   PHASE=finetune MPS=1 bash experiments/sweep34.sh
#     the gpu protocol (80 vectors, body LR 1e-5, prefix LR 0.3, cosine, 20 epochs, seed 762354) on the 5 iteration
#     tasks: the continued model capped (--prefix-max-norm fst, Table 1's sip-d4-capped) and uncapped, and the
#     released model capped on the same card where its weights travelled (15 runs, ~340 s under MPS); archives
#     $OUT/{cont,released}/
# A cold host for the second phase: join the parts into data/gpu/checkpoints/$NAME here and carry it (with
# data/gpu/eval/iteration-s4; `travel_light.sh drop` first).
# CPU dry run: PHASE=pretrain INIT=models/sip-d4-small POOL=<a small d4 pool with states> MINUTES=0.5 COOL=0.2 ...
set -u
[[ ${MPS:-0} == 1 ]] && exec env MPS=0 PYTHONPATH=$PWD python3 -m sip_core.mps bash "$0" "$@"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
name=${NAME:-sip-d4-cont} pool=${POOL:-data/gpu/pretrain/d4} out=${OUT:-/tmp}
model=data/gpu/checkpoints/$name; mkdir -p "$out"
case ${PHASE:?PHASE=pretrain or PHASE=finetune} in
pretrain)
  if [ ! -f "$pool/examples.parquet" ]; then
    python3 -m sip_core.cli data d4 --n-train 500000 --n-dev 1000 --seed 55 --n-test 1000 --per-fst 5 --with-states \
      --workers "$(nproc)" --out "$pool" --quiet || exit 1
  fi
  rm -rf "/tmp/cont/$name"
  python3 -m sip_core.cli pretrain --variant sip --data "$pool" --init "${INIT:-models/sip-d4}" --epochs 100 \
    --batch-size "${BATCH:-1024}" --lr "${LR:-3e-4}" --warmup 200 --schedule wsd --max-minutes "${MINUTES:-7}" \
    --cooldown-minutes "${COOL:-2.5}" --precision bf16 --adam-beta2 0.98 --clip 1.0 --state-loss 1.0 \
    --seed "${SEED:-56}" --save-dtype bf16 --no-progress --eval-every 0 --log-every 100 \
    --out "/tmp/cont/$name" > "$out/$name.log" 2>&1 || { tail -c 1500 "$out/$name.log"; exit 1; }
  tail -n 3 "$out/$name.log"
  mkdir -p "$model" && cp /tmp/cont/$name/*.json /tmp/cont/$name/*.safetensors "$model/"
  # the released model's mean-of-32 prefix init (pretrain draws it with --seed): only the body differs
  cp "${INIT:-models/sip-d4}/prefix_init.safetensors" "$model/"
  tar -C "$model" -cf - . | split -b 15m - "$out/$name.tar.part-"
  ;;
finetune)
  P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --checkpoint-minutes 1 --seed ${FT_SEED:-762354}"
  [ -f "$model/model.safetensors" ] || { echo "no continued model at $model" >&2; exit 1; }
  common=(SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=${EPOCHS:-20} LIMIT_S=${LIMIT_S:-540} MPS=0)
  env "${common[@]}" SIP_MODEL="$model" WORK=/tmp/sweep-cont OUT="$out/cont" bash experiments/finetune_sweep.sh \
    "cont-capped|$P --prefix-max-norm fst" "cont|$P" > "$out/cont.txt" 2>&1 &
  # the released control only where its weights travelled (a cold host: the carried model leaves no room for them)
  [ -f "${REL_MODEL:-models/sip-d4}/model.safetensors" ] &&
  env "${common[@]}" SIP_MODEL="${REL_MODEL:-models/sip-d4}" WORK=/tmp/sweep-rel OUT="$out/released" \
    bash experiments/finetune_sweep.sh "released-capped|$P --prefix-max-norm fst" > "$out/released.txt" 2>&1 &
  wait
  cat "$out"/*.txt  # released.txt only where the control ran
  ;;
*) echo "PHASE must be pretrain or finetune" >&2; exit 2 ;;
esac
