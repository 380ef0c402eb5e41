#!/usr/bin/env bash
# Sweep 17 (docs/EXPERIMENTS.md session 12): is a weight average of seeds (a uniform model soup) as good as their
# vote? The gpu settings at seeds 1-4 (--save-model), 5 iteration-s4 tasks: 20 runs of 20 epochs (~960 s of one
# H100: two calls, the second with RESUME=1). Once all 20 are done, experiments/soup.py averages each task's 4 runs
# (and seeds 1+2 alone) and evaluates the average: soup.tgz beside finetune-sweep.tgz.
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --save-model"
seeds=${SEEDS:-1 2 3 4}
variants=(); for s in $seeds; do variants+=("seed$s|$P --seed $s"); done
SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 TASKS=${TASKS:-5} EPOCHS=${EPOCHS:-20} LIMIT_S=${LIMIT_S:-540} \
  bash experiments/finetune_sweep.sh "${variants[@]}"
work=/tmp/sweep
for ((t = 0; t < ${TASKS:-5}; t++)); do
  task=iteration-s4-$t; runs=(); for s in $seeds; do runs+=($work/seed$s--$task); done
  ls "${runs[@]/%//metrics.json}" >/dev/null 2>&1 || { echo "soup $task: runs unfinished"; continue; }
  for pick in all first2; do
    use=("${runs[@]}"); [[ $pick == first2 ]] && use=("${runs[@]:0:2}")
    PYTHONPATH=$PWD python3 experiments/soup.py --tasks data/gpu/eval/iteration-s4/examples.parquet --task-id $task \
      --out $work/soup/$pick/$task "${use[@]}" | sed "s/^/soup $pick: /"
  done
done
[[ -d $work/soup ]] && tar -C $work -czf "${OUT:-/tmp}/soup.tgz" --exclude='*.safetensors' soup
exit 0
