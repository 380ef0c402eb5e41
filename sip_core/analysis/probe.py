"""The linear state probe of paper Section 7 (REFERENCE §6).

A single linear layer (softmax / cross-entropy) reads the top encoder layer of a frozen model at every
input position (bytes and EOS; labels from ``states.probe_labels``) and predicts the FST state before
that token. Trained for one epoch with Adagrad (LR 0.1, batch 32 instances), as the original.
Baselines: the same probe on SIP-d4 whose Transformer is re-initialised (its FST encoder kept), and
on a fully random model; the naive heuristic lives in ``states``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from sip_core.analysis.states import IGNORE, probe_labels
from sip_core.model.sip_model import SIPForConditionalGeneration
from sip_core.train.batching import DeviceSplit, eval_batches, random_batches

LR = 0.1
BATCH_SIZE = 32
EPOCHS = 1


class ProbeData:
    """A split with state sequences, ready for a model: batches plus targets in encoder coordinates."""

    def __init__(self, data: DeviceSplit, n_prefix: np.ndarray):
        self.data = data
        self.n_prefix = np.asarray(n_prefix, np.int64)
        self._labels = torch.from_numpy(probe_labels(data.split)).to(data.device)

    def __len__(self) -> int:
        return len(self.data)

    def targets(self, idx: np.ndarray, width: int) -> torch.Tensor:
        """(B, width) labels: byte k of row r sits at n_prefix_r + k in the packed encoder input."""
        device = self.data.device
        idx_t = torch.from_numpy(np.asarray(idx, np.int64)).to(device)
        n_pre = torch.from_numpy(self.n_prefix[idx]).to(device)
        k = torch.arange(width, device=device).unsqueeze(0) - n_pre.unsqueeze(1)
        valid = (k >= 0) & (k < self.data._in_len[idx_t].unsqueeze(1))
        pos = torch.where(valid, self.data._in_off[idx_t].unsqueeze(1) + k, torch.zeros_like(k))
        return torch.where(valid, self._labels[pos], torch.full_like(k, IGNORE))


def prefix_lengths(model: SIPForConditionalGeneration, data: DeviceSplit) -> np.ndarray:
    """Encoder positions before the bytes of each example, by the model's prefix mode."""
    mode = model.config.prefix_mode
    if mode == "fst":
        return data.prefix_lengths
    if mode in ("tuned", "soft", "te"):
        return np.full(len(data), model.config.prefix_length, np.int64)
    return np.zeros(len(data), np.int64)


def probe_data(model: SIPForConditionalGeneration, split, device, fsts=None) -> ProbeData:
    use_fsts = model.config.prefix_mode == "fst"
    data = DeviceSplit(split, device, fsts, use_fsts=use_fsts)
    return ProbeData(data, prefix_lengths(model, data))


@torch.no_grad()
def features(model: SIPForConditionalGeneration, pdata: ProbeData, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(top-layer vectors at labelled positions (m, d), their labels (m,), row-major mask (B, W))."""
    batch = pdata.data.batch(idx, with_labels=False)
    hidden, _ = model.encode(batch["input_ids"], batch["attention_mask"], batch.get("fst"), batch.get("task_ids"),
                             batch.get("encoder_width"))
    hidden = hidden.last_hidden_state.float()
    labels = pdata.targets(idx, hidden.shape[1])
    mask = labels != IGNORE
    return hidden[mask], labels[mask], mask


def train_probe(model: SIPForConditionalGeneration, pdata: ProbeData, n_classes: int, lr: float = LR,
                batch_size: int = BATCH_SIZE, epochs: int = EPOCHS, seed: int = 0) -> nn.Linear:
    """A linear probe trained on the frozen ``model``'s top encoder layer."""
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    probe = nn.Linear(model.config.d_model, n_classes)
    with torch.no_grad():  # PyTorch's default init, drawn from our own generator (reproducible)
        bound = model.config.d_model ** -0.5
        probe.weight.uniform_(-bound, bound, generator=gen)
        probe.bias.uniform_(-bound, bound, generator=gen)
    probe = probe.to(pdata.data.device)
    optimizer = torch.optim.Adagrad(probe.parameters(), lr=lr)
    for epoch in range(epochs):
        for idx in random_batches(len(pdata), batch_size, seed, epoch):
            x, y, _ = features(model, pdata, idx)
            loss = nn.functional.cross_entropy(probe(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return probe


@torch.no_grad()
def predict_states(model: SIPForConditionalGeneration, probe: nn.Linear, pdata: ProbeData,
                   batch_size: int = 64) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per example, in split order: (predicted states, gold states) at its labelled positions."""
    model.eval()
    predicted: list = [None] * len(pdata)
    gold: list = [None] * len(pdata)
    for idx in eval_batches(pdata.data.encoder_lengths, batch_size):
        x, y, mask = features(model, pdata, idx)
        pred = probe(x).argmax(-1).cpu().numpy()
        y = y.cpu().numpy()
        ends = np.cumsum(mask.sum(1).cpu().numpy())  # labelled positions are row-major, in order
        for i, start, end in zip(idx, np.concatenate([[0], ends[:-1]]), ends):
            predicted[i], gold[i] = pred[start:end], y[start:end]
    return predicted, gold


@dataclass(frozen=True)
class Accuracy:
    acc_token: float
    acc_seq: float
    n_seq: int
    n_tokens: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def accuracy(predicted: list[np.ndarray], gold: list[np.ndarray]) -> Accuracy:
    right = [p == g for p, g in zip(predicted, gold)]
    tokens = sum(len(r) for r in right)
    return Accuracy(100.0 * sum(int(r.sum()) for r in right) / max(1, tokens),
                    100.0 * float(np.mean([bool(r.all()) for r in right])), len(right), tokens)


def n_classes_of(*splits) -> int:
    """Probe classes: the states that occur in the probing data (0..max)."""
    return int(max(int(s.states.max(initial=0)) for s in splits)) + 1


# ---- baseline models --------------------------------------------------------------------------------

def reinit_transformer(model: SIPForConditionalGeneration, init: str, seed: int) -> SIPForConditionalGeneration:
    """SIP-d4 with its FST encoder kept and its Transformer re-initialised to the base model's init:
    ``scratch`` (random, T5's init rules) or a T5/ByT5 path (the paper: ByT5-small)."""
    config = copy.deepcopy(model.config)
    torch.manual_seed(seed)
    if init == "scratch":
        fresh = SIPForConditionalGeneration(config)
    else:
        from sip_core.model.loading import load_pretrained_t5

        fresh = SIPForConditionalGeneration(config, t5=load_pretrained_t5(init))
    fresh.fst_encoder.load_state_dict(model.fst_encoder.state_dict())
    return fresh.to(model.device).eval()


def random_model(model: SIPForConditionalGeneration, seed: int) -> SIPForConditionalGeneration:
    """A model of the same configuration with every weight freshly initialised."""
    torch.manual_seed(seed)
    return SIPForConditionalGeneration(copy.deepcopy(model.config)).to(model.device).eval()
