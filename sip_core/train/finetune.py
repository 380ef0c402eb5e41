"""``sip finetune``: fine-tune a (SIP) model on one task, every task of a Parquet file, or a TSV pair.

Prefix: ``mean`` (position-wise mean of 32 FST encodings from the checkpoint's pre-training sample),
``random`` (N(0,1), the TE baseline), ``none``. Adam with a prefix group (LR 1.0) and a body group
(3e-4), global grad-norm clip 1.0; greedy test evaluation every epoch (or in the last K epochs);
reported = mean of the last 10 evaluations (REFERENCE §4.7). The base model is loaded once per process
and reset per task, so ``--task-id all`` runs many small fine-tunes without start-up cost.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from sip_core.errors import SipError
from sip_core.eval.decode import predict_split
from sip_core.eval.metrics import score
from sip_core.eval.outputs import reported, write_run
from sip_core.model.config import SIPConfig, t5_kwargs
from sip_core.model.loading import (build_model, is_sip_checkpoint, load_prefix_init, load_sip, mean_prefix,
                                    save_model, with_prefix_mode)
from sip_core.model.sip_model import SIPForConditionalGeneration
from sip_core.train import runtime
from sip_core.train.batching import DeviceSplit, random_batches
from sip_core.train.data import load_task_examples, make_split, read_pairs_any, task_ids_in, task_pairs


def finetune_param_groups(model: SIPForConditionalGeneration, lr: float, prefix_lr: float) -> list[dict]:
    """[{'name': 'prefix', lr: prefix_lr}, {'name': 'body', lr: lr}] (the prefix group may be empty)."""
    prefix = [model.prefix] if model.prefix is not None else []
    body = [p for n, p in model.named_parameters() if n != "prefix"]
    return [{"name": "prefix", "params": prefix, "lr": prefix_lr}, {"name": "body", "params": body, "lr": lr}]


def load_base(model_arg: str, args) -> SIPForConditionalGeneration:
    if model_arg == "scratch":
        shape = t5_kwargs(d_model=args.d_model, d_ff=args.d_ff, num_layers=args.layers,
                          num_decoder_layers=args.decoder_layers, num_heads=args.heads, d_kv=args.d_kv,
                          dropout_rate=args.dropout)
        return SIPForConditionalGeneration(SIPConfig(t5=shape, prefix_mode="none", variant="base"))
    if is_sip_checkpoint(model_arg):
        return load_sip(model_arg)
    path = Path(model_arg)
    if not path.exists() and (model_arg.startswith((".", "/", "~")) or model_arg.count("/") > 1):
        raise SipError(f"--model {model_arg} does not exist")
    if path.exists() or "/" in model_arg:
        shape = t5_kwargs()
        return build_model(model_arg, "none", "base", shape)
    raise SipError(f"--model {model_arg!r} is neither 'scratch', a SIP checkpoint nor a T5 path")


def resolve_prefix(requested: str, base: SIPForConditionalGeneration, model_arg: str) -> str:
    has_sample = base.fst_encoder is not None and is_sip_checkpoint(model_arg) and load_prefix_init(model_arg) is not None
    if requested == "auto":
        if base.config.prefix_mode == "tuned":
            return "keep"
        return "mean" if has_sample else "none"
    if requested == "mean" and not has_sample:
        raise SipError(f"--prefix mean needs a SIP pre-training checkpoint with prefix_init.safetensors; {model_arg} has none")
    return requested


class FineTuner:
    """Holds the base model once; ``run`` fine-tunes a fresh copy on one task."""

    def __init__(self, args):
        self.args = args
        self.device = runtime.pick_device(args.device)
        runtime.configure_threads(self.device, args.threads)
        self.autocast = runtime.set_precision(args.precision, self.device)
        runtime.seed_everything(args.seed)
        base = load_base(args.model, args)
        self.prefix_kind = resolve_prefix(args.prefix, base, args.model)
        self.fst_sample = load_prefix_init(args.model) if self.prefix_kind == "mean" else None
        self.fst_encoder = base.fst_encoder
        if self.prefix_kind in ("mean", "random"):
            model = with_prefix_mode(base, "tuned", prefix_length=args.prefix_length)
        elif self.prefix_kind == "none":
            model = with_prefix_mode(base, "none") if base.config.prefix_mode != "none" else base
        else:
            model = base
        self.model = model.to(self.device)
        self.initial_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.commit = runtime.git_commit()

    def _reset(self, seed: int) -> None:
        self.model.load_state_dict(self.initial_state)
        runtime.seed_everything(seed)
        gen = torch.Generator().manual_seed(seed)
        if self.prefix_kind == "mean":
            init = mean_prefix(self.fst_encoder, self.fst_sample, 32, self.model.config.prefix_length, gen,
                               self.model.t5.shared)
        elif self.prefix_kind == "random":
            init = torch.randn(self.model.prefix.shape, generator=gen)
        else:
            return
        with torch.no_grad():
            self.model.prefix.copy_(init.to(self.model.prefix.device))

    def run(self, task_id: str, train_pairs, test_pairs, out_dir: Path) -> dict:
        args = self.args
        if not train_pairs:
            raise SipError(f"task {task_id!r} has no training examples")
        if not test_pairs:
            raise SipError(f"task {task_id!r} has no test examples")
        started = time.monotonic()
        self._reset(args.seed)
        model = self.model
        train = DeviceSplit(make_split(*zip(*train_pairs)), self.device)
        test = DeviceSplit(make_split(*zip(*test_pairs)), self.device)
        optimizer = torch.optim.Adam([g for g in finetune_param_groups(model, args.lr, args.prefix_lr) if g["params"]])
        evaluations = []
        predictions = None
        steps = 0
        first_eval = args.epochs - args.eval_last if args.eval_last > 0 else 0
        epochs = range(args.epochs)
        if not args.no_progress:
            from tqdm.auto import tqdm
            epochs = tqdm(epochs, desc=f"finetune {task_id}", unit="epoch", leave=False, mininterval=1.0)
        for epoch in epochs:
            model.train()
            for idx in random_batches(len(train), args.batch_size, args.seed, epoch):
                batch = train.batch(idx)
                with self.autocast():
                    loss = model(**batch).loss
                loss.backward()
                if args.clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                steps += 1
            if epoch >= first_eval:
                predictions = predict_split(model, test, args.eval_batch_size, self.autocast)
                row = score(predictions, test.split.outputs)
                evaluations.append({"epoch": epoch + 1, "acc": row["acc"], "ed": row["ed"], "per": row["per"]})
        metrics = {
            "run_id": args.run_id or f"{args.model_name or Path(args.model).name}-{task_id}-s{args.seed}",
            "model": args.model_name or Path(args.model).name, "model_path": str(args.model),
            "task_id": task_id, "seed": args.seed, "scale": args.scale, "prefix": self.prefix_kind,
            "epochs": evaluations, "reported": reported(evaluations, args.report_last),
            "n_train": len(train), "n_test": len(test), "steps": steps,
            "device": runtime.device_name(self.device), "commit": self.commit, "params_hash": args.params_hash,
            "wall_seconds": round(time.monotonic() - started, 2),
            "hyperparameters": {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                                "prefix_lr": args.prefix_lr, "clip": args.clip, "precision": args.precision},
        }
        write_run(out_dir, metrics, test.split.inputs, test.split.outputs, predictions)
        if args.save_model:
            save_model(model, out_dir)
        return metrics


def main(args) -> int:
    if args.tasks and (args.train or args.test):
        raise SipError("give either --tasks or --train/--test, not both")
    if not args.tasks and not (args.train and args.test):
        raise SipError("give --tasks FILE, or both --train and --test")
    if args.epochs < 1:
        raise SipError("--epochs must be at least 1")
    args.no_progress = getattr(args, "no_progress", False)
    out = Path(args.out)
    jobs = []
    if args.tasks:
        table = load_task_examples(args.tasks)
        ids = task_ids_in(table)
        if args.task_id != "all":
            if args.task_id not in ids:
                raise SipError(f"task {args.task_id!r} is not in {args.tasks} (has {ids[:5]}...)")
            ids = [args.task_id]
        many = args.task_id == "all"
        for tid in ids:
            jobs.append((tid, task_pairs(table, tid, "train"), task_pairs(table, tid, "test"),
                         out / tid if many else out))
    else:
        tid = args.task_id if args.task_id != "all" else Path(args.train).stem
        jobs.append((tid, read_pairs_any(args.train, "train"), read_pairs_any(args.test, "test"), out))
    tuner = FineTuner(args)
    results = []
    for tid, train_pairs, test_pairs, task_out in jobs:
        metrics = tuner.run(tid, train_pairs, test_pairs, task_out)
        results.append(metrics)
        rep = metrics["reported"]
        print(f"finetune {tid}: acc {rep['acc']:.1f}%, ed {rep['ed']:.3f}, per {rep['per']:.3f} "
              f"(mean of last {rep['n_evaluations']} evals, n_test {metrics['n_test']}, {metrics['wall_seconds']:.1f}s)")
    if len(results) > 1:
        acc = np.mean([m["reported"]["acc"] for m in results])
        ed = np.mean([m["reported"]["ed"] for m in results])
        print(f"finetune: {len(results)} tasks, mean acc {acc:.1f}%, mean ed {ed:.3f} → {out}")
    return 0
