# Shared by all rule files. The validated params, the effective settings of a scale, and the
# functions that turn settings into `sip` arguments and input paths (rule files hold only rules).
import os
import re
import sys

sys.path.insert(0, workflow.basedir)  # sip_core importable from a checkout without installation

from sip_core import config as sip_config
from sip_core import jobscope, pipeline

sip_config.validate(config)  # params.yaml plus any --config overrides
PARAMS = config
SCALE = config["scale"]
# `--config seed_offset=N` shifts every training seed: how the seed-to-seed spread behind the CI
# tolerance (results/ci/tolerance.json) is measured.
SEED_OFFSET = int(config.get("seed_offset", 0))
CONDA_ENV = "../envs/sip.yaml"
pipeline.put_interpreter_first_on_path()  # jobs call `python -m sip_core.cli` with this interpreter

# Which tables each scale builds by default (the target `all`); the CPU scales build all they can,
# `gpu` the synthetic tables, `paper` only Table 5 here (the rest is a dry run: see README).
TABLES_OF_SCALE = {
    "ci": ["table1", "table2", "table3", "table4", "table5", "table6", "table7", "pretrain", "table11", "probe",
           "prefix", "significance", "table8", "table9", "table10"],
    "cpu": ["table1", "table2", "table3", "table4", "table5", "table6", "table7", "pretrain",
            "prefix", "significance", "table8", "table9", "table10"],
    "gpu": ["table1", "table2", "table6", "pretrain"],
    "paper": ["table5"],
}
# Evaluation FSTs must not be isomorphic to any training FST of these pre-training pools.
EXCLUDE_POOLS = jobscope.EXCLUDE_POOLS
SHAPE_FLAGS = {"d_model": "--d-model", "d_ff": "--d-ff", "num_layers": "--layers",
               "num_decoder_layers": "--decoder-layers", "num_heads": "--heads", "d_kv": "--d-kv",
               "dropout": "--dropout", "rel_buckets": "--rel-buckets", "rel_max_distance": "--rel-max-distance"}
# Optional pre-training levers of params.pretrain.* (absent: the command's default, i.e. off).
LEVER_FLAGS = {"max_steps": "--max-steps", "max_fsts": "--max-fsts", "cooldown_steps": "--cooldown-steps", "adam_beta2": "--adam-beta2",
               "clip": "--clip", "state_loss": "--state-loss", "curriculum_steps": "--curriculum-steps",
               "curriculum_start": "--curriculum-start", "save_dtype": "--save-dtype"}


def S(wildcards):
    """Effective settings of the scale in a rule's wildcards."""
    return sip_config.resolve(PARAMS, wildcards.scale)


def job_hash(wildcards, keys):
    """A job's params hash: only the settings it reads (sip_core/jobscope.py). It is among the rule's params,
    so changing one setting reruns exactly the jobs that depend on it, and a retrained checkpoint reruns
    the fine-tuning on it even where its new timestamp is no trigger."""
    return jobscope.settings_hash(S(wildcards), keys)


# --- datasets
def pool_args(wildcards, name=None):
    name = name or wildcards.pool
    pool = S(wildcards)["data"]["pools"][name]
    args = f"--n-train {pool['n_train']} --n-dev {pool['n_dev']} --seed {pool['seed']}"
    if name == "set":
        return args
    args += f" --n-test {pool['n_test']} --per-fst {pool['per_fst']}"
    return f"{args} --with-states" if pool.get("with_states") else args


def eval_args(wildcards):
    ev = S(wildcards)["data"]["eval"]
    setting = wildcards.setting
    bimachine = setting.startswith("bimachine")
    kind = setting if bimachine else setting.rsplit("-s", 1)[0]
    tasks = ev["bimachine_tasks"] if bimachine else ev["tasks"]
    return (f"--tasks {tasks} --n-train {ev['n_train']} --n-test {ev['n_test']} --seed {ev['seeds'][kind]}"
            f" --draws-per-length {ev['draws_per_length']}")


def natural_args(wildcards):
    nat = S(wildcards)["data"][wildcards.family]
    args = f"--draws {nat['draws']} --n-train {nat['n_train']} --seed {nat['seed']}"
    if nat.get("max_test"):
        args += f" --max-test {nat['max_test']}"
    if wildcards.family == "g2p":
        args += " --langs " + ",".join(nat["langs"])
    return args


# --- pre-training
def shape_args(wildcards):
    shape = S(wildcards)["model"]["shape"]
    return " ".join(f"{SHAPE_FLAGS[key]} {value}" for key, value in shape.items())


def init_arg(wildcards, input):
    if getattr(input, "parent", None):
        return f"--init {os.path.dirname(input.parent)}"
    return f"--init {S(wildcards)['model']['init']}"


# Checkpoints a scale takes from a released model instead of pre-training it (params `model.released`), as
# "<scale>/checkpoints/<model>" alternatives: the use_release rule's only outputs, so that no other
# checkpoint is ambiguous between it and `pretrain`.
RELEASED = {f"{scale}/checkpoints/{model}": (scale, model) for scale in PARAMS["scales"]
            for model in (sip_config.resolve(PARAMS, scale)["model"].get("released") or {})}
RELEASED_PATTERN = "|".join(re.escape(k) for k in RELEASED) or "(?!)"  # (?!): matches nothing


def released_input(wildcards):
    scale, model = RELEASED[wildcards.released]
    return os.path.join(pipeline.released_checkpoint(sip_config.resolve(PARAMS, scale), model), "model.safetensors")


def released_scope(wildcards):
    scale, model = RELEASED[wildcards.released]
    return jobscope.settings_hash(sip_config.resolve(PARAMS, scale), jobscope.pretrain_keys(model))


def pretrain_inputs(wildcards):
    spec = pipeline.MODELS[wildcards.model]
    inputs = {"data": f"data/{wildcards.scale}/pretrain/{spec.pool}/examples.parquet"}
    if spec.parent:
        inputs["parent"] = f"data/{wildcards.scale}/checkpoints/{spec.parent}/model.safetensors"
    return inputs


def train_args(wildcards):
    hp = pipeline.pretrain_settings(S(wildcards), wildcards.model)
    args = (f"--epochs {hp['epochs']} --batch-size {hp['batch_size']} --lr {hp['lr']} --warmup {hp['warmup']}"
            f" --schedule {hp['schedule']} --precision {hp['precision']}")
    if "table_lr" in hp:
        args += f" --te-lr {hp['table_lr']}"
    for key, flag in LEVER_FLAGS.items():
        if key in hp and not (key == "state_loss" and pipeline.MODELS[wildcards.model].variant not in ("sip", "naive")):
            args += f" {flag} {hp[key]}"
    return args


# --- fine-tuning
def finetune_inputs(wildcards):
    inputs = {"tasks": pipeline.task_file(wildcards.scale, wildcards.setting)}
    if wildcards.model != "base":
        ckpt = pipeline.checkpoint_model(wildcards.model)
        inputs["model"] = f"data/{wildcards.scale}/checkpoints/{ckpt}/model.safetensors"
    return inputs


def model_arg(wildcards, input):
    """A pre-trained checkpoint, or for `base` the initialisation itself (scratch + shape, or a path)."""
    if wildcards.model == "base":
        init = S(wildcards)["model"]["init"]
        return f"--model {init} " + (shape_args(wildcards) if init == "scratch" else "")
    return f"--model {os.path.dirname(input.model)}"


def finetune_args(wildcards, phash=None):
    ft = S(wildcards)["finetune"]
    phash = phash or job_hash(wildcards, jobscope.finetune_keys(S(wildcards), wildcards.model, wildcards.setting))
    fam = ft[pipeline.family(wildcards.setting)]
    spec = pipeline.MODELS[wildcards.model]
    return (f"--prefix {spec.prefix} --epochs {fam['epochs']} --eval-last {fam['eval_last']}"
            f" --report-last {fam['report_last']} --batch-size {pipeline.by_model(fam['batch'], wildcards.model)}"
            f" --eval-batch-size {fam['test_batch']} --lr {pipeline.by_model(fam['lr'], wildcards.model)}"
            f" --prefix-lr {pipeline.by_model(ft['prefix_lr'], wildcards.model)}"
            + pipeline.induced_prefix_flag(ft, wildcards.model)
            + pipeline.readout_flag(ft, wildcards.model)
            + pipeline.max_norm_flag(wildcards.model)
            + f" --prefix-length {pipeline.by_model(ft['prefix_length'], wildcards.model)} --clip {ft['clip']}"
            f" --seed {ft['seed'] + SEED_OFFSET} --scale {wildcards.scale} --params-hash {phash}"
            # optional: absent means the original's constant LR (and leaves the ci/cpu commands as they were)
            + (f" --schedule {pipeline.by_model(ft['schedule'], wildcards.model)}" if "schedule" in ft else "")
            + pipeline.restart_flags(ft.get("restarts")))


# --- tables
def table_runs(name):
    """Input function: the run directories of every (model, setting) of table `name`."""

    def runs(wildcards):
        cfg = S(wildcards)["tables"][name if name else wildcards.table]
        return [f"data/{wildcards.scale}/runs/{m}/{s}" for m in cfg["models"] for s in cfg["settings"]]

    return runs


def table5_eval(wildcards):
    ev = S(wildcards)["data"]["eval"]
    settings = [f"iteration-s{n}" for n in ev["states"]] + ["bimachine-iteration"]
    return [f"data/{wildcards.scale}/eval/{s}/examples.parquet" for s in settings]


def pretrain_checkpoints(wildcards):
    models = [m for m in pipeline.MODELS if pipeline.MODELS[m].variant in ("sip", "te", "naive", "set")]
    wanted = {m for t in S(wildcards)["tables"].values() for m in t["models"]}
    return [f"data/{wildcards.scale}/checkpoints/{m}/model.safetensors" for m in models
            if m in wanted or pipeline.checkpoint_model(m) in wanted]


# --- analyses (workflow/rules/analysis.smk): probing data, the probe's transfer study, Table 11
def probe_data_args(wildcards):
    pr = S(wildcards)["data"]["probe"]
    return (f"--n-train {pr['n_train']} --n-dev {pr.get('n_dev', 0)} --n-test {pr['n_test']}"
            f" --per-fst {pr['per_fst']} --seed {pr['seed']}")


def length_args(wildcards):
    ev = S(wildcards)["data"]["eval"]
    return (f"--tasks {ev['length']['tasks']} --n-train {ev['length']['n_train']} --n-test {ev['length']['n_test']}"
            f" --seed {ev['seeds']['length']}")


def transfer_finetune_args(wildcards):
    """Fine-tuning of the probed model on the transfer tasks with the arguments of its Table 1 runs."""
    from types import SimpleNamespace

    return finetune_args(SimpleNamespace(scale=wildcards.scale, model=pipeline.PROBE_MODEL,
                                         setting=pipeline.PROBE_SETTING))


def probe_finetuned_runs(wildcards):
    """The probed model's fine-tuned run on each transfer task (one job per task)."""
    tasks = S(wildcards)["data"]["eval"]["tasks"]
    return [f"data/{wildcards.scale}/probe/finetuned/{pipeline.PROBE_SETTING}-{i}" for i in range(tasks)]


def analysis_table_runs(name):
    def runs(wildcards):
        cfg = S(wildcards)["analysis"][name]
        return [f"data/{wildcards.scale}/runs/{m}/{s}" for m in cfg["models"] for s in cfg["settings"]]

    return runs


# --- appendix (workflow/rules/appendix.smk): tuned prefixes (Figure 9), significance, T5-Base (Tables 8-10)
T5_TABLE_SETTINGS = jobscope.T5_TABLE_SETTINGS


def A(wildcards):
    """Appendix settings of the scale in a rule's wildcards (params.yaml `appendix`)."""
    return S(wildcards)["appendix"]


def prefix_tune_args(wildcards):
    pr = A(wildcards)["prefix"]
    ft = S(wildcards)["finetune"]
    return (f"--epochs {pr['epochs']} --eval-last 1 --report-last 1 --batch-size {pr['batch_size']}"
            f" --eval-batch-size {ft['synthetic']['test_batch']} --prefix-lr {pr['prefix_lr']}"
            f" --prefix-length {pipeline.by_model(ft['prefix_length'], pipeline.PROBE_MODEL)} --clip {ft['clip']}"
            f" --seed {ft['seed'] + SEED_OFFSET}"
            f" --scale {wildcards.scale} --params-hash {job_hash(wildcards, jobscope.prefix_tune_keys())}")


def significance_tables(wildcards):
    """The tables the claims' '*' resolves against (their runs come with them), as far as the scale builds them.
    Every table whose runs a test reads must be here: the report reads data/<scale>/runs, so a run that is
    not an input would enter the report or not depending on the order jobs happen to run in."""
    return [f"results/{wildcards.scale}/{t}.csv"
            for t in jobscope.SIGNIFICANCE_TABLES if t in TABLES_OF_SCALE[wildcards.scale]]


def t5_init_inputs(wildcards):
    init = A(wildcards)["t5"]["init"]
    return {"standin": f"data/{wildcards.scale}/t5/standin/config.json"} if init == "standin" else {}


def t5_init_arg(wildcards, input):
    init = A(wildcards)["t5"]["init"]
    return os.path.dirname(input.standin) if init == "standin" else init


def t5_train_args(wildcards):
    hp = A(wildcards)["t5"]["pretrain"]
    return (f"--epochs {hp['epochs'][wildcards.model]} --batch-size {hp['batch_size']} --grad-accum {hp['grad_accum']}"
            f" --lr {hp['lr']} --warmup {hp['warmup']} --schedule {hp['schedule']} --precision {hp['precision']}")


def t5_task_file(wildcards):
    if wildcards.setting == "g2p-ascii":
        return f"data/{wildcards.scale}/t5/g2p-ascii/examples.parquet"
    return pipeline.task_file(wildcards.scale, wildcards.setting)


def t5_finetune_args(wildcards):
    """A T5 model is fine-tuned with the arguments of the model whose protocol it mirrors (T5-SIP-d4: SIP-d4)."""
    from types import SimpleNamespace

    mirror = A(wildcards)["t5"]["models"][wildcards.model]
    setting = "g2p" if wildcards.setting == "g2p-ascii" else wildcards.setting
    keys = jobscope.t5_finetune_keys(S(wildcards), wildcards.model, wildcards.setting)
    return finetune_args(SimpleNamespace(scale=wildcards.scale, model=mirror, setting=setting), job_hash(wildcards, keys))


def t5_table_runs(wildcards):
    if not A(wildcards)["t5"]["init"]:
        return []  # no T5 weights at this scale: the table says "not run"
    return [f"data/{wildcards.scale}/t5/runs/{m}/{s}" for m in A(wildcards)["t5"]["models"]
            for s in T5_TABLE_SETTINGS[wildcards.table]]
