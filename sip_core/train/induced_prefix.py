"""``sip finetune --prefix induced``: start the tuned prefix from the encoding of the FST its training pairs
determine (OSTIA, `sip_core.fst.ostia`), instead of the mean of random FSTs (the paper's init).

An extension, not the paper's method (DEVIATIONS.md): on Table 1's iteration tasks the paper's init leaves the tuned
prefix an imprecise copy of the task's FST, while OSTIA recovers that FST exactly from the same 5,000 training pairs
(docs/EXPERIMENTS.md, session 22). Where OSTIA finds no FST a prefix can hold (a non-subsequential task, more states
than the model embeds, symbols outside its map, more transitions than ``--prefix-length``), the run falls back to
the paper's init and says so in its metrics. The prefix then has one vector per transition of the FST.

``--prefix sampled`` (a research lever, not the paper's method): the encoding of one FST drawn by the pre-training
generator over the task's own symbols with the model's number of states. Unlike the mean of 32 FSTs (a blur in
which every slot mixes source states), it starts the search on the manifold of encodings the body was trained on,
with distinct states, and learns nothing from the training pairs but their alphabet.
"""
from __future__ import annotations

import random

import torch

from sip_core.data.tables import fst_table
from sip_core.errors import SipError
from sip_core.fst.machine import Machine
from sip_core.fst.ostia import induce_machine
from sip_core.fst.sample import random_fst
from sip_core.train.data import fst_table_from_arrow


@torch.no_grad()
def machine_prefix(fst_encoder, machine: Machine, max_length: int, byte_embedding, num_states: int,
                   symbols: list[str]) -> torch.Tensor | None:
    """(transitions, d_model): the machine's transition encodings, one vector each, exactly the prefix pre-training
    gave the body for this FST (filling the rest of a longer prefix cost points: repeated transitions 93.3 -> 86.7%
    at 80 vectors on a 23-transition task, session 22); None if the model cannot encode the machine or it has more
    than ``max_length`` transitions."""
    try:
        encoded = fst_table_from_arrow(fst_table([{"fst_id": 0, "split": "induced", "machine": machine}]),
                                       num_states, symbols)
    except SipError:  # a state or symbol the model does not embed
        return None
    transitions = torch.as_tensor(encoded.transitions, dtype=torch.long)
    if not 0 < len(transitions) <= max_length:
        return None
    device = next(fst_encoder.parameters()).device
    vectors, _ = fst_encoder(transitions.unsqueeze(0).to(device), byte_embedding)
    return vectors[0].float()


def induced_prefix(fst_encoder, train_pairs, max_length: int, byte_embedding, num_states: int,
                   symbols: list[str]) -> tuple[torch.Tensor | None, Machine | None]:
    """The prefix init from the training pairs' FST, and that FST; (None, machine-or-None) when there is none."""
    machine = induce_machine(train_pairs, max_states=num_states)
    if machine is None:
        return None, None
    return machine_prefix(fst_encoder, machine, max_length, byte_embedding, num_states, symbols), machine


SAMPLED_DRAWS = 1000  # a draw is rejected when empty, acyclic, or too long for the prefix; 4 states rarely need 10


def task_symbols(train_pairs, symbols: list[str]) -> str:
    """The characters of the training pairs that the model embeds, in the model's order."""
    seen = {c for x, y in train_pairs for c in x + y}
    return "".join(c for c in symbols if c in seen)


def sampled_prefix(fst_encoder, train_pairs, max_length: int, byte_embedding, num_states: int, symbols: list[str],
                   rng: random.Random, states: int = 4) -> tuple[torch.Tensor, Machine]:
    """The encoding of one cyclic FST drawn by the pre-training generator over the task's symbols (``states``
    states before minimisation, 1..n final; the model embeds ``num_states``), and that FST."""
    if not 0 < states <= num_states:
        raise SipError(f"--prefix-sampled-states must be in 1..{num_states} (the model's states), not {states}")
    vocab = task_symbols(train_pairs, symbols)
    if not vocab:
        raise SipError("--prefix sampled: no character of the training pairs is one the model embeds")
    for _ in range(SAMPLED_DRAWS):
        machine = random_fst(rng, states, rng.randint(1, states), vocab)
        if machine.n_states == 0 or not machine.is_cyclic():
            continue
        init = machine_prefix(fst_encoder, machine, max_length, byte_embedding, num_states, symbols)
        if init is not None:
            return init, machine
    raise SipError(f"--prefix sampled: no FST over the task's {len(vocab)} symbols fitted {max_length} prefix vectors "
                   f"in {SAMPLED_DRAWS} draws (raise --prefix-length)")
