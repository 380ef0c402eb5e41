# Pre-trained checkpoints: data/{scale}/checkpoints/{model}/ (config.json + model.safetensors).
# Continued pre-training (d4+, nd7, d4-long) starts from its parent's checkpoint; `base` has none
# (fine-tuning initialises it: scratch or a from_pretrained path). A scale may take a model from a released
# checkpoint instead (params `model.released`; the cpu scale's SIP models, DESIGN §8): rule use_release.


ruleorder: use_release > pretrain


rule pretrain:
    input:
        unpack(pretrain_inputs),
    output:
        "data/{scale}/checkpoints/{model}/model.safetensors",
    wildcard_constraints:
        model="naive|set|te|sip-d4|sip-d4plus|sip-nd7|sip-d4-long",
    params:
        variant=lambda wc: pipeline.MODELS[wc.model].variant,
        shape=shape_args,
        init=init_arg,
        train=train_args,
        seed=lambda wc: S(wc)["seed"] + SEED_OFFSET,
        data=lambda wc, input: os.path.dirname(input.data),
        out=lambda wc, output: os.path.dirname(output[0]),
        scope=lambda wc: job_hash(wc, jobscope.pretrain_keys(wc.model)),  # incl. its pool's and parent's settings
    log:
        "logs/{scale}/pretrain/{model}.log",
    threads: 1
    # a pre-training heads a long chain (continued pre-training, then fine-tunings): started first, it keeps
    # every core busy to the end instead of running alone while short jobs wait on it (ci: ~1 min idle before)
    priority: 10
    resources:
        gpu=1,
        runtime=600,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli pretrain --variant {params.variant} --data {params.data} {params.init} {params.shape}"
        " {params.train} --seed {params.seed} --out {params.out} > {log} 2>&1"


rule use_release:
    input:
        released_input,
    output:
        "data/{released}/model.safetensors",
    wildcard_constraints:
        released=RELEASED_PATTERN,
    params:
        src=lambda wc, input: os.path.dirname(input[0]),
        out=lambda wc, output: os.path.dirname(output[0]),
        scope=released_scope,
    log:
        "logs/{released}/use-release.log",
    threads: 1
    resources:
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli use-release {params.src} --out {params.out} > {log} 2>&1"
