"""What a GPU host's last hand-off call had finished, so that the next call on that host can tell when the
outputs it was given are older.

The device tool's ``carry`` replaces the carried paths on a warm host. Carrying a ``data/<scale>/runs`` from
before the last archive was imported therefore deletes that call's finished tasks there, and the next call runs
them again (session 15 lost a 555 s call this way). ``handoff-run`` records each job's progress when it packs,
in a file that is neither tracked nor carried (ignored build outputs stay on a warm host); the next call refuses
to start if a job has less than that.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sip_core.errors import SipError
from sip_core.io import write_json

STATE_FILE = Path(".sip-host/handoff-state.json")  # relative to the working tree's root on the host


def job_key(job: dict) -> str:
    """A job by its output and its command: a changed command is a new job, which may well start over."""
    return f"{job['output'][0]}@{hashlib.sha256(job['cmd'].encode()).hexdigest()[:12]}"


def check(progress: dict[str, int], state_file: Path = STATE_FILE) -> None:
    """Raise if a job has fewer finished units now than the last call on this host left it with."""
    if not state_file.exists():
        return
    before = json.loads(state_file.read_text())
    behind = [f"{key.split('@')[0]}: {before[key]} then, {now} now" for key, now in progress.items()
              if key in before and now < before[key]]
    if behind:
        raise SipError("the carried outputs are older than this host's last hand-off call ("
                       + "; ".join(behind) + "): `sip import` its archive here before carrying them again,"
                       " or pass --allow-rerun to run that work again")


def record(progress: dict[str, int], state_file: Path = STATE_FILE) -> None:
    write_json(progress, state_file)
