"""``sip finetune``: fine-tune a (SIP) model on one task, every task of a Parquet file, or a TSV pair.

Prefix: ``mean`` (position-wise mean of 32 FST encodings from the checkpoint's pre-training sample),
``random`` (N(0,1), the TE baseline), ``none``. Adam with a prefix group (LR 1.0) and a body group
(3e-4), global grad-norm clip 1.0; greedy test evaluation every epoch (or in the last K epochs);
reported = mean of the last 10 evaluations (REFERENCE §4.7). The base model is loaded once per process
and reset per task, so ``--task-id all`` runs many small fine-tunes without start-up cost.

Outputs are built in a staging directory and appear under ``--out`` only when complete (``rundir``); a killed
run resumes from its per-task epoch checkpoints. ``--train/--test`` runs save an ordinary Hugging Face
checkpoint with a model card. Under torchrun the epochs are data-parallel (``distributed``).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sip_core.errors import SipError
from sip_core.eval.decode import predict_split
from sip_core.eval.metrics import score
from sip_core.eval.outputs import reported, write_run
from sip_core.fst.machine import Machine
from sip_core.io import write_json, write_text
from sip_core.model.codebook import nearest as codebook_nearest
from sip_core.model.codebook import task_symbol_ids, transition_codebook
from sip_core.model.config import SIPConfig, t5_kwargs
from sip_core.model.loading import (build_model, is_sip_checkpoint, load_prefix_init, load_sip, mean_prefix,
                                    save_model, save_tuned_prefix, with_prefix_mode)
from sip_core.model.sip_model import SIPForConditionalGeneration
from sip_core.train import checkpoint as ckpt
from sip_core.train import distributed, modelcard, restarts, runtime, taskpool
from sip_core.train.batching import DeviceSplit, random_batches
from sip_core.train.commands import FINETUNE_DETERMINISM
from sip_core.train import consistency as consist
from sip_core.train import readout, regularisers
from sip_core.train.optim import decay_factor
from sip_core.train.pretrain import state_loss
from sip_core.train.prefix_norm import FROM_FSTS, cap_slot_norms, encoding_slot_norm, parse_max_norm
from sip_core.train.profiling import StepProfiler, parse_window
from sip_core.train.induced_prefix import induced_prefix, machine_prefix, sampled_prefix
from sip_core.train.prefix_search import search_machine
from sip_core.train.data import (load_task_examples, make_split, read_pairs_any, split_longest, task_ids_in,
                                 task_pairs)
from sip_core.train.rundir import Staging, check_out, sha256

# The released SIP-d4 (issue 8): the default --model once it exists.
RELEASED_MODEL = Path(__file__).resolve().parents[2] / "models" / "sip-d4"
SMALL_MODEL = RELEASED_MODEL.parent / "sip-d4-small"  # 3.0M parameters, weights in git
# prefix kinds that start from the checkpoint's FST sample or its FST encoder (a fallback to the mean init included)
FROM_SAMPLE = ("mean", "soft", "induced", "search", "readout", "sampled")
# ... and those that start at one machine's encoding, one vector per transition
ONE_MACHINE = ("induced", "search", "readout", "sampled")
PROGRESS_FILE = "progress.json"  # evaluations so far, in the staging directory of an unfinished run
# settings that do not change the result (left out of the staging directory's fingerprint)
_NOT_SETTINGS = ("func", "command", "out", "no_progress", "threads", "device", "checkpoint_every",
                 "checkpoint_minutes", "save_model", "task_workers", "cli_argv", "worker_tasks", "profile_steps")


def finetune_param_groups(model: SIPForConditionalGeneration, lr: float, prefix_lr: float,
                          freeze_body: bool = False) -> list[dict]:
    """[{'name': 'prefix', lr: prefix_lr}, {'name': 'body', lr: lr}] (the prefix group may be empty).
    ``freeze_body`` (prefix-only fine-tuning, the paper's prefix analysis): the body group is empty and
    its parameters stop requiring gradients."""
    prefix = [model.prefix] if model.prefix is not None else []
    if model.soft_prefix is not None:  # soft transitions: their logits are the prefix
        prefix = list(model.soft_prefix.parameters())
    prefix_ids = {id(p) for p in prefix}
    body = [p for p in model.parameters() if id(p) not in prefix_ids]
    if freeze_body:
        if not prefix:
            raise SipError("--freeze-body needs a tunable prefix (--prefix mean|random|soft)")
        for p in body:
            p.requires_grad_(False)
        body = []
    return [{"name": "prefix", "params": prefix, "lr": prefix_lr}, {"name": "body", "params": body, "lr": lr}]


def load_base(model_arg: str, args) -> SIPForConditionalGeneration:
    if model_arg == "scratch":
        shape = t5_kwargs(d_model=args.d_model, d_ff=args.d_ff, num_layers=args.layers,
                          num_decoder_layers=args.decoder_layers, num_heads=args.heads, d_kv=args.d_kv,
                          dropout_rate=args.dropout, relative_attention_num_buckets=args.rel_buckets,
                          relative_attention_max_distance=args.rel_max_distance)
        return SIPForConditionalGeneration(SIPConfig(t5=shape, prefix_mode="none", variant="base"))
    if is_sip_checkpoint(model_arg):
        return load_sip(model_arg)
    path = Path(model_arg)
    if not path.exists() and (model_arg.startswith((".", "/", "~")) or model_arg.count("/") > 1):
        raise SipError(f"--model {model_arg} does not exist")
    if path.is_dir():
        check_t5_dir(path)
    if path.exists() or "/" in model_arg:
        shape = t5_kwargs()
        return build_model(model_arg, "none", "base", shape)
    raise SipError(f"--model {model_arg!r} is neither 'scratch', a SIP checkpoint nor a T5 path")


def check_t5_dir(path: Path) -> None:
    """A local --model that is not a SIP checkpoint must at least be a T5-family checkpoint."""
    import json
    cfg = path / "config.json"
    if not cfg.is_file():
        raise SipError(f"--model {path} is not a model checkpoint (no config.json)")
    try:
        model_type = json.loads(cfg.read_text(encoding="utf-8")).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise SipError(f"--model {path}: config.json is not valid JSON") from None
    if model_type not in ("t5", "mt5", "umt5"):
        raise SipError(f"--model {path} is not a SIP or T5/ByT5 checkpoint (config.json has model_type "
                       f"{model_type!r})")


def resolve_model(model_arg: str | None) -> str:
    """--model, defaulting to the released models/sip-d4 (an error naming it while it is absent)."""
    if model_arg is not None:
        return model_arg
    if not (RELEASED_MODEL / "config.json").exists():
        raise SipError(f"no --model given and the released SIP-d4 ({RELEASED_MODEL}) does not exist yet; "
                       "pass --model CHECKPOINT")
    if not (RELEASED_MODEL / "model.safetensors").exists():  # e.g. a sparse or LFS-less checkout
        raise SipError(f"no --model given and the released SIP-d4's weights ({RELEASED_MODEL / 'model.safetensors'}) "
                       f"are missing; restore them with `git checkout -- {RELEASED_MODEL}`, or pass --model "
                       f"CHECKPOINT (e.g. --model {SMALL_MODEL.relative_to(SMALL_MODEL.parents[1])})")
    return str(RELEASED_MODEL)


def resolve_prefix(requested: str, base: SIPForConditionalGeneration, model_arg: str) -> str:
    has_sample = base.fst_encoder is not None and is_sip_checkpoint(model_arg) and load_prefix_init(model_arg) is not None
    if requested == "auto":
        if base.config.prefix_mode in ("tuned", "soft"):
            return "keep"
        return "mean" if has_sample else "none"
    if requested in FROM_SAMPLE and not has_sample:
        raise SipError(f"--prefix {requested} needs a SIP pre-training checkpoint with prefix_init.safetensors; "
                       f"{model_arg} has none")
    return requested


class FineTuner:
    """Holds the base model once; ``run`` fine-tunes a fresh copy on one task."""

    def __init__(self, args, dist: distributed.Dist | None = None, device_arg: str | None = None):
        self.args = args
        self.dist = dist or distributed.Dist()
        self.device = runtime.pick_device(device_arg or args.device)
        runtime.configure_threads(self.device, args.threads)
        # repeatable by default: with a tuned prefix, GPU atomics alone moved a task by 26 points (sweep 20)
        self.determinism = runtime.determinism_mode(getattr(args, "determinism", None), default=FINETUNE_DETERMINISM)
        self.autocast = runtime.set_precision(args.precision, self.device, self.determinism)
        runtime.seed_everything(args.seed)
        base = load_base(args.model, args)
        self.prefix_kind = resolve_prefix(args.prefix, base, args.model)
        self.fst_sample = load_prefix_init(args.model) if self.prefix_kind in FROM_SAMPLE else None
        self.fst_encoder = base.fst_encoder
        self.prefix_init = None  # --prefix induced or sampled: what the last run started from
        self.prefix_induced = False  # ... and whether that was an induced or searched FST (--induced-prefix-lr applies)
        self.prefix_search_log = []  # --prefix search: the search's progress, for metrics.json
        self.readout_log = None  # --prefix readout: what the first pass read, for metrics.json (and the start)
        if self.prefix_kind in ("mean", "random") + ONE_MACHINE:
            model = with_prefix_mode(base, "tuned", prefix_length=args.prefix_length)
        elif self.prefix_kind == "soft":
            model = with_prefix_mode(base, "soft", prefix_length=args.prefix_length)
        elif self.prefix_kind == "none":
            model = with_prefix_mode(base, "none") if base.config.prefix_mode != "none" else base
        else:
            model = base
        self.model = model.to(device=self.device, dtype=torch.float32)  # fp32 master weights (bf16 releases)
        states = getattr(args, "prefix_codebook_states", 0)
        if states and (self.fst_encoder is None or self.model.prefix is None):
            raise SipError("--prefix-codebook-states needs a SIP pre-training checkpoint (an FST encoder) and a tuned prefix")
        if states > self.model.config.num_states:
            raise SipError(f"--prefix-codebook-states {states} exceeds the model's {self.model.config.num_states} states")
        if getattr(args, "state_consistency", 0.0) > 0:
            if self.model.state_head is None or self.model.prefix is None:
                raise SipError("--state-consistency needs a SIP checkpoint with a state head (pre-trained with "
                               "--state-loss) and a tuned prefix (--prefix mean or random)")
            if self.dist.enabled:
                raise SipError("--state-consistency runs in one process only (not under torchrun/--nproc)")
            self.model.state_head.requires_grad_(False)  # frozen: a trained head could predict one state everywhere
        if self.prefix_kind == "readout" and self.model.state_head is None:
            raise SipError("--prefix readout needs a SIP checkpoint with a state head (pre-trained with --state-loss)")
        self.rehearsal = self._rehearsal()
        if getattr(args, "state_entropy", 0.0) > 0:
            if self.model.state_head is None or self.model.prefix is None:
                raise SipError("--state-entropy needs a SIP checkpoint with a state head (pre-trained with --state-loss) "
                               "and a tuned prefix (--prefix mean, random or induced)")
            self.model.state_head.requires_grad_(False)  # frozen: trained, it could sharpen itself instead of the body
        if restarts.enabled(args) and self.dist.enabled:
            raise SipError("--restarts runs in one process only (not under torchrun/--nproc)")
        if (getattr(args, "prefix_dropout", 0.0) or getattr(args, "prefix_noise", 0.0)) and self.model.prefix is None:
            raise SipError("--prefix-dropout and --prefix-noise need a tuned prefix (--prefix mean or random)")
        self.max_norm = self._max_norm(getattr(args, "prefix_max_norm", None))
        self.model.prefix_dropout = getattr(args, "prefix_dropout", 0.0)
        self.model.prefix_noise = getattr(args, "prefix_noise", 0.0)
        self.initial_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.commit = runtime.git_commit()

    def _rehearsal(self) -> regularisers.Rehearsal | None:
        """``--rehearsal W``: pre-training pairs replayed beside the task's (regularisers.py)."""
        args = self.args
        if getattr(args, "rehearsal", 0.0) <= 0:
            return None
        if not getattr(args, "rehearsal_data", None):
            raise SipError("--rehearsal needs --rehearsal-data POOL (a pre-training pool, e.g. `sip data d4 --out POOL`)")
        if self.fst_encoder is None or self.model.prefix is None:
            raise SipError("--rehearsal needs a SIP pre-training checkpoint (an FST encoder) and a tuned prefix")
        if self.dist.enabled:
            raise SipError("--rehearsal runs in one process only (not under torchrun/--nproc)")
        return regularisers.Rehearsal(args.rehearsal_data, self.model, self.fst_encoder, self.device,
                                      getattr(args, "rehearsal_batch", 0) or args.batch_size, args.seed)

    def _reset(self, seed: int, train_pairs=()) -> None:
        if "prefix" in self.initial_state:  # an induced run before may have sized it to its FST
            self._resize_prefix(len(self.initial_state["prefix"]))
        self.model.load_state_dict(self.initial_state)
        runtime.seed_everything(seed)
        init_seed = getattr(self.args, "prefix_init_seed", None)  # the init apart from the data order (session 12)
        gen = torch.Generator().manual_seed(seed if init_seed is None else init_seed)
        n_fsts = getattr(self.args, "prefix_init_fsts", 32)
        init = None
        if self.prefix_kind == "induced":
            init = self._induced_init(train_pairs)
        elif self.prefix_kind == "sampled":
            init = self._sampled_init(train_pairs, seed if init_seed is None else init_seed)
        elif self.prefix_kind == "search":
            init = self._search_init(train_pairs, seed if init_seed is None else init_seed)
        elif self.prefix_kind == "readout":
            init = self._readout_init()
        if self.prefix_kind == "mean" or (self.prefix_kind in ONE_MACHINE and init is None):  # no machine: the mean
            init = mean_prefix(self.fst_encoder, self.fst_sample, n_fsts, self.model.config.prefix_length, gen,
                               self.model.t5.shared)
        elif self.prefix_kind == "random":
            init = torch.randn(self.model.prefix.shape, generator=gen)
        elif self.prefix_kind == "soft":
            sample = self.fst_sample[torch.randperm(self.fst_sample.shape[0], generator=gen)[:n_fsts]]
            self.model.soft_prefix.init_from_sample(sample)
            return
        elif init is None:  # none, keep: nothing to initialise
            return
        self._resize_prefix(len(init))  # an induced or sampled FST: one vector per transition, as in pre-training
        with torch.no_grad():
            self.model.prefix.copy_(init.to(self.model.prefix.device))

    def _resize_prefix(self, length: int) -> None:
        """Give the tuned prefix ``length`` vectors (the config follows, so a saved run loads as it trained)."""
        prefix = self.model.prefix
        if prefix is None or prefix.shape[0] == length:
            return
        self.model.prefix = torch.nn.Parameter(prefix.new_zeros(length, prefix.shape[1]))
        self.model.config.prefix_length = length

    def _induced_init(self, train_pairs) -> torch.Tensor | None:
        """The prefix encoding the FST OSTIA induces from the training pairs (None: the paper's init instead)."""
        config = self.model.config
        init, machine = induced_prefix(self.fst_encoder, train_pairs, config.prefix_length, self.model.t5.shared,
                                       config.num_states, config.symbols)
        self.prefix_induced = init is not None
        self.prefix_init = (f"induced: {machine.n_states} states, {len(machine.transitions)} transitions"
                            if init is not None else "mean: no FST a prefix can hold was induced")
        return init

    def _sampled_init(self, train_pairs, seed: int) -> torch.Tensor:
        """--prefix sampled: one pre-training-style FST over the task's symbols, drawn from ``seed``."""
        config = self.model.config
        init, machine = sampled_prefix(self.fst_encoder, train_pairs, config.prefix_length, self.model.t5.shared,
                                       config.num_states, config.symbols, random.Random(seed),
                                       getattr(self.args, "prefix_sampled_states", 4))
        self.prefix_init = f"sampled: {machine.n_states} states, {len(machine.transitions)} transitions"
        return init

    def _readout_init(self) -> torch.Tensor | None:
        """--prefix readout: the encoding of the machine the first pass's states imply (None: the paper's init)."""
        config, row = self.model.config, (self.readout_log or {}).get("machine")
        init = None if row is None else machine_prefix(self.fst_encoder, Machine.from_row(row), config.prefix_length,
                                                       self.model.t5.shared, config.num_states, config.symbols)
        self.prefix_induced = init is not None
        self.prefix_init = (f"readout: {self.readout_log['summary']}" if init is not None else
                            f"mean: the first pass read no FST a prefix can hold ({self.readout_log['summary']})")
        return init

    def _search_init(self, train_pairs, seed: int) -> torch.Tensor | None:
        """--prefix search: the encoding of the machine the body-scored local search finds (None: the paper's init,
        where it has more transitions than the prefix holds)."""
        args, config = self.args, self.model.config
        self.fst_encoder.to(self.device, torch.float32)
        scorer = with_prefix_mode(self.model, "fst")  # the same T5, reading FST encodings as in pre-training
        scorer.fst_encoder = self.fst_encoder
        result = search_machine(scorer, train_pairs, config.symbols, config.num_states, self.device, self.autocast,
                                random.Random(seed), states=args.prefix_search_states, steps=args.prefix_search_steps,
                                candidates=args.prefix_search_candidates, batch=args.prefix_search_batch,
                                subset=args.prefix_search_subset, max_seconds=60 * args.prefix_search_minutes,
                                progress=lambda row: print(f"prefix search: {row}", flush=True))  # every 50 steps
        init = machine_prefix(self.fst_encoder, result.machine, config.prefix_length, self.model.t5.shared,
                              config.num_states, config.symbols)
        self.prefix_induced = init is not None
        self.prefix_search_log = result.log
        found = len(result.machine.transitions)
        if init is None:
            # said aloud, not only in metrics.json: sweep 33 lost a GPU call to this fallback (session 55)
            self.prefix_init = (f"mean: the searched FST has {found} transitions, more than the prefix's "
                                f"{config.prefix_length} slots (raise --prefix-length)")
            print(f"warning: --prefix search: {self.prefix_init}", file=sys.stderr, flush=True)
            return None
        self.prefix_init = (f"search: {result.machine.n_states} states, {found} transitions, its own accuracy on the "
                            f"training pairs {100 * result.train_acc:.2f}% after {result.steps} steps "
                            f"({result.seconds:.0f} s)")
        return init

    def _max_norm(self, requested: float | str | None) -> float | None:
        """--prefix-max-norm as a radius: a number as given; ``fst``: the mean slot norm of this checkpoint's
        encodings of its FST sample."""
        if requested is None:
            return None
        if self.model.prefix is None:
            raise SipError("--prefix-max-norm needs a tuned prefix (--prefix mean, random, induced or sampled)")
        if requested != FROM_FSTS:
            return float(requested)
        if self.fst_encoder is None or self.fst_sample is None:
            raise SipError(f"--prefix-max-norm {FROM_FSTS} needs a SIP checkpoint with an FST sample and --prefix mean "
                           "or induced (or give the radius as a number)")
        return round(encoding_slot_norm(self.fst_encoder, self.fst_sample, self.model.t5.shared), 4)

    def _prefix_lr(self) -> float:
        """--induced-prefix-lr where this task's prefix starts as an induced FST (it starts where tuning should end);
        --prefix-lr otherwise, the fallback to the mean init included (at 0.01 that init stalled, session 23)."""
        induced_lr = getattr(self.args, "induced_prefix_lr", None)
        return induced_lr if self.prefix_induced and induced_lr is not None else self.args.prefix_lr

    def _codebook(self, train_pairs) -> tuple[torch.Tensor | None, float]:
        """The task's single-transition codebook (``--prefix-codebook-states``) and the pull weight; the
        model reads its prefix through the codebook when ``--prefix-straight-through``."""
        states = getattr(self.args, "prefix_codebook_states", 0)
        self.model.prefix_codebook = None
        if not states:
            return None, 0.0
        ids = task_symbol_ids(train_pairs, self.model.config.symbols)
        encoder = self.fst_encoder.to(self.device, torch.float32)
        codebook = transition_codebook(encoder, self.model.t5.shared, states, ids)
        if getattr(self.args, "prefix_straight_through", False):
            self.model.prefix_codebook = codebook
        return codebook, float(getattr(self.args, "prefix_pull", 0.0))

    def _walks(self, train: DeviceSplit, epoch: int, n: int) -> tuple[DeviceSplit, dict]:
        """This epoch's state-consistency walks: the transition graph the model's own states on the training
        strings imply, walked ``n`` times (sip_core/train/consistency.py)."""
        args = self.args
        states = consist.read_states(self.model, train, args.eval_batch_size, self.autocast)
        graph = consist.transition_graph(train.split.inputs, states)
        texts, seqs = consist.sample_walks(graph, n, args.consistency_walk_length,
                                           np.random.default_rng([args.seed, epoch, 7]))
        stats = {"epoch": epoch + 1, "transitions": len(graph.next),
                 "states": len(({q for q, _ in graph.next} | set(graph.next.values())) - {consist.START}),
                 "walk_mean_length": round(float(np.mean([len(t) for t in texts])), 2)}
        return DeviceSplit(consist.walk_split(texts, seqs), self.device, state_labels=True), stats

    def run(self, task_id: str, train_pairs, test_pairs, out_dir: Path, save: bool = False) -> dict:
        """Fine-tune on one task; outputs to ``out_dir`` (metrics.json last). Resumes from ``out_dir``'s
        epoch checkpoint if an interrupted run left one."""
        args, dist = self.args, self.dist
        if not train_pairs:
            raise SipError(f"task {task_id!r} has no training examples")
        if not test_pairs:
            raise SipError(f"task {task_id!r} has no test examples")
        started = time.monotonic()
        # --holdout-longest: the longest training inputs become a length dev set (scored at the end, not trained on)
        fit_pairs, holdout_pairs = split_longest(train_pairs, getattr(args, "holdout_longest", 0.0))
        if self.prefix_kind == "readout":  # a mean-init first pass, whose states give the machine to start from
            self.readout_log = readout.first_pass(self, task_id, fit_pairs, test_pairs, out_dir)
        self._reset(args.seed, fit_pairs)
        resume_from = ckpt.latest_checkpoint(out_dir)
        selection = None
        if restarts.enabled(args):  # K short runs choose the start by the longest training inputs (restarts.py)
            selection = (restarts.read_log(out_dir) if resume_from is not None
                         else restarts.select_start(self, task_id, train_pairs, test_pairs, out_dir))
            runtime.seed_everything(args.seed)
        distributed.seed_rank(dist, args.seed)
        model = self.model
        forward = dist.wrap(model, self.device, getattr(args, "ddp_grads", "fp32"),
                            getattr(args, "ddp_bucket_mb", 25.0))
        train_pairs = fit_pairs
        if not train_pairs:
            raise SipError(f"task {task_id!r}: --holdout-longest leaves no training pairs")
        train = DeviceSplit(make_split(*zip(*train_pairs)), self.device)
        test = DeviceSplit(make_split(*zip(*test_pairs)), self.device)
        codebook, pull = self._codebook(train_pairs)
        prefix_lr = self._prefix_lr()
        optimizer = torch.optim.Adam([g for g in finetune_param_groups(model, args.lr, prefix_lr,
                                                                       getattr(args, "freeze_body", False))
                                      if g["params"]])
        evaluations, consistency_log = [], []
        predictions = None
        steps, start_epoch, seconds_before, eval_seconds = 0, 0, 0.0, 0.0
        if resume_from is not None:
            payload, _ = ckpt.load_checkpoint(resume_from)
            model.load_state_dict(payload["model"])
            optimizer.load_state_dict(payload["optimizer"])
            runtime.set_rng_state(payload["rng"][dist.rank])
            start_epoch, steps, evaluations = payload["epoch"], payload["steps"], payload["evaluations"]
            seconds_before = payload["seconds"]
            eval_seconds = payload.get("eval_seconds", 0.0)
            if dist.is_main:
                pooled = f", loaded {taskpool.since_launch()} after launch" if taskpool.LAUNCHED_AT in os.environ \
                    else ""
                print(f"finetune {task_id}: resuming from epoch {start_epoch} ({resume_from}){pooled}", flush=True)
        first_eval = args.epochs - args.eval_last if args.eval_last > 0 else 0
        eval_every = getattr(args, "eval_every", 0) or 0

        # --holdout-longest: the length dev set is scored beside every test evaluation too, so that a curve shows where
        # stopping by it would land (session 39: 100 epochs lose to 50 on the long inputs)
        held = DeviceSplit(make_split(*zip(*holdout_pairs)), self.device) if holdout_pairs else None

        def decode(split: DeviceSplit) -> list[str]:  # greedy predictions, their time counted in eval_seconds
            nonlocal eval_seconds
            eval_started = time.monotonic()
            decoded = predict_split(model, split, args.eval_batch_size, self.autocast)
            eval_seconds += time.monotonic() - eval_started
            return decoded

        every = getattr(args, "checkpoint_every", 0) or 0
        minutes = getattr(args, "checkpoint_minutes", 0) or 0
        last_save = time.monotonic()
        epochs = range(start_epoch, args.epochs)
        if not args.no_progress and dist.is_main:
            from tqdm.auto import tqdm
            epochs = tqdm(epochs, desc=f"finetune {task_id}", unit="epoch", leave=False, mininterval=1.0,
                          initial=start_epoch, total=args.epochs)
        prefix_only = getattr(args, "prefix_only_epochs", 0)
        lr_scale = args.continue_lr_scale if restarts.enabled(args) else 1.0  # the chosen start is trained already
        schedule = getattr(args, "schedule", "constant")
        steps_per_epoch = -(-len(train) // args.batch_size)
        total_steps = args.epochs * steps_per_epoch
        consistency = getattr(args, "state_consistency", 0.0)
        entropy_weight, rehearsal_weight = getattr(args, "state_entropy", 0.0), getattr(args, "rehearsal", 0.0)
        # --length-weighting A: long training inputs (the rare ones, and what the test extrapolates to) drawn
        # in proportion to length^A
        alpha = getattr(args, "length_weighting", 0.0)
        sampling_weights = (np.array([len(x) for x, _ in train_pairs], dtype=np.float64) ** alpha) if alpha else None
        # --profile-steps A:B: where a step's time goes (the gpu fine-tunes run ~115 ms a step, host-bound, session 49)
        profiler = StepProfiler(parse_window(getattr(args, "profile_steps", None)) if dist.is_main else None, out_dir)
        for epoch in epochs:
            model.train()
            # two-stage tuning: the body waits while the prefix finds its place
            base_lr = {"prefix": prefix_lr * lr_scale, "body": 0.0 if epoch < prefix_only else args.lr * lr_scale}
            walks = None
            if consistency > 0:
                walks, stats = self._walks(train, epoch, steps_per_epoch * args.batch_size)
                consistency_log.append(stats)
            for b, idx in enumerate(random_batches(len(train), args.batch_size, args.seed, epoch, sampling_weights)):
                factor = decay_factor(schedule, steps, total_steps)
                for group in optimizer.param_groups:
                    group["lr"] = base_lr[group["name"]] * factor
                idx, weight = dist.shard(idx, train.label_lengths)
                batch = train.batch(idx)
                with self.autocast():
                    output = forward(**batch)
                    loss = output.loss
                    if entropy_weight > 0:  # crisp states at every training input byte
                        loss = loss + entropy_weight * regularisers.state_entropy(
                            model, output.encoder_last_hidden_state, batch["attention_mask"])
                    if self.rehearsal is not None:  # and the body still simulates pre-training FSTs
                        loss = loss + rehearsal_weight * self.rehearsal.loss(model, steps)
                    if walks is not None:  # the state head along this step's walks agrees with the walk
                        wb = walks.batch(np.arange(b * args.batch_size, (b + 1) * args.batch_size), with_labels=False)
                        hidden = model.encode(wb["input_ids"], wb["attention_mask"])[0].last_hidden_state
                        walk_loss, _, _ = state_loss(model, hidden, consist.prefix_padded(wb["state_labels"],
                                                                                          model.prefix.shape[0]))
                        loss = loss + consistency * walk_loss
                if pull > 0:  # commitment: each slot towards its nearest single-transition encoding
                    loss = loss + pull * torch.nn.functional.mse_loss(model.prefix, codebook_nearest(model.prefix, codebook))
                (loss * weight if dist.enabled else loss).backward()
                if args.clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                optimizer.step()
                if self.max_norm is not None:
                    cap_slot_norms(model.prefix, self.max_norm)
                optimizer.zero_grad(set_to_none=True)
                steps += 1
                profiler.at(steps)
            if epoch >= first_eval or (eval_every and (epoch + 1) % eval_every == 0):
                if dist.is_main:  # the others go on to the next epoch and wait in its first all-reduce
                    predictions = decode(test)
                    row = score(predictions, test.split.outputs)
                    evaluations.append({"epoch": epoch + 1, "acc": row["acc"], "ed": row["ed"], "per": row["per"]})
                    if held is not None:
                        held_row = score(decode(held), held.split.outputs)
                        evaluations[-1].update(holdout_acc=held_row["acc"], holdout_ed=held_row["ed"])
                    # the curve so far, so that a run stopped by a time limit still tells what it learned
                    write_json({"task_id": task_id, "epochs": evaluations}, out_dir / PROGRESS_FILE)
            if epoch == start_epoch and dist.is_main and taskpool.LAUNCHED_AT in os.environ:
                # where a resumed call's first minutes go (session 32: cards idle ~100 s, workers loaded at 37 s)
                print(f"finetune {task_id}: epoch {epoch + 1} done {taskpool.since_launch()} after launch", flush=True)
            due = epoch + 1 < args.epochs and ((every and (epoch + 1) % every == 0) or
                                               (minutes and time.monotonic() - last_save >= minutes * 60))
            if dist.any(due):
                rngs = dist.gather(runtime.rng_state())
                if dist.is_main:
                    payload = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": rngs,
                               "epoch": epoch + 1, "steps": steps, "evaluations": evaluations,
                               "seconds": seconds_before + time.monotonic() - started, "eval_seconds": eval_seconds}
                    ckpt.save_checkpoint(out_dir, epoch + 1, payload, model.config.to_json_string())
                dist.barrier()
                last_save = time.monotonic()
                _maybe_die_for_test(task_id, epoch + 1)
        if not dist.is_main:
            return {}
        if predictions is None:  # --eval-last beyond the resumed epoch, or no evaluation epoch at all
            predictions = decode(test)
        metrics = {
            "run_id": args.run_id or f"{args.model_name or Path(args.model).name}-{task_id}-s{args.seed}",
            "model": args.model_name or Path(args.model).name, "model_path": str(args.model),
            "task_id": task_id, "seed": args.seed, "scale": args.scale, "prefix": self.prefix_kind,
            **({"prefix_init": self.prefix_init} if self.prefix_kind in ONE_MACHINE else {}),
            **({"prefix_search": self.prefix_search_log} if self.prefix_kind == "search" else {}),
            **({"readout": {k: v for k, v in self.readout_log.items() if k not in ("machine", "read_machine")}}
               if self.prefix_kind == "readout" else {}),
            "epochs": evaluations, "reported": reported(evaluations, args.report_last),
            "n_train": len(train), "n_test": len(test), "steps": steps,
            "device": runtime.device_name(self.device) + (f" x {dist.world} (DDP)" if dist.enabled else ""),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "determinism": self.determinism,  # off / math / strict (--determinism, $SIP_DETERMINISTIC)
            # deterministic modes fill new tensors with NaN only where $SIP_FILL_UNINITIALIZED=1
            "fill_uninitialized_memory": torch.are_deterministic_algorithms_enabled()
                                         and bool(torch.utils.deterministic.fill_uninitialized_memory),
            "commit": self.commit, "params_hash": args.params_hash,
            "wall_seconds": round(seconds_before + time.monotonic() - started, 2),
            "eval_seconds": round(eval_seconds, 2),  # of wall_seconds, decoding the test set (the rest: training)
            "hyperparameters": {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                                "prefix_lr": args.prefix_lr,
                                "induced_prefix_lr": getattr(args, "induced_prefix_lr", None),
                                "schedule": schedule, "clip": args.clip,
                                "precision": args.precision,
                                "freeze_body": bool(getattr(args, "freeze_body", False)),
                                "prefix_length": args.prefix_length,
                                "prefix_init_fsts": getattr(args, "prefix_init_fsts", 32),
                                "prefix_init_seed": getattr(args, "prefix_init_seed", None),
                                "prefix_only_epochs": getattr(args, "prefix_only_epochs", 0),
                                "prefix_codebook_states": getattr(args, "prefix_codebook_states", 0),
                                "prefix_straight_through": bool(getattr(args, "prefix_straight_through", False)),
                                "prefix_pull": getattr(args, "prefix_pull", 0.0),
                                "prefix_max_norm": self.max_norm,
                                "prefix_dropout": getattr(args, "prefix_dropout", 0.0),
                                "prefix_noise": getattr(args, "prefix_noise", 0.0),
                                "holdout_longest": getattr(args, "holdout_longest", 0.0),
                                "length_weighting": getattr(args, "length_weighting", 0.0),
                                "state_consistency": getattr(args, "state_consistency", 0.0),
                                "state_entropy": getattr(args, "state_entropy", 0.0),
                                "rehearsal": getattr(args, "rehearsal", 0.0),
                                "rehearsal_data": getattr(args, "rehearsal_data", None),
                                "rehearsal_batch": getattr(args, "rehearsal_batch", 0) or None,
                                "restarts": getattr(args, "restarts", 1),
                                "restart_epochs": getattr(args, "restart_epochs", 0),
                                "restart_holdout": getattr(args, "restart_holdout", 0.0),
                                "continue_lr_scale": getattr(args, "continue_lr_scale", 1.0),
                                "consistency_walk_length": getattr(args, "consistency_walk_length", 30)},
        }
        if consistency_log:
            metrics["consistency"] = consistency_log
        if self.prefix_kind == "readout":  # ... and the first pass behind it
            metrics["wall_seconds"] = round(metrics["wall_seconds"] + self.readout_log["first_pass_wall_seconds"], 2)
        if selection is not None:  # the run's cost includes the restarts behind it
            metrics["selection"] = selection
            metrics["wall_seconds"] = round(metrics["wall_seconds"] + sum(e["wall_seconds"] for e in selection["restarts"]), 2)
        if held is not None:
            row = score(predict_split(model, held, args.eval_batch_size, self.autocast), held.split.outputs)
            metrics["holdout"] = {"acc": row["acc"], "ed": row["ed"], "n": len(held),
                                  "min_input_length": min(len(x) for x, _ in holdout_pairs)}
        if save:
            save_model(model, out_dir)
        if getattr(args, "save_prefix", False) and model.prefix is not None:
            save_tuned_prefix(model.prefix, out_dir)
        shutil.rmtree(ckpt.checkpoint_root(out_dir), ignore_errors=True)
        restarts.drop_weights(out_dir)  # the restarts' logs stay beside the run; their weights are spent
        (out_dir / PROGRESS_FILE).unlink(missing_ok=True)  # metrics.json carries the whole curve
        write_run(out_dir, metrics, test.split.inputs, test.split.outputs, predictions)  # metrics.json last
        return metrics


def _maybe_die_for_test(task_id: str, epoch: int) -> None:
    """Resume tests: $SIP_TEST_KILL_AFTER_EPOCH (``N`` or ``TASK:N``) makes the process die abruptly (like
    SIGKILL) after the checkpoint of epoch N (of task TASK)."""
    target = os.environ.get("SIP_TEST_KILL_AFTER_EPOCH")
    if not target:
        return
    task, _, n = target.rpartition(":")
    if (not task or task == task_id) and epoch >= int(n):
        os._exit(137)


def _settings(args, model_arg: str, data_files: list[str]) -> dict:
    """What determines the result: the arguments, the data's and the base model's bytes."""
    settings = {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_SETTINGS}
    settings["model"] = model_arg
    settings["data_sha256"] = [sha256(f) for f in data_files]
    weights = Path(model_arg) / "model.safetensors"
    settings["model_sha256"] = sha256(weights) if weights.is_file() else None
    return settings


def check_codebook_args(args) -> None:
    states = getattr(args, "prefix_codebook_states", 0)
    if states < 0:
        raise SipError("--prefix-codebook-states must be at least 0")
    if getattr(args, "prefix_pull", 0.0) < 0:
        raise SipError("--prefix-pull must be at least 0")
    if not states and (getattr(args, "prefix_straight_through", False) or getattr(args, "prefix_pull", 0.0) > 0):
        raise SipError("--prefix-straight-through and --prefix-pull need --prefix-codebook-states N")
    if states and args.prefix not in ("mean", "random", "auto"):
        raise SipError("--prefix-codebook-states needs a tuned prefix (--prefix mean or random)")


def _print_task(tid: str, metrics: dict) -> None:
    rep = metrics["reported"]
    print(f"finetune {tid}: acc {rep['acc']:.1f}%, ed {rep['ed']:.3f}, per {rep['per']:.3f} (mean of last "
          f"{rep['n_evaluations']} evals, n_test {metrics['n_test']}, {metrics['wall_seconds']:.1f}s)", flush=True)


def _print_summary(results: list[dict], out: Path) -> None:
    acc = np.mean([m["reported"]["acc"] for m in results])
    ed = np.mean([m["reported"]["ed"] for m in results])
    print(f"finetune: {len(results)} tasks, mean acc {acc:.1f}%, mean ed {ed:.3f} → {out}")


def task_workers(args) -> int:
    """--task-workers, else $SIP_TASK_WORKERS (set by ``handoff-run --task-workers``), else 1."""
    n = getattr(args, "task_workers", None)
    if n is None:
        raw = os.environ.get("SIP_TASK_WORKERS", "1")
        if not raw.isdigit():
            raise SipError(f"SIP_TASK_WORKERS must be a whole number, not {raw!r}")
        n = int(raw)
    if n < 1:
        raise SipError("--task-workers must be at least 1")
    return n


def _run_task_pool(args, jobs: list, data_files: list[str], out: Path, workers: int) -> int:
    """The tasks of ``jobs`` as parallel child processes (``taskpool``), then one commit of the run directory."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise SipError("--task-workers runs one process per task: use it with --nproc 1")
    if getattr(args, "cli_argv", None) is None:
        raise SipError("--task-workers needs the command line (run it as `sip finetune ...`)")
    stage = Staging(out, _settings(args, args.model, data_files))
    todo = []
    for tid, _, _, rel in jobs:
        if stage.done(stage.path / rel) is not None:
            print(f"finetune {tid}: finished before the interruption")
            continue
        if (stage.path / rel).exists():  # an interrupted in-process run's task: a child stages elsewhere, so restart it
            print(f"finetune {tid}: restarted (its checkpoint is from a run without --task-workers)")
            shutil.rmtree(stage.path / rel)
        todo.append((tid, stage.path / rel))
    threads = max(1, (args.threads or int(os.environ.get("SIP_THREADS", "0") or 0) or 1) // workers)
    print(f"finetune: {len(todo)} of {len(jobs)} tasks to run, {min(workers, len(todo))} at a time", flush=True)
    taskpool.run_tasks(args.cli_argv, todo, workers, threads, on_done=_print_task)
    results = [stage.done(stage.path / rel) for *_, rel in jobs]
    stage.commit()
    _print_summary(results, out)
    return 0


def _run_worker(args, root: Path) -> int:
    """A task pool's child (``--worker-tasks A,B,..``; ``--out`` the pool's staging directory): its tasks one after
    another in one process, each exactly as ``--task-id T --out <root>/T`` would run it (same staging, settings and
    resume), so that a process start (~45 s with 15 at once on a GPU host) is paid once, not per task."""
    print(f"worker: Python and its imports ready {taskpool.since_launch()} after launch (pid {os.getpid()})", flush=True)
    table = load_task_examples(args.tasks)
    print(f"worker: tasks read {taskpool.since_launch()} after launch", flush=True)
    dist, device_arg = distributed.setup(args.device, getattr(args, "nccl_channels", distributed.NCCL_CHANNELS))
    device = runtime.pick_device(device_arg)
    if device.type == "cuda":  # start the context here: the log then tells its cost (20 workers at once) from the model's
        torch.zeros(1, device=device)
        print(f"worker: CUDA context ready {taskpool.since_launch()} after launch", flush=True)
    tuner = FineTuner(args, dist, device_arg)
    print(f"worker: model loaded {taskpool.since_launch()} after launch", flush=True)
    for tid in args.worker_tasks.split(","):
        task_args = argparse.Namespace(**{**vars(args), "task_id": tid, "out": str(root / tid), "worker_tasks": None})
        stage = Staging(root / tid, _settings(task_args, args.model, [args.tasks]))
        metrics = stage.done(stage.path) or tuner.run(tid, task_pairs(table, tid, "train"),
                                                       task_pairs(table, tid, "test"), stage.path, save=args.save_model)
        stage.commit()
        _print_task(tid, metrics)
    return dist.finish(0)


def main(args) -> int:
    if args.tasks and (args.train or args.test):
        raise SipError("give either --tasks or --train/--test, not both")
    if not args.tasks and not (args.train and args.test):
        raise SipError("give --tasks FILE, or both --train and --test")
    if args.epochs < 1:
        raise SipError("--epochs must be at least 1")
    if args.eval_last < 0 or getattr(args, "eval_every", 0) < 0:
        raise SipError("--eval-last and --eval-every must be at least 0")
    if args.batch_size < 1 or args.eval_batch_size < 1:
        raise SipError("--batch-size and --eval-batch-size must be at least 1")
    for flag, value in (("--lr", args.lr), ("--prefix-lr", args.prefix_lr),
                        ("--induced-prefix-lr", getattr(args, "induced_prefix_lr", None))):
        if value is not None and not value >= 0:  # also NaN
            raise SipError(f"{flag} must be at least 0, got {value}")
    if getattr(args, "prefix_init_fsts", 32) < 1:
        raise SipError("--prefix-init-fsts must be at least 1")
    if not 0 <= getattr(args, "prefix_only_epochs", 0) < args.epochs:
        raise SipError("--prefix-only-epochs must be between 0 and --epochs - 1")
    check_codebook_args(args)
    args.prefix_max_norm = parse_max_norm(getattr(args, "prefix_max_norm", None))
    parse_window(getattr(args, "profile_steps", None))  # a malformed window stops here, before any set-up
    restarts.check_args(args)
    readout.check_args(args)
    if getattr(args, "length_weighting", 0.0) < 0:
        raise SipError("--length-weighting must be at least 0")
    if not 0 <= getattr(args, "holdout_longest", 0.0) < 1:
        raise SipError("--holdout-longest must be in [0, 1)")
    if not 0 <= getattr(args, "prefix_dropout", 0.0) < 1 or getattr(args, "prefix_noise", 0.0) < 0:
        raise SipError("--prefix-dropout must be in [0, 1) and --prefix-noise at least 0")
    if getattr(args, "state_consistency", 0.0) < 0 or getattr(args, "consistency_walk_length", 30) < 1:
        raise SipError("--state-consistency must be at least 0 and --consistency-walk-length at least 1")
    for flag, value in (("--state-entropy", getattr(args, "state_entropy", 0.0)),
                        ("--rehearsal", getattr(args, "rehearsal", 0.0)),
                        ("--rehearsal-batch", getattr(args, "rehearsal_batch", 0))):
        if not value >= 0:  # also NaN
            raise SipError(f"{flag} must be at least 0, got {value}")
    args.no_progress = getattr(args, "no_progress", False)
    args.model = resolve_model(args.model)
    out = Path(args.out)
    if getattr(args, "worker_tasks", None):
        return _run_worker(args, out)
    check_out(out)
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
            jobs.append((tid, task_pairs(table, tid, "train"), task_pairs(table, tid, "test"), tid if many else ""))
            for split, pairs in (("training", jobs[-1][1]), ("test", jobs[-1][2])):
                if not pairs:  # checked here, before anything is written
                    raise SipError(f"task {tid!r} has no {split} examples in {args.tasks}")
        data_files = [args.tasks]
    else:
        tid = args.task_id if args.task_id != "all" else Path(args.train).stem
        jobs.append((tid, read_pairs_any(args.train, "train"), read_pairs_any(args.test, "test"), ""))
        data_files = [args.train, args.test]
    # a --train/--test run is the user's own model: an HF checkpoint directory with a model card
    own_task = not args.tasks
    workers = task_workers(args)
    if workers > 1 and len(jobs) > 1:
        return _run_task_pool(args, jobs, data_files, out, workers)
    dist, device_arg = distributed.setup(args.device, getattr(args, "nccl_channels", distributed.NCCL_CHANNELS))
    try:
        tuner = FineTuner(args, dist, device_arg)  # loading the model is the last check before writing
        stage = Staging(out, _settings(args, args.model, data_files), main=dist.is_main)
        dist.barrier()  # the staging directory exists (fresh or resumed) before any rank reads it
        finished = [stage.done(stage.path / rel) for *_, rel in jobs]
        results = []
        for (tid, train_pairs, test_pairs, rel), metrics in zip(jobs, finished):
            task_out = stage.path / rel
            if metrics is not None:
                if dist.is_main:
                    print(f"finetune {tid}: finished before the interruption")
            else:
                metrics = tuner.run(tid, train_pairs, test_pairs, task_out, save=args.save_model or own_task)
            if not dist.is_main:
                continue
            results.append(metrics)
            _print_task(tid, metrics)
        if dist.is_main:
            if own_task:
                card = modelcard.render(results[0], modelcard.data_entry(args.train, len(jobs[0][1])),
                                        modelcard.data_entry(args.test, len(jobs[0][2])),
                                        modelcard.base_entry(args.model), modelcard.command_line(),
                                        modelcard.library_versions())
                write_text(card, stage.path / "README.md")
            stage.commit()
            if len(results) > 1:
                _print_summary(results, out)
            elif own_task:
                print(f"finetune: model, model card (README.md) and predictions → {out}")
        return dist.finish(0)  # under torchrun the process ends here
    except BaseException as err:
        dist.abandon()
        if isinstance(err, RuntimeError) and (one_line := runtime.deterministic_kernel_error(err)):
            raise one_line from err
        raise
