"""`Machine`: the one pure-Python FST value type shared by samplers, splits, builders and tests.

A machine is the *shorthand-level* transducer that a SIP model sees: states 0..n-1 (start 0), a set
of final states, transitions ``(src, ilabel, olabel, dst)`` in model order with labels as in
``sip_core.fst.vocab`` (one character, ``""`` for epsilon, ``<id>``/``<upper>``/``<lower>``), and its
sub-vocabulary V_T (the shorthands are expanded over it). ``kind`` is ``det`` (input-deterministic)
or ``bimachine`` (a non-deterministic but functional product FST).

pynini is imported lazily (only `to_pynini`/`from_pynini`), so GPU hosts can read machines too.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import cached_property

from sip_core.fst import vocab as V

# OpenFst integer labels: ε = 0, the shorthands keep the original code's control codes (17/18/19),
# every other label is the code point of its character (chr(17..19) are not in V, so no clash).
_SHORTHAND_TO_INT = {V.ID: 17, V.UPPER: 18, V.LOWER: 19}
_INT_TO_SHORTHAND = {v: k for k, v in _SHORTHAND_TO_INT.items()}

Transition = tuple[int, str, str, int]


def label_to_int(label: str) -> int:
    if label == V.EPS:
        return 0
    code = _SHORTHAND_TO_INT.get(label)
    return code if code is not None else ord(label)


def int_to_label(code: int) -> str:
    if code == 0:
        return V.EPS
    label = _INT_TO_SHORTHAND.get(code)
    return label if label is not None else chr(code)


@dataclass(frozen=True, eq=True)
class Machine:
    n_states: int
    finals: tuple[int, ...]
    transitions: tuple[Transition, ...]
    vocab: str
    kind: str = "det"
    start: int = field(default=0)

    _FIELDS = ("n_states", "finals", "transitions", "vocab", "kind", "start")

    def __getstate__(self):  # pickle only the fields, not the cached tables (workers ship machines)
        return {k: getattr(self, k) for k in self._FIELDS}

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)

    # ------------------------------------------------------------------ structure
    @cached_property
    def final_set(self) -> frozenset[int]:
        return frozenset(self.finals)

    @cached_property
    def expanded(self) -> tuple[tuple[tuple[str, str, int, int], ...], ...]:
        """Per state: concrete arcs (input, output, dst, transition index) after shorthand expansion."""
        out: list[list[tuple[str, str, int, int]]] = [[] for _ in range(self.n_states)]
        for idx, (src, il, ol, dst) in enumerate(self.transitions):
            for a, b in V.expand_label(il, ol, self.vocab):
                out[src].append((a, b, dst, idx))
        return tuple(tuple(arcs) for arcs in out)

    @cached_property
    def table(self) -> dict[tuple[int, str], tuple[str, int, int]]:
        """(state, input symbol) -> (output, dst, transition index); only for deterministic machines."""
        t: dict[tuple[int, str], tuple[str, int, int]] = {}
        for q, arcs in enumerate(self.expanded):
            for a, b, dst, idx in arcs:
                if (q, a) in t:
                    raise ValueError(f"machine is not deterministic at state {q} on {a!r}")
                t[(q, a)] = (b, dst, idx)
        return t

    def is_deterministic(self) -> bool:
        """Input-deterministic at the shorthand level: no ε input, distinct input labels per state."""
        seen = set()
        for src, il, _, _ in self.transitions:
            if il == V.EPS or (src, il) in seen:
                return False
            seen.add((src, il))
        return True

    def is_cyclic(self) -> bool:
        """Any cycle in the graph of all states (OpenFst's ACYCLIC property, dead states included)."""
        succ = [[] for _ in range(self.n_states)]
        for src, _, _, dst in self.transitions:
            succ[src].append(dst)
        color = [0] * self.n_states  # 0 new, 1 on stack, 2 done
        for root in range(self.n_states):
            if color[root]:
                continue
            stack = [(root, iter(succ[root]))]
            color[root] = 1
            while stack:
                q, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    color[q] = 2
                    stack.pop()
                elif color[nxt] == 1:
                    return True
                elif color[nxt] == 0:
                    color[nxt] = 1
                    stack.append((nxt, iter(succ[nxt])))
        return False

    # ------------------------------------------------------------------ application
    def path(self, x: str) -> tuple[list[int], list[int], str] | None:
        """Accepting path of x: (states q0..q|x|, transition indices, output) or None if x is rejected.

        Deterministic machines walk the table; others keep forward state sets with back-pointers
        (bimachines are unambiguous, so the path found is the path).
        """
        if self.kind == "det" or self.is_deterministic_cached:
            q, states, used, out = self.start, [self.start], [], []
            table = self.table
            for c in x:
                hit = table.get((q, c))
                if hit is None:
                    return None
                b, q, idx = hit
                states.append(q)
                used.append(idx)
                out.append(b)
            if q not in self.final_set:
                return None
            return states, used, "".join(out)
        return self._nondet_path(x)

    @cached_property
    def is_deterministic_cached(self) -> bool:
        return self.is_deterministic()

    def _nondet_path(self, x: str):
        by_input: dict[tuple[int, str], list[tuple[str, int, int]]] = self._by_input
        layer = {self.start: None}
        back: list[dict[int, tuple[int, str, int] | None]] = [layer]
        for c in x:
            nxt: dict[int, tuple[int, str, int]] = {}
            for q in layer:
                for b, dst, idx in by_input.get((q, c), ()):
                    if dst not in nxt:
                        nxt[dst] = (q, b, idx)
            if not nxt:
                return None
            back.append(nxt)
            layer = nxt
        ends = sorted(q for q in layer if q in self.final_set)
        if not ends:
            return None
        q = ends[0]
        states, used, out = [q], [], []
        for i in range(len(x), 0, -1):
            prev, b, idx = back[i][q]
            states.append(prev)
            used.append(idx)
            out.append(b)
            q = prev
        return states[::-1], used[::-1], "".join(reversed(out))

    @cached_property
    def _by_input(self):
        d: dict[tuple[int, str], list[tuple[str, int, int]]] = {}
        for q, arcs in enumerate(self.expanded):
            for a, b, dst, idx in arcs:
                d.setdefault((q, a), []).append((b, dst, idx))
        return d

    def apply(self, x: str) -> str | None:
        """Output of x (None if rejected)."""
        p = self.path(x)
        return None if p is None else p[2]

    def state_sequence(self, x: str) -> list[int] | None:
        p = self.path(x)
        return None if p is None else p[0]

    def iteration_count(self, x: str) -> int | None:
        """Max number of visits of one state along x's path (the initial visit counts)."""
        states = self.state_sequence(x)
        if states is None:
            return None
        counts: dict[int, int] = {}
        for q in states:
            counts[q] = counts.get(q, 0) + 1
        return max(counts.values())

    # ------------------------------------------------------------------ renumbering
    def renumbered_bfs(self) -> "Machine":
        """Canonical numbering: BFS from the start following transition order; unreachable states go.

        Transitions are then listed state by state (start first), keeping their order within a state.
        """
        by_src: list[list[Transition]] = [[] for _ in range(self.n_states)]
        for t in self.transitions:
            by_src[t[0]].append(t)
        order = {self.start: 0}
        queue = deque([self.start])
        while queue:
            q = queue.popleft()
            for _, _, _, dst in by_src[q]:
                if dst not in order:
                    order[dst] = len(order)
                    queue.append(dst)
        old_of = sorted(order, key=order.get)
        trans = tuple((order[s], il, ol, order[d]) for q in old_of for (s, il, ol, d) in by_src[q])
        finals = tuple(sorted(order[q] for q in self.finals if q in order))
        return Machine(len(order), finals, trans, self.vocab, self.kind, 0)

    # ------------------------------------------------------------------ pynini
    def to_pynini(self):
        return self._pynini(self.transitions)

    def expanded_pynini(self):
        """The shorthand-expanded FST over concrete symbols (what strings are sampled from)."""
        return self._pynini((q, a, b, dst) for q, arcs in enumerate(self.expanded) for a, b, dst, _ in arcs)

    def _pynini(self, arcs):
        import pynini

        fst = pynini.Fst()
        one = pynini.Weight.one(fst.weight_type())
        fst.add_states(self.n_states)
        if self.n_states:
            fst.set_start(self.start)
        for q in self.finals:
            fst.set_final(q, one)
        for src, il, ol, dst in arcs:
            fst.add_arc(src, pynini.Arc(label_to_int(il), label_to_int(ol), one, dst))
        return fst

    @classmethod
    def from_pynini(cls, fst, vocab: str, kind: str = "det") -> "Machine":
        """Read a pynini FST (start anywhere) and renumber it canonically (BFS, OpenFst arc order)."""
        import pynini

        zero = pynini.Weight.zero(fst.weight_type())
        n = fst.num_states()
        if n == 0 or fst.start() < 0:
            return cls(0, (), (), vocab, kind, 0)
        trans = []
        finals = []
        for q in fst.states():
            if fst.final(q) != zero:
                finals.append(q)
            for arc in fst.arcs(q):
                trans.append((q, int_to_label(arc.ilabel), int_to_label(arc.olabel), arc.nextstate))
        raw = cls(n, tuple(finals), tuple(trans), vocab, kind, fst.start())
        return raw.renumbered_bfs()

    # ------------------------------------------------------------------ Parquet rows (DESIGN §5)
    def to_row(self) -> dict:
        return {
            "n_states": self.n_states,
            "start": self.start,
            "finals": list(self.finals),
            "vocab": self.vocab,
            "transitions": [{"src": s, "ilabel": i, "olabel": o, "dst": d} for s, i, o, d in self.transitions],
            "kind": self.kind,
        }

    @classmethod
    def from_row(cls, row: dict) -> "Machine":
        trans = tuple((int(t["src"]), t["ilabel"], t["olabel"], int(t["dst"])) for t in row["transitions"])
        return cls(int(row["n_states"]), tuple(int(q) for q in row["finals"]), trans, row["vocab"],
                   row.get("kind", "det"), int(row.get("start", 0)))
