"""The DVC/Snakemake timestamp issue: `dvc repro`/`dvc checkout` re-link cached checkpoints (new mtime, same
bytes). Snakemake reruns a job whose input is newer than its output unless the input's recorded checksum
still matches, and records checksums only up to --max-checksum-file-size: the local profile's threshold
must make a re-linked multi-MB checkpoint no reason to rerun, while a changed one still is."""
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SNAKEFILE = """
rule checkpoint:
    output: "ckpt.bin"
    shell: "python -c 'import os; open(\\"{output}\\", \\"wb\\").write(os.urandom(3_000_000))'"

rule finetune:
    input: "ckpt.bin"
    output: "run.txt"
    shell: "wc -c {input} > {output}"
"""


def snakemake(workdir: Path, *args: str) -> str:
    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    flags = ["--rerun-triggers", *profile["rerun-triggers"], "--max-checksum-file-size",
             str(profile["max-checksum-file-size"])]
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-j1", *flags, *args, "run.txt"], cwd=workdir,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout + proc.stderr


def test_a_relinked_checkpoint_reruns_nothing_and_a_changed_one_reruns_its_jobs(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    snakemake(tmp_path)
    ckpt = tmp_path / "ckpt.bin"
    later = os.path.getmtime(tmp_path / "run.txt") + 100
    # what `dvc checkout` does: same bytes, a new file with a new timestamp
    data = ckpt.read_bytes()
    ckpt.unlink()
    ckpt.write_bytes(data)
    os.utime(ckpt, (later, later))
    assert "Nothing to be done" in snakemake(tmp_path, "-n")
    ckpt.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    os.utime(ckpt, (later + 1, later + 1))
    assert "rule finetune" in snakemake(tmp_path, "-n")
