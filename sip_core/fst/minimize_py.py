"""Pure-Python `minimize_or_keep`: the same machine as the pynini path (sip_core.fst.minimize),
for hosts without pynini (GPU data-loader workers).

What OpenFst's `Minimize(allow_nondet=False)` does to a deterministic shorthand-level machine, and
how each step is mirrored here:

* Acceptor input (every arc reads and writes the same label): plain acceptor minimisation — trim
  (Connect), merge equivalent states, arcs of a state sorted by label number (ArcUniqueMapper).
* Transducer input: arcs become Gallic arcs ``il:il/"out"``; `Push(REWEIGHT_TO_INITIAL)` in the
  left string semiring. The potential P(q) is the longest common prefix of all output strings
  accepted from q (undefined for states that reach no final state); an arc p -il:o-> d between
  such states gets ``P(p)^-1 · o · P(d)``; a final state keeps ε (P(q) = ε for final q). P(start)
  is then put back: if no cycle passes through the start, onto the start's arcs (so they carry
  ``o · P(d)``); otherwise on a new ε-input start arc. The Gallic acceptor is encoded (label =
  (il, pushed output)), minimised (Connect first), arcs sorted by encoded label, decoded.
  FactorWeightFst then keeps the first symbol of an output longer than one and hands the rest on
  to the destination, which becomes a new state (q, residual); a residual that reaches a final
  state is emitted by an ε-input arc.
* The original rejects the result — keeping the input, renumbered BFS — if an arc has input ε
  (a residual reached a final state, or a non-empty P(start) with the start on a cycle), if a
  shorthand arc does not read and write the same shorthand, or if it has more states than the input
  (residual states can outnumber the states merged away).

Encoded labels are numbered in order of first use while encoding (states in order, arcs in order,
dead arcs included), so the arc order of a minimised state is reproduced too: the result equals
`Machine.from_pynini` of OpenFst's output exactly, not only up to isomorphism.
"""
from __future__ import annotations

from sip_core.fst.graph import closure
from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine, label_to_int

# Output strings are handled as Python str with one character per label (shorthands as the
# control characters OpenFst uses for them), so concatenation and prefixes are plain str ops.
_TO_CHAR = {V.EPS: "", V.ID: chr(17), V.UPPER: chr(18), V.LOWER: chr(19)}
_FROM_CHAR = {v: k for k, v in _TO_CHAR.items()}
_SHORTHAND_CHARS = frozenset(_TO_CHAR[s] for s in V.SHORTHANDS)


def minimize_or_keep(m: Machine) -> Machine:
    """Minimise a deterministic `m` as OpenFst would; keep `m` (BFS-renumbered) if the original's
    rejection rules fire. Empty language → the 0-state machine."""
    if not m.is_deterministic():  # OpenFst refuses these too (allow_nondet=False)
        raise ValueError("minimize_or_keep needs an input-deterministic machine")
    n = m.n_states
    if n == 0:
        return Machine(0, (), (), m.vocab, m.kind)
    arcs = [[] for _ in range(n)]  # per state: (il_char, o_char, dst) in storage order
    for s, il, ol, d in m.transitions:
        arcs[s].append((_TO_CHAR.get(il, il), _TO_CHAR.get(ol, ol), d))
    live = _reach([m.start], arcs, forward=True) & _reach(m.finals, arcs, forward=False)
    if m.start not in live:
        return Machine(0, (), (), m.vocab, m.kind)

    if all(i == o for s in range(n) for i, o, _ in arcs[s]):
        # Unweighted acceptor: no pushing; arcs ordered by label number.
        labelled = {s: [(i, i, d) for i, _, d in arcs[s] if d in live] for s in live}
        n_cls, start, finals, cls_arcs = _merge(m, live, labelled,
                                                lambda key: label_to_int(_FROM_CHAR.get(key[0], key[0])))
        trans = [(c, i, o, d) for c in range(n_cls) for i, o, d in cls_arcs[c]]
        return _machine(m, n_cls, finals, trans, start)

    pref = _potentials(n, arcs, m.final_set)
    start_cyclic = m.start in _reach([d for _, _, d in arcs[m.start]], arcs, forward=True)
    if start_cyclic and pref[m.start]:
        return m.renumbered_bfs()  # new start state with an ε-input arc carrying P(start)
    # pushed (il, output) per arc, for all arcs: dead arcs keep their output but still take up
    # encoded label numbers, which decide the arc order of the result.
    order: dict[tuple[str, str], int] = {}
    labelled = {}
    for s in range(n):
        ps = pref[s]
        out = []
        for i, o, d in arcs[s]:
            pd = pref[d]
            if ps is not None and pd is not None:
                o = (o + pd)[len(ps):]  # P(s) is a prefix of o·P(d) by construction
            if s == m.start and ps:
                o = ps + o  # Reweight multiplies the (acyclic) start's arcs by P(start)
            order.setdefault((i, o), len(order))
            out.append((i, o, d))
        if s in live:
            labelled[s] = [a for a in out if a[2] in live]
    n_cls, start, finals, cls_arcs = _merge(m, live, labelled, order.__getitem__)
    factored = _factor(start, finals, cls_arcs, n)
    if factored is None:
        return m.renumbered_bfs()
    states, trans = factored
    for _, i, o, _ in trans:
        if (i in _SHORTHAND_CHARS or o in _SHORTHAND_CHARS) and i != o:
            return m.renumbered_bfs()  # shorthand arc lost (or gained) its output
    return _machine(m, len(states), [k for k, (q, _) in enumerate(states) if q in finals], trans, 0)


def _factor(start: int, finals: set[int], cls_arcs, max_states: int):
    """FactorWeightFst on the minimised Gallic machine: an output longer than one symbol keeps its
    first symbol and hands the rest on to the next state (a new state (q, residual)); a residual
    that reaches a final state needs an ε-input arc. None = rejected (that, or more than
    `max_states` states). States in discovery order (the lazy FST is expanded from its start)."""
    index = {(start, ""): 0}
    states = [(start, "")]
    trans = []
    k = 0
    while k < len(states):
        q, res = states[k]
        if (res and q in finals) or len(states) > max_states:
            return None
        for i, o, d in cls_arcs[q]:
            w = res + o
            elem = (d, "") if len(w) <= 1 else (d, w[1:])
            if elem not in index:
                index[elem] = len(states)
                states.append(elem)
            trans.append((k, i, w[:1], index[elem]))
        k += 1
    return states, trans


def _reach(roots, arcs, forward: bool) -> set[int]:
    if forward:
        edges = [[d for _, _, d in a] for a in arcs]
    else:
        edges = [[] for _ in arcs]
        for s, a in enumerate(arcs):
            for _, _, d in a:
                edges[d].append(s)
    return closure(roots, edges)


def _lcp(a: str, b: str) -> str:
    i, k = 0, min(len(a), len(b))
    while i < k and a[i] == b[i]:
        i += 1
    return a[:i]


def _potentials(n: int, arcs, finals) -> list[str | None]:
    """P(q) = LCP of all outputs accepted from q (None: no final state reachable).

    Fixpoint from "undefined" downwards: values only ever shrink (prefix order), so it terminates,
    and every value stays a prefix of each accepted output, hence it reaches the exact LCP.
    """
    pref: list[str | None] = [("" if q in finals else None) for q in range(n)]
    changed = True
    while changed:
        changed = False
        for q in range(n):
            if q in finals:
                continue  # ε is among its outputs: P(q) = ε
            cur = pref[q]
            for _, o, d in arcs[q]:
                pd = pref[d]
                if pd is None:
                    continue
                cand = o + pd
                cur = cand if cur is None else _lcp(cur, cand)
            if cur != pref[q]:
                pref[q] = cur
                changed = True
    return pref


def _merge(m: Machine, live: set[int], labelled: dict, rank):
    """Merge equivalent live states (Moore refinement on finality and (label, class) signatures);
    each class lists its arcs (il, o, class) by `rank` of their (il, o) key."""
    states = sorted(live)
    finals = m.final_set
    cls = {q: int(q in finals) for q in states}
    n_cls = len(set(cls.values()))
    while True:
        sigs: dict = {}
        new = {}
        for q in states:
            sig = (cls[q], tuple(sorted((i, o, cls[d]) for i, o, d in labelled[q])))
            new[q] = sigs.setdefault(sig, len(sigs))
        cls = new
        if len(sigs) == n_cls:
            break
        n_cls = len(sigs)
    cls_arcs: list = [None] * n_cls
    for q in states:
        if cls_arcs[cls[q]] is None:
            cls_arcs[cls[q]] = [(i, o, cls[d]) for i, o, d in sorted(labelled[q], key=lambda a: rank(a[:2]))]
    return n_cls, cls[m.start], {cls[q] for q in states if q in finals}, cls_arcs


def _machine(m: Machine, n: int, finals, trans, start: int) -> Machine:
    """Back to labels, renumbered BFS (as Machine.from_pynini does with OpenFst's output)."""
    trans = tuple((s, _FROM_CHAR.get(i, i), _FROM_CHAR.get(o, o), d) for s, i, o, d in trans)
    return Machine(n, tuple(sorted(finals)), trans, m.vocab, m.kind, start).renumbered_bfs()
