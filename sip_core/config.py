"""params.yaml: validation against the schema, scale resolution (defaults deep-merged with one
scale's overrides) and a hash of a scale's settings (per job: sip_core.jobscope)."""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import yaml

from sip_core.errors import SipError

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "workflow" / "schemas" / "params.schema.yaml"
SCALES = ("ci", "cpu", "gpu", "paper")


def deep_merge(base: dict, override: dict) -> dict:
    """``base`` with ``override`` laid over it, recursively for nested mappings."""
    merged = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def validate(params: dict) -> None:
    try:
        import jsonschema
    except ImportError:  # GPU hosts (DESIGN §8) run jobs exported here, where the params were validated
        return

    schema = yaml.safe_load(SCHEMA.read_text())
    try:
        jsonschema.validate(params, schema)
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        raise SipError(f"params.yaml: {where}: {err.message}") from None


def load(path: str | Path = ROOT / "params.yaml") -> dict:
    path = Path(path)
    if not path.exists():
        raise SipError(f"params file not found: {path}")
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise SipError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    validate(params)
    return params


def resolve(params: dict, scale: str) -> dict:
    """The effective settings of one scale."""
    if scale not in params["scales"]:
        raise SipError(f"unknown scale {scale!r}; known: {', '.join(params['scales'])}")
    resolved = deep_merge(params["defaults"], params["scales"][scale])
    resolved["scale"] = scale
    return resolved


def params_hash(resolved: dict) -> str:
    """A short stable hash of a scale's whole effective settings. Runs and tables record the hash of only
    the settings they read (sip_core.jobscope), so that a new or changed key reruns only dependent jobs."""
    blob = json.dumps(resolved, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
