"""Params hashes and DVC params scoped per job: a change reruns exactly the jobs and stages that read it."""
import copy

import pytest

from sip_core import config, dvcstages, jobscope, pipeline

PARAMS = config.load()
CHECKPOINTS = [m for m, s in pipeline.MODELS.items() if s.variant]


def job_hashes(params: dict, scale: str = "ci") -> dict[str, str]:
    """Every pre-training, fine-tuning and table hash of a scale, by job name."""
    resolved = config.resolve(params, scale)
    hashes = {f"pretrain/{m}": jobscope.settings_hash(resolved, jobscope.pretrain_keys(m)) for m in CHECKPOINTS}
    tables = {**resolved["tables"], **resolved["analysis"]}
    for cfg in tables.values():
        for m in cfg["models"]:
            for s in cfg["settings"]:
                hashes[f"finetune/{m}/{s}"] = jobscope.settings_hash(resolved, jobscope.finetune_keys(resolved, m, s))
    for table in [*tables, "table5", "pretrain", "probe", "prefix", "significance", "table8", "table9", "table10"]:
        hashes[f"table/{table}"] = jobscope.table_hash(resolved, table)
    return hashes


def changed(mutate, scale: str = "ci") -> set[str]:
    params = copy.deepcopy(PARAMS)
    mutate(params)
    config.validate(params)
    before, after = job_hashes(PARAMS, scale), job_hashes(params, scale)
    return {job for job in before if before[job] != after[job]}


def test_a_fine_tuning_key_changes_fine_tuning_hashes_only():
    hit = changed(lambda p: p["scales"]["ci"]["finetune"]["g2p"].update(epochs=16))
    assert {"finetune/sip-d4/g2p", "finetune/base/g2p", "table/table3", "table/table7"} <= hit
    assert not any(j.startswith("pretrain/") for j in hit)
    assert not any(j.startswith("finetune/") and not j.endswith("/g2p") for j in hit)
    assert "table/table1" not in hit and "table/pretrain" not in hit


def test_a_pre_training_key_reaches_the_runs_on_that_checkpoint_and_its_children():
    hit = changed(lambda p: p["scales"]["ci"]["pretrain"]["sip"].update(lr=2.0e-3))
    assert {"pretrain/sip-d4", "pretrain/sip-d4plus", "pretrain/sip-nd7", "finetune/sip-d4/iteration-s4",
            "finetune/sip-d4-noprefix/iteration-s4", "finetune/sip-nd7/bimachine-uc"} <= hit
    assert not any(j.startswith(("pretrain/te", "pretrain/naive", "pretrain/set", "finetune/base/",
                                 "finetune/te/", "finetune/set/")) for j in hit)


def test_another_scale_and_unread_keys_leave_ci_hashes_alone():
    assert changed(lambda p: p["scales"]["cpu"]["pretrain"]["sip"].update(epochs=3)) == set()
    assert changed(lambda p: p["scales"]["gpu"]["finetune"]["synthetic"].update(epochs=3)) == set()
    assert changed(lambda p: p["defaults"]["data"]["eval"]["seeds"].update(extra=1)) == set()
    # a default the ci scale overrides is not read there
    assert changed(lambda p: p["defaults"]["finetune"]["synthetic"].update(epochs=51)) == set()
    # ...but it is where nothing overrides it
    assert "finetune/sip-d4/iteration-s4" in changed(lambda p: p["defaults"]["finetune"].update(clip=0.5))


def test_the_induced_prefix_lr_reaches_only_the_induced_runs_and_their_command():
    hit = changed(lambda p: p["scales"]["gpu"]["finetune"].update(induced_prefix_lr=0.02), scale="gpu")
    assert {"finetune/sip-d4-induced/iteration-s4", "finetune/sip-d4-induced/uc-s4", "table/table1",
            "finetune/sip-d4-long-induced/len-90-110"} <= hit
    induced = ("/sip-d4-induced/", "/sip-d4-long-induced/", "/sip-d4-readout/")  # readout: where a machine was read
    assert not any(j.startswith("finetune/") and not any(m in j for m in induced) for j in hit)
    gpu = config.resolve(PARAMS, "gpu")["finetune"]
    assert pipeline.induced_prefix_flag(gpu, "sip-d4-induced") == f" --induced-prefix-lr {gpu['induced_prefix_lr']}"
    assert pipeline.induced_prefix_flag(gpu, "sip-d4") == ""


def test_the_readout_epochs_reach_only_a_read_out_prefix_and_its_command():
    gpu = config.resolve(PARAMS, "gpu")["finetune"]
    assert pipeline.readout_flag(gpu, "sip-d4-readout") == f" --readout-epochs {gpu['readout_epochs']}"
    assert pipeline.induced_prefix_flag(gpu, "sip-d4-readout") == f" --induced-prefix-lr {gpu['induced_prefix_lr']}"
    assert all(pipeline.readout_flag(gpu, m) == "" for m in pipeline.MODELS if m != "sip-d4-readout")
    keys = jobscope.finetune_keys(config.resolve(PARAMS, "gpu"), "sip-d4-readout", "iteration-s4")
    assert "finetune.readout_epochs" in keys and "finetune.induced_prefix_lr" in keys
    assert "finetune.readout_epochs" not in jobscope.finetune_keys(config.resolve(PARAMS, "gpu"), "sip-d4", "iteration-s4")


def test_every_scope_key_names_a_setting():
    for scale in config.SCALES:
        resolved = config.resolve(PARAMS, scale)
        keys = set(jobscope.table_keys(resolved, "significance"))
        for table in ("table5", "pretrain", "probe", "prefix", "table8", "table9", "table10"):
            keys |= set(jobscope.table_keys(resolved, table))
        missing = [k for k in keys if not jobscope._has(resolved, k) and not k.startswith(jobscope.OPTIONAL_KEYS)]
        assert not missing, f"{scale}: {missing}"


def stage_values(params: dict) -> dict[str, dict]:
    """What DVC compares per stage: the values of the params keys the stage lists."""
    return {name: {k: jobscope.lookup(params, k) for k in stage.get("params", [])}
            for name, stage in dvcstages.stages(params)["stages"].items()}


@pytest.mark.parametrize("mutate, expect, spare", [
    (lambda p: p["scales"]["ci"]["finetune"]["sygus"].update(epochs=31),
     {"table4-ci"}, {"table1-ci", "table3-ci", "checkpoint-ci-sip-d4", "table4-cpu"}),
    (lambda p: p["scales"]["ci"]["pretrain"]["te"].update(epochs=5),
     {"checkpoint-ci-te", "table1-ci"}, {"checkpoint-ci-sip-d4", "table5-ci", "table11-ci", "checkpoint-cpu-te"}),
    (lambda p: p["defaults"]["appendix"]["significance"].update(resamples=30000),
     {"significance-ci", "significance-cpu"}, {"table1-ci", "prefix-ci"}),
])
def test_a_dvc_stage_lists_the_keys_it_depends_on(mutate, expect, spare):
    params = copy.deepcopy(PARAMS)
    mutate(params)
    before, after = stage_values(PARAMS), stage_values(params)
    hit = {name for name in before if before[name] != after[name]}
    assert expect <= hit and not (spare & hit), sorted(hit)


def test_fine_tuning_restarts_reach_the_fine_tuning_jobs_and_their_commands():
    restarts = {"count": 4, "epochs": 8, "holdout": 0.05, "lr_scale": 0.1}
    hit = changed(lambda p: p["scales"]["ci"]["finetune"].update(restarts=restarts))
    assert {"finetune/sip-d4/iteration-s4", "finetune/base/g2p", "table/table1"} <= hit
    assert not any(j.startswith("pretrain/") for j in hit)
    assert pipeline.restart_flags(restarts) == (" --restarts 4 --restart-epochs 8 --restart-holdout 0.05"
                                                " --continue-lr-scale 0.1")
    assert pipeline.restart_flags(None) == ""
    params = copy.deepcopy(PARAMS)
    params["scales"]["ci"]["finetune"]["restarts"] = {"count": 1}
    with pytest.raises(Exception, match="restarts"):
        config.validate(params)
