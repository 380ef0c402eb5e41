"""The ci scale end to end, from FST sampling to every table, compared with the committed results/ci/.

The pipeline runs in a temporary copy of the repository (so the committed tables are never the ones
checked), then each produced table must match its committed copy within results/ci/tolerance.json,
which was derived from the measured seed-to-seed spread (docs/BENCHMARKS.md). A test of the test
checks that the comparison catches a real change.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sip_core.report.regression import compare_dirs, compare_table, load_tolerance

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "results" / "ci"
MIRROR = Path(os.environ.get("SIP_DATA_MIRROR", ROOT.parent / "shared" / "data"))
TABLES = ["table1", "table2", "table3", "table4", "table5", "table6", "table7", "pretrain",
          "prefix", "significance", "table8", "table9", "table10", "table11", "probe"]
IGNORE = shutil.ignore_patterns(".git", ".venv", "data", "logs", ".snakemake", "results", "__pycache__",
                                ".pytest_cache", ".hypothesis", ".dvc-remote", "handoff", "runs")


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    if not MIRROR.exists():
        pytest.skip(f"no data mirror at {MIRROR}")
    work = tmp_path_factory.mktemp("ci") / "repo"
    shutil.copytree(ROOT, work, ignore=IGNORE)
    targets = [f"results/ci/{name}.csv" for name in TABLES]
    cmd = [sys.executable, "-m", "snakemake", "-j2", "--config", "scale=ci", f"mirror={MIRROR}", "--", *targets]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=40 * 60)
    if proc.returncode != 0:
        logs = "\n".join(f"== {p}\n{p.read_text()[-1500:]}" for p in sorted((work / "logs").rglob("*.log"))
                         if "rror" in p.read_text())
        pytest.fail(f"ci pipeline failed:\n{proc.stderr[-3000:]}\n{logs}")
    return work


@pytest.mark.slow
def test_every_ci_table_matches_the_committed_copy(ci_run):
    problems = compare_dirs(ci_run / "results" / "ci", REFERENCE, TABLES)
    report = "\n".join(f"{name}: {line}" for name, lines in problems.items() for line in lines)
    assert not report, f"ci tables moved beyond tolerance:\n{report}"


@pytest.mark.slow
def test_something_is_learned_at_ci_scale(ci_run):
    """SIP-d4's pre-training loss falls to under 40% of where it started (ci floor; docs/BENCHMARKS.md)."""
    pretrain = pd.read_csv(ci_run / "results" / "ci" / "pretrain.csv").set_index(["model", "metric"])["value"]
    assert pretrain[("sip-d4", "loss_end")] < 0.4 * pretrain[("sip-d4", "loss_start")]


@pytest.mark.slow
def test_the_comparison_catches_a_dropped_prefix(ci_run, tmp_path):
    """A test of the test: SIP-d4 pre-trained with the same settings but without its FST prefix (the
    Naive variant) must fail the pretrain.csv comparison."""
    from sip_core.handoff import parse_dry_run

    dry = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--config", "scale=ci", f"mirror={MIRROR}",
                          "--forcerun", "data/ci/checkpoints/sip-d4/model.safetensors", "--",
                          "data/ci/checkpoints/sip-d4/model.safetensors"],
                         cwd=ci_run, capture_output=True, text=True, check=True)
    (job,) = [j for j in parse_dry_run(dry.stdout) if j["rule"] == "pretrain"]
    cmd = job["cmd"].split(" > ")[0].replace("python -m", f"{sys.executable} -m", 1).replace(
        "--variant sip", "--variant naive").replace(
        "--out data/ci/checkpoints/sip-d4", f"--out {tmp_path / 'sip-d4'}")
    subprocess.run(cmd + " --no-progress", shell=True, cwd=ci_run, check=True, capture_output=True)
    others = [str(p) for p in sorted((ci_run / "data" / "ci" / "checkpoints").iterdir()) if p.name != "sip-d4"]
    out = tmp_path / "pretrain.csv"
    subprocess.run([sys.executable, "-m", "sip_core.cli", "table", "--table", "pretrain", "--scale", "ci",
                    "--checkpoints", *others, str(tmp_path / "sip-d4"), "--out", str(out)],
                   cwd=ci_run, check=True, capture_output=True)
    tolerance = load_tolerance(REFERENCE / "tolerance.json")
    problems = compare_table(pd.read_csv(out), pd.read_csv(REFERENCE / "pretrain.csv"), tolerance)
    assert any(p.startswith("sip-d4/train/loss_end") for p in problems), problems
