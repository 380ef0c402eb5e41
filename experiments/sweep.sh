#!/usr/bin/env bash
# Run several `sip pretrain` configurations concurrently on one GPU host and collect their curves.
# Usage (on the GPU host, from the repo root): bash experiments/sweep.sh NAME MINUTES "ARGS_A" "ARGS_B" ...
# Each config trains from scratch on data/gpu/pretrain/d4 (built on a CPU host, carried along) for
# MINUTES, then its pretrain_metrics.json and log land in $OUT/NAME-<i>.json / .log.
set -u
name=$1; minutes=$2; shift 2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 SIP_THREADS=2
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
mkdir -p "${OUT:-/tmp}"
if [ -n "${GEN_TRAIN:-}" ]; then  # fresh, larger pool built on the GPU host itself (pure-Python path)
  DATA=/tmp/pool-$GEN_TRAIN
  start=$SECONDS
  python3 -m sip_core.cli data d4 --n-train "$GEN_TRAIN" --n-dev 1000 --n-test 1000 --seed 55 \
    --workers "${GEN_WORKERS:-14}" --quiet ${GEN_FLAGS:-} --out "$DATA"
  echo "pool built in $((SECONDS - start)) s"
fi
i=0
for args in "$@"; do
  out=/tmp/sweep/$name-$i
  mkdir -p /tmp/sweep && printf '%s\n%s\n' "${DATA:-data/gpu/pretrain/d4}" "$args" > "$out.args"  # for resume.sh
  python3 -m sip_core.cli pretrain --variant sip --data ${DATA:-data/gpu/pretrain/d4} --out "$out" \
    --max-minutes "$minutes" --no-progress $args > "${OUT:-/tmp}/$name-$i.log" 2>&1 &
  i=$((i + 1))
done
wait
i=0
for args in "$@"; do
  out=/tmp/sweep/$name-$i
  cp "$out/pretrain_metrics.json" "${OUT:-/tmp}/$name-$i.json" 2>/dev/null || echo "config $i wrote no metrics"
  echo "== $i: $args"; tail -n 2 "${OUT:-/tmp}/$name-$i.log"
  i=$((i + 1))
done
