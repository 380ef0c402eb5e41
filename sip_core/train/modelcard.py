"""The README.md model card of a fine-tuned run: what it was trained on, how, how well, and how to use it."""
from __future__ import annotations

import datetime
import platform
import shlex
import sys
from importlib import metadata
from pathlib import Path

from sip_core.train.rundir import sha256


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for dist in ("sip-core", "torch", "transformers", "safetensors", "numpy", "pyarrow"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return versions


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed (``sip finetune ...``), however it was started (entry point, -m, torchrun)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["sip", *argv])


def data_entry(path: str | Path, n_examples: int) -> dict:
    path = Path(path)
    return {"path": str(path), "sha256": sha256(path), "bytes": path.stat().st_size, "examples": n_examples}


def base_entry(model_arg: str) -> dict:
    entry = {"path": str(model_arg)}
    weights = Path(model_arg) / "model.safetensors"
    if weights.is_file():
        entry["sha256"] = sha256(weights)
    return entry


def render(metrics: dict, train: dict, test: dict, base: dict, command: str, versions: dict,
           date: str | None = None) -> str:
    """Markdown with the Hub's YAML front matter; every number comes from ``metrics``."""
    date = date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rep, hp = metrics["reported"], metrics["hyperparameters"]
    last = metrics["epochs"][-1] if metrics["epochs"] else {}
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: text2text-generation",
        "tags: [sip, finite-state-transduction, byt5, seq2seq]",
        "---",
        f"# {metrics['run_id']}",
        "",
        "A byte-level seq2seq model fine-tuned with `sip finetune` (SIP: Lindemann, Koller & Titov, ACL 2024:",
        "a structural inductive bias for finite-state transduction, injected by pre-training a Transformer to",
        "simulate finite-state transducers).",
        "",
        "## Use",
        "```bash",
        "sip predict --model THIS_DIRECTORY < inputs.txt > outputs.txt   # one input per line",
        "```",
        "```python",
        "import sip_core.model  # registers model_type 'sip' with transformers' Auto classes",
        "from transformers import AutoModelForSeq2SeqLM",
        "model = AutoModelForSeq2SeqLM.from_pretrained('THIS_DIRECTORY')",
        "```",
        "",
        "## Results (test set, greedy decoding)",
        "| metric | reported | last evaluation |",
        "|---|---|---|",
        f"| exact-match accuracy (%) | {rep['acc']:.2f} | {last.get('acc', float('nan')):.2f} |",
        f"| edit distance (mean) | {rep['ed']:.3f} | {last.get('ed', float('nan')):.3f} |",
        f"| phoneme/character error rate | {rep['per']:.3f} | {last.get('per', float('nan')):.3f} |",
        "",
        f"Reported = mean of the last {rep['n_evaluations']} evaluation(s) (the paper's protocol); "
        f"{metrics['n_test']} test examples.",
        "",
        "## Data",
        "| split | file | examples | bytes | sha256 |",
        "|---|---|---|---|---|",
        f"| train | `{train['path']}` | {train['examples']} | {train['bytes']} | `{train['sha256']}` |",
        f"| test | `{test['path']}` | {test['examples']} | {test['bytes']} | `{test['sha256']}` |",
        "",
        "## Training",
        f"- base checkpoint: `{base['path']}`" + (f" (model.safetensors sha256 `{base['sha256']}`)" if "sha256" in base else ""),
        f"- prefix: {metrics['prefix']}; epochs {hp['epochs']}, batch size {hp['batch_size']}, body LR {hp['lr']}, "
        f"prefix LR {hp['prefix_lr']}, clip {hp['clip']}, precision {hp['precision']}, seed {metrics['seed']}",
        f"- {metrics['steps']} optimiser steps on {metrics['device']}, {metrics['wall_seconds']:.1f} s",
        f"- date (UTC): {date}; sip-core commit `{metrics['commit']}`",
        "- command:",
        "```bash",
        command,
        "```",
        "",
        "## Library versions",
        "| library | version |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in versions.items()],
        "",
    ]
    return "\n".join(lines)
