"""Tables 8–10 (paper Appendix B.3): T5-Set and T5-SIP-d4, pre-trained from a sentencepiece T5 after
vocabulary surgery, on 4-state FSTs (Table 8, as Table 1), bimachines (Table 9, as Table 2) and g2p with
ASCII-mapped scripts (Table 10, as Table 7).

Without T5 weights (``appendix.t5.init`` null in params.yaml: T5-Base cannot be downloaded
here) each table says so plainly and holds no numbers. ``init: standin`` is a tiny random T5 built
locally (``sip t5 standin``) that exercises the path end to end at ci scale; its tables say so.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from sip_core.io import write_json, write_text
from sip_core.report import tables
from sip_core.report.paper_numbers import PAPER

T5_MODELS = ["t5-set", "t5-sip-d4"]
# table -> (the main-paper table it mirrors, title)
T5_TABLES = {
    "table8": ("table1", "T5-Base: systematic generalisation on 4-state FST tasks (paper Table 8)"),
    "table9": ("table2", "T5-Base: non-deterministic FSTs, bimachines (paper Table 9)"),
    "table10": ("table7", "T5-Base: grapheme-to-phoneme conversion, ASCII-mapped scripts (paper Table 10)"),
}
NOT_RUN = "not run: no pretrained T5-Base weights"


def spec(name: str, tasks: int | None = None) -> tables.TableSpec:
    mirror, title = T5_TABLES[name]
    fields = {**tables.TABLES[mirror].__dict__, "name": name, "title": title}
    if fields["max_task_index"] is not None and tasks:
        fields["max_task_index"] = tasks
    return tables.TableSpec(**fields)


def not_run_markdown(name: str, scale: str, reason: str) -> str:
    _, title = T5_TABLES[name]
    cited = PAPER.get(name, {})
    lines = [f"# {title}", "", f"**{NOT_RUN}** at scale `{scale}` ({reason}). No numbers of ours; the paper's:", "",
             "| model | setting | metric | paper |", "|---|---|---|---|"]
    lines += [f"| {m} | {s} | {k} | {v} |" for (m, s, k), v in cited.items()]
    return "\n".join(lines) + "\n"


def build(name: str, scale: str, resolved: dict, params_hash: str, runs_root: str | None, out: str | Path) -> str:
    """Write ``<name>.csv/.md/.meta.json``; returns a one-line summary."""
    from sip_core.report.runs import load_runs

    init = resolved["appendix"]["t5"]["init"]
    out = Path(out)
    if not init:
        reason = "T5 init is null at this scale (params.yaml: appendix.t5.init)"
        empty = pd.DataFrame(columns=["model", "setting", "metric", "value", "n"])
        write_text(empty.to_csv(index=False, lineterminator="\n"), out)
        write_text(not_run_markdown(name, scale, reason), out.with_suffix(".md"))
        meta = tables.build_meta(pd.DataFrame(columns=["device", "params_hash", "wall_s"]), scale, params_hash, "none")
        write_json({**meta, "not_run": f"{NOT_RUN} ({reason})", "t5_init": None}, out.with_suffix(".meta.json"))
        return f"{name}: {NOT_RUN}"
    table_cfg = resolved["tables"].get(T5_TABLES[name][0]) or {}
    s = spec(name, table_cfg.get("tasks"))
    runs = load_runs(runs_root, models=T5_MODELS)
    runs = runs[runs["setting"].map(s.setting_of).notna()]  # this table's runs (meta.json counts them)
    frame = tables.aggregate(runs, s, T5_MODELS)
    standin = init == "standin"
    meta = tables.build_meta(runs, scale, params_hash, init)
    meta["t5_init"] = init
    if standin:
        meta["standin"] = ("a tiny random T5 (sentencepiece-sized vocabulary, T5 v1.0 layout) built locally "
                           "by `sip t5 standin` stands in for T5-Base: these are not T5-Base numbers")
    title = s.title + (" — stand-in T5, not T5-Base" if standin else "")
    tables.write_table(frame, out, name, title, meta)
    headline = frame[frame["metric"] == s.metrics[0]].groupby("model")["value"].mean().round(1)
    return f"{name} ({scale}, {len(runs)} runs, init {init}): " + ", ".join(f"{m} {v}" for m, v in headline.items())


def write_standin(out: str | Path, shape: dict, vocab_size: int, seed: int) -> None:
    """A tiny T5 in T5 v1.0's layout (sentencepiece-sized vocabulary, tied head, ReLU feed-forward),
    randomly initialised and saved with ``save_pretrained``: what a T5-Base directory looks like."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(vocab_size=vocab_size, d_model=shape["d_model"], d_ff=shape["d_ff"],
                      num_layers=shape["num_layers"], num_decoder_layers=shape.get("num_decoder_layers"),
                      num_heads=shape["num_heads"], d_kv=shape["d_kv"], dropout_rate=shape.get("dropout", 0.1),
                      feed_forward_proj="relu", tie_word_embeddings=True, pad_token_id=0, eos_token_id=1,
                      decoder_start_token_id=0)
    T5ForConditionalGeneration(config).save_pretrained(out)
    write_json({"standin": True, "vocab_size": vocab_size, "shape": shape, "seed": seed}, Path(out) / "standin.json")
