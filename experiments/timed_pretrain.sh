#!/usr/bin/env bash
# Time the gpu scale's SIP-d4 recipe (params.yaml, one continuous run, no warm restart) on one GPU: the
# issue-6 gate is >= 90% exact match on unseen d4 FSTs within 20 minutes. The device allows 10 minutes a
# call, so the run is stopped by --max-minutes and resumed by the next call on the same warm host.
# The commands come from here: snakemake -n -p --forceall --config scale=gpu -- \
#   data/gpu/checkpoints/sip-d4/model.safetensors  (grep "Shell command") > experiments/timed_pretrain.cmds
# Usage (GPU host, repo root): MINUTES=8.5 bash experiments/timed_pretrain.sh NAME
# The pool (150 MiB, too big to carry) is rebuilt on the host by its own command (pure-Python minimiser).
set -u
name=$1; out=/tmp/timed/$name
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pool_cmd=$(sed -n 1p experiments/timed_pretrain.cmds); train_cmd=$(sed -n 2p experiments/timed_pretrain.cmds)
if [ ! -f data/gpu/pretrain/d4/examples.parquet ]; then
  start=$(date +%s)
  eval "${pool_cmd/--workers 2/--workers $(nproc)}" || { echo "pool build failed"; exit 1; }
  echo "pool built in $(( $(date +%s) - start )) s"
fi
train_cmd=${train_cmd/--out data\/gpu\/checkpoints\/sip-d4/--out $out}
train_cmd=${train_cmd%% >*}  # the log goes to $OUT instead
mkdir -p "$out"
eval "$train_cmd --no-progress --eval-every 1000 --max-minutes ${MINUTES:-8.5}" >> "${OUT:-/tmp}/$name.log" 2>&1
cp "$out/pretrain_metrics.json" "${OUT:-/tmp}/$name.json" 2>/dev/null
grep -E "^step|pretrain sip" "${OUT:-/tmp}/$name.log" | tail -n 25
if [ -n "${PACK_MODEL:-}" ] && grep -q '"status": "finished"' "$out/pretrain_metrics.json" 2>/dev/null; then
  rm -rf /tmp/pack && python3 -c "import sys, torch; from sip_core.model.loading import load_sip, save_model; \
save_model(load_sip(sys.argv[1]), '/tmp/pack', dtype=torch.bfloat16)" "$out"
  cp "$out"/prefix_init.safetensors "$out"/pretrain_metrics.json /tmp/pack/ 2>/dev/null
  tar -C /tmp/pack -czf - . | split -b 15m - "${OUT:-/tmp}/$name-model.tgz."
fi
