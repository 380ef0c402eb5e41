"""A scale may take a model from a released checkpoint (params `model.released`) instead of pre-training it:
the copy is checked, the shape must be the scale's, and only that checkpoint changes rule and hash."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sip_core import config, jobscope, pipeline
from sip_core.errors import SipError

ROOT = Path(__file__).resolve().parent.parent
CI_SHAPE = config.resolve(config.load(), "ci")["model"]["shape"]


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """A SIP checkpoint of the ci scale's shape, as models/ would hold it."""
    from sip_core.model.config import t5_kwargs
    from sip_core.model.loading import build_model, save_model, save_prefix_init
    import torch
    out = tmp_path_factory.mktemp("release") / "sip-d4"
    shape = {("dropout_rate" if k == "dropout" else k): v for k, v in CI_SHAPE.items()}
    model = build_model("scratch", "fst", "sip", t5_kwargs(**shape))
    save_model(model, out, dtype=torch.bfloat16)
    save_prefix_init(out, torch.zeros(4, 3, 5, dtype=torch.int32))
    (out / "pretrain_metrics.json").write_text(json.dumps({"status": "finished", "final": {"dev_acc": 97.9}}))
    return out


def _with_release(scale: str, path, shape=None) -> dict:
    resolved = config.resolve(config.load(), scale)
    resolved["model"]["released"] = {"sip-d4": str(path)}
    if shape:
        resolved["model"]["shape"] = shape
    return resolved


def test_use_release_copies_a_loadable_checkpoint_and_refuses_a_corrupt_one(released, tmp_path):
    from sip_core.model.loading import load_sip
    from sip_core.release import use_release
    copied = use_release(released, tmp_path / "ckpt")
    assert set(copied) == {"config.json", "model.safetensors", "prefix_init.safetensors", "pretrain_metrics.json"}
    assert (tmp_path / "ckpt" / "model.safetensors").read_bytes() == (released / "model.safetensors").read_bytes()
    assert load_sip(tmp_path / "ckpt").config.t5["d_model"] == CI_SHAPE["d_model"]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_bytes((released / "config.json").read_bytes())
    (broken / "model.safetensors").write_bytes((released / "model.safetensors").read_bytes()[:1000])
    proc = subprocess.run([sys.executable, "-m", "sip_core.cli", "use-release", str(broken), "--out", str(tmp_path / "x")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "truncated or corrupt" in proc.stderr
    assert not (tmp_path / "x" / "model.safetensors").exists()


def test_a_release_must_have_the_scales_shape(released):
    assert pipeline.released_checkpoint(_with_release("ci", released), "sip-d4") == str(released)
    assert pipeline.released_checkpoint(_with_release("ci", released), "te") is None
    wider = {**CI_SHAPE, "d_model": 2 * CI_SHAPE["d_model"]}
    with pytest.raises(SipError, match="not of this scale's model.shape .*d_model 128 vs 64"):
        pipeline.released_checkpoint(_with_release("ci", released, wider), "sip-d4")


def test_a_release_changes_only_its_own_checkpoints_hash():
    """The key is optional: unset, it leaves every existing params hash as it was (nothing reruns)."""
    plain = config.resolve(config.load(), "ci")
    with_release = _with_release("ci", "models/x")
    for model in ("sip-d4", "sip-nd7", "te"):
        keys = jobscope.pretrain_keys(model)
        legacy = [k for k in keys if not k.startswith(jobscope.OPTIONAL_KEYS)]
        assert jobscope.settings_hash(plain, keys) == jobscope.settings_hash(plain, legacy)
        # sip-nd7 continues from sip-d4, so a released sip-d4 changes it too; te is untouched
        assert (jobscope.settings_hash(with_release, keys) != jobscope.settings_hash(plain, keys)) == (model != "te")


def test_snakemake_takes_a_released_checkpoint_instead_of_pre_training_it(released, tmp_path):
    override = tmp_path / "release.yaml"
    override.write_text(yaml.safe_dump({"scales": {"ci": {"model": {"released": {"sip-d4": str(released)}}}}}))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--forceall", "--configfile", "params.yaml",
                           str(override), "--config", "scale=ci", "--", "data/ci/checkpoints/sip-d4/model.safetensors",
                           "data/ci/checkpoints/te/model.safetensors"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert f"use-release {released} --out data/ci/checkpoints/sip-d4" in out
    assert "pretrain --variant sip" not in out and "pretrain --variant te" in out


def test_saved_weights_get_the_usual_file_mode_not_mkstemps_0600(released):
    import os
    umask = os.umask(0)
    os.umask(umask)
    for name in ("config.json", "model.safetensors", "prefix_init.safetensors"):
        assert (released / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


@pytest.mark.parametrize("release", sorted(p.name for p in (ROOT / "models").iterdir() if p.is_dir()))
def test_each_committed_release_loads_and_its_card_states_its_own_numbers(release):
    """What models/ ships: a loadable SIP checkpoint, a model card whose unseen-FST results and parameter count are
    the ones its pretrain_metrics.json measured, and a size fit for git (the small ones ≤ 16 MB, issue 6)."""
    from sip_core.model.loading import load_sip
    path = ROOT / "models" / release
    metrics = json.loads((path / "pretrain_metrics.json").read_text())
    card = (path / "README.md").read_text()
    model = load_sip(path)
    n_params = sum(p.numel() for p in model.parameters())
    assert metrics["status"] == "finished" and metrics["n_params"] == n_params
    assert f"{n_params:,}" in card or f"{n_params / 1e6:.0f}M" in card
    final = metrics["final"]
    assert f"dev {final['dev_acc']:.1f}%" in card and f"test {final['test_acc']:.1f}%" in card
    size_mb = (path / "model.safetensors").stat().st_size / 1e6
    assert size_mb <= (16 if release.endswith("-small") else 40)
