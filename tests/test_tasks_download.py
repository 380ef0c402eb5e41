"""Fetching pinned files: local mirror directory, HTTP (a local server on 127.0.0.1), checksums, errors."""
from __future__ import annotations

import functools
import hashlib
import http.server
import os
import socket
import threading
from pathlib import Path

import pytest

from sip_core.cli import main
from sip_core.errors import SipError
from sip_core.tasks import download
from sip_core.tasks.download import fetch, select, sha256_file
from sip_core.tasks.sources import SOURCES, Source

SHARED = Path(os.environ.get("SIP_DATA_MIRROR", Path(__file__).resolve().parents[2] / "shared" / "data"))
GOOD = b"word\tw o r d\n"
SRC = Source("wikipron/x.tsv", "https://example.invalid/x.tsv", hashlib.sha256(GOOD).hexdigest())


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server(tmp_path, monkeypatch):
    """An HTTP server on 127.0.0.1 serving tmp_path/www; yields (root dir, base URL)."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    root = tmp_path / "www"
    (root / "wikipron").mkdir(parents=True)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_http_good_file(server, tmp_path):
    root, url = server
    (root / "wikipron/x.tsv").write_bytes(GOOD)
    out = tmp_path / "out"
    assert fetch(SRC, out, url) == "downloaded"
    assert (out / "wikipron/x.tsv").read_bytes() == GOOD
    assert fetch(SRC, out, url) == "present"  # verified copy is reused, no second download


def test_http_corrupted_file_is_rejected_and_not_written(server, tmp_path):
    root, url = server
    (root / "wikipron/x.tsv").write_bytes(GOOD + b"tampered\n")
    out = tmp_path / "out"
    with pytest.raises(SipError, match=r"wikipron/x.tsv: checksum mismatch .*expected sha256"):
        fetch(SRC, out, url)
    assert not (out / "wikipron").exists() or not any((out / "wikipron").iterdir())


def test_http_missing_file_is_a_404(server, tmp_path):
    _, url = server
    with pytest.raises(SipError, match=r"wikipron/x.tsv: download failed: HTTP 404"):
        fetch(SRC, tmp_path / "out", url)


def test_network_failure(tmp_path):
    with socket.socket() as s:  # a port nobody listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SipError, match=r"wikipron/x.tsv: download failed: .*127.0.0.1"):
        fetch(SRC, tmp_path / "out", f"http://127.0.0.1:{port}", timeout=5)


def test_directory_mirror(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "wikipron").mkdir(parents=True)
    (mirror / "wikipron/x.tsv").write_bytes(GOOD)
    out = tmp_path / "out"
    assert fetch(SRC, out, mirror) == "copied"
    (out / "wikipron/x.tsv").write_bytes(b"stale")  # a wrong local copy is replaced, not trusted
    assert fetch(SRC, out, mirror) == "copied"
    assert sha256_file(out / "wikipron/x.tsv") == SRC.sha256
    with pytest.raises(SipError, match="not found in mirror"):
        fetch(Source("wikipron/y.tsv", "", SRC.sha256), out, mirror)
    with pytest.raises(SipError, match="does not exist"):
        fetch(SRC, tmp_path / "out2", tmp_path / "nowhere")
    (mirror / "wikipron/x.tsv").write_bytes(b"corrupt")
    with pytest.raises(SipError, match="checksum mismatch"):
        fetch(SRC, tmp_path / "out3", mirror)
    assert not (tmp_path / "out3/wikipron/x.tsv").exists()


def test_registry_and_selection():
    assert len(SOURCES) == 37
    ban = SOURCES["wikipron/ban_bali_broad.tsv"]
    assert ban.url == ("https://raw.githubusercontent.com/CUNY-CL/wikipron/"
                       "185dfcf514fe37fe4cfddddeacff1eda3afdca55/data/scrape/tsv/ban_bali_broad.tsv")
    assert len(select(["wikipron"])) == 10
    assert len(select(["sygus_pbe_strings_2017", "wikipron/ban_bali_broad.tsv"])) == 28
    with pytest.raises(SipError, match="unknown source"):
        select(["wikipedia"])


@pytest.mark.skipif(not SHARED.is_dir(), reason="no local data mirror")
def test_registry_matches_mirror_sums():
    lines = (SHARED / "SHA256SUMS").read_text().split("\n")
    sums = dict(reversed(line.split(maxsplit=1)) for line in lines if line.strip())
    assert {name: s.sha256 for name, s in SOURCES.items()} == sums


@pytest.mark.skipif(not SHARED.is_dir(), reason="no local data mirror")
def test_cli_fetch_from_mirror(tmp_path, capsys):
    assert main(["data", "fetch", "--mirror", str(SHARED), "--out", str(tmp_path), "--only", "wikipron"]) == 0
    assert "10 files" in capsys.readouterr().out
    assert len(list((tmp_path / "wikipron").iterdir())) == 10


def test_cli_error_is_one_line(server, tmp_path, capsys, monkeypatch):
    _, url = server
    monkeypatch.setitem(download.SOURCES, SRC.name, SRC)
    assert main(["data", "fetch", "--mirror", url, "--out", str(tmp_path), "--only", SRC.name]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("sip: error: wikipron/x.tsv: download failed: HTTP 404")
