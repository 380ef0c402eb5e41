"""Read the machine a fine-tuned SIP model believes in off its own states (``sip finetune --prefix readout``).

Why: a prefix tuned from the paper's mean init fits Table 1's short training strings but drifts on the longer test
strings, while the same body given the task's FST as its prefix does not (98.2% with ``--prefix induced``). If the
tuned model's states on the training strings are the task's states, the machine they imply can be read off and the
prefix restarted from that machine's encoding: the model, not an outside learner, finds the machine; the
encoding only puts it back on the manifold the body was pre-trained on. An extension, not the paper's method.

The reading: the pre-trained (frozen) state head gives a state id after every character of every training input;
the majority successor per (state, character) is the transition graph (`consistency.transition_graph`); each
training pair then fixes the outputs along its path, since a transition writes one symbol or nothing
(`solve_outputs`). The graph's start is a node of its own (the head reads no state before the first character),
so the machine has one more state than the head used; a greedy state merge (`merge_states`, the fold of OSTIA and
RPNI, kept only where every training pair still maps right) joins it to the state it behaves as, then
`minimize_or_keep`. The machine is only used where it maps every training pair right (``--readout-min-acc``,
checked by running it, `Machine.apply`); otherwise the second pass starts from the paper's mean init.

``--readout-repair``: a head that is systematically wrong on one (state, character) sends every path through that
arc astray, and the machine misses 1-3% of the pairs (sweep 37, seed 1), or 20-50% where the arc leaves the start.
`repair_graph` then sends the head's steps along one of the arcs most to blame to the node that makes the most
training pairs come out right and votes the graph again, so that the arcs downstream of the wrong one are re-voted
from their right traffic (session 63; session 62 changed the one arc alone). A wrong start arc is two arcs of the
graph (its own start and the head's name for the start state), so where no single change helps, a start arc and
its twin change together; and where even that fails, a node the head never named (a state only the wrong arc
leads to). Checked in simulation (`experiments/repair_check.py`): see docs/EXPERIMENTS.md, sessions 62-63.

``--readout-tries K``: where the reading (repaired or not) still misses pairs, the first pass runs again at the
next seed, up to K passes, and the reading that maps the most training pairs is kept.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sip_core.errors import SipError
from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine
from sip_core.fst.minimize_py import minimize_or_keep
from sip_core.io import write_json
from sip_core.train import restarts
from sip_core.train.batching import DeviceSplit
from sip_core.train.consistency import START, read_states, transition_graph
from sip_core.train.data import make_split
from sip_core.train.induced_prefix import task_symbols

Arc = tuple[int, str]  # (source state, input character)


@dataclass
class Readout:
    machine: Machine | None   # None where the reading gives no machine (a path leaves the graph)
    agreement: float          # share of the head's per-character states that the majority graph agrees with
    train_acc: float          # share of the training pairs the machine maps right
    unsolved: int             # transitions whose output no training pair determined (written as ε)
    repairs: list = ()        # arcs `repair_graph` changed: (arc, old successor, new successor)

    def summary(self) -> str:
        size = (f"{self.machine.n_states} states, {len(self.machine.transitions)} transitions"
                if self.machine is not None else "no machine")
        return (f"{size}, head agreement {100 * self.agreement:.2f}%, machine's train accuracy "
                f"{100 * self.train_acc:.2f}%, {self.unsolved} outputs undetermined"
                + (f", {len(self.repairs)} arcs repaired" if self.repairs else ""))


MAX_ROUNDS = 50  # of pruning; each round only removes values, and clean data settle in a few


def _occurrence_fits(path: list[Arc], y: str, cands: dict[Arc, frozenset[str]]) -> list[frozenset[str]]:
    """Per position of ``path``: the values of its arc (among ``cands``) with which some choice of the other
    positions' values (each from its own arc's candidates, independently) writes ``y``. Reachable output
    positions are bitmasks: bit j of ``fwd[i]`` says that the first i arcs can write ``y[:j]``."""
    n, m = len(path), len(y)
    at = {}  # symbol -> bitmask of the positions j where y[j] is that symbol
    for j, ch in enumerate(y):
        at[ch] = at.get(ch, 0) | (1 << j)

    def step(reach: int, values: frozenset[str]) -> int:
        nxt = reach if V.EPS in values else 0
        for v in values:
            if v != V.EPS:
                nxt |= (reach & at.get(v, 0)) << 1
        return nxt

    fwd = [1]
    for arc in path:
        fwd.append(step(fwd[-1], cands[arc]))
    bwd = [0] * n + [1 << m]  # bit j of bwd[i]: arcs i.. can write y[j:]
    for i in range(n - 1, -1, -1):
        values, later = cands[path[i]], bwd[i + 1]
        here = later if V.EPS in values else 0
        for v in values:
            if v != V.EPS:
                here |= (later >> 1) & at.get(v, 0)
        bwd[i] = here
    fits = []
    for i, arc in enumerate(path):
        ok = {v for v in cands[arc]
              if (v == V.EPS and fwd[i] & bwd[i + 1]) or (v != V.EPS and ((fwd[i] & at.get(v, 0)) << 1) & bwd[i + 1])}
        fits.append(frozenset(ok))
    return fits


def _prune(paths: list[list[Arc]], outputs: list[str], cands: dict[Arc, frozenset[str]]) -> dict[Arc, frozenset[str]]:
    """Keep, per arc, the values that fit at the most of its occurrences (at all of them, where the paths are
    right), until nothing changes."""
    for _ in range(MAX_ROUNDS):
        counts: dict[Arc, Counter] = {arc: Counter() for arc in cands}
        for path, y in zip(paths, outputs):
            for arc, ok in zip(path, _occurrence_fits(path, y, cands)):
                counts[arc].update(ok)
        pruned = {}
        for arc, c in counts.items():
            best = max(c.values(), default=0)
            pruned[arc] = frozenset(v for v, k in c.items() if k == best) if best else cands[arc]
        if pruned == cands:
            break
        cands = pruned
    return cands


def solve_outputs(paths: list[list[Arc]], outputs: list[str]) -> tuple[dict[Arc, str], int]:
    """One output per arc (a symbol, or ``V.EPS``: a transition writes one symbol or nothing) such that each
    path writes its output. Values are pruned by what every occurrence of an arc allows (`_prune`); an arc left
    with several is fixed to its first (ε, then the model's order of symbols is not known here: sorted) and the
    rest pruned again. Returns the outputs and how many arcs had to be fixed that way (the data did not decide)."""
    symbols = frozenset({V.EPS} | {ch for y in outputs for ch in y})
    cands = _prune(paths, outputs, {arc: symbols for path in paths for arc in path})
    guessed = 0
    while open_arcs := sorted(arc for arc, c in cands.items() if len(c) > 1):
        arc = open_arcs[0]
        cands[arc] = frozenset([min(cands[arc])])  # "" (ε) sorts first
        guessed += 1
        cands = _prune(paths, outputs, cands)
    return {arc: next(iter(c)) if c else V.EPS for arc, c in cands.items()}, guessed


def _fold(machine: Machine, p: int, q: int) -> Machine | None:
    """``machine`` with states ``p`` and ``q`` made one, and every pair of states that then reads one symbol into
    two places made one too (the merge of OSTIA and of RPNI), or None where two merged arcs write different
    outputs. The result's language can only grow (a merged state is final if either was)."""
    parent = list(range(machine.n_states))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    arcs: dict[int, dict[str, tuple[str, int]]] = {q0: {} for q0 in range(machine.n_states)}
    for src, a, b, dst in machine.transitions:
        arcs[src][a] = (b, dst)
    todo = [(p, q)]
    while todo:
        x, y = (find(s) for s in todo.pop())
        if x == y:
            continue
        x, y = min(x, y), max(x, y)
        parent[y] = x
        for a, (b, dst) in arcs.pop(y).items():
            if a not in arcs[x]:
                arcs[x][a] = (b, dst)
            elif arcs[x][a][0] != b:
                return None
            else:
                todo.append((arcs[x][a][1], dst))
    live = sorted(arcs)
    index = {r: i for i, r in enumerate(live)}
    transitions = tuple((index[r], a, b, index[find(dst)]) for r in live for a, (b, dst) in sorted(arcs[r].items()))
    finals = tuple(sorted({index[find(f)] for f in machine.finals}))
    return Machine(len(live), finals, transitions, machine.vocab, start=index[find(machine.start)])


def merge_states(machine: Machine, pairs) -> Machine:
    """The fewest states greedy merging reaches while every training pair is still mapped right: two states the
    head told apart may be one state of the task, seen by the training strings from different sides (the
    graph's own start, above all, which the head never names). State pairs are tried in order, and a merge is
    kept only if the merged machine maps every pair that ``machine`` did."""
    right = [(x, y) for x, y in pairs if machine.apply(x) == y]
    merged = True
    while merged:
        merged = False
        for p in range(machine.n_states):
            for q in range(p + 1, machine.n_states):
                folded = _fold(machine, p, q)
                if folded is not None and all(folded.apply(x) == y for x, y in right):
                    machine, merged = folded.renumbered_bfs(), True
                    break
            if merged:
                break
    return machine


def identity_shorthands(machine: Machine) -> Machine:
    """Each state that copies every symbol of the vocabulary to one state gets the one ``<id>`` transition
    instead, as the task generator, pre-training and OSTIA (`Ostia.to_machine`) write it: fewer prefix vectors."""
    by_state: dict[int, list] = {}
    for t in machine.transitions:
        by_state.setdefault(t[0], []).append(t)
    transitions = []
    for q in range(machine.n_states):
        arcs = by_state.get(q, [])
        if ({a for _, a, _, _ in arcs} == set(machine.vocab) and len({d for *_, d in arcs}) == 1
                and all(a == b for _, a, b, _ in arcs)):
            transitions.append((q, V.ID, V.ID, arcs[0][3]))
        else:
            transitions += arcs
    return Machine(machine.n_states, machine.finals, tuple(transitions), machine.vocab).renumbered_bfs()


def _walk(successor: dict[Arc, int], text: str) -> tuple[list[Arc], int | None]:
    """The arcs ``text`` takes from node 0 and the node it ends in (None where an arc is missing: the path's
    last arc is then the missing one)."""
    q, path = 0, []
    for ch in text:
        path.append((q, ch))
        q = successor.get((q, ch))
        if q is None:
            return path, None
    return path, q


def graph_machine(successor: dict[Arc, int], pairs, vocab: str) -> tuple[Machine, int]:
    """The machine of the transition graph ``successor`` (node 0 the start) whose outputs make the most training
    pairs come out right (`solve_outputs`), and how many outputs the pairs left undetermined; a node where a
    training input ends is final."""
    paths, ys, ends = [], [], set()
    for text, y in pairs:
        path, end = _walk(successor, text)
        if end is not None:  # an input that leaves the graph fixes no output
            paths.append(path)
            ys.append(y)
            ends.add(end)
    outs, unsolved = solve_outputs(paths, ys)
    transitions = tuple(sorted((q, ch, outs.get((q, ch), V.EPS), d) for (q, ch), d in successor.items()))
    n_nodes = 1 + max([d for d in successor.values()] + [q for q, _ in successor], default=0)
    return Machine(n_nodes, tuple(sorted(ends)), transitions, vocab), unsolved


def _n_right(machine: Machine, pairs) -> int:
    return sum(machine.apply(x) == y for x, y in pairs)


def _suspects(successor: dict[Arc, int], machine: Machine, pairs) -> Counter:
    """Arcs to blame for the pairs ``machine`` maps wrong: on each such path, the arcs up to the first one whose
    output leaves the target (or that is missing, or the end), the nearer that point the more blame: a wrong
    successor shows up as the next arc's wrong output."""
    blame: Counter = Counter()
    table = machine.table
    for text, y in pairs:
        path, end = _walk(successor, text)
        written, stop = "", len(path) - 1
        for i, arc in enumerate(path):
            hit = table.get(arc)
            if hit is None:
                break
            written += hit[0]
            if not y.startswith(written):
                stop = i
                break
        else:
            if end is not None and written == y and end in machine.final_set:
                continue  # mapped right
        for i in range(stop + 1):
            blame[path[i]] += 1.0 / (stop - i + 1)
    return blame


REPAIR_ROUNDS = 4  # arcs changed at most; one systematically wrong head transition costs 1-3% of the pairs
REPAIR_ARCS = 8    # suspects tried per round, each with every other successor


def _majority(inputs: list[str], seqs: list[np.ndarray]) -> dict[Arc, int]:
    """The majority graph of per-character node sequences (`consistency.transition_graph`), node 0 the start."""
    return {(0 if q == START else q, ch): d for (q, ch), d in transition_graph(inputs, seqs).next.items()}


def _relabel(inputs: list[str], seqs: list[np.ndarray], move: dict[Arc, int]) -> list[np.ndarray]:
    """``seqs`` with the node after every step along an arc of ``move`` replaced by that arc's new node; the steps
    after it then leave from the new node, so the arcs downstream of a wrong one are re-voted too."""
    out = []
    for text, seq in zip(inputs, seqs):
        new, prev = None, 0
        for i, ch in enumerate(text):
            d = move.get((prev, ch))
            if d is not None and d != seq[i]:
                if new is None:
                    new = seq.copy()
                new[i] = d
            prev = int(seq[i] if new is None else new[i])
        out.append(seq if new is None else new)
    return out


def _moves(successor: dict[Arc, int], suspects: list[Arc], targets: list[int], twins: bool):
    """Candidate changes, each a dict of arcs to new nodes among ``targets``: any other for one suspect; with
    ``twins``, any start arc (node 0's: a wrong start arc passes its blame on to the arcs after it) together with
    the same character's arc from one other node, both to one target. Why twins: the head names the start state
    after a return to it, but the graph's start is a node of its own, so one wrong head transition out of the start
    state is two wrong arcs, and either change alone may map no more pairs right."""
    if not twins:
        yield from ({arc: d} for arc in suspects for d in targets if d != successor.get(arc))
        return
    for (q, ch), d in sorted(successor.items()):
        if q != 0:
            continue
        for twin in sorted(a for a in successor if a[1] == ch and a[0] != 0):
            yield from ({(0, ch): t, twin: t} for t in targets if (t, t) != (d, successor[twin]))


def repair_graph(inputs: list[str], seqs: list[np.ndarray], successor: dict[Arc, int], pairs, vocab: str,
                 rounds: int = REPAIR_ROUNDS) -> tuple[dict[Arc, int], list[tuple[Arc, int | None, int]]]:
    """Greedy repair of ``successor``, the majority graph of node sequences ``seqs`` (one node per character of
    each of ``inputs``; node 0 the start), that maps nearly every training pair: per round, send the steps along one of the
    arcs most to blame (`_suspects`) to the node that makes the most pairs come out right, and vote the graph
    again (`_relabel`); where no single change helps, a start arc and its twin together (`_moves`). The head's
    states stay the proposal; the training pairs only correct a few of its transitions. Returns the graph and the
    changes made, as (arc, old successor, new successor)."""
    machine, _ = graph_machine(successor, pairs, vocab)
    right = _n_right(machine, pairs)
    changes = []
    for _ in range(rounds):
        if right == len(pairs):
            break
        suspects = [arc for arc, _ in _suspects(successor, machine, pairs).most_common(REPAIR_ARCS)]
        # the start is a candidate too, and, where nothing else helps, a fresh node: a head wrong on every arc
        # into a state never names that state
        named = sorted({0} | set(successor.values()) | {q for q, _ in successor})
        best = None
        for twins, nodes in ((False, named), (True, named), (False, [named[-1] + 1]), (True, [named[-1] + 1])):
            for move in _moves(successor, suspects, nodes, twins):
                trial_seqs = _relabel(inputs, seqs, move)
                trial = _majority(inputs, trial_seqs)
                m, _ = graph_machine(trial, pairs, vocab)
                n = _n_right(m, pairs)
                if n > (best[0] if best else right):
                    best = (n, trial_seqs, trial, m, [(arc, successor.get(arc), d) for arc, d in move.items()])
            if best is not None:
                break
        if best is None:
            break
        right, seqs, successor, machine, change = best
        changes += change
    return successor, changes


def read_machine(pairs: list[tuple[str, str]], states: list, vocab: str, repair: bool = False) -> Readout:
    """The machine that the per-character state ids ``states`` (one array per training input) imply for
    ``pairs`` (see the module docstring); ``vocab`` is the machine's sub-vocabulary. ``repair``: where that
    machine misses some pairs, first correct a few transitions of the head (`repair_graph`)."""
    inputs = [x for x, _ in pairs]
    graph = transition_graph(inputs, states)
    agree = total = 0
    for text, seq in zip(inputs, states):
        prev = START
        for ch, q in zip(text, seq):
            agree += graph.next[(prev, ch)] == int(q)
            total += 1
            prev = int(q)
    agreement = agree / max(total, 1)
    number = {START: 0}  # START first, so the machine starts at 0; the head's ids after it, in order
    for q in sorted({q for q, _ in graph.next} | set(graph.next.values())):
        number.setdefault(q, len(number))
    # each input's path goes through the majority graph, not the head's own (noisier) states
    successor = {(number[q], ch): number[nxt] for (q, ch), nxt in graph.next.items()}
    def finish(successor):  # the graph's machine, merged and minimised, and the pairs it maps right
        raw, unsolved = graph_machine(successor, pairs, vocab)
        machine = identity_shorthands(minimize_or_keep(merge_states(raw, pairs)))
        return machine, unsolved, _n_right(machine, pairs)

    machine, unsolved, right = finish(successor)
    changes = []
    # only where the finished machine misses pairs: the raw graph may miss some that the merge puts right
    if repair and right < len(pairs):
        seqs = [np.array([number[int(q)] for q in seq], dtype=np.int64) for seq in states]
        successor, changes = repair_graph(inputs, seqs, successor, pairs, vocab)
        machine, unsolved, right = finish(successor)
    return Readout(machine, agreement, right / max(len(pairs), 1), unsolved, changes)


# ---------------------------------------------------------------- the first pass of ``--prefix readout``
DIR = "readout"  # under a task's run directory: the first pass's own run, and the log of what was read
LOG_FILE = "readout.json"
TRY_FILE = "reading.json"  # in each try's run directory: what that try read


def check_args(args) -> None:
    if getattr(args, "prefix", None) != "readout":
        return
    if args.readout_epochs < 1:
        raise SipError("--readout-epochs must be at least 1")
    if not 0 < args.readout_min_acc <= 1:
        raise SipError("--readout-min-acc must be in (0, 1]")
    if args.readout_tries < 1:
        raise SipError("--readout-tries must be at least 1")
    if restarts.enabled(args) or getattr(args, "holdout_longest", 0.0) > 0:
        raise SipError("--prefix readout takes neither --restarts nor --holdout-longest")


def _first_args(args, seed: int) -> argparse.Namespace:
    """The first pass is an ordinary mean-init run, --readout-epochs long, with one test evaluation (for the
    record) at its end."""
    return argparse.Namespace(**{**vars(args), "prefix": "mean", "epochs": args.readout_epochs, "eval_last": 1,
                                 "seed": seed, "report_last": 1, "eval_every": 0, "save_prefix": False})


def _try_dir(out_dir: Path, k: int) -> Path:
    """Try ``k``'s run directory: the first under ``readout/`` (as before tries existed), later ones beside it."""
    return out_dir / (DIR if k == 0 else f"{DIR}-try{k + 1}")


def _one_try(tuner, task_id: str, train_pairs, test_pairs, out_dir: Path, k: int) -> dict:
    """Try ``k`` of the first pass: a mean-init run seeded ``--seed`` + k, and the machine its states imply. Its
    reading is kept in its run directory (``TRY_FILE``), so a run interrupted at a later try skips this one."""
    run_dir = _try_dir(out_dir, k)
    if (run_dir / TRY_FILE).is_file():
        return json.loads((run_dir / TRY_FILE).read_text(encoding="utf-8"))
    args = tuner.args
    tuner.args, tuner.prefix_kind = _first_args(args, args.seed + k), "mean"
    try:
        first = tuner.run(f"{task_id}/{run_dir.name}", train_pairs, test_pairs, run_dir)
    finally:
        tuner.args, tuner.prefix_kind = args, "readout"
    split = DeviceSplit(make_split(*zip(*train_pairs)), tuner.device)
    states = read_states(tuner.model, split, args.eval_batch_size, tuner.autocast)
    result = read_machine(list(train_pairs), states, task_symbols(train_pairs, tuner.model.config.symbols),
                          repair=args.readout_repair)
    reading = {"try": k + 1, "seed": args.seed + k, "first_pass_acc": first["reported"]["acc"],
               "first_pass_steps": first["steps"], "first_pass_wall_seconds": first["wall_seconds"],
               "head_agreement": round(100 * result.agreement, 2),
               "machine_train_acc": round(100 * result.train_acc, 2),
               "machine_train_share": result.train_acc,  # unrounded, for --readout-min-acc
               "undetermined_outputs": result.unsolved, "summary": result.summary(),
               "repairs": [[q, ch, old, new] for (q, ch), old, new in result.repairs],
               "read_machine": result.machine.to_row() if result.machine is not None else None}  # for later study
    print(f"finetune {task_id}: readout after {args.readout_epochs} epochs (try {k + 1}): {result.summary()}",
          flush=True)
    write_json(reading, run_dir / TRY_FILE)
    return reading


def first_pass(tuner, task_id: str, train_pairs, test_pairs, out_dir: Path) -> dict:
    """Run the first pass (unless an interrupted run finished it), read its machine off the training strings and
    return the log; ``log["machine"]`` is the machine's row where it is the start, else None. With
    ``--readout-tries K``, a reading below ``--readout-min-acc`` is followed by another first pass at the next seed,
    up to K in all; the reading that maps the most training pairs is kept (the earliest among equals)."""
    log_file = out_dir / DIR / LOG_FILE
    if log_file.is_file():
        return json.loads(log_file.read_text(encoding="utf-8"))
    args = tuner.args
    readings = []
    for k in range(args.readout_tries):
        readings.append(_one_try(tuner, task_id, train_pairs, test_pairs, out_dir, k))
        best = max(readings, key=lambda r: (r["read_machine"] is not None, r["machine_train_share"], -r["try"]))
        use = best["read_machine"] is not None and best["machine_train_share"] >= args.readout_min_acc
        if use:
            break
    log = {"epochs": args.readout_epochs, **best, "tries": len(readings),
           # the time of every try, since all of them were spent before the second pass
           "first_pass_wall_seconds": round(sum(r["first_pass_wall_seconds"] for r in readings), 2),
           "all_tries": [{k: r[k] for k in ("seed", "first_pass_acc", "machine_train_acc", "head_agreement")}
                         for r in readings],
           "machine": best["read_machine"] if use else None}
    print(f"finetune {task_id}: readout after {args.readout_epochs} epochs: {best['summary']}"
          + (f" (try {best['try']} of {len(readings)})" if len(readings) > 1 else "")
          + ("" if use else f"; below --readout-min-acc {args.readout_min_acc}, the mean init instead"), flush=True)
    write_json(log, log_file)
    return log
