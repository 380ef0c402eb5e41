"""De-duplication by FST isomorphism (REFERENCE §2.2), without pynini.

Isomorphism here is OpenFst's: a bijection of states mapping start to start, finals to finals and
arcs to arcs with equal (ilabel, olabel). V_T is not compared (the original compared the FST objects
only, so two machines made only of shorthand arcs are duplicates whatever their V_T).

* Deterministic machines (distinct input labels per state, every state reachable from the start):
  BFS from the start visiting arcs sorted by label numbers every state canonically, so the
  relabelled (finals, sorted arcs) is an exact canonical key: isomorphic <=> equal keys.
* Other machines (bimachines): a Weisfeiler–Lehman style hash is the bucket key and an exact
  backtracking search decides isomorphism within a bucket.
"""
from __future__ import annotations

import itertools
from collections import deque

from sip_core.fst.machine import Machine


def det_key(m: Machine) -> tuple:
    out: list[list[tuple[str, str, int]]] = [[] for _ in range(m.n_states)]
    for s, il, ol, d in m.transitions:
        out[s].append((il, ol, d))
    for arcs in out:
        arcs.sort()
    order = {m.start: 0}
    queue = deque([m.start])
    while queue:
        q = queue.popleft()
        for _, _, d in out[q]:
            if d not in order:
                order[d] = len(order)
                queue.append(d)
    if len(order) != m.n_states:  # unreachable states: fall back to the general path
        return ("nd", wl_hash(m))
    arcs = tuple((order[q], il, ol, order[d]) for q in sorted(order, key=order.get) for il, ol, d in out[q])
    finals = tuple(sorted(order[q] for q in m.finals))
    return ("det", m.n_states, finals, arcs)


def wl_hash(m: Machine, rounds: int = 3) -> int:
    """Isomorphism-invariant hash: colour refinement over labelled in/out arcs, start and finality."""
    n = m.n_states
    colour = [hash((q == m.start, q in m.final_set)) for q in range(n)]
    for _ in range(rounds):
        sig: list[list] = [[] for _ in range(n)]
        for s, il, ol, d in m.transitions:
            sig[s].append(("o", il, ol, colour[d]))
            sig[d].append(("i", il, ol, colour[s]))
        colour = [hash((colour[q], tuple(sorted(sig[q])))) for q in range(n)]
    return hash((n, len(m.transitions), tuple(sorted(colour))))


def key(m: Machine):
    return det_key(m) if m.is_deterministic() else ("nd", wl_hash(m))


def isomorphic(a: Machine, b: Machine) -> bool:
    """Exact isomorphism test (start -> start) by backtracking over arc matchings."""
    if (a.n_states, len(a.transitions), len(a.finals)) != (b.n_states, len(b.transitions), len(b.finals)):
        return False
    out_a = _out(a)
    out_b = _out(b)
    fa, fb = a.final_set, b.final_set

    def extend(mapping: dict[int, int], used: set[int], todo: list[int]) -> bool:
        while todo:
            q = todo.pop()
            p = mapping[q]
            if (q in fa) != (p in fb) or len(out_a[q]) != len(out_b[p]):
                return False
            # group arcs by label; every label group must match in size, then match destinations
            ga: dict[tuple[str, str], list[int]] = {}
            gb: dict[tuple[str, str], list[int]] = {}
            for il, ol, d in out_a[q]:
                ga.setdefault((il, ol), []).append(d)
            for il, ol, d in out_b[p]:
                gb.setdefault((il, ol), []).append(d)
            if {k: len(v) for k, v in ga.items()} != {k: len(v) for k, v in gb.items()}:
                return False
            for lab, dests in ga.items():
                if len(dests) == 1:
                    d, e = dests[0], gb[lab][0]
                    if d in mapping:
                        if mapping[d] != e:
                            return False
                    elif e in used:
                        return False
                    else:
                        mapping[d] = e
                        used.add(e)
                        todo.append(d)
                elif all(d in mapping for d in dests):
                    if sorted(mapping[d] for d in dests) != sorted(gb[lab]):
                        return False
                else:
                    return _branch(mapping, used, todo, q, dests, gb[lab])
        return len(mapping) == a.n_states and _arcs_match(mapping)

    def _branch(mapping, used, todo, q, dests, targets):
        # Ambiguous label group (non-deterministic state): try the assignments of its destinations.
        for perm in sorted(set(itertools.permutations(targets))):
            m2, u2, t2 = dict(mapping), set(used), list(todo)
            ok = True
            for d, e in zip(dests, perm):
                if d in m2:
                    if m2[d] != e:
                        ok = False
                        break
                elif e in u2:
                    ok = False
                    break
                else:
                    m2[d] = e
                    u2.add(e)
                    t2.append(d)
            if ok:
                t2.append(q)  # re-check q's remaining groups under the extended mapping
                if extend(m2, u2, t2):
                    return True
        return False

    def _arcs_match(mapping) -> bool:
        arcs_a = sorted((mapping[s], il, ol, mapping[d]) for s, il, ol, d in a.transitions)
        arcs_b = sorted(b.transitions)
        return arcs_a == arcs_b and {mapping[q] for q in fa} == fb

    return extend({a.start: b.start}, {b.start}, [a.start])


def _out(m: Machine):
    out: list[list[tuple[str, str, int]]] = [[] for _ in range(m.n_states)]
    for s, il, ol, d in m.transitions:
        out[s].append((il, ol, d))
    return out


class IsoIndex:
    """A set of machines up to isomorphism; `add` says whether the machine was new."""

    def __init__(self):
        self._buckets: dict = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._buckets.values())

    def contains(self, m: Machine, k=None) -> bool:
        k = key(m) if k is None else k
        bucket = self._buckets.get(k)
        if not bucket:
            return False
        if k[0] == "det":
            return True
        return any(isomorphic(m, other) for other in bucket)

    def add(self, m: Machine, k=None) -> bool:
        k = key(m) if k is None else k
        if self.contains(m, k):
            return False
        self._buckets.setdefault(k, []).append(m)
        return True
