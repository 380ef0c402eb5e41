"""Prefix encoders: FST transitions → vectors (SIP), and the task-embedding table (TE baseline)."""
from __future__ import annotations

import torch
from torch import nn

# Columns of an encoded transition (REFERENCE §1.5): source state, input symbol, output symbol,
# destination state, final flag of the destination (0 padding, 1 non-final, 2 final).
SRC, ILABEL, OLABEL, DST, FINAL = range(5)


def symbol_byte_ids(symbols: list[str]) -> torch.Tensor:
    """(n_symbols, 2) ByT5 ids of each symbol's UTF-8 bytes (0 = none); the special symbols (padding,
    ε, the shorthands) take ByT5 ids 259.. that no byte uses, so they get embeddings of their own."""
    from sip_core.model import tokenizer

    ids = torch.zeros(len(symbols), 2, dtype=torch.long)
    special = 259
    for i, s in enumerate(symbols):
        raw = s.encode("utf-8") if len(s) == 1 else b""
        if raw and len(raw) <= 2:
            ids[i, : len(raw)] = torch.tensor(list(raw)) + tokenizer.BYTE_OFFSET
        else:
            ids[i, 0] = special
            special += 1
    return ids


class TransitionEncoder(nn.Module):
    """h = W [E_state(p); E_state(q); E_sym(σ); E_sym(ρ); E_fin(final(q))] + b, one vector per transition.

    ``symbol_source="bytes"`` (a from-scratch lever, docs/EXPERIMENTS.md) ties E_sym to the T5 byte
    embeddings: E_sym(σ) = shared[byte1(σ)] + g ⊙ shared[byte2(σ)], so a transition's label and the input
    byte it must match live in one space instead of two tables the model has to align by itself.
    """

    def __init__(self, num_states: int, n_symbols: int, d_model: int, state_dim: int = 64,
                 symbol_dim: int = 256, final_dim: int = 16, symbol_source: str = "table",
                 symbols: list[str] | None = None):
        super().__init__()
        self.symbol_source = symbol_source
        self.state_embedding = nn.Embedding(num_states, state_dim)
        self.final_embedding = nn.Embedding(3, final_dim)
        if symbol_source == "bytes":
            # A plain attribute, not a buffer: from_pretrained builds modules on the meta device and
            # would leave a non-persistent buffer uninitialised; this table is derived, not learned.
            self._symbols = list(symbols)
            self._symbol_bytes = None
            self.second_byte_gate = nn.Parameter(torch.ones(d_model))
            symbol_dim = d_model
        else:
            self.symbol_embedding = nn.Embedding(n_symbols, symbol_dim)
        self.project = nn.Linear(2 * state_dim + 2 * symbol_dim + final_dim, d_model, bias=True)

    def symbols(self, ids: torch.Tensor, byte_embedding: nn.Embedding | None) -> torch.Tensor:
        if self.symbol_source != "bytes":
            return self.symbol_embedding(ids)
        if self._symbol_bytes is None or self._symbol_bytes.device != ids.device:
            self._symbol_bytes = symbol_byte_ids(self._symbols).to(ids.device)
        b = self._symbol_bytes[ids]
        second = byte_embedding(b[..., 1]) * (b[..., 1:2] != 0).to(self.second_byte_gate.dtype)
        return byte_embedding(b[..., 0]) + self.second_byte_gate * second

    def forward(self, fst: torch.Tensor, byte_embedding: nn.Embedding | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """fst: (B, T, 5) ints → (vectors (B, T, d_model), mask (B, T): True for real transitions)."""
        parts = [self.state_embedding(fst[..., SRC]), self.state_embedding(fst[..., DST]),
                 self.symbols(fst[..., ILABEL], byte_embedding), self.symbols(fst[..., OLABEL], byte_embedding),
                 self.final_embedding(fst[..., FINAL])]
        return self.project(torch.cat(parts, dim=-1)), fst[..., FINAL] != 0


    def forward_soft(self, soft: "SoftTransitions", byte_embedding: nn.Embedding | None = None) -> torch.Tensor:
        """(L, d_model): each slot's *expected* transition encoding under its label distributions. The
        projection is linear, so this is the encoding of a mixture of transitions: the prefix stays in the
        span the body was pre-trained on, whatever the fine-tuning gradient does."""
        probs = soft.probabilities()
        table = self.symbols(torch.arange(probs["ilabel"].shape[-1], device=probs["ilabel"].device), byte_embedding)
        state, final = self.state_embedding.weight, self.final_embedding.weight
        parts = [probs["src"] @ state, probs["dst"] @ state, probs["ilabel"] @ table, probs["olabel"] @ table,
                 probs["final"] @ final]
        return self.project(torch.cat([x.to(self.project.weight.dtype) for x in parts], dim=-1))


class SoftTransitions(nn.Module):
    """``length`` slots of learnable logits over the five columns of a transition (source, destination,
    input and output symbol, final flag of the destination: non-final or final, never padding)."""

    COLUMNS = {"src": SRC, "ilabel": ILABEL, "olabel": OLABEL, "dst": DST, "final": FINAL}

    def __init__(self, length: int, num_states: int, n_symbols: int):
        super().__init__()
        self.src = nn.Parameter(torch.zeros(length, num_states))
        self.dst = nn.Parameter(torch.zeros(length, num_states))
        self.ilabel = nn.Parameter(torch.zeros(length, n_symbols))
        self.olabel = nn.Parameter(torch.zeros(length, n_symbols))
        self.final = nn.Parameter(torch.zeros(length, 2))  # flags 1 (non-final) and 2 (final)

    def probabilities(self) -> dict[str, torch.Tensor]:
        probs = {name: getattr(self, name).float().softmax(-1) for name in self.COLUMNS}
        probs["final"] = torch.nn.functional.pad(probs["final"], (1, 0))  # flag 0 is padding: probability 0
        return probs

    @torch.no_grad()
    def init_from_sample(self, fst_sample: torch.Tensor, smoothing: float = 0.1) -> None:
        """Logits = log of each slot's label frequencies over a sample of pre-training FSTs (B, T, 5), the
        soft counterpart of the mean-prefix init: at slots every sampled FST fills, the expected encoding
        equals the position-wise mean encoding. Slots no FST fills get the frequencies over all slots."""
        length = self.src.shape[0]
        sample = fst_sample[:, :length].long()
        real = sample[..., FINAL] != 0
        for name, col in self.COLUMNS.items():
            param = getattr(self, name)
            k = param.shape[1]
            labels = sample[..., col] - (1 if name == "final" else 0)
            onehot = torch.nn.functional.one_hot(labels.clamp(0, k - 1), k).float() * real[..., None]
            counts = onehot.sum(0)                                       # (T', k)
            overall = counts.sum(0, keepdim=True)
            counts = torch.cat([counts, overall.expand(length - counts.shape[0], -1)]) if counts.shape[0] < length else counts
            counts = torch.where(counts.sum(1, keepdim=True) > 0, counts, overall)
            freqs = (counts + smoothing) / (counts + smoothing).sum(1, keepdim=True)
            param.copy_(freqs.log().to(param.dtype))


class TaskEmbedding(nn.Module):
    """TE baseline (REFERENCE §4.4): a row of ``prefix_length × te_dim`` per task, up-projected to d_model.

    Row 0 stands for tasks without an embedding (the original falls back to row 0 for unknown ids).
    """

    def __init__(self, num_tasks: int, prefix_length: int, te_dim: int, d_model: int):
        super().__init__()
        self.prefix_length = prefix_length
        self.te_dim = te_dim
        self.embedding = nn.Embedding(num_tasks, prefix_length * te_dim)
        self.up_proj = nn.Linear(te_dim, d_model, bias=True)

    def forward(self, task_ids: torch.Tensor) -> torch.Tensor:
        rows = self.embedding(task_ids).view(task_ids.shape[0], self.prefix_length, self.te_dim)
        return self.up_proj(rows)
