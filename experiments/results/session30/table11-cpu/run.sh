#!/usr/bin/env bash
# Session 30: the induced prefix with nothing tuned (D2 of session 29) on tasks 0-2 at 40-70 and 1-2 at 90-110.
cd /work/main && . .venv/bin/activate
while ! grep -q "^rc=" /tmp/ci30a.log; do sleep 20; done
for tid in len-40-70-0 len-40-70-1 len-40-70-2 len-90-110-1 len-90-110-2; do
  rm -rf /tmp/t11cpu/U-$tid
  /usr/bin/time -f "%e s" -o /tmp/t11cpu/U-$tid.time sip finetune --model data/gpu/checkpoints/sip-d4-long \
    --train /tmp/t11cpu/$tid.train.tsv --test /tmp/t11cpu/$tid.test.tsv --prefix-length 80 --batch-size 32 \
    --clip 1.0 --seed 762354 --precision fp32 --device cpu --no-progress --prefix induced --epochs 1 --lr 0 \
    --prefix-lr 0 --induced-prefix-lr 0 --eval-last 1 --report-last 1 --threads 2 --out /tmp/t11cpu/U-$tid \
    > /tmp/t11cpu/U-$tid.log 2>&1
done
echo all-done > /tmp/t11cpu/U.done
