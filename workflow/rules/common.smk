# Shared by all rule files. The validated params, the effective settings of a scale, and the
# functions that turn settings into `sip` arguments and input paths (rule files hold only rules).
import os
import sys

sys.path.insert(0, workflow.basedir)  # sip_core importable from a checkout without installation

from sip_core import config as sip_config
from sip_core import pipeline

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
    "ci": ["table1", "table2", "table3", "table4", "table5", "table6", "table7", "pretrain"],
    "cpu": ["table1", "table2", "table3", "table4", "table5", "table6", "table7", "pretrain"],
    "gpu": ["table1", "table2", "table6", "pretrain"],
    "paper": ["table5"],
}
# Evaluation FSTs must not be isomorphic to any training FST of these pre-training pools.
EXCLUDE_POOLS = ("d4", "d4plus", "d4long")
SHAPE_FLAGS = {"d_model": "--d-model", "d_ff": "--d-ff", "num_layers": "--layers",
               "num_decoder_layers": "--decoder-layers", "num_heads": "--heads", "d_kv": "--d-kv",
               "dropout": "--dropout"}


def S(wildcards):
    """Effective settings of the scale in a rule's wildcards."""
    return sip_config.resolve(PARAMS, wildcards.scale)


def params_hash(wildcards):
    return sip_config.params_hash(S(wildcards))


# --- datasets
def pool_args(wildcards, name=None):
    name = name or wildcards.pool
    pool = S(wildcards)["data"]["pools"][name]
    args = f"--n-train {pool['n_train']} --n-dev {pool['n_dev']} --seed {pool['seed']}"
    if name == "set":
        return args
    return args + f" --n-test {pool['n_test']} --per-fst {pool['per_fst']}"


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


def finetune_args(wildcards):
    ft = S(wildcards)["finetune"]
    fam = ft[pipeline.family(wildcards.setting)]
    spec = pipeline.MODELS[wildcards.model]
    return (f"--prefix {spec.prefix} --epochs {fam['epochs']} --eval-last {fam['eval_last']}"
            f" --report-last {fam['report_last']} --batch-size {pipeline.by_model(fam['batch'], wildcards.model)}"
            f" --eval-batch-size {fam['test_batch']} --lr {pipeline.by_model(fam['lr'], wildcards.model)}"
            f" --prefix-lr {ft['prefix_lr']} --prefix-length {ft['prefix_length']} --clip {ft['clip']}"
            f" --seed {ft['seed'] + SEED_OFFSET} --scale {wildcards.scale} --params-hash {params_hash(wildcards)}")


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
