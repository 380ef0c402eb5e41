"""State consistency for fine-tuning (``sip finetune --state-consistency W``), a research lever of issue 6.

A fine-tuned SIP-d4 fits its short training strings but drifts on longer ones, although the same body with the
gold FST as its prefix does not (docs/EXPERIMENTS.md). The pre-trained state head reads, at every input
character, the FST state the encoder holds. On the training strings those states are crisp, and they imply a
transition graph: (state, character) -> next state, by majority over all training strings. Random walks on
that graph give long strings that stay inside the machine the model itself believes in, each with its state
sequence. The loss asks the state head to agree with the walk at every character, so that the prefix and
body keep simulating that machine past the training lengths. No labels beyond the training pairs are used.

The state head stays frozen: trained here it could satisfy the loss by predicting one state everywhere.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from sip_core.train.batching import DeviceSplit
from sip_core.train.data import Seq2SeqSplit, make_split

START = -1  # the walk's start node: the (unknown) state before the first character


@dataclass
class TransitionGraph:
    """(state, character) -> next state; ``START`` stands for the state before any character."""

    next: dict[tuple[int, str], int]

    def options(self, state: int) -> list[tuple[str, int]]:
        return self._by_state.get(state, [])

    def __post_init__(self):
        by_state: dict[int, list[tuple[str, int]]] = {}
        for (q, ch), nxt in sorted(self.next.items()):
            by_state.setdefault(q, []).append((ch, nxt))
        self._by_state = by_state


def transition_graph(inputs: list[str], states: list[np.ndarray]) -> TransitionGraph:
    """Majority transition per (state, character) over strings ``inputs`` whose character i left the
    machine in ``states[k][i]`` (one state per character)."""
    votes: dict[tuple[int, str], Counter] = {}
    for text, seq in zip(inputs, states):
        if len(seq) != len(text):
            raise ValueError(f"{len(seq)} states for {len(text)} characters")
        prev = START
        for ch, q in zip(text, seq):
            votes.setdefault((prev, ch), Counter())[int(q)] += 1
            prev = int(q)
    # ties go to the smaller state id, so that the graph does not depend on the order of the strings
    return TransitionGraph({key: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for key, c in votes.items()})


def sample_walks(graph: TransitionGraph, n: int, max_length: int, rng: np.random.Generator
                 ) -> tuple[list[str], list[list[int]]]:
    """``n`` walks from START, each of a length drawn uniformly from 1..max_length, a character chosen
    uniformly among the current state's outgoing ones at each step; a walk ends early at a state with none
    (at least one character: START always has an option if any training string was seen)."""
    texts, seqs = [], []
    for _ in range(n):
        length = int(rng.integers(1, max_length + 1))
        state, chars, seq = START, [], []
        for _ in range(length):
            options = graph.options(state)
            if not options:
                break
            ch, state = options[int(rng.integers(len(options)))]
            chars.append(ch)
            seq.append(state)
        texts.append("".join(chars))
        seqs.append(seq)
    return texts, seqs


def walk_split(texts: list[str], seqs: list[list[int]]) -> Seq2SeqSplit:
    """The walks as a split whose ``state_labels`` are the walk states (q0 is a placeholder, dropped there)."""
    flat = np.array([q for seq in seqs for q in [0, *seq]], np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(s) + 1 for s in seqs])]).astype(np.int64)
    return make_split(texts, [""] * len(texts), states=(flat, offsets))


@torch.no_grad()
def read_states(model, data: DeviceSplit, batch_size: int, autocast) -> list[np.ndarray]:
    """The state head's argmax at the last byte of every character of every string of ``data`` (the model's
    prefix, if any, comes first in the encoder)."""
    split = data.split
    ends, n_chars = split._char_ends()
    rows = np.searchsorted(split.input_offsets, ends, side="right") - 1
    within = ends - split.input_offsets[rows]  # byte position of each character end inside its row
    n_prefix = model.prefix.shape[0] if getattr(model, "prefix", None) is not None else 0
    was_training = model.training
    model.eval()
    out: list[np.ndarray] = []
    char_start = np.concatenate([[0], np.cumsum(n_chars)])
    for lo in range(0, len(split), batch_size):
        hi = min(len(split), lo + batch_size)
        batch = data.batch(np.arange(lo, hi), with_labels=False)
        with autocast():
            hidden = model.encode(batch["input_ids"], batch["attention_mask"])[0].last_hidden_state
        best = model.state_logits(hidden.to(model.state_head.weight.dtype)).argmax(-1).cpu().numpy()
        for r in range(lo, hi):
            out.append(best[r - lo, n_prefix + within[char_start[r]:char_start[r + 1]]])
    model.train(was_training)
    return out


def prefix_padded(labels: torch.Tensor, n_prefix: int) -> torch.Tensor:
    """State labels of the bytes moved to encoder coordinates: ``n_prefix`` ignored (-100) positions first (a
    fixed-length tuned prefix precedes the bytes)."""
    pad = torch.full((labels.shape[0], n_prefix), -100, dtype=labels.dtype, device=labels.device)
    return torch.cat([pad, labels], 1)
