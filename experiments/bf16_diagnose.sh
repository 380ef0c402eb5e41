#!/usr/bin/env bash
# Why does bf16 diverge at the ByT5-small shape (docs/BENCHMARKS.md)? Our loop alone, 300 steps of 30 at LR 5e-4
# from the same weights, each variant traced: grad norms, the first non-finite step and the module where the
# non-finite values start (`bench_loss --trace`). One JSON per variant in $OUT.
# Usage (GPU host, repo root; data/ci/pretrain/d4 carried): [ONLY="bf16 ..."] bash experiments/bf16_diagnose.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
common="--data ${DATA:-data/ci/pretrain/d4} --shape ${SHAPE:-byt5-small} --steps ${STEPS:-300} --only-ours --trace"
for variant in "bf16|--precision bf16" "bf16-clip1|--precision bf16 --clip 1.0" \
               "bf16-warmup100|--precision bf16 --warmup 100" "tf32|--precision tf32"; do
  name=${variant%%|*}; extra=${variant#*|}
  [[ -n ${ONLY:-} && " $ONLY " != *" $name "* ]] && continue  # ONLY="bf16 tf32": a subset
  python3 -m sip_core.train.bench_loss $common $extra > "${OUT:-/tmp}/bf16-diagnose-$name.json" 2> "/tmp/$name.err" ||
    { echo "== $name failed"; tail -c 800 "/tmp/$name.err"; }
  python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['ours']; print(sys.argv[2], json.dumps(d))" \
    "${OUT:-/tmp}/bf16-diagnose-$name.json" "$name"
done
