"""Use a released checkpoint (``models/``) as a scale's pre-trained model: the cpu scale fine-tunes SIP
models pre-trained on a GPU (DESIGN §8) instead of pre-training them on two cores, where they learn nothing."""
from __future__ import annotations

import shutil
from pathlib import Path

from sip_core.io import atomic_path

RELEASE_FILES = ("config.json", "model.safetensors", "prefix_init.safetensors", "pretrain_metrics.json")


def use_release(src: str | Path, out: str | Path) -> list[str]:
    """Copy a released SIP checkpoint into ``out`` after loading it once (a checkpoint that is not a SIP
    model, or whose weights are truncated, stops here with its reason). model.safetensors is written last,
    so a copy interrupted half-way is never taken for a complete checkpoint."""
    from sip_core.model.loading import load_sip
    load_sip(src)
    src, out = Path(src), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in sorted(RELEASE_FILES, key=lambda n: n == "model.safetensors"):
        if (src / name).is_file():
            with atomic_path(out / name) as tmp:
                shutil.copyfile(src / name, tmp)
            copied.append(name)
    return copied


def register(commands, data_commands) -> None:
    p = commands.add_parser("use-release", help="copy a released SIP checkpoint (models/...) to a checkpoint directory")
    p.add_argument("src", help="the released checkpoint directory, e.g. models/sip-d4")
    p.add_argument("--out", required=True)
    p.set_defaults(func=lambda a: print(f"use-release: {a.src} -> {a.out} ({', '.join(use_release(a.src, a.out))})"))
