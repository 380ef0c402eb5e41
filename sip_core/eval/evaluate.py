"""``sip evaluate`` (greedy evaluation of a saved model on task files) and ``sip predict`` (stdin → stdout)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sip_core.errors import SipError
from sip_core.eval.decode import predict_split
from sip_core.eval.metrics import score
from sip_core.eval.outputs import write_run
from sip_core.model.loading import load_sip
from sip_core.train import runtime
from sip_core.train.batching import DeviceSplit
from sip_core.train.data import (fst_table_from_arrow, load_task_examples, make_split, read_pairs_any,
                                 read_parquet, task_ids_in)


def _load(args, path: str | None = None):
    device = runtime.pick_device(args.device)
    runtime.configure_threads(device, args.threads)
    autocast = runtime.set_precision(args.precision, device)
    model = load_sip(path or args.model).to(device).eval()
    if model.config.prefix_mode == "te":
        raise SipError("a TE pre-training checkpoint has no prefix for new inputs; fine-tune it first")
    return model, device, autocast


def evaluate_main(args) -> int:
    model, device, autocast = _load(args)
    out = Path(args.out)
    fsts = None
    if args.tasks.endswith(".parquet"):
        table = load_task_examples(args.tasks)
        if model.config.prefix_mode == "fst":  # a pre-training checkpoint simulates the task's own FST
            fsts = fst_table_from_arrow(read_parquet(Path(args.tasks).with_name("fsts.parquet")),
                                        model.config.num_states, model.config.symbols)
        ids = task_ids_in(table) if args.task_id == "all" else [args.task_id]
        jobs = []
        for tid in ids:
            sub = table.filter((table.column("task_id").to_numpy(zero_copy_only=False) == tid)
                               & (table.column("split").to_numpy(zero_copy_only=False) == args.split))
            if len(sub) == 0:
                raise SipError(f"task {tid!r} has no {args.split!r} examples in {args.tasks}")
            fst_rows = fsts.rows_of(sub.column("fst_id").to_numpy()) if fsts is not None else None
            jobs.append((tid, make_split(sub.column("input").to_pylist(), sub.column("output").to_pylist(), fst_rows),
                         out / tid if args.task_id == "all" else out))
    else:
        if model.config.prefix_mode == "fst":
            raise SipError("an FST-prefix checkpoint needs a Parquet task file with fsts.parquet beside it")
        pairs = read_pairs_any(args.tasks)
        jobs = [(Path(args.tasks).stem, make_split(*zip(*pairs)), out)]
    accs = []
    for tid, split, task_out in jobs:
        data = DeviceSplit(split, device, fsts, use_fsts=fsts is not None)
        preds = predict_split(model, data, args.eval_batch_size, autocast)
        m = score(preds, split.outputs)
        metrics = {"run_id": f"eval-{Path(args.model).name}-{tid}", "model": Path(args.model).name,
                   "model_path": str(args.model), "task_id": tid, "seed": args.seed, "scale": args.scale,
                   "epochs": [], "reported": {"acc": m["acc"], "ed": m["ed"], "per": m["per"], "n_evaluations": 1},
                   "n_test": m["n"], "steps": 0, "device": runtime.device_name(device),
                   "commit": runtime.git_commit(), "params_hash": args.params_hash, "split": args.split}
        write_run(task_out, metrics, split.inputs, split.outputs, preds)
        accs.append(m["acc"])
        print(f"evaluate {tid}: acc {m['acc']:.1f}%, ed {m['ed']:.3f}, per {m['per']:.3f} (n {m['n']})")
    if len(accs) > 1:
        print(f"evaluate: {len(accs)} tasks, mean acc {np.mean(accs):.1f}% → {out}")
    return 0


def predict_main(args) -> int:
    """One output per input line; with several --model runs, their majority vote (``sip_core.eval.vote``)."""
    from sip_core.eval.vote import majority
    from sip_core.tasks.tsv import read_inputs
    models = [_load(args, path) for path in args.model]  # every checkpoint is checked before any input is read
    for model, _, _ in models:
        if model.config.prefix_mode == "fst":
            raise SipError("an FST-prefix (pre-training) checkpoint needs an FST per input; predict with a fine-tuned run")
    lines = read_inputs(sys.stdin)  # one input per line; a bad line is a one-line error before any output
    data = DeviceSplit(make_split(lines, [""] * len(lines)), models[0][1])  # one device (--device) for all
    columns = [predict_split(model, data, args.batch_size, autocast) for model, _, autocast in models]
    for pred in (majority(columns) if len(columns) > 1 else columns[0]):
        sys.stdout.write(pred + "\n")
    sys.stdout.flush()
    return 0
