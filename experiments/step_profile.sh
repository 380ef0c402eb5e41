#!/usr/bin/env bash
# Where a gpu fine-tuning step's time goes (planned in session 49, docs/EXPERIMENTS.md). The Table 1 fine-tunes run
# ~115 ms an optimiser step whether 5 share an H200 under MPS or 10 take it in turn (sessions 45 and 49: 3,140
# steps in ~357 / ~375 s of training), so a run's own loop, not the card, sets the pace, and the paper's 50 epochs
# need ~1,000 s a run: two calls. Session 48 profiled one strict run alone: 108.5 ms, GPU 13% busy, 1,064 of
# ~2,200 launches the NaN fill of new memory (determinism off: 88.3 ms). This call measures, in one piece:
#   1. one run, strict determinism with the NaN fill (SIP_FILL_UNINITIALIZED=1; the default until session 51): wall vs GPU-busy ms per step (--profile-steps 50:150);
#   2. the same with SIP_FILL_UNINITIALIZED=0 (no NaN fill of new tensors): its step time, and whether its tuned
#      prefix and metrics are the same bits as 1's (the condition for using it);
#   3. the same with --determinism off (the floor of what determinism costs);
#   (1-3 run side by side, one task each; session 50: sharing the card barely moves a run's step)
#   4. five strict runs at once (tasks 0-4), profiled: the step under sharing, against 1.
# The gpu protocol's flags otherwise (80 vectors, body LR 1e-5, prefix LR 0.3, cosine), 2 epochs each.
# ~4-5 min of one H200. Carry data/gpu/eval/iteration-s4; models/sip-d4 is in git. Archives: $OUT/step-*.tgz.
set -u
# A CPU dry run: SIP_MODEL=models/sip-d4-small EPOCHS=1 PROFILE=2:6 PATH=.venv/bin:$PATH bash experiments/step_profile.sh
P="--prefix-length 80 --prefix-lr 0.3 --lr 1e-5 --schedule cosine --save-prefix --profile-steps ${PROFILE:-50:150}"
export SIP_MODEL=${SIP_MODEL:-models/sip-d4} SETTINGS=iteration-s4 EPOCHS=${EPOCHS:-2} EVAL_LAST=1
sweep() {  # NAME TASKS PER_GPU LIMIT_S VARIANT...: one finetune_sweep.sh, its archive kept as $OUT/step-NAME.tgz
    local name=$1 tasks=$2 per_gpu=$3 limit=$4; shift 4
    WORK=/tmp/step-$name TASKS=$tasks PER_GPU=$per_gpu LIMIT_S=$limit bash experiments/finetune_sweep.sh "$@"
    mv "${OUT:-/tmp}/finetune-sweep.tgz" "${OUT:-/tmp}/step-$name.tgz"
}
# side by side: one after another, three profiled 2-epoch runs (~200 s each) overran the limit (session 50)
sweep alone 1 0 330 "strict|$P|SIP_FILL_UNINITIALIZED=1" "nofill|$P|SIP_FILL_UNINITIALIZED=0" "off|$P --determinism off"
sweep shared 5 0 200 "strict5|$P"
python3 - <<'PY'
import hashlib, json, pathlib
runs = sorted(r for r in pathlib.Path("/tmp").glob("step-*/*--iteration-s4-*") if r.is_dir())  # .partial: stopped
for run in runs:
    head = (run / "profile-rank0.txt").read_text().splitlines()[:2] if (run / "profile-rank0.txt").exists() else ["-"]
    print(f"{run.name:28s} {' | '.join(head)}")
def bits(run):
    m = json.loads((run / "metrics.json").read_text())
    prefix = hashlib.sha256((run / "prefix.safetensors").read_bytes()).hexdigest()
    return prefix, m["epochs"]
strict, nofill = (pathlib.Path(f"/tmp/step-alone/{v}--iteration-s4-0") for v in ("strict", "nofill"))
if (strict / "metrics.json").exists() and (nofill / "metrics.json").exists():
    print("SIP_FILL_UNINITIALIZED=0 gives the same prefix and curve as strict:", bits(strict) == bits(nofill))
PY
