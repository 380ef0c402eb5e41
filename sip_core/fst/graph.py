"""Graph helpers shared by the FST modules."""
from __future__ import annotations

from collections.abc import Iterable, Sequence


def closure(roots: Iterable[int], edges: Sequence[Iterable[int]]) -> set[int]:
    """States reachable from ``roots`` along ``edges`` (edges[q] = successors of q), roots included."""
    seen = set(roots)
    stack = list(seen)
    while stack:
        for r in edges[stack.pop()]:
            if r not in seen:
                seen.add(r)
                stack.append(r)
    return seen
