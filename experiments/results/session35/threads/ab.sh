set -u
# the same 2-epoch fine-tune with PyTorch's default CPU threads (SIP_THREADS unset) and with one thread, side by side
(env -u SIP_THREADS python3 -m sip_core.cli finetune --model data/gpu/checkpoints/te --model-name te --tasks data/gpu/eval/iteration-s5/examples.parquet --task-id iteration-s5-0 --prefix random --epochs 2 --eval-last 2 --report-last 2 --batch-size 32 --eval-batch-size 64 --lr 0.0005 --prefix-lr 1.0 --prefix-length 50 --clip 1.0 --seed 762354 --scale gpu --params-hash 1e80af9378f7 --schedule cosine --no-progress --out /tmp/ab_default > $OUT/ab_default.txt 2>&1) &
(SIP_THREADS=1 python3 -m sip_core.cli finetune --model data/gpu/checkpoints/te --model-name te --tasks data/gpu/eval/iteration-s5/examples.parquet --task-id iteration-s5-0 --prefix random --epochs 2 --eval-last 2 --report-last 2 --batch-size 32 --eval-batch-size 64 --lr 0.0005 --prefix-lr 1.0 --prefix-length 50 --clip 1.0 --seed 762354 --scale gpu --params-hash 1e80af9378f7 --schedule cosine --no-progress --out /tmp/ab_one > $OUT/ab_one.txt 2>&1) &
wait
python3 - <<'PY'
import json
a, b = (json.load(open(f'/tmp/ab_{k}/metrics.json')) for k in ('default', 'one'))
print('epochs equal:', a['epochs'] == b['epochs'], 'reported equal:', a['reported'] == b['reported'], a['reported'])
print('wall', a['wall_seconds'], b['wall_seconds'])
PY
python3 -c "import pyarrow.parquet as pq; print('predictions equal:', pq.read_table('/tmp/ab_default/predictions.parquet').equals(pq.read_table('/tmp/ab_one/predictions.parquet')))"
