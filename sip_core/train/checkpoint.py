"""Training checkpoints that survive being killed at any moment.

A checkpoint is a directory ``checkpoints/step-<N>`` holding one ``state.pt`` (model, optimiser, scheduler,
RNG states, data position, metrics so far) and the model config. It is written under a temporary name,
fsynced, renamed into place, and only then named in ``checkpoints/latest``; older ones are removed last.
A kill at any point leaves the previous checkpoint complete and pointed to.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from sip_core.io import write_text

STATE_FILE = "state.pt"
LATEST = "latest"


def checkpoint_root(out_dir: str | Path) -> Path:
    return Path(out_dir) / "checkpoints"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save_checkpoint(out_dir: str | Path, step: int, payload: dict, config_json: str, keep: int = 1) -> Path:
    root = checkpoint_root(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:09d}"
    tmp = root / f".tmp-step-{step:09d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    with open(tmp / STATE_FILE, "wb") as fh:
        torch.save(payload, fh)
        fh.flush()
        os.fsync(fh.fileno())
    (tmp / "config.json").write_text(config_json, encoding="utf-8")
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    write_text(final.name + "\n", root / LATEST)
    for old in sorted(p for p in root.glob("step-*") if p != final)[: max(0, len(list(root.glob("step-*"))) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".tmp-step-*"):
        shutil.rmtree(stale, ignore_errors=True)
    return final


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint directory, or None."""
    root = checkpoint_root(out_dir)
    pointer = root / LATEST
    if pointer.exists():
        candidate = root / pointer.read_text(encoding="utf-8").strip()
        if (candidate / STATE_FILE).exists():
            return candidate
    complete = sorted(p for p in root.glob("step-*") if (p / STATE_FILE).exists()) if root.exists() else []
    return complete[-1] if complete else None


def load_checkpoint(path: Path) -> tuple[dict, dict]:
    """(payload, config dict) of a checkpoint directory."""
    payload = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    return payload, config


def model_from_checkpoint(payload: dict, config: dict):
    """The model a checkpoint holds, whole (a TE run's task table included, which its saved model cuts)."""
    from sip_core.model.config import SIPConfig
    from sip_core.model.sip_model import SIPForConditionalGeneration
    model = SIPForConditionalGeneration(SIPConfig.from_dict({k: v for k, v in config.items()
                                                             if k not in ("model_type", "transformers_version")}))
    model.load_state_dict(payload["model"])
    return model


def discard_checkpoints(out_dir: str | Path) -> None:
    """Remove every checkpoint of ``out_dir`` (a rerun with other settings starts from scratch)."""
    root = checkpoint_root(out_dir)
    if root.exists():
        shutil.rmtree(root)
