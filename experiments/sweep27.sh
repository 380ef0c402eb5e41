#!/usr/bin/env bash
# Sweep 27 (session 41, docs/EXPERIMENTS.md): search-aware continued pre-training of models/sip-d4
# (experiments/search_aware.py), then Table 1 iteration fine-tuning of the result at the gpu protocol (20 epochs,
# seed 762354: paired with Table 1's 81.1 under strict determinism).
#   bash experiments/sweep27.sh train      one call: ~8 min of training; the checkpoint stays in runs/search-aware on
#                                          the host (ignored, so a warm host keeps it) and comes back in 15-MB parts
#   bash experiments/sweep27.sh finetune   the next call on the same warm host (RESUME=1 for a third)
# Run A: the defaults; run B: SA_FLAGS="--lr 2e-5" MINUTES=4. Both lost simulation (EXPERIMENTS, session 41). A guarded
# next try, e.g.: SA_FLAGS="--lr 2e-5 --gold-size-power 1 --gold-long-fraction 0.75 --prefix-weight 0.3
# --min-gold-acc 97" (read gold_long_acc in the log before spending a fine-tuning call: models/sip-d4 starts at 98.0).
# Carry data/gpu/search-aware (python experiments/search_aware_data.py --out data/gpu/search-aware, 12 MB) and
# data/gpu/eval/iteration-s4. Afterwards, here: cat search-aware.safetensors.part-* > runs/search-aware/model.safetensors
set -eu
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp}; model=${SA_MODEL:-runs/search-aware}
case ${1:?train or finetune} in
  train)
    python3 experiments/search_aware.py --model models/sip-d4 --data data/gpu/search-aware --out "$model" \
      --max-minutes "${MINUTES:-8}" --steps 100000 ${SA_FLAGS:-} 2>&1 | tee "$out/search-aware.log"
    cp "$model/search_aware.json" "$model/config.json" "$out/"
    split -b 15M "$model/model.safetensors" "$out/search-aware.safetensors.part-" ;;
  finetune)
    P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --checkpoint-minutes 1 --seed 762354"
    SIP_MODEL=$model SETTINGS=iteration-s4 TASKS=5 EPOCHS=${EPOCHS:-20} LIMIT_S=${LIMIT_S:-555} PER_GPU=10 \
      bash experiments/finetune_sweep.sh "sa-s762354|$P" ;;
esac
