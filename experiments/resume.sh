#!/usr/bin/env bash
# Resume one run of a sweep (default: the one with the best final dev exact match) alone on the GPU for
# MINUTES more, ending in a cosine decay over the last COOLDOWN minutes (wsd schedule), on the same data.
# Usage (GPU host, repo root, after sweep.sh NAME ... on the same warm machine):
#   bash experiments/resume.sh NAME MINUTES COOLDOWN [INDEX]
# PACK_MODEL=1 also returns the final weights as bf16 safetensors in ≤ 15 MiB pieces ($OUT/NAME-model.tgz.*).
set -u
name=$1; minutes=$2; cooldown=$3; index=${4:-}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 SIP_THREADS=2
if [ -z "$index" ]; then
  index=$(python3 - "$name" <<'PY'
import glob, json, sys
runs = sorted(glob.glob(f"/tmp/sweep/{sys.argv[1]}-*/pretrain_metrics.json"))
best = max(runs, key=lambda p: json.load(open(p))["final"].get("dev_acc", -1))
print(best.split("/")[-2].rsplit("-", 1)[1])
PY
)
fi
out=/tmp/sweep/$name-$index
data=$(sed -n 1p "$out.args"); args=$(sed -n 2p "$out.args")
echo "resuming $out ($args) for $minutes min, decay over the last $cooldown"
python3 -m sip_core.cli pretrain --variant sip --data "$data" --out "$out" --no-progress $args \
  --max-minutes "$minutes" --schedule wsd --cooldown-minutes "$cooldown" > "${OUT:-/tmp}/$name-$index-resumed.log" 2>&1
cp "$out/pretrain_metrics.json" "${OUT:-/tmp}/$name-$index-resumed.json"
tail -n 2 "${OUT:-/tmp}/$name-$index-resumed.log"
if [ -n "${PACK_MODEL:-}" ]; then
  rm -rf /tmp/pack && python3 -c "import sys, torch; from sip_core.model.loading import load_sip, save_model; \
save_model(load_sip(sys.argv[1]), '/tmp/pack', dtype=torch.bfloat16)" "$out"
  cp "$out"/prefix_init.safetensors /tmp/pack/ 2>/dev/null
  tar -C /tmp/pack -czf - . | split -b 15m - "${OUT:-/tmp}/$name-model.tgz."
  ls -la "${OUT:-/tmp}"
fi
