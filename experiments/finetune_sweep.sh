#!/usr/bin/env bash
# Fine-tuning variants side by side on one GPU: every variant × task runs as its own process, all at once,
# with the gpu scale's Table 1 fine-tuning flags (`snakemake -n -p --config scale=gpu`) as the common base.
# Returns every run's metrics.json (with the per-epoch test curve) as one archive in $OUT.
# Usage (GPU host, repo root; data/gpu/eval/<setting> and data/gpu/checkpoints/sip-d4 carried):
#   SETTINGS="iteration-s4 uc-s4" TASKS=2 EPOCHS=10 bash experiments/finetune_sweep.sh \
#     "name|extra finetune flags" ...
# Throughput on one H100 at the gpu shape: 8 runs at once finish 20 epochs in ~8 min; 12 at once do not finish
# in 7 (LIMIT_S then brings back each unfinished run's curve so far, from its progress.json). g2p at 150 epochs: 18 at
# once on 16 cores took 208-307 s each; 36 at once reached no evaluated epoch in 535 s (session 16, nothing came back).
# A variant's flags come after the common ones, so they override them (e.g. "plr0.1|--prefix-lr 0.1"); an optional
# third field sets environment variables of its runs ("det|--lr 3e-4|SIP_DETERMINISTIC=1").
# Named models: "base" in a variant's name selects the randomly initialised same-shape model.
# RESUME=1 (a second call on the same warm host): keep the runs so far; finished ones are skipped, the others
# resume from their checkpoints (every 2 minutes).
# Other task files: TASK_FILE=data/gpu/natural/g2p/examples.parquet TASK_IDS="g2p-ban-d0 g2p-cop-d0" (SETTINGS and
# TASKS are then unused).
# Several GPUs: runs go round-robin over the GPUs the host shows (NGPU to override); PER_GPU=N keeps at most N runs
# per GPU at once, the rest queued (default: all at once). Two H200s took 10 per GPU in ~420 s each (session 19).
set -u
# MPS=1: the whole sweep under a CUDA MPS control daemon (sip_core/mps.py, as handoff-run by default), so that the
# runs' kernels overlap instead of taking the card in turn: 1.33x the run-epochs per second for ten joint fine-tunes
# on an H200 (session 47); where it cannot serve, one warning and the sweep runs time-sliced
[[ ${MPS:-0} == 1 ]] && exec env MPS=0 PYTHONPATH=$PWD python3 -m sip_core.mps bash "$0" "$@"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 SIP_THREADS=1
settings=${SETTINGS:-iteration-s4 uc-s4}; tasks=${TASKS:-2}; epochs=${EPOCHS:-20}
common="--epochs $epochs --eval-last ${EVAL_LAST:-10} --report-last 10 --eval-batch-size 64 --prefix-lr 1.0 --prefix-length 50 --clip 1.0 --seed 762354 --no-progress --checkpoint-minutes 2"
base="--model scratch --d-model 256 --d-ff 1024 --layers 12 --decoder-layers 4 --heads 4 --d-kv 64 --dropout 0.0 --rel-buckets 128 --rel-max-distance 256 --model-name base --prefix none --batch-size 48 --lr 0.0005"
sip="--model ${SIP_MODEL:-data/gpu/checkpoints/sip-d4} --model-name sip-d4 --prefix mean --batch-size 32 --lr 0.0003"
work=${WORK:-/tmp/sweep}  # WORK: another folder lets two sweeps run side by side in one call
[[ ${RESUME:-0} == 1 ]] || rm -rf $work  # a warm host keeps /tmp: never mix an earlier sweep's runs into this archive
mkdir -p $work "${OUT:-/tmp}"
ngpu=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}; ((ngpu > 0)) || ngpu=1
cap=$(( ${PER_GPU:-0} * ngpu )); started=0
# LIMIT_S: stop unfinished runs after that many seconds (queued ones never start), so that what finished still
# comes back; the watchdog is detached from stdout: a pipe reader must not wait for its sleep
deadline=$((SECONDS + ${LIMIT_S:-999999}))
w=0; if [[ -n ${LIMIT_S:-} ]]; then (sleep "$LIMIT_S"; pkill -P $$ -f " finetune --") >/dev/null 2>&1 & watchdog=$!; w=1; fi
pids=()
for variant in "$@"; do
  name=${variant%%|*}; rest=${variant#*|}; extra=${rest%%|*}; envs=""; [[ $rest == *"|"* ]] && envs=${rest#*|}
  model=$sip; [[ $name == base* ]] && model=$base
  if [[ -n ${TASK_IDS:-} ]]; then
    todo=(); for id in $TASK_IDS; do todo+=("${TASK_FILE:?TASK_IDS needs TASK_FILE}|$id"); done
  else
    todo=(); for setting in $settings; do for ((t = 0; t < tasks; t++)); do
      todo+=("data/gpu/eval/$setting/examples.parquet|$setting-$t"); done; done
  fi
  for job in "${todo[@]}"; do
    file=${job%%|*}; id=${job#*|}; run=$name--$id
    [[ -f $work/$run/metrics.json ]] && continue  # finished in an earlier call
    while ((cap > 0 && $(jobs -rp | wc -l) >= cap + w)); do wait -n; done  # a slot frees when a run ends
    ((SECONDS < deadline)) || continue
    gpu=$((started % ngpu)); started=$((started + 1))
    env CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-$gpu} $envs python3 -m sip_core.cli finetune $model $common $extra \
      --tasks $file --task-id $id --out $work/$run > $work/$run.log 2>&1 &
    pids+=($!)
  done
done
wait "${pids[@]}" 2>/dev/null  # (runs reaped by `wait -n` are no longer children)
[[ -n ${watchdog:-} ]] && kill $watchdog 2>/dev/null
# weights stay on the host (36 MB a run); a tuned prefix (--save-prefix: prefix.safetensors, 80 KB) comes back
# (a run stopped by LIMIT_S: its latest checkpoint's prefix, in prefix-epoch<N>/)
[[ "$*" == *--save-prefix* ]] && python3 experiments/partial_prefixes.py $work
tar -C $work -czf "${OUT:-/tmp}/finetune-sweep.tgz" --exclude='model.safetensors' --exclude='checkpoints' .
python3 - "$work" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
for m in sorted(work.glob("*/metrics.json")):
    d = json.loads(m.read_text())
    curve = " ".join(f"{e['acc']:.0f}" for e in d["epochs"])
    held = f"  holdout {d['holdout']['acc']:5.1f}" if "holdout" in d else ""
    if d["epochs"] and "holdout_acc" in d["epochs"][0]:  # --holdout-longest: its curve beside the test's
        held += "  holdout curve " + " ".join(f"{e['holdout_acc']:.0f}" for e in d["epochs"])
    print(f"{m.parent.name:40s} acc {d['reported']['acc']:6.2f}  ed {d['reported']['ed']:6.2f}{held}  curve {curve}  {d['wall_seconds']:.0f}s")
    if "readout" in d:  # --prefix readout: what the first pass read, and where the real run started
        r = d["readout"]
        print(f"{'':40s} first pass {r['first_pass_acc']:.1f}; {r['summary']}; start: {d['prefix_init'].split(':')[0]}")
    if "selection" in d:  # --restarts: each restart's holdout and test accuracy, the choice, and their vote
        from sip_core.eval.vote import vote_runs
        sel = d["selection"]
        rows = " ".join(f"r{e['restart']} {e['holdout_acc']:.1f}/{e['test_acc']:.1f}" for e in sel["restarts"])
        vote = vote_runs(sorted(m.parent.glob("restarts/r*")))["metrics"]["acc"]
        print(f"{'':40s} restarts holdout/test: {rows}; chosen r{sel['chosen']}; vote of restarts {vote:.1f}")
for p in sorted(work.glob(".*.partial/progress.json")):  # stopped by LIMIT_S: the curve so far
    d = json.loads(p.read_text())
    curve = " ".join(f"{e['acc']:.0f}" for e in d["epochs"])  # Python < 3.12 too: no nested same quotes
    print(f"{p.parent.name:40s} unfinished, curve {curve}")
PY
for f in $work/*.log; do grep -l -i "error\|traceback" "$f" >/dev/null && { echo "== $f"; tail -c 600 "$f"; }; done
exit 0
