"""Building and loading SIP models: scratch, a SIP checkpoint, or any T5/ByT5 ``from_pretrained`` path."""
from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from sip_core.errors import SipError
from sip_core.model.config import SIPConfig
from sip_core.model.sip_model import ByT5LayoutT5, SIPForConditionalGeneration, untie_lm_head

PREFIX_INIT_FILE = "prefix_init.safetensors"
TUNED_PREFIX_FILE = "prefix.safetensors"  # `sip finetune --save-prefix`


def _quiet_transformers() -> None:
    """No per-shard progress bars or load reports: our commands print their own progress."""
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def is_sip_checkpoint(path: str | Path) -> bool:
    cfg = Path(path) / "config.json"
    if not cfg.exists():
        return False
    try:
        return json.loads(cfg.read_text(encoding="utf-8")).get("model_type") == "sip"
    except json.JSONDecodeError:
        return False


def load_sip(path: str | Path) -> SIPForConditionalGeneration:
    path = Path(path)
    if not is_sip_checkpoint(path):
        raise SipError(f"{path} is not a SIP checkpoint (no config.json with model_type 'sip')")
    _quiet_transformers()
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise SipError(f"{path} has no model.safetensors (an incomplete or non-Hugging Face checkpoint)")
    try:
        return SIPForConditionalGeneration.from_pretrained(path)
    except Exception as err:  # safetensors, JSON and shape errors all mean: this checkpoint is unusable
        reason = " ".join(str(err).split())[:200]
        raise SipError(f"{path}: cannot load the checkpoint ({type(err).__name__}: {reason}); "
                       "is model.safetensors truncated or corrupt?") from None


def load_pretrained_t5(path: str) -> ByT5LayoutT5:
    """A T5/ByT5 checkpoint in the ByT5 layout; a tied head (T5 v1.0) becomes an equivalent untied copy."""
    _quiet_transformers()
    try:
        t5, info = ByT5LayoutT5.from_pretrained(path, output_loading_info=True, tie_word_embeddings=False)
    except (OSError, ValueError) as err:
        raise SipError(f"cannot load a pretrained T5 from {path!r}: {' '.join(str(err).split())}") from None
    if t5.config.vocab_size < 384:
        raise SipError(f"{path} has vocabulary size {t5.config.vocab_size}; a byte-level (ByT5) model has 384")
    if t5.config.vocab_size > 384:  # a sentencepiece T5 (T5-Base): the paper's vocabulary surgery
        from sip_core.model.surgery import byte_vocab_surgery
        byte_vocab_surgery(t5)
    elif "lm_head.weight" in info.get("missing_keys", []):
        untie_lm_head(t5, scratch=False, copy_scale=t5.config.d_model ** -0.5)
    t5.config.scale_decoder_outputs = False
    return t5


def with_prefix_mode(model: SIPForConditionalGeneration, prefix_mode: str, **config_updates) -> SIPForConditionalGeneration:
    """The same T5 under another prefix mode (new prefix modules are freshly initialised)."""
    config = copy.deepcopy(model.config)
    config.prefix_mode = prefix_mode
    for k, v in config_updates.items():
        setattr(config, k, v)
    new = SIPForConditionalGeneration(config, t5=model.t5)
    if prefix_mode in ("fst", "soft") and model.fst_encoder is not None:
        new.fst_encoder = model.fst_encoder
    if model.state_head is not None:  # the pre-trained state head, not a fresh one
        new.state_head = model.state_head
    return new


def without_task_table(model: SIPForConditionalGeneration) -> SIPForConditionalGeneration:
    """A TE model for saving: its task table cut to row 0 (the row of FSTs without an embedding).

    Fine-tuning starts a fresh prefix instead of the table (REFERENCE §4.4), and the whole table (a row of
    50 x 180 per pre-training FST: 4.5B parameters for the gpu pool's 500k) would not travel or load.
    The resume checkpoint keeps the whole table."""
    slim = with_prefix_mode(model, "te", te_num_tasks=1)
    slim.task_embedding.up_proj = model.task_embedding.up_proj
    slim.task_embedding.embedding.to(model.task_embedding.embedding.weight.device)
    with torch.no_grad():
        slim.task_embedding.embedding.weight.copy_(model.task_embedding.embedding.weight[:1])
    return slim


def build_model(init: str, prefix_mode: str, variant: str, t5_kwargs: dict, **config_kwargs) -> SIPForConditionalGeneration:
    """``init`` = scratch (a random T5 of the given shape), a SIP checkpoint (continued pre-training keeps
    its prefix modules when the mode matches), or a T5/ByT5 path."""
    if init == "scratch":
        return SIPForConditionalGeneration(SIPConfig(t5=t5_kwargs, prefix_mode=prefix_mode, variant=variant, **config_kwargs))
    if is_sip_checkpoint(init):
        model = load_sip(init)
        if model.config.prefix_mode != prefix_mode:
            model = with_prefix_mode(model, prefix_mode, **config_kwargs)
        model.config.variant = variant
        return model
    t5 = load_pretrained_t5(init)
    t5_dict = {k: getattr(t5.config, k) for k in t5_kwargs}
    config = SIPConfig(t5=t5_dict, prefix_mode=prefix_mode, variant=variant, **config_kwargs)
    return SIPForConditionalGeneration(config, t5=t5)


def save_model(model: SIPForConditionalGeneration, out_dir: str | Path, dtype: torch.dtype | None = None) -> None:
    """An ordinary HF checkpoint (config.json + model.safetensors), written beside and renamed into place."""
    import os
    import shutil
    import tempfile

    from sip_core.io import usual_permissions
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".save-", dir=out_dir))
    try:
        _quiet_transformers()
        to_save = model
        if dtype is not None:
            to_save = copy.deepcopy(model).to(dtype)
        to_save.save_pretrained(tmp)
        for f in sorted(tmp.iterdir()):
            usual_permissions(f)  # safetensors writes 0600
            os.replace(f, out_dir / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save_prefix_init(out_dir: str | Path, fst_sample: torch.Tensor) -> None:
    """FSTs from the pre-training data (n, slots, 5) from which fine-tuning builds its prefix init."""
    from sip_core.io import atomic_path
    with atomic_path(Path(out_dir) / PREFIX_INIT_FILE) as tmp:
        save_file({"fst_sample": fst_sample.to(torch.int32).contiguous()}, str(tmp))


def save_tuned_prefix(prefix: torch.Tensor, out_dir: str | Path) -> None:
    """A fine-tuned prefix (prefix_length, d_model) alone: with a frozen body, checkpoint + prefix = the model."""
    from sip_core.io import atomic_path
    with atomic_path(Path(out_dir) / TUNED_PREFIX_FILE) as tmp:
        save_file({"prefix": prefix.detach().float().cpu().contiguous()}, str(tmp))


def load_tuned_prefix(run_dir: str | Path) -> torch.Tensor:
    f = Path(run_dir) / TUNED_PREFIX_FILE
    if not f.exists():
        raise SipError(f"{f} is missing (fine-tune with --freeze-body --save-prefix)")
    return load_file(str(f))["prefix"]


def load_prefix_init(path: str | Path) -> torch.Tensor | None:
    f = Path(path) / PREFIX_INIT_FILE
    return load_file(str(f))["fst_sample"].long() if f.exists() else None


@torch.no_grad()
def mean_prefix(fst_encoder, fst_sample: torch.Tensor, n_examples: int = 32, prefix_length: int = 50,
                generator: torch.Generator | None = None, byte_embedding=None) -> torch.Tensor:
    """Fine-tuning prefix init (DESIGN §7): position-wise mean of ``n_examples`` random FST encodings,
    over the FSTs that have a transition at that position; positions none has get the mean of all real
    transitions of the sample."""
    perm = torch.randperm(fst_sample.shape[0], generator=generator)[:n_examples]
    sample = fst_sample[perm][:, :prefix_length]
    if sample.shape[1] < prefix_length:
        sample = torch.nn.functional.pad(sample, (0, 0, 0, prefix_length - sample.shape[1]))
    device = next(fst_encoder.parameters()).device
    vectors, mask = fst_encoder(sample.to(device), byte_embedding)
    vectors, mask = vectors.float(), mask.float().unsqueeze(-1)
    counts = mask.sum(0)
    overall = (vectors * mask).sum((0, 1)) / mask.sum().clamp(min=1)
    per_position = (vectors * mask).sum(0) / counts.clamp(min=1)
    return torch.where(counts > 0, per_position, overall.expand_as(per_position))
