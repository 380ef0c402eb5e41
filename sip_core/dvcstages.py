"""dvc.yaml, generated from params.yaml: one stage per pre-trained checkpoint and one per table, per
scale, each running Snakemake (which owns the DAG inside a stage). Checkpoints are cached outputs;
tables and metrics are `cache: false` outputs committed to git. `gpu` and `paper` stages are frozen:
they run through the GPU hand-off (README) or on a cluster, never under `dvc repro` here.

Each stage lists only the params.yaml keys its jobs read (sip_core.jobscope), so `dvc repro` after a
params change reruns only the stages that depend on it. Checkpoints are `persist: true`: DVC does not
delete them before the stage runs, Snakemake decides (a pre-training settings change is in the job's
params); tables are deleted and rebuilt from the runs (seconds), so a code change reaches them.

`sip dvc-yaml` rewrites dvc.yaml; a test keeps the committed file equal to what this produces.
"""
from __future__ import annotations

import yaml

from sip_core import config, jobscope, pipeline

REPRO_SCALES = ("ci", "cpu")
FROZEN_SCALES = ("gpu",)
CODE_DEPS = ["Snakefile", "workflow/rules", "sip_core"]
# Snakemake must not rerun a job only because `dvc checkout` gave its inputs new timestamps.
SNAKEMAKE = "snakemake -j2 --rerun-triggers input params code --config scale={scale} --"
# The appendix's results (workflow/rules/appendix.smk) and the files each writes besides csv/md/meta.json.
APPENDIX_TABLES = {"prefix": ("fig9_prefix_similarity.png",), "significance": ("significance.tasks.csv",),
                   "table8": (), "table9": (), "table10": ()}


def _table_models(resolved: dict, table: str) -> list[str]:
    if table == "pretrain":
        return [m for t in resolved["tables"].values() for m in t["models"]]
    if table == "table5":
        return []
    if table in pipeline.ANALYSIS_TABLES:
        return resolved["analysis"][table]["models"]
    if table == "probe":
        return [pipeline.PROBE_MODEL]
    if table == "prefix":
        return ["sip-d4"]
    if table == "significance":  # the runs of every table the claims test
        return [m for t in ("table1", "table2", "table3", "table4", "table6") if t in resolved["tables"]
                for m in resolved["tables"][t]["models"]]
    if table in APPENDIX_TABLES:  # Tables 8-10: the T5 checkpoints live apart (data/<scale>/t5/)
        return []
    return resolved["tables"][table]["models"]


def _checkpoints(models: list[str]) -> list[str]:
    """Pre-trained checkpoints behind these models (base has none; the ablation shares sip-d4's)."""
    out = []
    for model in models:
        ckpt = pipeline.checkpoint_model(model)
        if pipeline.MODELS[ckpt].variant and ckpt not in out:
            out.append(ckpt)
    for ckpt in list(out):  # continued pre-training needs its parent too
        parent = pipeline.MODELS[ckpt].parent
        if parent and parent not in out:
            out.append(parent)
    return out


def stages(params: dict) -> dict:
    result = {}
    for scale in REPRO_SCALES + FROZEN_SCALES:
        resolved = config.resolve(params, scale)
        tables = [t for t in ("table1", "table2", "table3", "table4", "table5", "table6", "table7", "pretrain")
                  if t in resolved["tables"] or t in ("table5", "pretrain")]
        if scale in FROZEN_SCALES:
            tables = [t for t in tables if t in ("table1", "table2", "table6", "pretrain")]
        else:  # the analyses (workflow/rules/analysis.smk)
            tables += list(pipeline.ANALYSIS_TABLES) + ["probe"]
            tables += list(APPENDIX_TABLES)
        needed = []
        for table in tables:
            for ckpt in _checkpoints(_table_models(resolved, table)):
                if ckpt not in needed:
                    needed.append(ckpt)
        frozen = scale in FROZEN_SCALES
        for ckpt in needed:
            stage = {
                "cmd": SNAKEMAKE.format(scale=scale) + f" data/{scale}/checkpoints/{ckpt}/model.safetensors",
                "deps": CODE_DEPS + ([f"data/{scale}/checkpoints/{pipeline.MODELS[ckpt].parent}"]
                                     if pipeline.MODELS[ckpt].parent else [])
                        + [p for p in [pipeline.released_checkpoint(resolved, ckpt)] if p],
                "params": _params(params, scale, jobscope.pretrain_keys(ckpt)),
                "outs": [{f"data/{scale}/checkpoints/{ckpt}": {"persist": True}}],
            }
            if frozen:
                stage["frozen"] = True
            result[f"checkpoint-{scale}-{ckpt}"] = stage
        for table in tables:
            outs = [f"results/{scale}/{table}.{ext}" for ext in ("csv", "md", "meta.json")]
            if table == "table6":
                outs.append(f"results/{scale}/fig3_more_states.png")
            if table == "pretrain":
                outs.append(f"results/{scale}/fig_pretrain_curves.png")
            if table == "probe":
                outs += [f"results/{scale}/fig5_confusion_{split}.png" for split in ("train", "test")]
            outs += [f"results/{scale}/{extra}" for extra in APPENDIX_TABLES.get(table, ())]
            stage = {
                "cmd": SNAKEMAKE.format(scale=scale) + f" results/{scale}/{table}.csv",
                "deps": CODE_DEPS + [f"data/{scale}/checkpoints/{c}"
                                     for c in _checkpoints(_table_models(resolved, table))]
                + ([f"results/{scale}/{t}.csv" for t in jobscope.SIGNIFICANCE_TABLES if t in tables]
                   if table == "significance" else []),  # the claims read these tables (a DAG edge for DVC)
                "params": _params(params, scale, jobscope.table_keys(resolved, table)),
                "outs": [{path: {"cache": False}} for path in outs],
            }
            if frozen:
                stage["frozen"] = True
            result[f"{table}-{scale}"] = stage
    return {"stages": result}


def _params(params: dict, scale: str, keys: list[str]) -> list[str]:
    """params.yaml keys of a stage, without those already covered by a listed parent key."""
    found = jobscope.params_keys(params, scale, keys)
    return [k for k in found if not any(k.startswith(other + ".") for other in found)]


def render(params: dict) -> str:
    header = "# Generated by `sip dvc-yaml` from params.yaml (sip_core/dvcstages.py); do not edit by hand.\n"
    return header + yaml.safe_dump(stages(params), sort_keys=False, width=120)


def register(commands, data_commands) -> None:
    p = commands.add_parser("dvc-yaml", help="write dvc.yaml (stages per checkpoint and table) from params.yaml")
    p.add_argument("--out", default=str(config.ROOT / "dvc.yaml"))
    p.set_defaults(func=_write)


def _write(args) -> int:
    from sip_core.io import write_text

    write_text(render(config.load()), args.out)
    print(f"wrote {args.out}")
    return 0
