"""The ci scale end to end, from FST sampling to every table, compared with the committed results/ci/.

The pipeline runs in a temporary copy of the repository (so the committed tables are never the ones
checked), then each produced table must match its committed copy within results/ci/tolerance.json,
which was derived from the measured seed-to-seed spread (docs/BENCHMARKS.md). A test of the test
checks that the comparison catches a real change.
"""
from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from sip_core.report.regression import compare_dirs, compare_table, load_tolerance
from tests.fixtures.ci_pipeline import MIRROR, REFERENCE, TABLES


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
