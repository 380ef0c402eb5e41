"""What the pipeline knows about models and settings: which pre-training makes each model, how it is
fine-tuned, and which task file each evaluation setting reads. Snakemake rules stay thin by asking here."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    variant: str | None          # pre-training variant (sip | te | naive | set), None: no pre-training
    pool: str | None             # pre-training pool (d4, d4plus, nd7, d4long, set)
    parent: str | None = None    # continued pre-training starts from this model's checkpoint
    checkpoint_of: str | None = None  # fine-tune another model's checkpoint (the no-prefix ablation)
    prefix: str = "none"         # fine-tuning prefix: mean | induced | readout | random | none
    hparams: str = "default"     # key into the per-model batch/lr maps of params.finetune.*
    extension: bool = False      # ours, not the paper's: a row of its own, outside the paper's claims
    prefix_max_norm: str | None = None  # --prefix-max-norm of its fine-tuning (an extension; None: no cap)


MODELS: dict[str, ModelSpec] = {
    "base": ModelSpec(None, None),
    "naive": ModelSpec("naive", "d4"),
    "set": ModelSpec("set", "set"),
    "te": ModelSpec("te", "d4", prefix="random", hparams="te"),
    "sip-d4": ModelSpec("sip", "d4", prefix="mean", hparams="sip"),
    "sip-d4-noprefix": ModelSpec(None, None, checkpoint_of="sip-d4", prefix="none", hparams="sip"),
    # an extension, not the paper's: the prefix starts as the FST OSTIA learns from the training pairs (DEVIATIONS.md)
    "sip-d4-induced": ModelSpec(None, None, checkpoint_of="sip-d4", prefix="induced", hparams="sip", extension=True),
    # an extension: the paper's init, each tuned slot capped at the body's own encoding norm (sweep 30, session 45)
    "sip-d4-capped": ModelSpec(None, None, checkpoint_of="sip-d4", prefix="mean", hparams="sip", extension=True,
                               prefix_max_norm="fst"),
    # an extension: a capped first pass, then the capped protocol from the FST read off its states (session 59)
    "sip-d4-readout": ModelSpec(None, None, checkpoint_of="sip-d4", prefix="readout", hparams="sip", extension=True,
                                prefix_max_norm="fst"),
    "sip-d4plus": ModelSpec("sip", "d4plus", parent="sip-d4", prefix="mean", hparams="sip"),
    "sip-nd7": ModelSpec("sip", "nd7", parent="sip-d4", prefix="mean", hparams="sip"),
    "sip-d4-long": ModelSpec("sip", "d4long", parent="sip-d4", prefix="mean", hparams="sip"),
    # the same extension on SIP-d4-long: Table 11's tasks, whose FSTs OSTIA's letter-to-letter fallback finds (session 29)
    "sip-d4-long-induced": ModelSpec(None, None, checkpoint_of="sip-d4-long", prefix="induced", hparams="sip",
                                     extension=True),
}

# Run tables of the analyses (workflow/rules/analysis.smk); their models and settings: params `analysis`.
ANALYSIS_TABLES = ("table11",)
PROBE_MODEL = "sip-d4"          # the probed checkpoint, fine-tuned for the transfer study
PROBE_SETTING = "iteration-s4"  # the transfer study's tasks (paper: the 4-state iteration tasks)


def checkpoint_model(model: str) -> str:
    """The model whose pre-trained checkpoint ``model`` fine-tunes."""
    return MODELS[model].checkpoint_of or model


def family(setting: str) -> str:
    """Fine-tuning protocol family of an evaluation setting (keys of params.finetune)."""
    if setting in ("g2p", "sygus"):
        return setting
    return "synthetic"


def task_file(scale: str, setting: str) -> str:
    if setting in ("g2p", "sygus"):
        return f"data/{scale}/natural/{setting}/examples.parquet"
    return f"data/{scale}/eval/{setting}/examples.parquet"


def hparams_key(mapping: dict, model: str) -> str:
    """The key of a ``{default: x, sip: y, te: z}`` map that holds for ``model``: its hparams group, else ``default``."""
    own = MODELS[model].hparams
    return own if own in mapping else "default"


def by_model(mapping, model: str):
    """Per-model value of a ``{default: x, sip: y, te: z}`` map; a plain value holds for every model."""
    if not isinstance(mapping, dict):
        return mapping
    return mapping[hparams_key(mapping, model)]


def max_norm_flag(model: str) -> str:
    """``sip finetune`` flag of a model whose tuned prefix slots are capped (``ModelSpec.prefix_max_norm``)."""
    cap = MODELS[model].prefix_max_norm
    return f" --prefix-max-norm {cap}" if cap else ""


# prefixes that start, where they can, from one FST's encoding, and so train at finetune.induced_prefix_lr
ONE_FST_PREFIXES = ("induced", "readout")


def uses_induced_prefix_lr(finetune: dict, model: str) -> bool:
    return MODELS[model].prefix in ONE_FST_PREFIXES and "induced_prefix_lr" in finetune


def uses_readout_epochs(finetune: dict, model: str) -> bool:
    return MODELS[model].prefix == "readout" and "readout_epochs" in finetune


def readout_flag(finetune: dict, model: str) -> str:
    """``sip finetune`` flag of ``finetune.readout_epochs`` (the first pass of ``--prefix readout``) for a model with
    a read-out prefix, where the scale sets one; else nothing (the command's default)."""
    return f" --readout-epochs {finetune['readout_epochs']}" if uses_readout_epochs(finetune, model) else ""


def induced_prefix_flag(finetune: dict, model: str) -> str:
    """``sip finetune`` flag of ``finetune.induced_prefix_lr`` (the prefix LR of a task whose induced prefix found
    its FST) for a model with an induced prefix, where the scale sets one; else nothing. A key of its own, so that
    adding it left every other run's params hash as it was. A task that falls back to the mean init keeps
    ``prefix_lr``: at 0.01 the mean init stalled (UC 39.0 against SIP-d4's 67.0, gpu session 23)."""
    return f" --induced-prefix-lr {finetune['induced_prefix_lr']}" if uses_induced_prefix_lr(finetune, model) else ""


def restart_flags(restarts: dict | None) -> str:
    """``sip finetune`` flags of params ``finetune.restarts`` (K short runs chosen by the longest training inputs,
    sip_core/train/restarts.py); absent: one run, as in the original."""
    if not restarts:
        return ""
    flags = {"count": "--restarts", "epochs": "--restart-epochs", "holdout": "--restart-holdout",
             "lr_scale": "--continue-lr-scale"}
    return "".join(f" {flags[k]} {restarts[k]}" for k in flags if k in restarts)


# params `model.shape` keys -> the T5 config's names (a released checkpoint's config.json, key "t5")
SHAPE_CONFIG_KEYS = {"d_model": "d_model", "d_ff": "d_ff", "num_layers": "num_layers",
                     "num_decoder_layers": "num_decoder_layers", "num_heads": "num_heads", "d_kv": "d_kv",
                     "dropout": "dropout_rate", "rel_buckets": "relative_attention_num_buckets",
                     "rel_max_distance": "relative_attention_max_distance"}


def released_checkpoint(resolved: dict, model: str) -> str | None:
    """The released checkpoint directory a scale uses for ``model`` instead of pre-training it (params
    ``model.released``), or None. Its shape must be the scale's ``model.shape``: the base row and the other
    pre-trained models are built at that shape, and a comparison across shapes would not be one."""
    import json

    from sip_core.errors import SipError
    path = (resolved["model"].get("released") or {}).get(model)
    if path is None:
        return None
    config = Path(path) / "config.json"
    if not config.is_file():
        raise SipError(f"model.released.{model}: {path} has no config.json (not a released SIP checkpoint)")
    t5 = json.loads(config.read_text(encoding="utf-8")).get("t5", {})
    differ = [f"{key} {resolved['model']['shape'][key]} vs {t5.get(name)}" for key, name in SHAPE_CONFIG_KEYS.items()
              if key in resolved["model"]["shape"] and t5.get(name) != resolved["model"]["shape"][key]]
    if differ:
        raise SipError(f"model.released.{model}: {path} is not of this scale's model.shape ({', '.join(differ)})")
    return path


def pretrain_settings(resolved: dict, model: str) -> dict:
    spec = MODELS[model]
    return resolved["pretrain"]["continued" if spec.parent else spec.variant]


def put_interpreter_first_on_path() -> None:
    """Jobs call ``python -m sip_core.cli``: make ``python`` the interpreter running Snakemake (the
    venv's), unless ``--use-conda`` activates a rule's environment over it."""
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
