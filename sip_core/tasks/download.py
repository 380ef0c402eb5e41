"""Fetch the pinned external files: copy from a local mirror or download, verify SHA-256, write atomically.

A file already present with the right checksum is left alone, so re-running is cheap and offline.
Any failure (missing in the mirror, HTTP error, network error, wrong checksum) stops with one line
naming the file; nothing half-written or unverified is ever left under the output name.
"""
from __future__ import annotations

import hashlib
import http.client
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

from sip_core.errors import SipError
from sip_core.io import atomic_path
from sip_core.tasks.sources import COLLECTIONS, SOURCES, Source

_CHUNK = 1 << 16


def select(only: list[str] | None = None) -> list[Source]:
    """All sources, or those named by collection (``wikipron``) or full name (``wikipron/ban_bali_broad.tsv``)."""
    if not only:
        return list(SOURCES.values())
    chosen: dict[str, Source] = {}
    for key in only:
        key = key.strip().strip("/")
        if key in SOURCES:
            chosen[key] = SOURCES[key]
        elif key in COLLECTIONS:
            chosen.update((s.name, s) for s in SOURCES.values() if s.collection == key)
        else:
            raise SipError(f"unknown source {key!r}; use a collection ({', '.join(COLLECTIONS)}) "
                           f"or a name such as {next(iter(SOURCES))}")
    return sorted(chosen.values(), key=lambda s: s.name)


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_url(mirror: str | None) -> bool:
    return bool(mirror) and str(mirror).startswith(("http://", "https://"))


def fetch(source: Source, out_dir: str | Path, mirror: str | Path | None = None, timeout: float = 60.0) -> str:
    """Place ``source`` at ``out_dir/<name>`` and return what was done: ``present``, ``copied`` or ``downloaded``.

    ``mirror`` is a directory with the same layout, an http(s) URL of one, or None for the public URL.
    """
    dest = Path(out_dir) / source.name
    if dest.is_file() and sha256_file(dest) == source.sha256:
        return "present"
    if mirror is not None and not is_url(mirror):
        origin = Path(mirror) / source.name
        if not Path(mirror).is_dir():
            raise SipError(f"{source.name}: mirror directory {mirror} does not exist")
        if not origin.is_file():
            raise SipError(f"{source.name}: not found in mirror {mirror} (expected {origin})")
        with open(origin, "rb") as f:
            _write_verified(f, dest, source, str(origin))
        return "copied"
    url = f"{str(mirror).rstrip('/')}/{source.name}" if mirror is not None else source.url
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "sip-core"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            _write_verified(response, dest, source, url)
    except urllib.error.HTTPError as err:
        raise SipError(f"{source.name}: download failed: HTTP {err.code} {err.reason} ({url})") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
        reason = getattr(err, "reason", None) or err
        raise SipError(f"{source.name}: download failed: {reason} ({url})") from None
    return "downloaded"


def _write_verified(stream: BinaryIO, dest: Path, source: Source, origin: str) -> None:
    digest = hashlib.sha256()
    with atomic_path(dest) as tmp:
        with open(tmp, "wb") as out:
            for chunk in iter(lambda: stream.read(_CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != source.sha256:  # raising here discards the temporary file
            raise SipError(f"{source.name}: checksum mismatch for {origin}: expected sha256 "
                           f"{source.sha256}, got {digest.hexdigest()}")
