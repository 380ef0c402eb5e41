"""Which settings define each job, and the params hash built from them.

A job's scope is the list of keys of a scale's resolved settings (dotted paths into params.yaml's
`defaults`/`scales.<scale>` trees) that the job reads directly or through its inputs: a fine-tuning run
reads its fine-tuning protocol, its task data (and the pools whose FSTs the tasks exclude) and its
checkpoint's pre-training (and that checkpoint's data and parents). A run records the hash of its scope
and Snakemake sees that hash among the rule's params, so changing one setting reruns exactly the jobs
that depend on it, also across DVC stages, where a retrained checkpoint's new timestamp is no trigger.
dvc.yaml lists the same keys per stage (sip_core.dvcstages), so `dvc repro` reruns only dependent stages.
"""
from __future__ import annotations

import hashlib
import json

from sip_core import pipeline
from sip_core.errors import SipError

# Evaluation FSTs must not be isomorphic to any training FST of these pre-training pools.
EXCLUDE_POOLS = ("d4", "d4plus", "d4long")
T5_TABLE_SETTINGS = {"table8": ["iteration-s4", "uc-s4"], "table9": ["bimachine-iteration", "bimachine-uc"],
                     "table10": ["g2p-ascii"]}
# Settings that count towards a hash only where set: adding one to params.yaml reruns nothing else.
OPTIONAL_KEYS = ("model.released.",)
# The tables whose runs the significance report reads (workflow/rules/common.smk: significance_tables).
SIGNIFICANCE_TABLES = ("table1", "table2", "table3", "table4", "table6", "table7", "table11")


def lookup(resolved: dict, key: str):
    """The value at a dotted key of resolved settings (None where absent)."""
    value = resolved
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def settings_hash(resolved: dict, keys: list[str]) -> str:
    """A short stable hash of the values at ``keys`` (what a job's outputs record as params_hash)."""
    values = {k: lookup(resolved, k) for k in sorted(set(keys))}
    values = {k: v for k, v in values.items() if v is not None or not k.startswith(OPTIONAL_KEYS)}
    blob = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _unique(keys) -> list[str]:
    return list(dict.fromkeys(keys))


def pretrain_keys(model: str) -> list[str]:
    """Pre-training of ``model``'s checkpoint: shape, init, its pool, its hyper-parameters, its parent's."""
    spec = pipeline.MODELS[model]
    own = ["seed", "model.init", "model.shape", f"pretrain.{'continued' if spec.parent else spec.variant}",
           f"data.pools.{spec.pool}", f"model.released.{model}"]
    return _unique((pretrain_keys(spec.parent) if spec.parent else []) + own)


def data_keys(setting: str) -> list[str]:
    """The task file of an evaluation setting (synthetic tasks exclude the FSTs of EXCLUDE_POOLS)."""
    if setting == "g2p-ascii":
        setting = "g2p"
    if setting in ("g2p", "sygus"):
        return [f"data.{setting}"]
    pools = [f"data.pools.{p}" for p in EXCLUDE_POOLS]
    if setting.startswith("len-"):
        return ["data.eval.length", "data.eval.seeds.length"] + pools
    bimachine = setting.startswith("bimachine")
    kind = setting if bimachine else setting.rsplit("-s", 1)[0]
    tasks = "data.eval.bimachine_tasks" if bimachine else "data.eval.tasks"
    return [tasks, "data.eval.n_train", "data.eval.n_test", "data.eval.draws_per_length",
            f"data.eval.seeds.{kind}"] + pools


def _protocol_keys(resolved: dict, model: str, family: str) -> list[str]:
    """The fine-tuning protocol of ``model`` in a setting family (its batch/lr entry or the default)."""
    fam = resolved["finetune"][family]
    per_model = [f"finetune.{family}.{name}.{pipeline.hparams_key(fam[name], model)}" for name in ("batch", "lr")]
    return ([f"finetune.{family}.{k}" for k in ("epochs", "eval_last", "report_last", "test_batch")] + per_model
            + ["finetune.prefix_lr", "finetune.prefix_length", "finetune.clip", "finetune.seed"]
            + (["finetune.schedule"] if "schedule" in resolved["finetune"] else [])  # optional: constant if absent
            + (["finetune.induced_prefix_lr"] if pipeline.uses_induced_prefix_lr(resolved["finetune"], model) else [])
            + (["finetune.readout_epochs"] if pipeline.uses_readout_epochs(resolved["finetune"], model) else [])
            + (["finetune.restarts"] if "restarts" in resolved["finetune"] else []))  # optional: one run if absent


def finetune_keys(resolved: dict, model: str, setting: str) -> list[str]:
    ckpt = pipeline.checkpoint_model(model)
    body = pretrain_keys(ckpt) if pipeline.MODELS[ckpt].variant else ["model.init", "model.shape"]
    return _unique(_protocol_keys(resolved, model, pipeline.family(setting)) + body + data_keys(setting))


def prefix_tune_keys() -> list[str]:
    """SIP-d4 fine-tuned prefix-only on its setting (appendix: analysis of fine-tuned prefixes)."""
    return _unique(["appendix.prefix.epochs", "appendix.prefix.batch_size", "appendix.prefix.prefix_lr",
                    "finetune.synthetic.test_batch", "finetune.prefix_length", "finetune.clip", "finetune.seed"]
                   + pretrain_keys(pipeline.PROBE_MODEL) + data_keys("iteration-s4"))


def t5_pretrain_keys(model: str) -> list[str]:
    pool = "d4" if model == "t5-sip-d4" else "set"
    return ["seed", "model.shape", "appendix.t5.init", "appendix.t5.standin_vocab", f"appendix.t5.pretrain.epochs.{model}",
            *(f"appendix.t5.pretrain.{k}" for k in ("batch_size", "grad_accum", "lr", "warmup", "schedule", "precision")),
            f"data.pools.{pool}"]


def t5_finetune_keys(resolved: dict, model: str, setting: str) -> list[str]:
    """A T5 model follows the fine-tuning protocol of the model it mirrors, from its own checkpoint."""
    mirror = resolved["appendix"]["t5"]["models"][model]
    family = pipeline.family("g2p" if setting == "g2p-ascii" else setting)
    return _unique([f"appendix.t5.models.{model}"] + _protocol_keys(resolved, mirror, family)
                   + t5_pretrain_keys(model) + data_keys(setting))


def table_config(resolved: dict, table: str) -> dict | None:
    """models/settings of a run table (params `tables` or `analysis`)."""
    return resolved["tables"].get(table) or resolved.get("analysis", {}).get(table)


def table_keys(resolved: dict, table: str) -> list[str]:
    """Everything a result table is built from: its own entry and the scopes of the jobs behind it."""
    cfg = table_config(resolved, table)
    if cfg is not None:
        where = "tables" if table in resolved["tables"] else "analysis"
        return _unique([f"{where}.{table}"] + [k for m in cfg["models"] for s in cfg["settings"]
                                               for k in finetune_keys(resolved, m, s)])
    if table == "table5":
        settings = [f"iteration-s{n}" for n in resolved["data"]["eval"]["states"]] + ["bimachine-iteration"]
        return _unique(["data.eval.states", "data.pools.d4"] + [k for s in settings for k in data_keys(s)])
    if table == "pretrain":
        models = {pipeline.checkpoint_model(m) for t in resolved["tables"].values() for m in t["models"]}
        return _unique([f"tables.{t}.models" for t in resolved["tables"]]
                       + [k for m in sorted(models) if pipeline.MODELS[m].variant for k in pretrain_keys(m)])
    if table == "probe":
        return _unique(["data.probe", "model.init"] + pretrain_keys(pipeline.PROBE_MODEL)
                       + finetune_keys(resolved, pipeline.PROBE_MODEL, pipeline.PROBE_SETTING))
    if table == "prefix":
        return _unique(["appendix.prefix"] + prefix_tune_keys())
    if table == "significance":
        return _unique(["appendix.significance"] + [k for t in SIGNIFICANCE_TABLES if table_config(resolved, t)
                                                     for k in table_keys(resolved, t)])
    if table in T5_TABLE_SETTINGS:
        return _unique(["appendix.t5.init", "appendix.t5.models"]
                       + [k for m in resolved["appendix"]["t5"]["models"] for s in T5_TABLE_SETTINGS[table]
                          for k in t5_finetune_keys(resolved, m, s)])
    raise SipError(f"unknown table {table!r}: no settings scope for it (sip_core/jobscope.py)")


def table_hash(resolved: dict, table: str) -> str:
    return settings_hash(resolved, table_keys(resolved, table))


def params_keys(params: dict, scale: str, keys: list[str]) -> list[str]:
    """The params.yaml keys (``defaults.<key>``, ``scales.<scale>.<key>``) behind resolved keys, as far
    as params.yaml has them: what a DVC stage lists under ``params``."""
    out = []
    for key in _unique(keys):
        for root, tree in (("defaults", params["defaults"]), (f"scales.{scale}", params["scales"][scale] or {})):
            if lookup(tree, key) is not None or _has(tree, key):
                out.append(f"{root}.{key}")
    return out


def _has(tree: dict, key: str) -> bool:
    *parents, last = key.split(".")
    node = lookup(tree, ".".join(parents)) if parents else tree
    return isinstance(node, dict) and last in node
