"""The T5-Base path (paper Tables 8-10) with a tiny sentencepiece-vocabulary T5 saved locally (no downloads):
vocabulary surgery, further pre-training with the paper's recipe, the reversible ASCII mapping of g2p, and
tables that say plainly when no T5 weights were configured."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import T5Config, T5ForConditionalGeneration

from sip_core.eval.metrics import score
from sip_core.model import tokenizer
from sip_core.model.config import t5_kwargs
from sip_core.model.loading import build_model, load_pretrained_t5, load_sip, save_model
from sip_core.tasks import ascii_map
from tests.fixtures.tiny_fsts import write_pool

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny_t5(tmp_path):
    """A T5 v1.0-style checkpoint (tied head, ReLU, 600 sentencepiece rows) as T5-Base is laid out."""
    torch.manual_seed(0)
    config = T5Config(vocab_size=600, d_model=32, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2, d_kv=16,
                      dropout_rate=0.0, feed_forward_proj="relu", tie_word_embeddings=True, pad_token_id=0,
                      eos_token_id=1, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config)
    path = tmp_path / "tiny-t5"
    model.save_pretrained(path)
    return path, model.shared.weight.detach().clone()


def test_vocabulary_surgery_keeps_the_first_rows_and_a_new_untied_head(tiny_t5):
    path, original = tiny_t5
    t5 = load_pretrained_t5(str(path))
    assert t5.config.vocab_size == tokenizer.VOCAB_SIZE == 384
    assert t5.shared.weight.shape == (384, 32)
    # pad, EOS, unk are ids 0, 1, 2 in both vocabularies: their rows keep their meaning
    for special in (tokenizer.PAD_ID, tokenizer.EOS_ID, tokenizer.UNK_ID):
        assert torch.equal(t5.shared.weight[special], original[special])
    assert torch.equal(t5.shared.weight, original[:384])           # byte id k <- sentencepiece row k
    assert t5.encoder.embed_tokens.weight is t5.shared.weight and t5.decoder.embed_tokens.weight is t5.shared.weight
    assert t5.lm_head.weight.shape == (384, 32) and t5.lm_head.bias is None
    assert t5.lm_head.weight.data_ptr() != t5.shared.weight.data_ptr()
    assert not torch.allclose(t5.lm_head.weight, original[:384] * 32 ** -0.5)  # re-initialised, not the tied copy
    assert t5.config.scale_decoder_outputs is False
    ids = torch.tensor([tokenizer.encode("ab:c")])
    out = t5(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([tokenizer.encode("ba")]))
    assert out.logits.shape == (1, 3, 384) and torch.isfinite(out.loss)


def test_surgered_t5_becomes_a_sip_model_that_survives_save_and_load(tiny_t5, tmp_path):
    path, _ = tiny_t5
    model = build_model(str(path), "fst", "sip", t5_kwargs())
    assert model.config.t5["vocab_size"] == 384 and model.config.t5["feed_forward_proj"] == "relu"
    save_model(model, tmp_path / "sip")
    loaded = load_sip(tmp_path / "sip")
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    fst = torch.tensor([[[0, 5, 6, 1, 2]]])
    ids = torch.tensor([tokenizer.encode("a")])
    logits = loaded(input_ids=ids, attention_mask=torch.ones_like(ids), fst=fst,
                    decoder_input_ids=torch.zeros(1, 1, dtype=torch.long)).logits
    assert logits.shape == (1, 1, 384)


def test_pretrain_from_the_tiny_t5_with_the_papers_recipe(tiny_t5, tmp_path):
    path, _ = tiny_t5
    pool = write_pool(tmp_path / "pool", n_train_fsts=6, n_dev_fsts=1, n_test_fsts=1, per_fst=5)
    r = subprocess.run([sys.executable, "-m", "sip_core.cli", "pretrain", "--variant", "sip", "--data", str(pool),
                        "--init", str(path), "--lr", "1e-4", "--warmup", "100", "--batch-size", "4", "--grad-accum", "2",
                        "--schedule", "constant", "--max-steps", "2", "--no-progress", "--out", str(tmp_path / "ckpt")],
                       capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "SIP_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["model_type"] == "sip" and config["t5"]["vocab_size"] == 384 and config["t5"]["d_model"] == 32
    assert (tmp_path / "ckpt" / "prefix_init.safetensors").exists()


G2P_ROWS = [
    {"group": "lao", "input": "ກາ", "output": "kaː"}, {"group": "lao", "input": "ມາ", "output": "maː"},
    {"group": "tel", "input": "అమ్మ", "output": "amma"}, {"group": "tel", "input": "ఆట", "output": "aːʈa"},
]


def test_ascii_mapping_is_reversible_ascii_and_keeps_the_metrics():
    maps = ascii_map.build_mappings(G2P_ROWS)
    for row in G2P_ROWS:
        m = maps[row["group"]]
        for side in ("input", "output"):
            mapped = ascii_map.apply(row[side], m[side])
            assert all(32 <= ord(c) < 127 for c in mapped) and len(mapped) == len(row[side])
            assert ascii_map.unmap(mapped, m[side]) == row[side]
        assert len(set(m["output"].values())) == len(m["output"])          # injective
        assert not set(m["output"].values()) & set("".join(r["output"] for r in G2P_ROWS if r["group"] == row["group"]))
    golds = [r["output"] for r in G2P_ROWS]
    preds = ["kaː", "maa", "ama", "aːʈ"]
    mapped = lambda texts: [ascii_map.apply(t, maps[r["group"]]["output"]) for t, r in zip(texts, G2P_ROWS)]
    assert score(mapped(preds), mapped(golds)) == score(preds, golds)      # acc, ED and PER unchanged


def test_ascii_task_file_keeps_ids_and_writes_the_mapping(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"task_id": f"g2p-{r['group']}-d0", "group": r["group"], "draw": 0, "split": "train", **r} for r in G2P_ROWS]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "g2p.parquet")
    info = ascii_map.ascii_task_file(tmp_path / "g2p.parquet", tmp_path / "out.parquet", tmp_path / "map.json")
    assert info["rows"] == 4 and info["groups"] == 2
    out = pq.read_table(tmp_path / "out.parquet").to_pylist()
    mapping = json.loads((tmp_path / "map.json").read_text())["mappings"]
    assert [r["task_id"] for r in out] == [r["task_id"] for r in rows]
    assert [ascii_map.unmap(r["input"], mapping[r["group"]]["input"]) for r in out] == [r["input"] for r in rows]


def test_tables_without_t5_weights_say_not_run(tmp_path):
    from sip_core import config
    from sip_core.report.t5_tables import NOT_RUN, build

    resolved = config.resolve(config.load(), "cpu")  # cpu: no T5 weights configured
    for name in ("table8", "table9", "table10"):
        out = tmp_path / f"{name}.csv"
        assert NOT_RUN in build(name, "cpu", resolved, "h", None, out)
        assert pd.read_csv(out).empty
        assert NOT_RUN in out.with_suffix(".md").read_text()
        assert NOT_RUN in json.loads(out.with_suffix(".meta.json").read_text())["not_run"]
