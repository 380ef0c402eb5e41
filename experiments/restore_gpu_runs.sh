#!/usr/bin/env bash
# Rebuild data/gpu/runs on a fresh checkout from the hand-off archives kept in git (experiments/results/), so that
# `sip table --scale gpu` and `sip report claims` see every gpu run again. The archives are unpacked oldest first,
# so a later session's copy of a run replaces an earlier one; Table 1's runs (kept as plain folders) fill in only
# what no archive holds. Logs land in logs/gpu/. Usage: bash experiments/restore_gpu_runs.sh
set -eu
cd "$(git rev-parse --show-toplevel)"
r=experiments/results
archives=(
  "$r/table3-gpu/handoff.tar.00"                                    # session 14
  "$r/table4-gpu/handoff-sygus.tar.xz" "$r/table4-gpu/handoff-session22.tar.xz"
)
for s in $(ls -d $r/session* | sed 's/.*session//' | sort -n); do  # session23, ..., in numeric order
  for f in "$r/session$s"/*.tar.xz; do [ -e "$f" ] && archives+=("$f"); done
done
for f in "${archives[@]}"; do
  case $f in *.xz) tar xJf "$f" ;; *) tar xf "$f" ;; esac
  echo "restored: $f"
done
mkdir -p data/gpu/runs
for d in table1-gpu table1-gpu-te table1-gpu-baselines; do cp -rn "$r/$d/runs/." data/gpu/runs/; done
echo "data/gpu/runs: $(find data/gpu/runs -name metrics.json | wc -l) fine-tuned tasks"
