"""``sip finetune --prefix search``: find the task's FST by local search in which the frozen pre-trained body is the
only judge, then tune from that FST's encoding as ``--prefix induced`` does.

Why: gradient steps from the paper's mean init end off the manifold of FST encodings (sessions 43 and 51), and only
a prefix that starts at the right machine extrapolates (``--prefix induced``: 98.2% on Table 1's iteration tasks).
``induced`` finds that machine with OSTIA, a learner of its own; here the body, which simulates a given FST at 99%,
scores candidate machines instead: a candidate is good when the body, reading its encoding, gives the training
outputs a low loss. An extension, not the paper's method (DEVIATIONS.md).

The space: deterministic machines with ``states`` states over the training inputs' symbols. Every (state, symbol)
has a destination and an output (one symbol of the training outputs, or ε); a state may instead carry the one
shorthand arc ``<id>`` (each symbol to itself), as pre-training FSTs do. Which transitions exist is not searched:
a candidate keeps those that its own runs over the training inputs use, and its final states are where those runs
end, so every candidate accepts every training input and its encoding is as large as what the data exercise.

Each step proposes single edits of the current machine (a destination, an output, a state's shorthand), scores
them and the current machine on one minibatch by the body's summed token loss (teacher forced, as training), and
keeps the best. The search stops when its machine reproduces every training pair (checked by running the machine
itself, `Machine.apply`) or after ``steps``.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from sip_core.data.tables import fst_table
from sip_core.errors import SipError
from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine
from sip_core.model import tokenizer
from sip_core.train.data import fst_table_from_arrow

NO_SHORTHAND = -1
P_SHORTHAND_EDIT = 0.05  # with shorthands=True; the rest split evenly between destination and output edits


@dataclass
class Space:
    """What a candidate is made of, and the training inputs its runs are computed on."""
    states: int
    inputs: str                 # the training inputs' symbols, in the model's order
    outputs: tuple[str, ...]    # ε first, then the training outputs' symbols
    x: torch.Tensor             # (N, L) symbol indices of the search's training inputs, -1 past the end
    lengths: torch.Tensor       # (N,)


@dataclass
class Candidate:
    dst: torch.Tensor           # (S, A) destination of each (state, input symbol)
    out: torch.Tensor           # (S, A) index into Space.outputs
    short_dst: torch.Tensor     # (S,) destination of the state's <id> arc, NO_SHORTHAND where it has none

    def copy(self) -> "Candidate":
        return Candidate(self.dst.clone(), self.out.clone(), self.short_dst.clone())


def make_space(pairs, symbols: list[str], states: int, device) -> Space:
    known = set(symbols)
    unknown = sorted({c for x, y in pairs for c in x + y} - known)
    if unknown:
        raise SipError(f"--prefix search: the model embeds no symbol for {''.join(unknown)[:20]!r}")
    order = {s: i for i, s in enumerate(symbols)}
    ins = sorted({c for x, _ in pairs for c in x}, key=order.get)
    outs = (V.EPS,) + tuple(sorted({c for _, y in pairs for c in y}, key=order.get))
    index = {c: i for i, c in enumerate(ins)}
    width = max((len(x) for x, _ in pairs), default=0)
    x = torch.full((len(pairs), max(width, 1)), -1, dtype=torch.long)
    for r, (inp, _) in enumerate(pairs):
        x[r, : len(inp)] = torch.tensor([index[c] for c in inp], dtype=torch.long)
    lengths = torch.tensor([len(inp) for inp, _ in pairs], dtype=torch.long)
    return Space(states, "".join(ins), outs, x.to(device), lengths.to(device))


def random_candidate(space: Space, rng: random.Random) -> Candidate:
    s, a = space.states, len(space.inputs)
    gen = torch.Generator().manual_seed(rng.getrandbits(63))
    dst = torch.randint(s, (s, a), generator=gen)
    out = torch.randint(len(space.outputs), (s, a), generator=gen)
    device = space.x.device
    return Candidate(dst.to(device), out.to(device), torch.full((s,), NO_SHORTHAND, dtype=torch.long, device=device))


def runs(space: Space, cands: list[Candidate]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every candidate's runs over the space's inputs at once: (used (B, S, A): the (state, symbol) arcs taken,
    short_used (B, S): states whose <id> arc is taken, ends (B, N): each input's last state)."""
    dst = torch.stack([c.dst for c in cands])
    short = torch.stack([c.short_dst for c in cands])
    b, s, a = dst.shape
    n = space.x.shape[0]
    rows = torch.arange(b, device=dst.device).unsqueeze(1).expand(b, n)
    state = torch.zeros(b, n, dtype=torch.long, device=dst.device)
    used = torch.zeros(b, s * a, dtype=torch.bool, device=dst.device)
    short_used = torch.zeros(b, s, dtype=torch.bool, device=dst.device)
    for t in range(space.x.shape[1]):
        sym = space.x[:, t].unsqueeze(0).expand(b, n)
        active = sym >= 0
        sd = short[rows, state]
        is_short = sd != NO_SHORTHAND
        arc = state * a + sym.clamp(min=0)
        nxt = torch.where(is_short, sd, dst.view(b, -1).gather(1, arc))
        take = active & ~is_short
        used.view(-1)[(rows * (s * a) + arc)[take]] = True
        short_used.view(-1)[(rows * s + state)[active & is_short]] = True
        state = torch.where(active, nxt, state)
    return used.view(b, s, a), short_used, state


def canonical(n_states: int, trans: list, finals: tuple, vocab: str) -> tuple[Machine, list[int]]:
    """The machine numbered as in pre-training (`Machine.renumbered_bfs`: breadth first from state 0, transitions
    state by state keeping their order) and, per transition of it, its index in ``trans``."""
    by_src: list[list[int]] = [[] for _ in range(n_states)]
    for k, t in enumerate(trans):
        by_src[t[0]].append(k)
    order, queue = {0: 0}, [0]
    for q in queue:
        for k in by_src[q]:
            d = trans[k][3]
            if d not in order:
                order[d] = len(order)
                queue.append(d)
    slots = [k for q in queue for k in by_src[q]]
    machine = Machine(len(order), tuple(sorted(order[q] for q in finals if q in order)),
                      tuple((order[trans[k][0]], trans[k][1], trans[k][2], order[trans[k][3]]) for k in slots), vocab)
    return machine, slots


def to_machines(space: Space, cands: list[Candidate]) -> tuple[list[Machine], list[list[tuple[int, int]]]]:
    """Each candidate as the machine its runs over the space's inputs exercise, numbered as in pre-training, and
    per prefix slot of it the (state, symbol index) arc it encodes (symbol -1: a state's <id> arc)."""
    used, short_used, ends = runs(space, cands)
    used, short_used, ends = used.cpu().numpy(), short_used.cpu().numpy(), ends.cpu().numpy()
    machines, arcs = [], []
    for i, c in enumerate(cands):
        dst, out, short = c.dst.cpu().numpy(), c.out.cpu().numpy(), c.short_dst.cpu().numpy()
        trans, where = [], []
        for q in range(space.states):
            if short[q] != NO_SHORTHAND:
                if short_used[i, q]:
                    trans.append((q, V.ID, V.ID, int(short[q])))
                    where.append((q, -1))
                continue
            for a in np.flatnonzero(used[i, q]):
                trans.append((q, space.inputs[a], space.outputs[out[q, a]], int(dst[q, a])))
                where.append((q, int(a)))
        machine, slots = canonical(space.states, trans, tuple(sorted({int(e) for e in ends[i]})), space.inputs)
        machines.append(machine)
        arcs.append([where[k] for k in slots])
    return machines, arcs


def encode_machines(machines: list[Machine], num_states: int, symbols: list[str], device) -> torch.Tensor:
    """(B, T, 5) transition rows of the machines, zero-padded, through the pre-training data path."""
    table = fst_table_from_arrow(fst_table([{"fst_id": i, "split": "search", "machine": m}
                                            for i, m in enumerate(machines)]), num_states, symbols)
    counts = np.diff(table.offsets)
    rows = np.zeros((len(machines), max(int(counts.max(initial=0)), 1), 5), dtype=np.int64)
    for i, (lo, n) in enumerate(zip(table.offsets[:-1], counts)):
        rows[i, :n] = table.transitions[lo: lo + n]
    return torch.from_numpy(rows).to(device)


class BodyScorer:
    """Summed token loss of the training outputs through each candidate's encoding, the body frozen."""

    def __init__(self, model, pairs, device, autocast, max_rows: int = 2048):
        self.model, self.device, self.autocast, self.max_rows = model, device, autocast, max_rows
        self.inputs = self._padded([x for x, _ in pairs], 0)
        self.labels = self._padded([y for _, y in pairs], -100)
        self.input_lengths = torch.tensor([len(x.encode("utf-8")) + 1 for x, _ in pairs])
        self.label_lengths = torch.tensor([len(y.encode("utf-8")) + 1 for _, y in pairs])

    def _padded(self, texts: list[str], fill: int) -> torch.Tensor:
        ids, offsets = tokenizer.encode_many(texts)
        width = int(np.diff(offsets).max())
        out = torch.full((len(texts), width), fill, dtype=torch.long)
        for r in range(len(texts)):
            row = ids[offsets[r]: offsets[r + 1]]
            out[r, : len(row)] = torch.from_numpy(row.astype(np.int64))
        return out.to(self.device)

    def _rows(self, idx: torch.Tensor):
        in_w, lab_w = int(self.input_lengths[idx].max()), int(self.label_lengths[idx].max())
        idx = idx.to(self.device)
        return self.inputs[idx, :in_w], self.labels[idx, :lab_w]

    def _losses(self, fst: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """(B,) summed token loss of the M examples through each of the B transition rows ``fst``."""
        b, m = fst.shape[0], inputs.shape[0]
        batch_labels = labels.repeat(b, 1)
        with self.autocast():
            logits = self.model(input_ids=inputs.repeat(b, 1), attention_mask=(inputs != 0).long().repeat(b, 1),
                                labels=batch_labels, fst=fst.repeat_interleave(m, 0),
                                encoder_width=fst.shape[1] + inputs.shape[1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), batch_labels, ignore_index=-100,
                                                 reduction="none")
        return loss.sum(1).view(b, m).sum(1)

    @torch.no_grad()
    def __call__(self, fst: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """(B,) summed loss of examples ``idx`` through each of the B candidates' transition rows ``fst``."""
        inputs, labels = self._rows(idx)
        per_chunk = max(1, self.max_rows // len(idx))
        return torch.cat([self._losses(fst[lo: lo + per_chunk], inputs, labels)
                          for lo in range(0, fst.shape[0], per_chunk)])

    def slot_gradients(self, fst: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """(T, d_model): gradient of the summed loss of examples ``idx`` with respect to each prefix vector of the
        one machine ``fst`` (1, T, 5); the body's parameters get no gradient."""
        captured = {}

        def leaf(module, args, output):  # the encoder's vectors become the leaf we differentiate by
            captured["vectors"] = output[0].detach().requires_grad_(True)
            return captured["vectors"], output[1]

        handle = self.model.fst_encoder.register_forward_hook(leaf)
        try:
            with torch.enable_grad():
                loss = self._losses(fst, *self._rows(idx)).sum()
                (grad,) = torch.autograd.grad(loss, captured["vectors"])
        finally:
            handle.remove()
        return grad[0].float()


def output_directions(fst_encoder, byte_embedding, symbols: list[str], outputs: tuple[str, ...]) -> torch.Tensor:
    """(n_outputs, d_model): what each output symbol adds to a transition's encoding (the encoder is linear in its
    columns, so a slot's change under an output edit is the difference of two rows)."""
    order = {s: i for i, s in enumerate(symbols)}
    ids = torch.tensor([order[o] for o in outputs], device=fst_encoder.project.weight.device)
    with torch.no_grad():
        table = fst_encoder.symbols(ids, byte_embedding).float()
        state_dim = fst_encoder.state_embedding.embedding_dim
        width = table.shape[1]
        block = fst_encoder.project.weight[:, 2 * state_dim + width: 2 * state_dim + 2 * width].float()
        return table @ block.T


def best_outputs(grad: torch.Tensor, directions: torch.Tensor, arcs: list[tuple[int, int]], current: Candidate,
                 k: int) -> dict[tuple[int, int], list[int]]:
    """Per ordinary arc, the ``k`` other outputs whose edit the gradient says lowers the loss most (first order)."""
    gain = grad @ directions.T                       # (T, n_outputs): loss change ~ gain[new] - gain[current]
    top = {}
    for slot, (q, a) in enumerate(arcs):
        if a < 0:
            continue
        row = gain[slot].clone()
        row[int(current.out[q, a])] = float("inf")
        top[(q, a)] = torch.topk(-row, min(k, len(row) - 1)).indices.tolist()
    return top


def propose(space: Space, current: Candidate, arcs: list[tuple[int, int]], top: dict, rng: random.Random,
            shorthands: bool = False) -> Candidate:
    """One single edit of ``current`` among the arcs and states its runs use: a destination (at random), an output
    (among the gradient's best for that arc, ``top``), or a state's <id> arc."""
    cand = current.copy()
    ordinary = [(q, a) for q, a in arcs if a >= 0]
    if (shorthands and rng.random() < P_SHORTHAND_EDIT) or not ordinary:
        q = rng.choice(sorted({q for q, _ in arcs})) if arcs else 0
        if cand.short_dst[q] == NO_SHORTHAND or rng.random() < 0.5:
            cand.short_dst[q] = rng.randrange(space.states)
        else:
            cand.short_dst[q] = NO_SHORTHAND
        return cand
    q, a = rng.choice(ordinary)
    if rng.random() < 0.5 and space.states > 1:
        cand.dst[q, a] = (int(cand.dst[q, a]) + rng.randrange(1, space.states)) % space.states
    elif top.get((q, a)):
        cand.out[q, a] = rng.choice(top[(q, a)])
    return cand


def train_accuracy(machine: Machine, pairs) -> float:
    """Share of ``pairs`` the machine itself maps right: the search's stopping rule, independent of the body."""
    return sum(machine.apply(x) == y for x, y in pairs) / max(len(pairs), 1)


@dataclass
class SearchResult:
    machine: Machine
    steps: int
    seconds: float
    train_acc: float
    log: list[dict] = field(default_factory=list)


def search_machine(model, pairs, symbols: list[str], num_states: int, device, autocast, rng: random.Random, *,
                   states: int = 4, steps: int = 1000, candidates: int = 64, batch: int = 32, subset: int = 1000,
                   top_k: int = 4, shorthands: bool = False, max_seconds: float = 0.0, check_every: int = 50,
                   progress=None, start: Candidate | None = None) -> SearchResult:
    """The best machine the local search finds for ``pairs`` (see the module docstring), from ``start`` (over
    ``make_space``'s symbols) or a random machine."""
    if not 0 < states <= num_states:
        raise SipError(f"--prefix-search-states must be in 1..{num_states} (the model's states), not {states}")
    if candidates < 2 or batch < 1 or subset < 1:
        raise SipError("--prefix-search-candidates must be >= 2, --prefix-search-batch and --prefix-search-subset >= 1")
    started = time.monotonic()
    pairs = list(pairs)
    chosen = rng.sample(range(len(pairs)), min(subset, len(pairs)))
    sub = [pairs[i] for i in chosen]
    space = make_space(pairs, symbols, states, device)
    space_sub = Space(space.states, space.inputs, space.outputs, space.x[torch.tensor(chosen, device=device)],
                      space.lengths[torch.tensor(chosen, device=device)])
    scorer = BodyScorer(model, sub, device, autocast)
    directions = output_directions(model.fst_encoder, model.t5.shared, symbols, space.outputs)
    current = random_candidate(space, rng) if start is None else start.copy()
    log, step, best_acc, losses_since = [], 0, 0.0, []
    was_training = model.training
    model.eval()
    try:
        while True:
            out_of_time = bool(max_seconds) and time.monotonic() - started > max_seconds
            if step % check_every == 0 or step == steps or out_of_time:
                machine = to_machines(space, [current])[0][0]
                best_acc = train_accuracy(machine, pairs)
                log.append({"step": step, "train_acc": round(100 * best_acc, 2),
                            "transitions": len(machine.transitions),
                            "loss": round(float(np.mean(losses_since)), 4) if losses_since else None,
                            "seconds": round(time.monotonic() - started, 1)})
                losses_since = []
                if progress is not None:
                    progress(log[-1])
                if best_acc == 1.0 or step == steps or out_of_time:
                    break
            idx = torch.tensor(rng.sample(range(len(sub)), min(batch, len(sub))))
            here, arcs = to_machines(space_sub, [current])
            grad = scorer.slot_gradients(encode_machines(here, num_states, symbols, device), idx)
            top = best_outputs(grad, directions, arcs[0], current, top_k)
            cands = [current] + [propose(space, current, arcs[0], top, rng, shorthands) for _ in range(candidates - 1)]
            losses = scorer(encode_machines(to_machines(space_sub, cands)[0], num_states, symbols, device), idx)
            best = int(torch.argmin(losses))  # ties keep the current machine (index 0)
            current = cands[best]
            losses_since.append(float(losses[best]) / int(scorer.label_lengths[idx].sum()))
            step += 1
    finally:
        model.train(was_training)
    return SearchResult(to_machines(space, [current])[0][0], step, time.monotonic() - started, best_acc, log)
