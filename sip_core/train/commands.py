"""``sip pretrain | finetune | evaluate | predict``; torch is imported inside the handlers only."""
from __future__ import annotations

import argparse
import os


def _add_shape(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model shape (scratch init)")
    g.add_argument("--d-model", type=int, default=256)
    g.add_argument("--d-ff", type=int, default=1024)
    g.add_argument("--layers", type=int, default=4, help="encoder layers")
    g.add_argument("--decoder-layers", type=int, default=None, help="default: same as --layers")
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--d-kv", type=int, default=64)
    g.add_argument("--dropout", type=float, default=0.1)
    g.add_argument("--num-states", type=int, default=16, help="state-embedding rows of the FST encoder")
    g.add_argument("--rel-buckets", type=int, default=32,
                   help="T5 relative-position buckets (32 as ByT5: exact offsets only up to 8 each way)")
    g.add_argument("--rel-max-distance", type=int, default=128)
    g.add_argument("--symbol-source", choices=["table", "bytes"], default="table",
                   help="FST symbol embeddings: their own table (the paper) or tied to the byte embeddings")


# Fine-tuning repeats bitwise by default: a tuned prefix otherwise turns GPU atomics into points (sweep 20)
FINETUNE_DETERMINISM = "strict"


def _add_runtime(p: argparse.ArgumentParser, precision_default: str, determinism_default: str | None = None) -> None:
    g = p.add_argument_group("runtime")
    g.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default=precision_default)
    if determinism_default:
        g.add_argument("--determinism", choices=["off", "math", "strict"], default=None,
                       help=f"GPU kernels: strict = bitwise repeatable, ~7%% slower; math = deterministic where "
                            f"possible, plain attention; off = fastest (default $SIP_DETERMINISTIC, else "
                            f"{determinism_default})")
    g.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--threads", type=int, default=None,
                   help="CPU threads (default $SIP_THREADS, else 1 on a CPU and one per core on a GPU)")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")


def register(commands, data_commands) -> None:
    p = commands.add_parser("pretrain", help="pre-train a SIP / TE / Naive / Set model")
    p.add_argument("--variant", required=True, choices=["sip", "te", "naive", "set"])
    p.add_argument("--data", required=True, help="pool directory with examples.parquet (+ fsts.parquet)")
    p.add_argument("--out", required=True, help="checkpoint directory (resumes automatically if it holds one)")
    p.add_argument("--init", default="scratch", help="scratch | a SIP checkpoint | a T5/ByT5 from_pretrained path")
    _add_shape(p)
    g = p.add_argument_group("optimisation")
    g.add_argument("--lr", type=float, default=5e-4)
    g.add_argument("--te-lr", type=float, default=1.0, help="LR of the TE task-embedding table")
    g.add_argument("--weight-decay", type=float, default=0.0)
    g.add_argument("--adam-beta2", type=float, default=0.999, help="second-moment decay (0.98-0.95: steadier from scratch)")
    g.add_argument("--batch-size", type=int, default=30)
    g.add_argument("--grad-accum", type=int, default=1)
    g.add_argument("--epochs", type=float, default=1.0)
    g.add_argument("--max-steps", type=int, default=None, help="optimiser steps (overrides --epochs)")
    g.add_argument("--max-fsts", type=int, default=None, metavar="N",
                   help="train on the examples of the pool's first N training FSTs only (TE: its task table has "
                        "a row per FST, so this bounds it; default: all)")
    g.add_argument("--warmup", type=int, default=0, help="warmup steps")
    g.add_argument("--schedule", choices=["constant", "linear", "cosine", "wsd"], default="constant")
    g.add_argument("--cooldown-steps", type=int, default=0, metavar="N",
                   help="wsd schedule: cosine decay to 0 over the last N steps")
    g.add_argument("--cooldown-minutes", type=float, default=0.0, metavar="M",
                   help="wsd schedule: decay over the last M minutes of --max-minutes (steps fixed from the rate)")
    g.add_argument("--clip", type=float, default=0.0, help="global grad-norm clip (0: none, as the original)")
    g.add_argument("--compile", action="store_true", help="torch.compile the training forward")
    g = p.add_argument_group("training levers (off by default)")
    g.add_argument("--state-loss", type=float, default=0.0, metavar="W",
                   help="add W x cross-entropy of a linear head predicting, at the last byte of each input "
                        "character, the FST state after it (needs a pool built with --with-states)")
    g.add_argument("--curriculum-steps", type=int, default=0, metavar="N",
                   help="length curriculum: in the first N steps only inputs of <= L(step) characters, L rising "
                        "linearly from --curriculum-start to the longest input")
    g.add_argument("--curriculum-start", type=int, default=5, help="input length (characters) allowed at step 0")
    g = p.add_argument_group("evaluation, limits, checkpoints")
    g.add_argument("--eval-every", type=int, default=0, help="greedy exact match every N steps (0: only at the end)")
    g.add_argument("--eval-max", type=int, default=1000, help="examples per evaluation split (0: all)")
    g.add_argument("--eval-batch-size", type=int, default=128)
    g.add_argument("--max-minutes", type=float, default=None, help="stop (resumably) after this much wall time")
    g.add_argument("--checkpoint-every", type=int, default=int(os.environ.get("SIP_CHECKPOINT_EVERY") or 0),
                   help="steps between checkpoints (0: by time only; default $SIP_CHECKPOINT_EVERY, e.g. for "
                        "preemptible nodes or Snakemake runs, whose rules do not pass it)")
    g.add_argument("--checkpoint-minutes", type=float, default=15.0)
    g.add_argument("--clock-sync-every", type=int, default=8, metavar="N",
                   help="with several GPUs, agree on time limits and time-based checkpoints every N steps")
    g.add_argument("--profile-steps", default=None, metavar="A:B",
                   help="write a torch.profiler summary of optimiser steps A..B per rank (profile-rank<R>.txt)")
    g.add_argument("--log-every", type=int, default=50)
    g.add_argument("--save-dtype", choices=["fp32", "bf16"], default="fp32",
                   help="dtype of the saved weights (training keeps fp32 master weights either way; bf16 halves "
                        "the file, e.g. so that a GPU host's model travels back)")
    _add_runtime(p, "tf32")
    _add_nproc(p)
    p.set_defaults(func=_pretrain)

    p = commands.add_parser("finetune", help="fine-tune a model on tasks (Parquet) or a TSV train/test pair")
    p.add_argument("--model", default=None,
                   help="SIP checkpoint, a T5/ByT5 path, or 'scratch' (default: the released models/sip-d4)")
    src = p.add_argument_group("data: --tasks FILE [--task-id ID|all], or --train X --test Y")
    src.add_argument("--tasks", help="task examples.parquet (task_id, split train|test, input, output)")
    src.add_argument("--task-id", default="all")
    src.add_argument("--train", help="training pairs: TSV input<TAB>output or Parquet")
    src.add_argument("--test", help="test pairs: TSV or Parquet")
    p.add_argument("--out", required=True)
    p.add_argument("--prefix", choices=["mean", "induced", "search", "readout", "sampled", "none", "random", "soft", "auto"], default="auto",
                   help="mean: from the checkpoint's FST sample; induced: the encoding of the FST OSTIA learns "
                        "from the training pairs, else mean (an extension, DEVIATIONS.md); search: the encoding of the FST a local search "
                        "finds with the frozen body as its only judge (an extension, sip_core/train/prefix_search.py); "
                        "readout: a mean-init run of --readout-epochs, then the encoding of the FST that run's own states "
                        "on the training strings imply, else mean (an extension, sip_core/train/readout.py); "
                        "sampled: the encoding of one "
                        "random FST over the task's symbols (a research lever: worse than mean on Table 1's iteration tasks, "
                        "docs/EXPERIMENTS.md session 51); none: no prefix; "
                        "random: N(0,1) (TE); "
                        "soft: soft transitions read through the FST encoder, from the sample's label frequencies; "
                        "auto: mean for SIP checkpoints with a prefix sample, else none")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-4, help="body LR")
    p.add_argument("--prefix-lr", type=float, default=1.0)
    p.add_argument("--induced-prefix-lr", type=float, default=None, metavar="LR",
                   help="prefix LR where --prefix induced found an FST (default: --prefix-lr); a run that falls "
                        "back to the mean init trains its prefix at --prefix-lr")
    p.add_argument("--schedule", choices=["constant", "linear", "cosine"], default="constant",
                   help="LR decay over the run for both groups (the original: constant)")
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--prefix-length", type=int, default=50)
    p.add_argument("--eval-last", type=int, default=0, help="evaluate only in the last K epochs (0: every epoch)")
    p.add_argument("--report-last", type=int, default=10, help="reported = mean of the last N evaluations")
    p.add_argument("--eval-every", type=int, default=0, metavar="N",
                   help="with --eval-last: also evaluate every N epochs before them, a curve of the whole run "
                        "(0: off; the reported mean still takes the last --report-last evaluations)")
    p.add_argument("--save-model", action="store_true", help="also save the model with --tasks (always with --train)")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="EPOCHS",
                   help="resumable checkpoint every N epochs (0: by time only)")
    p.add_argument("--checkpoint-minutes", type=float, default=10.0, help="resumable checkpoint after this much time")
    p.add_argument("--freeze-body", action="store_true",
                   help="prefix-only fine-tuning: train the prefix, keep every other parameter fixed")
    p.add_argument("--save-prefix", action="store_true", help="also write the tuned prefix to <run>/prefix.safetensors")
    p.add_argument("--profile-steps", default=None, metavar="A:B",
                   help="write a torch.profiler summary of optimiser steps A..B to <run>/profile-rank0.txt "
                        "(wall vs GPU-busy time per step, the top operators)")
    p.add_argument("--prefix-init-fsts", type=int, default=32, metavar="K",
                   help="pre-training FSTs averaged into the mean/soft prefix init (paper: 32; 1: one real FST's encoding)")
    p.add_argument("--prefix-init-seed", type=int, default=None, metavar="S",
                   help="seed of the prefix init's FST draw alone (default: --seed, which also orders the data)")
    p.add_argument("--prefix-only-epochs", type=int, default=0, metavar="N",
                   help="train the prefix alone (body LR 0) for the first N epochs, then prefix and body")
    p.add_argument("--prefix-sampled-states", type=int, default=4, metavar="N",
                   help="--prefix sampled: states of the drawn FST before minimisation (Table 1's tasks: 4)")
    p.add_argument("--prefix-search-states", type=int, default=4, metavar="N", help="--prefix search: states of its machines")
    p.add_argument("--prefix-search-steps", type=int, default=2000, metavar="N", help="--prefix search: most steps")
    p.add_argument("--prefix-search-candidates", type=int, default=64, metavar="B",
                   help="--prefix search: machines scored a step (the current one and B-1 single edits)")
    p.add_argument("--prefix-search-batch", type=int, default=32, metavar="M",
                   help="--prefix search: training pairs each candidate is scored on a step")
    p.add_argument("--prefix-search-subset", type=int, default=1000, metavar="N",
                   help="--prefix search: training pairs the minibatches are drawn from")
    p.add_argument("--prefix-search-minutes", type=float, default=0.0, metavar="MIN",
                   help="--prefix search: stop after this long (0: no limit)")
    p.add_argument("--readout-epochs", type=int, default=10, metavar="E",
                   help="--prefix readout: epochs of the mean-init run whose states are read")
    p.add_argument("--readout-min-acc", type=float, default=1.0, metavar="F",
                   help="--prefix readout: the read FST is the start only if it maps at least this share of the "
                        "training pairs right (by running it); otherwise the mean init")
    p.add_argument("--readout-tries", type=int, default=1, metavar="K",
                   help="--prefix readout: where the read FST maps fewer than --readout-min-acc of the training "
                        "pairs, run the first pass again at the next seed, up to K passes; the best reading is kept")
    p.add_argument("--readout-repair", action="store_true",
                   help="--prefix readout: where the read FST misses training pairs, first correct the few head "
                        "transitions whose change makes the most pairs come out right (sip_core/train/readout.py)")
    p.add_argument("--prefix-codebook-states", type=int, default=0, metavar="N",
                   help="codebook of every single-transition encoding over N states and the task's symbols "
                        "(needs a SIP checkpoint's FST encoder); used by the two options below")
    p.add_argument("--prefix-straight-through", action="store_true",
                   help="the body reads each prefix slot as its nearest codebook entry (gradient straight through)")
    p.add_argument("--prefix-pull", type=float, default=0.0, metavar="W",
                   help="loss weight pulling each prefix slot towards its nearest codebook entry")
    p.add_argument("--prefix-max-norm", default=None, metavar="R|fst",
                   help="after every step, scale each tuned prefix slot whose L2 norm exceeds R back to R; 'fst': R is "
                        "the mean slot norm of the checkpoint's own encodings of its pre-training FST sample (~57 for "
                        "models/sip-d4). Ours, not the paper's: +6.9 points on the gpu iteration tasks (sweep 30, "
                        "docs/EXPERIMENTS.md); default: no cap")
    p.add_argument("--holdout-longest", type=float, default=0.0, metavar="F",
                   help="hold out the fraction F of training pairs with the longest inputs (not trained on) and report "
                        "accuracy on them in metrics.json `holdout`: a length dev set for choosing among seeds (0: off)")
    p.add_argument("--restarts", type=int, default=1, metavar="K",
                   help="K short runs (seeds seed..seed+K-1) on the training pairs without the longest ones; the "
                        "best on those longest pairs is where the real run starts, on all pairs (1: off)")
    p.add_argument("--restart-epochs", type=int, default=10, metavar="E", help="epochs of each restart")
    p.add_argument("--restart-holdout", type=float, default=0.05, metavar="F",
                   help="fraction of training pairs, the longest inputs, that the restarts are chosen by")
    p.add_argument("--continue-lr-scale", type=float, default=0.1, metavar="S",
                   help="with --restarts: both LRs of the real run times S (its start is trained already)")
    p.add_argument("--length-weighting", type=float, default=0.0, metavar="A",
                   help="draw training examples in proportion to input length^A, with replacement (research lever; 0: "
                        "the original's uniform permutation)")
    p.add_argument("--prefix-dropout", type=float, default=0.0, metavar="P",
                   help="in training, mask each tuned prefix slot with probability P per example (research lever; 0: off)")
    p.add_argument("--prefix-noise", type=float, default=0.0, metavar="S",
                   help="in training, add Gaussian noise of std S to the tuned prefix per example (research lever; 0: off)")
    p.add_argument("--state-consistency", type=float, default=0.0, metavar="W",
                   help="weight of a loss that keeps the state head consistent along walks of the transition graph "
                        "the model's own states on the training strings imply (research lever; 0: off)")
    p.add_argument("--consistency-walk-length", type=int, default=30, metavar="N",
                   help="longest walk for --state-consistency (lengths uniform in 1..N)")
    p.add_argument("--state-entropy", type=float, default=0.0, metavar="W",
                   help="weight of the frozen state head's mean entropy at the training input bytes: asks the tuned "
                        "prefix and body for crisp states (research lever; 0: off)")
    p.add_argument("--rehearsal", type=float, default=0.0, metavar="W",
                   help="weight of the token loss on pre-training pairs read through their own FSTs' encodings, a batch "
                        "beside every task batch, so that the body stays a simulator (research lever; 0: off)")
    p.add_argument("--rehearsal-data", default=None, metavar="POOL",
                   help="--rehearsal's pre-training pool (examples.parquet + fsts.parquet, as `sip data d4` writes)")
    p.add_argument("--rehearsal-batch", type=int, default=0, metavar="B",
                   help="--rehearsal's batch size (0: --batch-size)")
    p.add_argument("--task-workers", type=int, default=None, metavar="N",
                   help="with several tasks: fine-tune N of them at once in N processes on the same device, each taking its share "
                        "in turn "
                        "(default $SIP_TASK_WORKERS or 1; a small model leaves most of a GPU idle)")
    p.add_argument("--worker-tasks", default=None, help=argparse.SUPPRESS)  # a --task-workers child's tasks
    p.add_argument("--run-id", default=None)
    p.add_argument("--model-name", default=None, help="model key recorded in metrics.json (e.g. sip-d4)")
    p.add_argument("--scale", default="unknown")
    p.add_argument("--params-hash", default="unknown")
    _add_shape(p)
    _add_runtime(p, "tf32", determinism_default=FINETUNE_DETERMINISM)
    _add_nproc(p)
    p.set_defaults(func=_finetune)

    p = commands.add_parser("evaluate", help="greedy evaluation of a fine-tuned run or checkpoint on tasks")
    p.add_argument("--model", required=True, help="a run directory saved with --save-model, or a checkpoint")
    p.add_argument("--tasks", required=True, help="Parquet task file or TSV")
    p.add_argument("--task-id", default="all")
    p.add_argument("--split", default="test")
    p.add_argument("--out", required=True)
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--scale", default="unknown")
    p.add_argument("--params-hash", default="unknown")
    _add_runtime(p, "tf32")
    p.set_defaults(func=_evaluate)

    p = commands.add_parser("vote", help="majority vote of several runs' predictions on the same test set")
    p.add_argument("runs", nargs="+", help="run directories (predictions.parquet); ties go to the first")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_vote)

    p = commands.add_parser("predict", help="greedy outputs for inputs read one per line from stdin")
    p.add_argument("--model", required=True, nargs="+",
                   help="a fine-tuned run; several: their majority vote per input (ties: the first named)")
    p.add_argument("--batch-size", type=int, default=64)
    _add_runtime(p, "tf32")
    p.set_defaults(func=_predict)


def _add_nproc(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nproc", default=None,
                   help="data-parallel processes: N, or auto (every visible GPU); starts torchrun itself "
                        "(default $SIP_NPROC or 1). --batch-size stays the global batch")
    p.add_argument("--ddp-grads", choices=("fp32", "bf16"), default="fp32",  # distributed.DDP_GRADS (no torch here)
                   help="with several processes, all-reduce the gradients in this dtype (bf16: half the bytes)")
    p.add_argument("--ddp-bucket-mb", type=float, default=25.0,
                   help="with several processes, DDP's gradient bucket size in MB (its bucket_cap_mb)")
    p.add_argument("--nccl-channels", type=int, default=2,  # distributed.NCCL_CHANNELS
                   help="with several GPUs, NCCL channels for the gradient all-reduce (0: NCCL's choice; "
                        "NCCL_MAX_NCHANNELS in the environment wins). Default 2: fewer SMs held while it waits")


def _relaunched(args) -> int | None:
    from sip_core.train.distributed import relaunch
    return relaunch(args.nproc)


def _pretrain(args) -> int:
    if (code := _relaunched(args)) is not None:
        return code
    from sip_core.train.pretrain import PretrainOptions, exit_status, run
    opts = PretrainOptions(
        variant=args.variant, data=args.data, out=args.out, init=args.init, d_model=args.d_model, d_ff=args.d_ff,
        layers=args.layers, decoder_layers=args.decoder_layers, heads=args.heads, d_kv=args.d_kv,
        dropout=args.dropout, num_states=args.num_states, lr=args.lr, te_lr=args.te_lr,
        weight_decay=args.weight_decay, adam_beta2=args.adam_beta2, symbol_source=args.symbol_source,
        rel_buckets=args.rel_buckets, rel_max_distance=args.rel_max_distance,
        batch_size=args.batch_size, grad_accum=args.grad_accum, epochs=args.epochs,
        max_steps=args.max_steps, max_fsts=args.max_fsts, warmup=args.warmup, schedule=args.schedule, cooldown_steps=args.cooldown_steps, cooldown_minutes=args.cooldown_minutes, clip=args.clip,
        precision=args.precision, compile=args.compile, seed=args.seed, eval_every=args.eval_every,
        eval_max=args.eval_max, eval_batch_size=args.eval_batch_size, max_minutes=args.max_minutes,
        checkpoint_every=args.checkpoint_every, checkpoint_minutes=args.checkpoint_minutes,
        clock_sync_every=args.clock_sync_every, profile_steps=args.profile_steps,
        log_every=args.log_every, device=args.device, threads=args.threads, progress=not args.no_progress,
        state_loss=args.state_loss, curriculum_steps=args.curriculum_steps, curriculum_start=args.curriculum_start,
        save_dtype=args.save_dtype, ddp_grads=args.ddp_grads, ddp_bucket_mb=args.ddp_bucket_mb,
        nccl_channels=args.nccl_channels)
    metrics = run(opts)
    return exit_status(metrics["status"])


def _finetune(args) -> int:
    if (code := _relaunched(args)) is not None:
        return code
    from sip_core.train.finetune import main
    return main(args)


def _evaluate(args) -> int:
    from sip_core.eval.evaluate import evaluate_main
    return evaluate_main(args)


def _vote(args) -> int:
    from sip_core.eval.vote import vote_main
    return vote_main(args)


def _predict(args) -> int:
    from sip_core.eval.evaluate import predict_main
    return predict_main(args)
