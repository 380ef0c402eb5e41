# Analyses: the state probe (paper Section 7, Figure 5) and length generalisation (Table 11).
# results/{scale}/probe.{csv,md,meta.json} + fig5_confusion_{train,test}.png and results/{scale}/table11.*


rule probe_data:
    input:
        exclude="data/{scale}/pretrain/d4/fsts.parquet",
    output:
        fsts="data/{scale}/eval/probe/fsts.parquet",
        examples="data/{scale}/eval/probe/examples.parquet",
    params:
        args=probe_data_args,
        out=lambda wc, output: os.path.dirname(output.fsts),
        scope=lambda wc: job_hash(wc, ["data.probe", "data.pools.d4"]),  # incl. the excluded pool's settings
    log:
        "logs/{scale}/data/probe.log",
    threads: config["workers"]
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli data probe {params.args} --exclude {input.exclude} --workers {threads} --quiet"
        " --out {params.out} > {log} 2>&1"


rule probe_train:
    input:
        model="data/{scale}/checkpoints/sip-d4/model.safetensors",
        data="data/{scale}/eval/probe/examples.parquet",
    output:
        probe="data/{scale}/probe/probe.safetensors",
        info="data/{scale}/probe/probing.json",
    params:
        init=lambda wc: S(wc)["model"]["init"],
        model=lambda wc, input: os.path.dirname(input.model),
        data=lambda wc, input: os.path.dirname(input.data),
        out=lambda wc, output: os.path.dirname(output.info),
    log:
        "logs/{scale}/probe/train.log",
    threads: 1
    resources:
        gpu=1,
        runtime=60,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli probe train --model {params.model} --data {params.data} --init {params.init}"
        " --out {params.out} > {log} 2>&1"


# The probed model fine-tuned on each transfer task as in Table 1, keeping the weights (--save-model). One job per
# task, so that a GPU host runs them side by side (sip_core/handoff.py PARALLEL_RULES).
rule probe_finetune:
    input:
        model="data/{scale}/checkpoints/sip-d4/model.safetensors",
        tasks=f"data/{{scale}}/eval/{pipeline.PROBE_SETTING}/examples.parquet",
    output:
        # temp: read once, by probe_report; on a GPU host the models stay there (sip_core/handoff.py HOST_ONLY_RULES)
        temp(directory("data/{scale}/probe/finetuned/{task}")),
    wildcard_constraints:
        task=rf"{pipeline.PROBE_SETTING}-\d+",
    params:
        args=transfer_finetune_args,
        model=lambda wc, input: os.path.dirname(input.model),
    log:
        "logs/{scale}/probe/finetune-{task}.log",
    threads: 1
    resources:
        gpu=1,
        runtime=600,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli finetune --model {params.model} --model-name sip-d4 --tasks {input.tasks}"
        " --task-id {wildcards.task} {params.args} --save-model --no-progress --out {output} > {log} 2>&1"


rule probe_report:
    input:
        info="data/{scale}/probe/probing.json",
        finetuned=probe_finetuned_runs,
        tasks=f"data/{{scale}}/eval/{pipeline.PROBE_SETTING}/examples.parquet",
    output:
        csv=report("results/{scale}/probe.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/probe.md",
        meta="results/{scale}/probe.meta.json",
        train=report("results/{scale}/fig5_confusion_train.png", caption="../report/figure.rst", category="Figures"),
        test=report("results/{scale}/fig5_confusion_test.png", caption="../report/figure.rst", category="Figures"),
    params:
        probe=lambda wc, input: os.path.dirname(input.info),
        tasks=lambda wc, input: os.path.dirname(input.tasks),
        finetuned=lambda wc: f"data/{wc.scale}/probe/finetuned",
    log:
        "logs/{scale}/tables/probe.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli probe report --probe {params.probe} --finetuned {params.finetuned} --tasks {params.tasks}"
        " --scale {wildcards.scale} --out {output.csv} --figure-train {output.train} --figure-test {output.test}"
        " > {log} 2>&1"


rule length_data:
    input:
        exclude=expand("data/{{scale}}/pretrain/{pool}/fsts.parquet", pool=EXCLUDE_POOLS),
    output:
        fsts="data/{scale}/eval/length/fsts.parquet",
        examples="data/{scale}/eval/length/examples.parquet",
    params:
        args=length_args,
        out=lambda wc, output: os.path.dirname(output.fsts),
        scope=lambda wc: job_hash(wc, jobscope.data_keys("len-")),  # incl. the excluded pools' settings
    log:
        "logs/{scale}/data/length.log",
    threads: config["workers"]
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli data length {params.args} --exclude {input.exclude} --workers {threads} --quiet"
        " --out {params.out} > {log} 2>&1"


# One task file per Table 11 test bucket (setting len-40-70, len-90-110); the generic finetune rule runs them.
rule length_bucket:
    input:
        "data/{scale}/eval/length/examples.parquet",
    output:
        "data/{scale}/eval/{setting}/examples.parquet",
    wildcard_constraints:
        setting=r"len-\d+-\d+",
    params:
        length=lambda wc, input: os.path.dirname(input[0]),
        out=lambda wc, output: os.path.dirname(output[0]),
    log:
        "logs/{scale}/data/{setting}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli data length-bucket --length {params.length} --bucket {wildcards.setting}"
        " --out {params.out} > {log} 2>&1"


rule table11:
    input:
        analysis_table_runs("table11"),
    output:
        csv=report("results/{scale}/table11.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/table11.md",
        meta="results/{scale}/table11.meta.json",
    log:
        "logs/{scale}/tables/table11.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli table --table table11 --scale {wildcards.scale} --runs data/{wildcards.scale}/runs"
        " --out {output.csv} > {log} 2>&1"
