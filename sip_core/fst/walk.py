"""String sampling: a pure-Python equivalent of OpenFst `randgen` (uniform arc selector) on
``compose(Σ^{lo..hi}, expanded FST)`` (REFERENCE §2.3).

In the trimmed composition a state is (q, k) = (FST state, symbols read). Its arcs are the expanded
arcs of q whose destination can still reach a final state with a total length in [lo, hi]; it is final
iff q is final and lo <= k <= hi. randgen picks uniformly among the arcs plus one "stop" option when
the state is final. The walk below makes exactly that choice at every step, so the distribution of
(input, output) pairs is the same without building the composition.
"""
from __future__ import annotations

import random

from sip_core.fst.machine import Machine


class Walker:
    """Samples (input, output[, states]) from one machine for one length range [lo, hi]."""

    def __init__(self, m: Machine, lo: int, hi: int):
        if lo < 0 or hi < lo:
            raise ValueError(f"bad length range {lo}..{hi}")
        self.m, self.lo, self.hi = m, lo, hi
        n = m.n_states
        arcs = m.expanded
        finals = m.final_set
        succ = [0] * n  # bitmask of successors per state
        for q in range(n):
            for _, _, dst, _ in arcs[q]:
                succ[q] |= 1 << dst
        # layers[j]: bitmask of states from which a final state is reachable in exactly j steps.
        # layers[j+1] is a function of layers[j] alone, so the sequence is eventually periodic:
        # once a mask repeats, the rest is copied instead of recomputed.
        layer = sum(1 << q for q in finals)
        layers = [layer]
        first_seen = {layer: 0}
        while len(layers) <= hi:
            layer = sum(1 << q for q in range(n) if succ[q] & layer)
            if layer in first_seen:
                start = first_seen[layer]
                period = len(layers) - start
                while len(layers) <= hi:
                    layers.append(layers[start + (len(layers) - start) % period])
                break
            first_seen[layer] = len(layers)
            layers.append(layer)
        # alive[k]: states q with (q, k) co-accessible in the composition: some j with lo <= k+j <= hi.
        prefix_or = []
        acc = 0
        for layer in layers:
            acc |= layer
            prefix_or.append(acc)
        self.alive = []
        for k in range(hi + 1):
            if k >= lo:
                self.alive.append(prefix_or[hi - k])
            else:
                acc = 0
                for j in range(lo - k, hi - k + 1):
                    acc |= layers[j]
                self.alive.append(acc)
        self.alive.append(0)
        self._arcs = arcs
        self._finals = finals
        self._cache: dict[tuple[int, int, bool], list] = {}

    @property
    def empty(self) -> bool:
        return not (self.m.n_states and self.alive[0] & 1 << self.m.start)

    def _options(self, q: int, k: int) -> tuple[list, bool]:
        nxt = self.alive[k + 1]
        stop = q in self._finals and self.lo <= k
        return self._opts(q, nxt, stop), stop

    def _opts(self, q: int, nxt: int, stop: bool) -> list:
        key = (nxt << 16) | (q << 1) | stop
        opts = self._cache.get(key)
        if opts is None:
            opts = self._cache[key] = [a for a in self._arcs[q] if nxt >> a[2] & 1]
        return opts

    def sample(self, rng: random.Random, with_states: bool = False):
        """One pair (input, output) — plus the state sequence if asked — or None if the range is empty."""
        if self.empty:
            return None
        q, k = self.m.start, 0
        ins: list[str] = []
        outs: list[str] = []
        states = [q]
        rand = rng.random  # int(random() * n) is uniform up to 2^-53 and ~10x faster than randrange
        alive, finals, lo, cache = self.alive, self._finals, self.lo, self._cache
        while True:
            nxt = alive[k + 1]
            stop = k >= lo and q in finals
            opts = cache.get((nxt << 16) | (q << 1) | stop)
            if opts is None:
                opts = self._opts(q, nxt, stop)
            r = int(rand() * (len(opts) + stop))
            if r == len(opts):
                break
            a, b, q, _ = opts[r]
            ins.append(a)
            outs.append(b)
            k += 1
            if with_states:
                states.append(q)
        if with_states:
            return "".join(ins), "".join(outs), states
        return "".join(ins), "".join(outs)
