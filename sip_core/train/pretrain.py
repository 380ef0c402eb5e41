"""``sip pretrain``: SIP (FST prefix), TE (task embeddings), Naive and Set (plain seq2seq) pre-training.

One optimiser step per batch (no accumulation by default), length-bucketed batches gathered on the
device, optional bf16 autocast / TF32 / torch.compile, periodic greedy exact-match evaluation, a time
limit, and checkpoints from which a killed run resumes to the same weights as an uninterrupted one.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from sip_core.errors import SipError
from sip_core.io import write_json, write_text
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import build_model, save_model, save_prefix_init, without_task_table
from sip_core.train import checkpoint as ckpt
from sip_core.train import distributed, runtime
from sip_core.train.batching import DeviceSplit, LengthCurriculum, bucketed_batches, plan_on_device
from sip_core.train.data import load_pool
from sip_core.train.optim import build_optimizer, build_scheduler, clip_grad_norm_, lr_factor, wsd_decay
from sip_core.train.profiling import StepProfiler, parse_window

VARIANT_PREFIX = {"sip": "fst", "te": "te", "naive": "none", "set": "none"}
EVAL_SPLITS = ("easy_dev", "dev", "test")


@dataclass
class PretrainOptions:
    variant: str
    data: str
    out: str
    init: str = "scratch"
    d_model: int = 256
    d_ff: int = 1024
    layers: int = 4
    decoder_layers: int | None = None
    heads: int = 4
    d_kv: int = 64
    dropout: float = 0.1
    num_states: int = 16
    lr: float = 5e-4
    te_lr: float = 1.0
    weight_decay: float = 0.0
    adam_beta2: float = 0.999
    rel_buckets: int = 32
    rel_max_distance: int = 128
    symbol_source: str = "table"
    batch_size: int = 30
    grad_accum: int = 1
    epochs: float = 1.0
    max_steps: int | None = None
    max_fsts: int | None = None    # only the first N training FSTs' examples (bounds TE's task table)
    warmup: int = 0
    schedule: str = "constant"
    cooldown_steps: int = 0        # wsd schedule: length of the final decay
    cooldown_minutes: float = 0.0  # wsd schedule: decay over the last M minutes of --max-minutes instead
    clip: float = 0.0
    precision: str = "tf32"
    compile: bool = False
    seed: int = 0
    eval_every: int = 0
    eval_max: int = 1000
    eval_batch_size: int = 128
    eval_splits: tuple = EVAL_SPLITS
    max_minutes: float | None = None
    checkpoint_every: int = 0
    checkpoint_minutes: float = 15.0
    clock_sync_every: int = 8      # DDP: ranks agree on wall-clock decisions every N steps (one all-reduce)
    profile_steps: str | None = None  # "A:B": a torch.profiler summary of optimiser steps A..B per rank
    ddp_grads: str = "fp32"        # DDP: the dtype gradients are all-reduced in
    ddp_bucket_mb: float = 25.0    # DDP: gradient bucket size (bucket_cap_mb)
    nccl_channels: int = distributed.NCCL_CHANNELS  # DDP on GPUs: NCCL_MAX_NCHANNELS (0: NCCL's choice)
    log_every: int = 50
    device: str = "auto"
    threads: int | None = None
    bucket_chunk: int = 64
    prefix_sample: int = 400
    progress: bool = True
    state_loss: float = 0.0        # weight of the auxiliary FST-state loss on the encoder (0: off)
    curriculum_steps: int = 0      # length curriculum over the first N optimiser steps (0: off)
    curriculum_start: int = 5      # input length (characters) allowed at step 0
    save_dtype: str = "fp32"       # dtype of the saved model.safetensors (bf16: half the size, so it travels)
    extra: dict = field(default_factory=dict)


class Timer:
    def __init__(self, limit_minutes: float | None):
        self.start = time.monotonic()
        self.limit = None if not limit_minutes else limit_minutes * 60.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def expired(self) -> bool:
        return self.limit is not None and self.elapsed >= self.limit


# Input-length bands (characters) of the per-length exact match: shows where simulation breaks down. The d4 pools
# reach 35 characters, d4-long 110 (Table 11's test lengths); a band with no example is not reported.
LENGTH_BANDS = ((1, 10), (11, 20), (21, 35), (36, 50), (51, 70), (71, 90), (91, 110))


def exact_match(model, data: DeviceSplit, batch_size: int, autocast, by_length: bool = False) -> dict:
    """{"acc": exact match %} and, with ``by_length``, {"acc_len1-10": ...} per input-length band."""
    from sip_core.eval.decode import predict_split
    preds = predict_split(model, data, batch_size, autocast)
    gold = data.split.outputs
    hits = np.array([p == g for p, g in zip(preds, gold)], dtype=bool)
    result = {"acc": 100.0 * hits.mean() if len(hits) else 0.0}
    if by_length:
        lengths = data.split.input_char_lengths
        for lo, hi in LENGTH_BANDS:
            band = (lengths >= lo) & (lengths <= hi)
            if band.any():
                result[f"acc_len{lo}-{hi}"] = round(100.0 * hits[band].mean(), 2)
    return result


def _eval_subset(split, n: int, seed: int):
    if n <= 0 or len(split) <= n:
        return split
    idx = np.sort(np.random.default_rng([seed, 7]).choice(len(split), n, replace=False))
    return split.subset(idx)


def run(opts: PretrainOptions) -> dict:
    if opts.variant not in VARIANT_PREFIX:
        raise SipError(f"--variant must be one of {sorted(VARIANT_PREFIX)}, not {opts.variant!r}")
    if opts.batch_size < 1 or opts.grad_accum < 1 or opts.clock_sync_every < 1 or not opts.ddp_bucket_mb > 0:
        raise SipError("--batch-size, --grad-accum, --clock-sync-every and --ddp-bucket-mb must be positive")
    distributed.check_nccl_channels(opts.nccl_channels)
    if opts.state_loss < 0 or opts.curriculum_steps < 0:
        raise SipError("--state-loss and --curriculum-steps must be >= 0")
    if not (opts.lr >= 0 and opts.te_lr >= 0):  # also NaN
        raise SipError(f"--lr and --te-lr must be >= 0, got {opts.lr} and {opts.te_lr}")
    parse_window(opts.profile_steps)  # a malformed window stops here, not after the set-up
    if opts.cooldown_minutes and (opts.schedule != "wsd" or not opts.max_minutes or opts.cooldown_steps
                                  or opts.cooldown_minutes >= opts.max_minutes):
        raise SipError("--cooldown-minutes needs --schedule wsd, --max-minutes larger than it, and no --cooldown-steps")
    if opts.state_loss > 0 and opts.variant not in ("sip", "naive"):
        raise SipError(f"--state-loss supports the sip and naive variants, not {opts.variant!r}")
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    dist, device_arg = distributed.setup(opts.device, opts.nccl_channels)  # torchrun: this rank's group and device
    try:
        return _train(opts, out, dist, device_arg)
    except BaseException:
        dist.abandon()  # an error on one rank: leave without waiting for the others
        raise


def _train(opts: PretrainOptions, out: Path, dist: distributed.Dist, device_arg: str) -> dict:
    """``run``'s training loop, evaluation and outputs, in this rank's process group (if any)."""
    device = runtime.pick_device(device_arg)
    runtime.configure_threads(device, opts.threads)
    autocast = runtime.set_precision(opts.precision, device)
    prefix_mode = VARIANT_PREFIX[opts.variant]
    timer = Timer(opts.max_minutes)

    resume_from = ckpt.latest_checkpoint(out)
    payload = None
    if resume_from is not None:
        payload, saved_config = ckpt.load_checkpoint(resume_from)
        if payload["options"]["variant"] != opts.variant:
            raise SipError(f"{out} holds a {payload['options']['variant']} run; refusing to resume it as {opts.variant}")
        changed = _changed_settings(payload["options"], opts)
        if opts.variant == "te" and "parts" not in payload["optimizer"]:  # before the table's SparseAdam
            changed = changed or "task table optimiser: AdamW -> SparseAdam"
        if changed:  # a rerun with new settings (e.g. Snakemake after a params change) must not continue the old run
            resume_from, payload = _start_over(dist, out, opts.variant, f"settings changed since the checkpoint in "
                                                                        f"{out} ({changed})")

    runtime.seed_everything(opts.seed)
    pool = load_pool(opts.data, with_fsts=prefix_mode == "fst", num_states=opts.num_states, te=prefix_mode == "te",
                     max_fsts=opts.max_fsts)
    te_tasks = len(pool.train_fst_ids) + 1 if pool.train_fst_ids is not None else 1
    if opts.state_loss > 0 and pool.splits["train"].states is None:
        raise SipError(f"--state-loss needs per-example FST states, but {opts.data}/examples.parquet has no "
                       f"'states' column (build the pool with `sip data d4|d4plus|d4long --with-states`)")
    if payload is not None and (moved := _schedule_moved(payload, opts, len(pool.splits["train"]))):
        # e.g. more epochs under a cosine decay: the steps already taken had another LR, so continuing them
        # would not give the run these settings describe
        resume_from, payload = _start_over(dist, out, opts.variant,
                                           f"the LR schedule of the steps in {out} changed ({moved})")
    if payload is not None:
        model = ckpt.model_from_checkpoint(payload, saved_config)
    else:
        shape = t5_kwargs(d_model=opts.d_model, d_ff=opts.d_ff, num_layers=opts.layers,
                          num_decoder_layers=opts.decoder_layers, num_heads=opts.heads, d_kv=opts.d_kv,
                          dropout_rate=opts.dropout, relative_attention_num_buckets=opts.rel_buckets,
                          relative_attention_max_distance=opts.rel_max_distance)
        model = build_model(opts.init, prefix_mode, opts.variant, shape, num_states=opts.num_states,
                            te_num_tasks=te_tasks, symbol_source=opts.symbol_source)
    if prefix_mode == "fst" and pool.fsts is not None and len(pool.fsts.transitions):
        top = int(pool.fsts.transitions[:, [0, 3]].max())
        if top >= model.config.num_states:
            raise SipError(f"the pool has state id {top}; the model embeds {model.config.num_states} states")
    if opts.state_loss > 0:
        model.enable_state_head()  # after the body's init, so that the rest of the model is unchanged
        top = int(pool.splits["train"].states.max(initial=0))
        if top >= model.config.num_states:
            raise SipError(f"the pool has state id {top}; the state head predicts {model.config.num_states} states")
    if prefix_mode == "te" and model.config.te_num_tasks < te_tasks:
        raise SipError(f"the TE table has {model.config.te_num_tasks} rows but the pool needs {te_tasks}")
    model.to(device=device, dtype=torch.float32).train()  # fp32 master weights, also from a bf16 checkpoint
    distributed.seed_rank(dist, opts.seed)

    train = DeviceSplit(pool.splits["train"], device, pool.fsts, prefix_mode == "fst", state_labels=opts.state_loss > 0)
    curriculum = None
    if opts.curriculum_steps > 0:
        curriculum = LengthCurriculum(pool.splits["train"].input_char_lengths, opts.curriculum_steps,
                                      opts.curriculum_start, opts.batch_size, opts.seed)
    evals = {name: DeviceSplit(_eval_subset(pool.splits[name], opts.eval_max, opts.seed), device, pool.fsts,
                               prefix_mode == "fst")
             for name in opts.eval_splits if name in pool.splits and not (prefix_mode == "te" and name != "easy_dev")}

    optimizer = make_optimizer(model, opts, device)
    options = asdict(opts)
    steps_per_epoch, total_steps = _steps_per_epoch(options, len(train)), _total_steps(options, len(train))
    scheduler = build_scheduler(optimizer, opts.schedule, opts.warmup, total_steps, opts.cooldown_steps,
                                decay_later=bool(opts.cooldown_minutes))

    state = {"step": 0, "epoch": 0, "batch_index": 0, "examples": 0, "tokens": 0, "train_seconds": 0.0}
    history = {"curve": [], "evals": []}
    if payload is not None:
        optimizer.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        state = payload["state"]
        history = payload["history"]
        runtime.set_rng_state(payload["rng"][dist.rank] if isinstance(payload["rng"], list) else payload["rng"])
        if dist.is_main:
            print(f"pretrain {opts.variant}: resuming from step {state['step']} ({resume_from})", flush=True)
        if state.get("cooldown"):  # a time-budgeted decay that had begun: continue it, same steps
            wsd_decay(scheduler).update(state["cooldown"])
            total_steps = state["cooldown"]["start"] + state["cooldown"]["steps"]

    ddp = dist.wrap(model, device, opts.ddp_grads, opts.ddp_bucket_mb)
    forward = torch.compile(ddp, dynamic=True) if opts.compile else ddp
    config_json = model.config.to_json_string()

    def evaluate_now():
        row = {"step": state["step"]}
        if not dist.is_main:  # rank 0 evaluates; the others wait for it in the next all-reduce
            return row
        for name, data in evals.items():
            scores = exact_match(model, data, opts.eval_batch_size, autocast, by_length=name == "dev")
            row.update({f"{name}_{key}": value for key, value in scores.items()})
        history["evals"].append(row)
        return row

    def save_state():
        rng = dist.gather(runtime.rng_state()) if dist.enabled else runtime.rng_state()  # every rank's stream
        if dist.is_main:
            payload_now = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                           "scheduler": scheduler.state_dict(), "rng": rng, "state": dict(state),
                           "history": history, "options": asdict(opts)}
            ckpt.save_checkpoint(out, state["step"], payload_now, config_json)
        # no rank runs ahead of a checkpoint still being written: if one dies next (preemption, a kill),
        # torchrun stops the others, and rank 0 must not be stopped mid-write with the step lost
        dist.barrier()

    def write_metrics(status: str):
        metrics = {"variant": opts.variant, "status": status, "options": asdict(opts),
                   "n_params": runtime.count_parameters(model),
                   "device": runtime.device_name(device) + (f" x {dist.world} (DDP)" if dist.enabled else ""),
                   "commit": runtime.git_commit(), "steps": state["step"], "total_steps": total_steps,
                   "epochs_done": state["step"] / steps_per_epoch, "train_seconds": state["train_seconds"],
                   "examples_per_second": state["examples"] / max(1e-9, state["train_seconds"]),
                   "curve": history["curve"], "evals": history["evals"],
                   "final": history["evals"][-1] if history["evals"] else {}}
        if not dist.is_main:
            return metrics
        write_json(metrics, out / "pretrain_metrics.json")
        cols = ["step", "epoch", "loss", "lr", "examples_per_second", "tokens_per_second"]
        if opts.state_loss > 0:
            cols += ["state_loss", "state_acc"]
        lines = [",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in history["curve"]]
        write_text("\n".join(lines) + "\n", out / "pretrain_log.csv")
        return metrics

    bar = None
    if opts.progress and dist.is_main:
        from tqdm.auto import tqdm
        bar = tqdm(total=total_steps, initial=state["step"], desc=f"pretrain {opts.variant}", unit="step", mininterval=2.0)
    loss_sum = torch.zeros((), device=device)
    state_sums = torch.zeros(3, device=device)  # state loss, correct, labelled positions (no per-step sync)
    loss_count = 0
    window_start, window_examples, window_tokens = time.monotonic(), 0, 0
    last_ckpt = time.monotonic()
    status = "finished"
    micro = 0

    def batch_stream():
        """(indices, indices on device, epoch position) of each micro-batch. The curriculum's steps come
        first and leave epoch/batch_index alone; then the epoch plans, resumable from state["batch_index"]."""
        j = 0
        while curriculum is not None and state["step"] < min(opts.curriculum_steps, total_steps):
            yield curriculum.batch(state["step"], j % opts.grad_accum), None, 0.0
            j += 1
        while True:
            plan = bucketed_batches(train.encoder_lengths, train.label_lengths, opts.batch_size, opts.seed,
                                    state["epoch"], opts.bucket_chunk)
            plan_device = plan_on_device(plan, device)
            while state["batch_index"] < len(plan):
                b = state["batch_index"]
                state["batch_index"] += 1
                yield plan[b], plan_device[b], state["epoch"] + state["batch_index"] / len(plan)
            state["epoch"] += 1
            state["batch_index"] = 0

    stream = batch_stream()
    loop_start_step = state["step"]
    profiler = StepProfiler(parse_window(opts.profile_steps), out, dist.rank)
    while state["step"] < total_steps:
        idx, idx_t, epoch_pos = next(stream)
        local, local_t, weight = idx, idx_t, 1.0
        if dist.enabled:  # this rank's share of the global batch, loss weighted by its share of label tokens
            local, weight = dist.shard(idx, train.label_lengths)
            local_t = None if idx_t is None else idx_t[dist.part(len(idx))]
        batch = train.batch(local, idx_t=local_t)
        state_labels = batch.pop("state_labels", None)
        micro += 1
        ends_step = micro % opts.grad_accum == 0
        # gradients are all-reduced once per optimiser step, on the micro-batch that ends the accumulation
        with dist.no_sync(ddp, sync=ends_step):
            with autocast():
                outputs = forward(**batch)
                loss = outputs.loss
                if state_labels is not None:
                    s_loss, s_correct, s_count = state_loss(model, outputs.encoder_last_hidden_state, state_labels)
                    state_sums += torch.stack([s_loss.detach(), s_correct, s_count])
                    total_loss = loss + opts.state_loss * s_loss
                else:
                    total_loss = loss
            (total_loss * weight / opts.grad_accum if dist.enabled else total_loss / opts.grad_accum).backward()
        n_tok = int(train.encoder_lengths[idx].sum() + train.label_lengths[idx].sum())
        state["examples"] += len(idx)
        state["tokens"] += n_tok
        window_examples += len(idx)
        window_tokens += n_tok
        loss_sum += loss.detach() * weight if dist.enabled else loss.detach()
        loss_count += 1
        if not ends_step:
            continue
        dist.mean_sparse_grads_(model)  # the TE table's gradient, which DDP leaves alone
        if opts.clip > 0:
            clip_grad_norm_(model.parameters(), opts.clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        profiler.at(state["step"])
        if bar is not None:
            bar.update(1)
        if state["step"] % opts.log_every == 0 or state["step"] == total_steps:
            now = time.monotonic()
            seconds = now - window_start
            state["train_seconds"] += seconds
            if dist.enabled:  # the global batch's token-mean loss, as one process logs it
                dist.sum_(loss_sum).div_(dist.world)
                dist.sum_(state_sums)[0].div_(dist.world)
            mean_loss = float(loss_sum) / max(1, loss_count)
            row = {"step": state["step"], "epoch": round(epoch_pos, 4),
                   "loss": round(mean_loss, 5), "lr": scheduler.get_last_lr()[0],
                   "examples_per_second": round(window_examples / max(seconds, 1e-9), 2),
                   "tokens_per_second": round(window_tokens / max(seconds, 1e-9), 1)}
            if opts.state_loss > 0:
                s_loss_sum, s_correct, s_count = state_sums.tolist()
                row["state_loss"] = round(s_loss_sum / max(1, loss_count), 5)
                row["state_acc"] = round(100.0 * s_correct / max(1.0, s_count), 2)
                state_sums.zero_()
            if curriculum is not None and state["step"] <= opts.curriculum_steps:
                row["max_input_chars"] = round(curriculum.limit(state["step"] - 1), 2)
            history["curve"].append(row)
            if not math.isfinite(mean_loss):
                status = "diverged"
            if bar is not None:
                bar.set_postfix(loss=f"{mean_loss:.4f}", ex_s=f"{window_examples / max(seconds, 1e-9):.0f}",
                                **({"state_acc": f"{row['state_acc']:.1f}"} if "state_acc" in row else {}))
            loss_sum.zero_()
            loss_count = 0
            window_start, window_examples, window_tokens = time.monotonic(), 0, 0
        if status == "diverged":
            break
        if opts.eval_every and state["step"] % opts.eval_every == 0 and state["step"] < total_steps:
            t0 = time.monotonic()
            row = evaluate_now()
            if bar is not None:
                bar.write(f"step {state['step']}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items() if k != "step"))
            window_start += time.monotonic() - t0  # evaluation time is not training time
        clock_due = bool(opts.checkpoint_minutes and time.monotonic() - last_ckpt >= opts.checkpoint_minutes * 60)
        cooling = bool(opts.cooldown_minutes and not state.get("cooldown") and
                       timer.elapsed >= timer.limit - 60.0 * opts.cooldown_minutes)
        expired = timer.expired()
        if dist.enabled:
            # wall clocks differ between ranks, so their decisions are taken together, in one all-reduce every
            # clock_sync_every steps: each one is a barrier of the host loops, which keep the GPUs fed
            if state["step"] % opts.clock_sync_every == 0:
                clock_due, cooling, expired = dist.agree(clock_due, cooling, expired)
            else:
                clock_due = cooling = expired = False
        due = bool(opts.checkpoint_every and state["step"] % opts.checkpoint_every == 0) or clock_due
        if cooling:
            # Fix the decay in steps from the rate so far (evaluation time included: errs on ending early).
            rate = (state["step"] - loop_start_step) / max(timer.elapsed, 1e-9)
            steps = max(1, int(rate * (timer.limit - timer.elapsed)))
            steps = dist.gather(steps)[0]  # rank 0's
            state["cooldown"] = {"start": state["step"], "steps": steps}
            wsd_decay(scheduler).update(state["cooldown"])
            total_steps = min(total_steps, state["step"] + steps)
        if expired:
            status = "time_limit"
            break
        if due:
            save_state()
            write_metrics("running")
            last_ckpt = time.monotonic()
            _maybe_die_for_test(state["step"])
    if bar is not None:
        bar.close()
    if loss_count:  # a partial logging window (time limit) still counts as training time
        state["train_seconds"] += time.monotonic() - window_start
    # Save before the final evaluation: a run stopped by its time limit must be resumable even if whoever
    # set that limit kills it during the evaluation.
    save_state()
    if status != "diverged":
        evaluate_now()
    if not dist.is_main:  # rank 0 writes the outputs
        dist.finish(exit_status(status))
        return {"status": status}
    save_model(without_task_table(model) if prefix_mode == "te" else model, out,
               dtype=torch.bfloat16 if opts.save_dtype == "bf16" else None)
    if prefix_mode == "fst":
        save_prefix_init(out, _prefix_sample(pool, opts.prefix_sample, opts.seed))
    metrics = write_metrics(status)
    final = metrics["final"]
    summary = ", ".join(f"{k} {v:.1f}%" for k, v in final.items() if k != "step")
    print(f"pretrain {opts.variant}: {status} at step {state['step']}/{total_steps}, "
          f"{metrics['examples_per_second']:.0f} ex/s" + (f", exact match {summary}" if summary else "")
          + f" → {out}")
    dist.finish(exit_status(status))  # under torchrun the process ends here, with the command's status
    return metrics


def exit_status(status: str) -> int:
    """The command's exit status for a run that ended with ``status``: a time limit is a normal end."""
    return 0 if status in ("finished", "time_limit") else 1


def make_optimizer(model, opts: PretrainOptions, device: torch.device) -> torch.optim.Optimizer:
    """AdamW; TE: the task table has its own LR (1.0 in the original), sparse gradients and SparseAdam.

    A batch touches at most batch-size rows of the table (90M parameters at the cpu scale), and dense Adam
    would update every row every step: 0.66 s of a 1.1 s step there, against 0.008 s (docs/DEVIATIONS.md).
    """
    table = []
    if getattr(model, "task_embedding", None) is not None:
        model.task_embedding.embedding.sparse = True  # not saved: a loaded model's table is dense again
        table = list(model.task_embedding.embedding.parameters())
    table_ids = {id(p) for p in table}
    body = [p for p in model.parameters() if id(p) not in table_ids]
    return build_optimizer([{"name": "body", "params": body, "lr": opts.lr},
                            {"name": "task_table", "params": table, "lr": opts.te_lr, "sparse": True}],
                           device, weight_decay=opts.weight_decay, betas=(0.9, opts.adam_beta2))


# Options that define what a run trains; a checkpoint is resumed only if they are unchanged. The rest may
# differ on resume: budgets and schedule length (--max-minutes, --max-steps, --schedule wsd/--cooldown-*:
# the way a constant-LR run is continued into its decay), evaluation, logging, checkpointing and devices.
RUN_IDENTITY = ("data", "init", "d_model", "d_ff", "layers", "decoder_layers", "heads", "d_kv", "dropout",
                "num_states", "lr", "te_lr", "weight_decay", "adam_beta2", "rel_buckets", "rel_max_distance",
                "symbol_source", "batch_size", "grad_accum", "max_fsts", "warmup", "clip", "precision", "seed", "state_loss",
                "curriculum_steps", "curriculum_start")


def _start_over(dist, out: Path, variant: str, why: str) -> tuple[None, None]:
    """Discard ``out``'s checkpoints (rank 0, the others wait): a fresh run, no (resume_from, payload)."""
    if dist.is_main:
        print(f"pretrain {variant}: {why}; starting over", flush=True)
        ckpt.discard_checkpoints(out)
    dist.barrier()
    return None, None


def _steps_per_epoch(options: dict, n_train: int) -> int:
    return max(1, math.ceil(n_train / options["batch_size"]) // options["grad_accum"])


def _total_steps(options: dict, n_train: int) -> int:
    """Optimiser steps of a run with these options (``asdict(PretrainOptions)``) over ``n_train`` examples."""
    return options["max_steps"] or max(1, int(round(options["epochs"] * _steps_per_epoch(options, n_train))))


def _schedule_moved(payload: dict, opts: PretrainOptions, n_train: int) -> str:
    """'' if the LR factors of the checkpoint's steps are the same under ``opts`` as under the options it was
    trained with, else what changed. Budgets and schedule length may change on resume (a constant or wsd run
    continued for longer) but not the LR of a step already taken (epochs under a cosine decay)."""
    if payload["state"].get("cooldown"):  # a time-budgeted decay that had begun continues as it was
        return ""
    saved, now = payload["options"], asdict(opts)
    plans = [lr_factor(o["schedule"], o["warmup"], _total_steps(o, n_train), o["cooldown_steps"],
                       decay_later=bool(o.get("cooldown_minutes"))) for o in (saved, now)]
    steps = payload["state"]["step"]
    if all(math.isclose(plans[0](s), plans[1](s), rel_tol=1e-9) for s in range(steps)):
        return ""
    keys = ("schedule", "warmup", "epochs", "max_steps", "cooldown_steps")
    return ", ".join(f"{k}: {saved.get(k)!r} -> {now[k]!r}" for k in keys if saved.get(k) != now[k])


def _changed_settings(saved: dict, opts: PretrainOptions) -> str:
    """'key: old -> new, ...' for the identity options that differ ('' if none)."""
    now = asdict(opts)
    return ", ".join(f"{k}: {saved.get(k)!r} -> {now[k]!r}" for k in RUN_IDENTITY if saved.get(k) != now[k])


def state_loss(model, hidden: torch.Tensor, labels: torch.Tensor):
    """Cross-entropy of the state head over labelled positions; also (correct, count) for the accuracy."""
    logits = model.state_logits(hidden).float()
    mask = labels != -100
    count = mask.sum().float()
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100,
                                             reduction="sum") / count.clamp(min=1)
    correct = ((logits.argmax(-1) == labels) & mask).sum().float()
    return loss, correct, count


def _maybe_die_for_test(step: int) -> None:
    """Resume tests: $SIP_TEST_KILL_AFTER_STEP makes the process die abruptly (like SIGKILL) after the
    checkpoint of that step, with no cleanup and no final save."""
    import os
    target = os.environ.get("SIP_TEST_KILL_AFTER_STEP")
    if target and step >= int(target):
        os._exit(137)


def _prefix_sample(pool, n: int, seed: int) -> torch.Tensor:
    """FSTs of ``n`` random training lines (as the original's 400-line pretraining_sample), padded."""
    train = pool.splits["train"]
    rng = np.random.default_rng([seed, 11])
    lines = rng.choice(len(train), size=min(n, len(train)), replace=False)
    rows = train.fst_rows[lines]
    width = int(pool.fsts.n_transitions[rows].max())
    return torch.from_numpy(pool.fsts.padded(rows, width))
