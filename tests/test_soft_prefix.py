"""The soft-transition prefix (`sip finetune --prefix soft`): slots of label distributions read through the
pre-trained FST encoder. Checked against the encoder's own path on hard transitions and against
``mean_prefix``, and end to end through the CLI (prefix-only training, save/load, predict)."""
from __future__ import annotations

import io
import sys

import pyarrow.parquet as pq
import torch
from safetensors.torch import load_file

from sip_core import cli
from sip_core.fst import vocab
from sip_core.model import SIPConfig, SIPForConditionalGeneration
from sip_core.model.config import t5_kwargs
from sip_core.model.encoder import SoftTransitions, TransitionEncoder
from sip_core.model.loading import load_sip, mean_prefix, save_model, save_prefix_init
from tests.test_finetune_own_task import EXAMPLE

# Three FSTs filling all four slots (columns: src, in, out, dst, final flag 1|2), so no padding is involved.
SAMPLE = torch.tensor([[[0, 5, 6, 1, 1], [1, 6, 7, 2, 2], [2, 7, 5, 0, 1], [0, 9, 9, 3, 2]],
                       [[0, 8, 9, 1, 2], [1, 5, 5, 1, 1], [1, 6, 6, 0, 1], [3, 7, 8, 2, 1]],
                       [[0, 9, 5, 3, 1], [3, 5, 5, 0, 2], [0, 6, 7, 2, 2], [2, 8, 8, 1, 1]]])


def encoder() -> TransitionEncoder:
    torch.manual_seed(0)
    return TransitionEncoder(num_states=4, n_symbols=vocab.N_SYMBOLS, d_model=8)


def test_near_one_hot_logits_give_the_encoding_of_those_transitions():
    enc, soft = encoder(), SoftTransitions(4, 4, vocab.N_SYMBOLS)
    with torch.no_grad():
        for name, col in SoftTransitions.COLUMNS.items():
            labels = SAMPLE[0, :, col] - (1 if name == "final" else 0)
            getattr(soft, name).copy_(torch.nn.functional.one_hot(labels, getattr(soft, name).shape[1]) * 60.0)
        want, _ = enc(SAMPLE[:1])
        assert torch.allclose(enc.forward_soft(soft), want[0], atol=1e-5)


def test_init_from_a_full_sample_equals_the_mean_prefix():
    enc, soft = encoder(), SoftTransitions(4, 4, vocab.N_SYMBOLS)
    soft.init_from_sample(SAMPLE, smoothing=0.0)
    with torch.no_grad():
        got = enc.forward_soft(soft)
    want = mean_prefix(enc, SAMPLE, n_examples=3, prefix_length=4, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(got, want, atol=1e-5)


def test_prefix_only_finetuning_moves_only_the_logits_and_round_trips(tmp_path, capsys, monkeypatch):
    torch.manual_seed(0)
    tiny = t5_kwargs(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, dropout_rate=0.0)
    base = SIPForConditionalGeneration(SIPConfig(t5=tiny, prefix_mode="fst", num_states=4))
    save_model(base, tmp_path / "sip")
    save_prefix_init(tmp_path / "sip", SAMPLE)
    out = tmp_path / "run"
    argv = ["finetune", "--model", str(tmp_path / "sip"), "--prefix", "soft", "--prefix-length", "6", "--freeze-body",
            "--prefix-lr", "0.5", "--train", str(EXAMPLE / "train.tsv"), "--test", str(EXAMPLE / "test.tsv"),
            "--out", str(out), "--epochs", "2", "--batch-size", "8", "--no-progress"]
    assert cli.main(argv) == 0
    tuned = load_file(str(out / "model.safetensors"))
    before = base.state_dict()
    soft = {k: v for k, v in tuned.items() if k.startswith("soft_prefix.")}
    assert len(soft) == 5 and soft["soft_prefix.ilabel"].shape == (6, vocab.N_SYMBOLS)
    body = [k for k in tuned if not k.startswith("soft_prefix.")]
    assert body and all(torch.equal(tuned[k], before[k]) for k in body), "a frozen body must not move"
    loaded = load_sip(out)
    assert loaded.config.prefix_mode == "soft"
    init = SoftTransitions(6, 4, vocab.N_SYMBOLS)
    init.init_from_sample(SAMPLE)
    assert not torch.allclose(loaded.soft_prefix.ilabel, init.ilabel), "the logits must have been trained"
    table = pq.read_table(out / "predictions.parquet").to_pydict()
    stdin = "".join(x + "\n" for x in table["input"]).encode()
    capsys.readouterr()  # the fine-tune's own summary
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    assert cli.main(["predict", "--model", str(out)]) == 0
    assert capsys.readouterr().out == "".join(p + "\n" for p in table["prediction"])  # (untrained: any bytes)
