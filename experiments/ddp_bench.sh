#!/usr/bin/env bash
# 1-GPU vs 2-GPU data-parallel pre-training throughput at the gpu scale's SIP-d4 shape (issue 8,
# docs/BENCHMARKS.md). Same command; RUNS lists GPUs:global-batch pairs (1:1024 2:1024 is strong scaling,
# 1:1024 2:2048 weak scaling: the same per-GPU batch). Run on a 2-GPU host:
#   STEPS=400 RUNS="1:1024 2:1024 2:2048" bash experiments/ddp_bench.sh   (data/gpu/pretrain/d4plus carried)
# EXTRA adds flags to every run (an A/B: EXTRA="--clock-sync-every 1" OUT=/tmp/b bash experiments/ddp_bench.sh;
# where the time goes: EXTRA="--profile-steps 150:170" adds each rank's profile-rank<R>.txt to $OUT).
# A pair may repeat: RUNS="1:1024 2:2048 1:1024 2:2048 1:1024 2:2048" interleaves them, and each 2-GPU run is
# compared with the mean of its neighbouring 1-GPU runs (the 1-GPU rate moves between calls; session 28).
# Gradients all-reduced in bf16 (half the bytes): EXTRA="--ddp-grads bf16"; the transport and its bandwidth:
# experiments/allreduce_bench.py.
# A run may name a variant, N:BATCH:VARIANT, so that A/B runs interleave in one call (see `variant` below):
#   RUNS="1:1024 2:2048 2:2048:onebucket 1:1024 2:2048:nccl 2:2048 1:1024" bash experiments/ddp_bench.sh
# A plain 2-GPU run uses 2 NCCL channels (`--nccl-channels`' default, session 31: 1.90x against 1.79x with
# NCCL's own choice, which the `nccl` variant restores).
# N:BATCH:indep runs N independent 1-GPU pre-trainings of BATCH/N at once, one per card, no DDP (their rates
# summed): what two busy cards lose without any communication (power, clocks, the host), against what DDP loses.
set -eu
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 SIP_THREADS=4
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # never NVLink multicast
steps=${STEPS:-400}; out=${OUT:-/tmp}; mkdir -p "$out"
nvidia-smi --query-gpu=name --format=csv,noheader || true
nvidia-smi topo -m || true  # NV#: NVLink between the cards; PHB/SYS/NODE: PCIe or through the host
data=${DATA:-data/gpu/pretrain/d4plus}  # 200k examples, 12.6 MiB: travels (the gpu d4 pool does not)
common="--variant sip --data $data --d-model 256 --d-ff 1024 --layers 12 --decoder-layers 4
  --heads 4 --d-kv 64 --lr 0.0006 --warmup 50 --precision bf16 --max-steps $steps
  --eval-every 1000000 --no-progress ${EXTRA:-}"
runs=${RUNS:-1:1024 2:1024 2:2048}
# Equal work per rank needs a pool that fills a bucket chunk (64 batches) at the largest global batch: batches are
# cut from length-sorted chunks, so in a smaller pool a rank's half of a 2B batch spans twice the lengths of a 1-GPU
# batch of B and pads ~20% more (the ci pool until session 33; tests/test_train_ddp.py).
python3 - "$data" $runs <<'PY'
import sys
import pyarrow.compute as pc, pyarrow.parquet as pq
data, runs = sys.argv[1], sys.argv[2:]
n = pc.sum(pc.equal(pq.read_table(f"{data}/examples.parquet", columns=["split"])["split"], "train")).as_py()
need = 64 * max(int(r.split(":")[1]) for r in runs)
if n < need:
    sys.exit(f"ddp_bench: {data} has {n} training examples, fewer than one bucket chunk at the largest global batch "
             f"({need}); ranks would pad more than one GPU does. Use a larger pool (DATA=...).")
print(f"pool {data}: {n} training examples (one bucket chunk at the largest global batch: {need})")
PY
variant() {  # what a named variant changes: "ENV=VALUE ... -- FLAGS"
  case $1 in
    "") echo "--" ;;
    bf16) echo "-- --ddp-grads bf16" ;;                # gradients all-reduced in bf16
    onebucket) echo "-- --ddp-bucket-mb 128" ;;        # one all-reduce after the backward (no overlap with it)
    ch2) echo "NCCL_MAX_NCHANNELS=2 --" ;;             # NCCL's kernels hold 2 SMs instead of up to 24 (default since session 31)
    nccl) echo "-- --nccl-channels 0" ;;               # NCCL chooses its channels (the default before session 31)
    accum2) echo "-- --grad-accum 2" ;;                # two micro-batches a step: the ranks meet every second one
    profile) echo "-- --profile-steps 150:170" ;;      # each rank's profile-rank<R>.txt
    indep) echo "--" ;;                                # no DDP: one process per card (below)
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
}
i=0
for run in $runs; do
  IFS=: read -r n batch tag <<< "$run"
  spec=$(variant "$tag"); envs=${spec%%--*}; flags=${spec#*--}
  name=ddp-$n-$batch${tag:+-$tag}; [[ $i -gt 0 ]] && name=$name-run$i  # the first keeps its old name
  if [[ $tag == indep ]]; then
    for ((g = 0; g < n; g++)); do
      rm -rf /tmp/$name-gpu$g
      CUDA_VISIBLE_DEVICES=$g python3 -m sip_core.cli pretrain $common --nproc 1 --batch-size $((batch / n)) \
        --out /tmp/$name-gpu$g > /tmp/$name-gpu$g.log 2>&1 &
    done
    wait
    for ((g = 0; g < n; g++)); do
      tail -1 /tmp/$name-gpu$g.log; cp /tmp/$name-gpu$g/pretrain_metrics.json "$out/$name-gpu$g.json"
    done
    i=$((i + 1)); continue
  fi
  rm -rf /tmp/$name
  env $envs python3 -m sip_core.cli pretrain $common $flags --nproc $n --batch-size $batch --out /tmp/$name 2>&1 \
    | tail -1
  cp /tmp/$name/pretrain_metrics.json "$out/$name.json"
  for f in /tmp/$name/profile-rank*.txt; do [[ -f $f ]] && cp "$f" "$out/$name-$(basename "$f")"; done
  i=$((i + 1))
done
python3 - "$out" $runs <<'PY'
import json, sys
out, runs = sys.argv[1], sys.argv[2:]
rates = []
for i, run in enumerate(runs):  # steady state: the logging windows after the first (warm-up, allocator, NCCL set-up)
    n, batch, tag = (run.split(":") + [""])[:3]
    name = f"ddp-{n}-{batch}" + (f"-{tag}" if tag else "") + (f"-run{i}" if i else "")
    files = [f"{name}-gpu{g}" for g in range(int(n))] if tag == "indep" else [name]
    rate = 0.0
    for f in files:  # indep: the cards' rates summed
        windows = [w["examples_per_second"] for w in json.load(open(f"{out}/{f}.json"))["curve"]]
        curve = windows[1:] or windows
        rate += sum(curve) / len(curve)
    rates.append((int(n), rate))
    print(f"{n} GPU(s), global batch {batch}{' (' + tag + ')' if tag else ''}: {rates[-1][1]:.0f} ex/s (steady state)")
for i, (n, rate) in enumerate(rates):  # each multi-GPU run against the 1-GPU runs just before and after it
    ones = [r for j, (m, r) in enumerate(rates) if m == 1 and abs(j - i) == 1]
    if n > 1 and ones:
        label = runs[i].split(":")[2] if runs[i].count(":") > 1 else ""
        print(f"run {i + 1} ({n} GPUs{', ' + label if label else ''}): {rate / (sum(ones) / len(ones)):.2f}x its"
              " neighbouring 1-GPU runs")
PY
