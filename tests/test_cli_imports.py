"""The `sip` dispatcher registers every command without importing torch, transformers or pynini: the ci scale's
~60 jobs that need none of them (tables, datasets, reports) would each pay ~5 s of imports on a CI core."""
from __future__ import annotations

import subprocess
import sys


def test_building_the_parser_imports_no_heavy_library():
    probe = ("import sys; from sip_core import cli; parser = cli.build_parser(); "
             "print(' '.join(m for m in ('torch', 'transformers', 'pynini') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
    # ... and every command is still there (a moved module drops its commands silently: cli skips missing areas)
    names = subprocess.run([sys.executable, "-m", "sip_core.cli", "--help"], capture_output=True, text=True).stdout
    for command in ("pretrain", "finetune", "use-release", "table", "export", "handoff-run", "import", "data"):
        assert command in names
