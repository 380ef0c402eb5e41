"""A fine-tuning output directory that appears only when complete, built in a resumable staging directory.

``sip finetune --out D`` works in ``.D.partial`` beside D (per-task checkpoints and finished tasks), and
renames it to D at the very end. A killed run therefore leaves no D that looks complete (Snakemake, the
GPU hand-off and users test for its existence), and the rerun resumes from the staging directory; it
lives outside D because Snakemake deletes a job's declared outputs before rerunning it. The staging
directory records the settings it was made with: a rerun with other settings starts afresh.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from sip_core.errors import SipError
from sip_core.io import write_json

SETTINGS_FILE = "settings.json"
# files by which an existing --out directory is recognised as an earlier run (safe to replace)
RUN_MARKERS = ("metrics.json", "config.json", "README.md")


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_out(out: Path) -> None:
    """Refuse to replace a directory that is not an earlier run (e.g. ``--out .`` by mistake)."""
    if out.exists() and not out.is_dir():
        raise SipError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        own = any((out / m).exists() for m in RUN_MARKERS) or any((p / "metrics.json").exists() for p in out.iterdir())
        if not own:
            raise SipError(f"--out {out} is a non-empty directory that is not a sip run; choose a new directory")


def staging_path(out: Path) -> Path:
    """Where ``sip finetune --out out`` builds its output: ``.<out>.partial`` beside it."""
    return out.parent / f".{out.name}.partial"


class Staging:
    """``.<out>.partial``: resumable while unfinished, renamed onto ``out`` by ``commit``."""

    def __init__(self, out: Path, settings: dict, main: bool = True):
        self.out = out
        self.path = staging_path(out)
        self.resumed = False
        if not main:
            return
        recorded = self.path / SETTINGS_FILE
        if self.path.exists():
            try:
                same = json.loads(recorded.read_text(encoding="utf-8")) == settings
            except (OSError, json.JSONDecodeError):
                same = False
            if same:
                self.resumed = True
            else:
                print(f"finetune: discarding {self.path} (an interrupted run with other settings)")
                shutil.rmtree(self.path)
        if not self.resumed:
            self.path.mkdir(parents=True)
            write_json(settings, recorded)

    def done(self, task_dir: Path) -> dict | None:
        """Metrics of a task finished before an interruption (metrics.json is written last)."""
        f = task_dir / "metrics.json"
        return json.loads(f.read_text(encoding="utf-8")) if f.exists() else None

    def commit(self) -> None:
        """Replace ``out`` with the finished staging directory (two renames; no half state is visible as out)."""
        (self.path / SETTINGS_FILE).unlink(missing_ok=True)
        old = None
        if self.out.exists():
            old = self.out.parent / f".{self.out.name}.old-{os.getpid()}"
            os.replace(self.out, old)
        os.replace(self.path, self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
