"""OSTIA (Oncina, García & Vidal 1993): a subsequential transducer learned from input/output pairs.

Build the prefix-tree transducer of the pairs, make it onward (every output as early as possible), then merge its
states in breadth-first order (red-blue), keeping a merge when the folded outputs stay consistent. It identifies a
subsequential function in the limit: given enough pairs of an input-deterministic FST it returns that FST, up to
state numbering. SIP uses it (``sip finetune --prefix induced``) to start the tuned prefix from the encoding of the
FST the training pairs determine, where there is one; an extension, not the paper's method (DEVIATIONS.md).
`LetterToLetter` is the same merging for pairs whose outputs are as long as their inputs, which needs far fewer
pairs; `induce_machine` falls back to it where OSTIA finds no machine.
"""
from __future__ import annotations

from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine

_ABSENT = object()  # an undo-log entry for a key that did not exist


def lcp(strings) -> str:
    strings = list(strings)
    if not strings:
        return ""
    first, last = min(strings), max(strings)
    i = 0
    while i < len(first) and first[i] == last[i]:
        i += 1
    return first[:i]


class Ostia:
    """The prefix-tree transducer, made onward, then merged; every change during a tentative merge is logged so that
    a failed merge is undone in place (copying a 50k-state tree per try would be too slow)."""

    def __init__(self, pairs):
        self._empty_tree()
        for x, y in pairs:
            q = 0
            for a in x:
                q = self._step(q, a, "")
            if self.final[q] not in (None, y):
                raise ValueError(f"not a function: {x!r} -> {self.final[q]!r} and {y!r}")
            self.final[q] = y
        self.initial = self._make_onward()

    def _empty_tree(self) -> None:
        self.child: list[dict[str, int]] = [{}]
        self.out: list[dict[str, str]] = [{}]
        self.final: list[str | None] = [None]
        self.parent: list[tuple[int, str] | None] = [None]
        self.access: list[str] = [""]
        self.log: list | None = None

    def _step(self, q: int, a: str, output: str) -> int:
        """The prefix tree's child of ``q`` on ``a``, added with ``output`` on its edge if new."""
        if a not in self.child[q]:
            self.child[q][a] = len(self.child)
            self.out[q][a] = output
            self.child.append({})
            self.out.append({})
            self.final.append(None)
            self.parent.append((q, a))
            self.access.append(self.access[q] + a)
        return self.child[q][a]

    def _make_onward(self) -> str:
        """Push every output towards the root (deepest states first); returns the output before the first symbol."""
        for q in sorted(range(len(self.child)), key=lambda s: -len(self.access[s])):
            outs = list(self.out[q].values()) + ([self.final[q]] if self.final[q] is not None else [])
            w = lcp(outs)
            if w:
                for a in self.out[q]:
                    self.out[q][a] = self.out[q][a][len(w):]
                if self.final[q] is not None:
                    self.final[q] = self.final[q][len(w):]
                if self.parent[q] is None:
                    return w
                f, a = self.parent[q]
                self.out[f][a] += w
        return ""

    # every mutation goes through _set, so that a failed merge can be rolled back
    def _set(self, table, key, value):
        self.log.append((table, key, table.get(key, _ABSENT) if isinstance(table, dict) else table[key]))
        table[key] = value

    def _undo(self):
        for table, key, old in reversed(self.log):
            if old is _ABSENT:
                del table[key]
            else:
                table[key] = old

    def _push_back(self, r: int, v: str) -> None:
        for a, o in list(self.out[r].items()):
            self._set(self.out[r], a, v + o)
        if self.final[r] is not None:
            self._set(self.final, r, v + self.final[r])

    def _graft(self, p: int, a: str, qc: int, output: str) -> None:
        """Hang subtree ``qc`` from ``p`` on ``a``, writing ``output`` (a later merge redirects p's edge)."""
        self._set(self.child[p], a, qc)
        self._set(self.out[p], a, output)
        self._set(self.parent, qc, (p, a))

    def _fold(self, p: int, q: int) -> bool:
        if self.final[q] is not None:
            if self.final[p] is None:
                self._set(self.final, p, self.final[q])
            elif self.final[p] != self.final[q]:
                return False
        for a, qc in list(self.child[q].items()):
            if a not in self.child[p]:
                self._graft(p, a, qc, self.out[q][a])
                continue
            pc, op, oq = self.child[p][a], self.out[p][a], self.out[q][a]
            u = lcp((op, oq))
            if len(op) > len(u):
                if pc in self.red:  # a red state's outputs are shared by other paths: cannot take a push-back
                    return False
                self._push_back(pc, op[len(u):])
            if len(oq) > len(u):
                self._push_back(qc, oq[len(u):])
            self._set(self.out[p], a, u)
            if pc != qc and not self._fold(pc, qc):
                return False
        return True

    def _try_merge(self, p: int, q: int) -> bool:
        self.log = []
        f, a = self.parent[q]
        self._set(self.child[f], a, p)
        if self._fold(p, q):
            return True
        self._undo()
        return False

    def learn(self, max_states: int | None = None) -> "Ostia":
        """Merge; with ``max_states``, give up (``states`` None) once more red states than that are needed. A fold
        recurses once per input symbol, so inputs of up to a few hundred symbols fit Python's default stack."""
        self.red = {0}
        order = [0]
        while True:
            blue = sorted({c for r in order for c in self.child[r].values() if c not in self.red},
                          key=lambda s: (len(self.access[s]), self.access[s]))
            if not blue:
                break
            q = blue[0]
            if not any(self._try_merge(p, q) for p in order):
                self.red.add(q)
                order.append(q)
                if max_states is not None and len(order) > max_states:
                    self.states = None
                    return self
        self.states = order
        return self

    def apply(self, x: str) -> str | None:
        q, y = 0, [self.initial]
        for a in x:
            if a not in self.child[q]:
                return None
            y.append(self.out[q][a])
            q = self.child[q][a]
        return None if self.final[q] is None else "".join(y) + self.final[q]

    def to_machine(self, vocab: str) -> Machine | None:
        """The learned transducer as a `Machine` over ``vocab``, or None if a SIP prefix cannot hold it: an output
        of several symbols on one transition, a final output, an output before the first symbol. A state that
        copies every symbol of ``vocab`` to one state gets one ``<id>`` transition, the shorthand of the task
        generator and of pre-training."""
        if self.states is None or self.initial:
            return None
        if any(len(o) > 1 for q in self.states for o in self.out[q].values()) or any(self.final[q] for q in self.states):
            return None
        number = {q: i for i, q in enumerate(self.states)}
        transitions = []
        for q in self.states:
            edges = self.out[q]
            targets = {self.child[q][a] for a in edges}
            if set(edges) == set(vocab) and len(targets) == 1 and all(edges[a] == a for a in edges):
                transitions.append((number[q], V.ID, V.ID, number[targets.pop()]))
                continue
            transitions += [(number[q], a, edges[a], number[self.child[q][a]]) for a in sorted(edges)]
        finals = tuple(number[q] for q in self.states if self.final[q] is not None)
        return Machine(len(self.states), finals, tuple(transitions), vocab)


class LetterToLetter(Ostia):
    """The same red-blue merging for letter-to-letter pairs (every output as long as its input): each output symbol
    stays on its input symbol's edge (no onward form, no push-back), and two states merge only if their shared
    edges write the same symbols, recursively.

    OSTIA needs a characteristic sample: for two different states, a pair of strings that reach them and go on with
    the same suffix. Random walks over 25 symbols (Table 11's training strings, mostly 14-15 long) almost never hold
    such a pair, and for a partial function OSTIA then makes a wrong early merge and ends with ~1,000 states
    (docs/EXPERIMENTS.md, session 29). Here every shared prefix is evidence, whatever the string's ending."""

    def __init__(self, pairs):
        self._empty_tree()
        for x, y in pairs:
            if len(x) != len(y):
                raise ValueError(f"not letter-to-letter: {x!r} -> {y!r}")
            q = 0
            for a, b in zip(x, y):
                p, q = q, self._step(q, a, b)
                if self.out[p][a] != b:  # an edge already there writes another symbol
                    raise ValueError(f"not a letter-to-letter function: {x!r} -> {y!r}")
            self.final[q] = ""
        self.initial = ""

    def _fold(self, p: int, q: int) -> bool:
        if self.final[q] is not None and self.final[p] is None:
            self._set(self.final, p, "")
        for a, qc in list(self.child[q].items()):
            if a not in self.child[p]:
                self._graft(p, a, qc, self.out[q][a])
                continue
            if self.out[p][a] != self.out[q][a]:
                return False
            pc = self.child[p][a]
            if pc != qc and not self._fold(pc, qc):
                return False
        return True


def induce_machine(pairs, max_states: int | None = None) -> Machine | None:
    """The FST OSTIA learns from ``pairs`` (its vocabulary: the symbols of their inputs), or None when the pairs
    are not a function, need more than ``max_states`` states, or give a transducer a prefix cannot hold. Where
    OSTIA gives none and every pair is letter-to-letter, `LetterToLetter`'s machine (OSTIA first, so that what it
    learns, e.g. Table 1's iteration tasks, stays as it was)."""
    pairs = list(pairs)
    vocab = "".join(sorted({a for x, _ in pairs for a in x}))
    for learner_class in (Ostia, LetterToLetter):
        try:
            learner = learner_class(pairs)
            learner.learn(max_states)
        except (ValueError, RecursionError):  # not a function (of this kind); inputs too long to fold
            continue
        if (machine := learner.to_machine(vocab)) is not None:
            return machine
    return None
