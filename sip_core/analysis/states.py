"""FST state sequences as probe targets, and the naive heuristic baseline (REFERENCE §6).

A state sequence q0..qn of an n-character input holds the state *before* each character and, last, the
state after the final one. The model sees the input as bytes + EOS: q_k labels the first byte of
character k and q_n the EOS token (the original's alignment). Pure numpy/Python: runs on GPU hosts.
"""
from __future__ import annotations

import numpy as np

from sip_core.errors import SipError
from sip_core.fst.machine import Machine
from sip_core.model import tokenizer
from sip_core.train.data import Seq2SeqSplit

IGNORE = -100


def probe_labels(split: Seq2SeqSplit) -> np.ndarray:
    """Per input id (aligned with ``split.input_ids``): the probe target, IGNORE on continuation bytes."""
    if split.states is None:
        raise SipError("this split has no state sequences")
    ids = split.input_ids
    byte = ids.astype(np.int64) - tokenizer.BYTE_OFFSET
    is_byte = ids >= tokenizer.BYTE_OFFSET
    cont = is_byte & (byte >= 0x80) & (byte < 0xC0)  # UTF-8 continuation bytes
    starts = np.flatnonzero(is_byte & ~cont)
    eos = np.flatnonzero(ids == tokenizer.EOS_ID)  # one per row, at its end
    rows = np.searchsorted(split.input_offsets, starts, side="right") - 1
    n_chars = np.bincount(rows, minlength=len(split))
    n_states = np.diff(split.state_offsets)
    bad = np.flatnonzero(n_states != n_chars + 1)
    if len(bad):
        raise SipError(f"example {int(bad[0])} has {int(n_states[bad[0]])} states for "
                       f"{int(n_chars[bad[0]])} input characters (expected characters + 1)")
    last = split.state_offsets[1:] - 1
    before = np.ones(len(split.states), bool)
    before[last] = False
    labels = np.full(len(ids), IGNORE, np.int64)
    labels[starts] = split.states[before]
    labels[eos] = split.states[last]
    return labels


def gold_states(machine: Machine, inputs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """State sequences of ``inputs`` under ``machine`` as (flat values, offsets); SipError if one is rejected."""
    values, offsets = [], [0]
    for x in inputs:
        seq = machine.state_sequence(x)
        if seq is None:
            raise SipError(f"input {x!r} is not accepted by its task FST")
        values.extend(seq)
        offsets.append(len(values))
    return np.asarray(values, np.int64), np.asarray(offsets, np.int64)


def destinations(machine: Machine) -> dict[str, frozenset[int]]:
    """Input symbol -> the states reached by some transition reading it (shorthands expanded)."""
    out: dict[str, set[int]] = {}
    for arcs in machine.expanded:
        for a, _b, dst, _idx in arcs:
            out.setdefault(a, set()).add(dst)
    return {a: frozenset(s) for a, s in out.items()}


def heuristic_chances(machine: Machine, x: str, states: list[int], dests: dict | None = None) -> np.ndarray:
    """Probability that the heuristic gets each of q0..qn right: q0 is the start state; q_k (k >= 1) is a
    uniform draw among the destinations of transitions reading x_{k-1}, the symbol just processed."""
    dests = destinations(machine) if dests is None else dests
    chances = [1.0 if states[0] == machine.start else 0.0]
    for c, q in zip(x, states[1:]):
        cands = dests.get(c, frozenset())
        chances.append(1.0 / len(cands) if q in cands else 0.0)
    return np.asarray(chances)


def heuristic_accuracy(items) -> dict:
    """Expected token and sequence accuracy (percent) of the heuristic over (machine, input, states)
    items: exact expectations, so no sampling noise and no seed."""
    tokens, hits, seq = 0, 0.0, []
    cache: dict[int, dict] = {}
    for machine, x, states in items:
        key = id(machine)
        if key not in cache:  # destinations once per machine, not per input
            cache[key] = destinations(machine)
        p = heuristic_chances(machine, x, states, cache[key])
        tokens += len(p)
        hits += float(p.sum())
        seq.append(float(np.prod(p)))
    if not seq:
        raise SipError("the heuristic needs at least one example")
    return {"acc_token": 100.0 * hits / tokens, "acc_seq": 100.0 * float(np.mean(seq)),
            "n_seq": len(seq), "n_tokens": tokens}
