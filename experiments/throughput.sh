#!/usr/bin/env bash
# Issue 3's projection (4M example-passes at the ByT5-small shape, ≤ 45 min): our loop's examples/s by batch size
# with and without the fused GELU/RMS-norm kernels (sip_core/model/fused.py), a profile of where a step's time goes, and the reference loop once for the
# speed-up. One JSON per variant in $OUT. Usage (GPU host, repo root; data/ci/pretrain/d4 carried):
#   [SECONDS_PER=30] [ONLY="b256-sdpa ..."] bash experiments/throughput.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
common="--data ${DATA:-data/ci/pretrain/d4} --shape byt5-small --precision bf16 --seconds ${SECONDS_PER:-30}"
for variant in "b256|--batch-size 256 --profile-steps 20 --loops ours,reference" \
               "b256-unfused|--batch-size 256 --unfused --profile-steps 20 --loops ours" \
               "b384|--batch-size 384 --loops ours" \
               "b512|--batch-size 512 --profile-steps 10 --loops ours"; do
  name=${variant%%|*}; extra=${variant#*|}
  [[ -n ${ONLY:-} && " $ONLY " != *" $name "* ]] && continue
  python3 -m sip_core.train.bench $common $extra > "${OUT:-/tmp}/throughput-$name.json" 2> "/tmp/$name.err" ||
    { echo "== $name failed"; tail -c 800 "/tmp/$name.err"; continue; }
  python3 - "${OUT:-/tmp}/throughput-$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); o = d["ours"]; prof = d.get("profile", {})
print(sys.argv[2], o["examples_per_second"], "ex/s", round(o["hours_for_4M_example_passes"] * 60, 1), "min", "mfu", o["mfu"],
      "speedup", d.get("speedup"), "| profile wall/gpu ms per step", prof.get("wall_ms_per_step"), prof.get("gpu_kernel_ms_per_step"),
      "launches", prof.get("kernel_launches_per_step"))
for k in prof.get("top_kernels_ms_per_step", [])[:8]:
    print("   ", k)
PY
done
# the loss-ε test at equal steps for the loop as it now is (both loops, no second-seed control)
if [[ -z ${ONLY:-} || " $ONLY " == *" loss "* ]]; then
  python3 -m sip_core.train.bench_loss --data ${DATA:-data/ci/pretrain/d4} --shape byt5-small --precision bf16 \
    --no-control > "${OUT:-/tmp}/throughput-bench-loss.json" 2> /tmp/loss.err || tail -c 800 /tmp/loss.err
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('loss', json.dumps({k: v for k, v in d.items() if k not in ('ours', 'reference')}), d['ours'].get('heldout_loss'), d['reference'].get('heldout_loss'))" "${OUT:-/tmp}/throughput-bench-loss.json"
fi
