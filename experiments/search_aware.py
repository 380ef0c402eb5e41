"""Search-aware continued pre-training of SIP-d4 (session 41, docs/EXPERIMENTS.md): train the body to extrapolate from
the prefixes that gradient search finds, not only from gold FST encodings.

Why: with the gold encoding the body scores 99% on Table 1's long test strings, but fine-tuning reaches the prefix by
gradient descent on short strings and lands on a near-machine that fits them and fails longer ones (80% over seeds,
sessions 38-40). Pre-training only ever showed the body gold encodings, so it never learned what to do with such
prefixes. Here a population of prefixes is tuned the way fine-tuning tunes one (the paper's mean init, Adam at the
prefix LR, a cosine decay over each prefix's lifetime), each on its own pre-training FST's short strings only; the
body, meanwhile, is trained on the same FSTs' long strings through the prefixes that have had at least half their
lifetime (first order: the tuned prefix is a constant for the body's gradient), plus the usual SIP loss with gold
encodings so that simulation stays. A prefix at the end of its lifetime is replaced by a fresh FST and a fresh init.

Sweep 27's two runs (defaults, body LR 1e-4 and 2e-5) made the body worse: it lost simulation of long inputs and
large FSTs faster than it learned to read tuned prefixes. The guards added after them: a gold check (greedy exact match
with gold encodings on the long strings of held-out FSTs of >= 40 transitions, every --check-every steps;
`models/sip-d4` 98.0%, sweep 27's run A 90.8%), --min-gold-acc (keep the weights of the last check that passed, stop at
the first that fails), --gold-size-power and --gold-long-fraction (weight the gold term to large FSTs and long strings)
and --prefix-weight.

Data: experiments/search_aware_data.py (FSTs with short and long strings). Output: a SIP checkpoint `sip finetune`
reads (config, weights, the prefix-init sample), and metrics.json with the loss curves.

    python experiments/search_aware.py --model models/sip-d4 --data data/gpu/search-aware --out runs/search-aware
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sip_core.model.loading import load_prefix_init, load_sip, mean_prefix, save_model, save_prefix_init  # noqa: E402
from sip_core.model.sip_model import ready_mask  # noqa: E402
from sip_core.train import runtime  # noqa: E402
from sip_core.train.batching import DeviceSplit  # noqa: E402
from sip_core.train.data import fst_table_from_arrow, make_split  # noqa: E402
from sip_core.train.pretrain import exact_match  # noqa: E402


class StringBank:
    """Every FST's strings of one split, ``per_fst`` each, as one DeviceSplit (example ``f * per_fst + j`` is string
    j of FST f) whose batches carry the FSTs' gold encodings too."""

    def __init__(self, examples, split: str, fsts, device):
        part = examples[examples.split == split].sort_values("fst_id", kind="stable")
        per_fst = part.groupby("fst_id").size()
        if len(per_fst) != len(fsts.fst_ids) or per_fst.nunique() != 1:
            raise SystemExit(f"search_aware: every FST needs the same number of {split} strings")
        self.per_fst = int(per_fst.iloc[0])
        self.data = DeviceSplit(make_split(part.input.tolist(), part.output.tolist(), fst_rows=part.fst_id.to_numpy()),
                                device, fsts, use_fsts=True)

    def examples(self, fsts: np.ndarray, strings: np.ndarray) -> np.ndarray:
        return (fsts[:, None] * self.per_fst + strings).ravel()

    def sample(self, fsts: np.ndarray, k: int, rng: np.random.Generator) -> dict:
        """A batch of k random strings of each FST: input_ids, attention_mask, labels, fst (gold), encoder_width."""
        return self.data.batch(self.examples(fsts, rng.integers(self.per_fst, size=(len(fsts), k))))


class PrefixPopulation:
    """``slots`` tuned prefixes, each on its own FST for ``lifetime`` Adam steps (cosine LR by its own age)."""

    def __init__(self, slots: int, length: int, d_model: int, lifetime: int, lr: float, device):
        self.prefix = torch.zeros(slots, length, d_model, device=device)
        self.m = torch.zeros_like(self.prefix)
        self.v = torch.zeros_like(self.prefix)
        self.age = torch.zeros(slots, dtype=torch.long, device=device)
        # staggered first lifetimes, so that at any step some prefixes are mature and some fresh
        self.life = torch.linspace(lifetime / slots, lifetime, slots, device=device).round().long().clamp(min=1)
        self.fst = np.zeros(slots, dtype=np.int64)  # each slot's FST (host: it indexes the banks' batches)
        self.lifetime, self.lr = lifetime, lr

    def reset(self, slots: torch.Tensor, fsts: np.ndarray, inits: torch.Tensor) -> None:
        self.prefix[slots] = inits
        self.m[slots] = 0
        self.v[slots] = 0
        self.age[slots] = 0
        self.fst[slots.cpu().numpy()] = fsts

    def step(self, slots: torch.Tensor, grad: torch.Tensor, betas=(0.9, 0.999), eps=1e-8) -> None:
        """One Adam step of each slot's prefix (torch.optim.Adam's update, per slot)."""
        t = (self.age[slots] + 1).float()[:, None, None]
        frac = self.age[slots].float() / self.life[slots].float()
        lr = (self.lr * 0.5 * (1 + torch.cos(math.pi * frac)))[:, None, None]
        m = self.m[slots] * betas[0] + (1 - betas[0]) * grad
        v = self.v[slots] * betas[1] + (1 - betas[1]) * grad * grad
        self.m[slots], self.v[slots] = m, v
        update = (m / (1 - betas[0] ** t)) / ((v / (1 - betas[1] ** t)).sqrt() + eps)
        self.prefix[slots] -= lr * update
        self.age[slots] += 1

    def mature(self, slots: torch.Tensor) -> torch.Tensor:
        return self.age[slots] * 2 >= self.life[slots]

    def expired(self) -> torch.Tensor:
        return (self.age >= self.life).nonzero().flatten()


def prefixed_loss(model, prefix: torch.Tensor, batch: dict) -> torch.Tensor:
    """Seq2seq loss with a (B, L, d) tuned prefix before the bytes, as `sip finetune` feeds it ([prefix | bytes])."""
    t5 = model.t5
    embeds = torch.cat([prefix.to(t5.shared.weight.dtype), t5.shared(batch["input_ids"])], 1)
    full = torch.cat([torch.ones(prefix.shape[:2], dtype=torch.bool, device=embeds.device),
                      batch["attention_mask"].bool()], 1)
    return t5(inputs_embeds=embeds, attention_mask=ready_mask(full, t5.config._attn_implementation),
              labels=batch["labels"]).loss


def gold_accuracy(model, check: DeviceSplit, autocast) -> float:
    """Greedy exact match % with the gold encodings on ``check`` (the held-out FSTs' long strings)."""
    return float(exact_match(model, check, 512, autocast)["acc"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="models/sip-d4")
    ap.add_argument("--data", default="data/gpu/search-aware")
    ap.add_argument("--out", required=True)
    ap.add_argument("--slots", type=int, default=64, help="prefixes tuned at once (each step tunes all)")
    ap.add_argument("--lifetime", type=int, default=300, help="Adam steps of one prefix before its FST is replaced")
    ap.add_argument("--prefix-lr", type=float, default=0.3)
    ap.add_argument("--prefix-length", type=int, default=80)
    ap.add_argument("--init-fsts", type=int, default=32, help="FSTs averaged into a prefix init (the paper's 32)")
    ap.add_argument("--short-per-fst", type=int, default=16)
    ap.add_argument("--long-per-fst", type=int, default=8)
    ap.add_argument("--gold-per-fst", type=int, default=8, help="strings per FST (half short, half long) of the gold loss")
    ap.add_argument("--gold-weight", type=float, default=1.0)
    ap.add_argument("--gold-long-fraction", type=float, default=0.5, help="share of the gold strings that are long")
    ap.add_argument("--gold-size-power", type=float, default=0.0,
                    help="draw gold FSTs with probability ~ transitions^P (0: uniform; sweep 27 lost the large ones)")
    ap.add_argument("--prefix-weight", type=float, default=1.0, help="weight of the long-string loss through tuned prefixes")
    ap.add_argument("--holdout-fsts", type=int, default=100, help="FSTs kept out of training for the gold check")
    ap.add_argument("--check-every", type=int, default=250, help="steps between gold checks on the held-out FSTs' long strings")
    ap.add_argument("--check-per-fst", type=int, default=4)
    ap.add_argument("--check-min-transitions", type=int, default=40, help="held-out FSTs are this large at least")
    ap.add_argument("--min-gold-acc", type=float, default=None,
                    help="save the weights of the last check at or above this (not the last step's); stop at the first below")
    ap.add_argument("--lr", type=float, default=1e-4, help="body LR (AdamW, warmup then cosine to 10%%)")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--max-minutes", type=float, default=None)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()

    device = runtime.pick_device(args.device)
    autocast = runtime.set_precision(args.precision, device, "off")
    runtime.seed_everything(args.seed)
    gen = torch.Generator().manual_seed(args.seed)  # the prefix inits
    rng = np.random.default_rng(args.seed)  # the strings and FSTs drawn
    model = load_sip(args.model).to(device=device, dtype=torch.float32)
    model.train()
    fst_sample = load_prefix_init(args.model)
    cfg = model.config
    data = Path(args.data)
    table = fst_table_from_arrow(pq.read_table(data / "fsts.parquet"), cfg.num_states, cfg.symbols)
    n_fsts = len(table.fst_ids)
    if not np.array_equal(table.fst_ids, np.arange(n_fsts)):
        raise SystemExit("search_aware: fsts.parquet must number its FSTs 0..n-1 in order")
    examples = pq.read_table(data / "examples.parquet").to_pandas()
    short = StringBank(examples, "short", table, device)
    long = StringBank(examples, "long", table, device)
    # held out for the gold check: the last --holdout-fsts FSTs of the bank with at least --check-min-transitions
    # (Table 1's FSTs have 49-67; sweep 27 lost the large ones first); never tuned, never in the gold term
    sizes = table.n_transitions
    big = np.flatnonzero(sizes >= args.check_min_transitions)
    held = big[-args.holdout_fsts:] if args.holdout_fsts else big[:0]
    train_ids = np.setdiff1d(np.arange(n_fsts), held)
    if len(train_ids) < args.slots:
        raise SystemExit(f"search_aware: {len(train_ids)} FSTs left after the holdout, fewer than --slots {args.slots}")
    check = DeviceSplit(long.data.split.subset(long.examples(held, np.arange(args.check_per_fst)[None, :])), device,
                        table, use_fsts=True)
    gold_odds = sizes[train_ids].astype(np.float64) ** args.gold_size_power
    gold_odds /= gold_odds.sum()

    def inits(k: int) -> torch.Tensor:
        return torch.stack([mean_prefix(model.fst_encoder, fst_sample, args.init_fsts, args.prefix_length, gen,
                                        model.t5.shared) for _ in range(k)])

    pop = PrefixPopulation(args.slots, args.prefix_length, cfg.d_model, args.lifetime, args.prefix_lr, device)
    all_slots = torch.arange(args.slots, device=device)
    next_fst = args.slots
    pop.reset(all_slots, train_ids[:args.slots], inits(args.slots))
    body = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(body, lr=args.lr, betas=(0.9, 0.98), weight_decay=0.0)

    def body_lr(step: int) -> float:
        """Warmup, then a cosine to 10% over the steps or the minutes, whichever runs out first."""
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        frac = (step - args.warmup) / max(1, args.steps - args.warmup)
        if args.max_minutes:
            frac = max(frac, (time.monotonic() - t0) / (60 * args.max_minutes))
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))

    log, window, fsts_used = [], {}, args.slots
    t0 = time.monotonic()
    step = 0
    kept = None  # --min-gold-acc: (step, weights) of the last check that passed
    if args.check_every and len(held):
        print(json.dumps({"step": 0, "gold_long_acc": gold_accuracy(model, check, autocast)}), flush=True)
        if args.min_gold_acc is not None:
            kept = (0, {k: v.detach().clone() for k, v in model.state_dict().items()})
    for step in range(args.steps):
        if args.max_minutes and time.monotonic() - t0 > 60 * args.max_minutes:
            break
        # 1. the search: one Adam step of every prefix on its FST's short strings (the body's weights get no gradient)
        batch = short.sample(pop.fst, args.short_per_fst, rng)
        prefix = pop.prefix.clone().requires_grad_(True)
        with autocast():
            loss_short = prefixed_loss(model, prefix.repeat_interleave(args.short_per_fst, 0), batch)
        (grad,) = torch.autograd.grad(loss_short, prefix)
        with torch.no_grad():
            pop.step(all_slots, grad)
        # 2. the body: long strings through the mature prefixes, and the gold encodings' SIP loss
        mature = all_slots[pop.mature(all_slots)]
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss_long = torch.zeros((), device=device)
            if len(mature):
                batch = long.sample(pop.fst[mature.cpu().numpy()], args.long_per_fst, rng)
                loss_long = prefixed_loss(model, pop.prefix[mature].repeat_interleave(args.long_per_fst, 0), batch)
            # gold: as many FSTs as slots, drawn from the whole bank (not the population's: no body fit to a few FSTs)
            fsts = rng.choice(train_ids, args.slots, p=gold_odds)
            n_long = round(args.gold_long_fraction * args.gold_per_fst)
            loss_gold = sum(k * model(**bank.sample(fsts, k, rng)).loss
                            for k, bank in ((args.gold_per_fst - n_long, short), (n_long, long)) if k) / args.gold_per_fst
            loss = args.prefix_weight * loss_long + args.gold_weight * loss_gold
        loss.backward()
        if args.clip:
            torch.nn.utils.clip_grad_norm_(body, args.clip)
        for group in opt.param_groups:
            group["lr"] = body_lr(step)
        opt.step()
        # 3. expired prefixes: fresh FSTs, fresh inits
        done = pop.expired()
        if len(done):
            fresh = train_ids[(np.arange(len(done)) + next_fst) % len(train_ids)]
            next_fst += len(done)
            fsts_used += len(done)
            pop.reset(done, fresh, inits(len(done)))
            pop.life[done] = args.lifetime
        for name, value in (("short", loss_short), ("long", loss_long), ("gold", loss_gold)):
            window.setdefault(name, []).append(float(value.detach()))
        window.setdefault("mature", []).append(len(mature))
        if args.check_every and len(held) and (step + 1) % args.check_every == 0:
            acc = gold_accuracy(model, check, autocast)
            window["gold_long_acc"] = [acc]
            if args.min_gold_acc is not None:
                if acc < args.min_gold_acc:
                    print(f"gold check {acc:.1f} < {args.min_gold_acc} at step {step + 1}: stopping", flush=True)
                    break
                kept = (step + 1, {k: v.detach().clone() for k, v in model.state_dict().items()})
        if (step + 1) % args.log_every == 0:
            row = {"step": step + 1, "seconds": round(time.monotonic() - t0, 1), "fsts": fsts_used,
                   "lr": round(opt.param_groups[0]["lr"], 7),
                   **{k: round(float(np.mean(v)), 4) for k, v in window.items()}}
            log.append(row)
            window = {}
            print(json.dumps(row), flush=True)
    out = Path(args.out)
    model.eval()
    if kept is not None:
        model.load_state_dict(kept[1])
    save_model(model, out, dtype=torch.bfloat16)
    save_prefix_init(out, fst_sample)
    meta = {"args": vars(args), "steps": step + 1, "saved_step": kept[0] if kept else step + 1, "seconds": round(time.monotonic() - t0, 1), "fsts_used": fsts_used,
            "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "curve": log,
            "commit": runtime.git_commit()}
    (out / "search_aware.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"saved {out} (the weights of step {meta['saved_step']}) after {step + 1} steps, {meta['seconds']} s, "
          f"{fsts_used} FSTs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
