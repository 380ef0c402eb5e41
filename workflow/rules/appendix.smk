# The paper's appendix: tuned-prefix analysis (Figure 9) -> results/{scale}/prefix.* + fig9_prefix_similarity.png;
# significance tests over tasks -> results/{scale}/significance.*; the T5-Base path -> results/{scale}/table{8,9,10}.*
# Settings per scale: params.yaml `appendix` (helpers in common.smk).


# SIP-d4 fine-tuned prefix-only (body frozen) on the 4-state iteration tasks; keeps each tuned prefix.
rule prefix_tune:
    input:
        model="data/{scale}/checkpoints/sip-d4/model.safetensors",
        tasks="data/{scale}/eval/iteration-s4/examples.parquet",
    output:
        directory("data/{scale}/analysis/prefix/tuned"),
    params:
        args=prefix_tune_args,
        model=lambda wc, input: os.path.dirname(input.model),
    log:
        "logs/{scale}/appendix/prefix-tune.log",
    threads: 1
    resources:
        gpu=1,
        runtime=120,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli finetune --model {params.model} --model-name sip-d4 --tasks {input.tasks} --task-id all"
        " --prefix mean --freeze-body --save-prefix {params.args} --out {output} > {log} 2>&1"


# Random FSTs with each gold FST's states and vocabulary (FST code: runs on the CPU side). The task rule
# declares examples.parquet; fsts.parquet is written beside it.
rule prefix_distractors:
    input:
        "data/{scale}/eval/iteration-s4/examples.parquet",
    output:
        "data/{scale}/analysis/prefix/distractors.parquet",
    params:
        fsts=lambda wc, input: os.path.join(os.path.dirname(input[0]), "fsts.parquet"),
        per_task=lambda wc: A(wc)["prefix"]["distractors"],
        seed=lambda wc: A(wc)["prefix"]["seed"],
    log:
        "logs/{scale}/appendix/prefix-distractors.log",
    threads: config["workers"]
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli prefix distractors --fsts {params.fsts} --per-task {params.per_task} --seed {params.seed}"
        " --workers {threads} --out {output} > {log} 2>&1"


rule prefix_table:
    input:
        model="data/{scale}/checkpoints/sip-d4/model.safetensors",
        tasks="data/{scale}/eval/iteration-s4/examples.parquet",
        tuned="data/{scale}/analysis/prefix/tuned",
        distractors="data/{scale}/analysis/prefix/distractors.parquet",
    output:
        csv=report("results/{scale}/prefix.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/prefix.md",
        meta="results/{scale}/prefix.meta.json",
        figure=report("results/{scale}/fig9_prefix_similarity.png", caption="../report/figure.rst", category="Figures"),
    params:
        model=lambda wc, input: os.path.dirname(input.model),
        fsts=lambda wc, input: os.path.join(os.path.dirname(input.tasks), "fsts.parquet"),
        permutations=lambda wc: A(wc)["prefix"]["permutations"],
        seed=lambda wc: A(wc)["prefix"]["seed"],
        eval_batch=lambda wc: A(wc)["prefix"]["eval_batch_size"],
    log:
        "logs/{scale}/appendix/prefix-table.log",
    threads: 1
    resources:
        gpu=1,
        runtime=120,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli prefix analyse --model {params.model} --model-name sip-d4 --tasks {input.tasks}"
        " --fsts {params.fsts} --tuned {input.tuned} --distractors {input.distractors} --permutations {params.permutations}"
        " --seed {params.seed} --eval-batch-size {params.eval_batch} --scale {wildcards.scale} --out {output.csv}"
        " --figure {output.figure} > {log} 2>&1"


# The paper's two tests plus every test the claims make, over all runs of the scale (>= 10,000 resamples).
rule significance:
    input:
        significance_tables,
    output:
        csv=report("results/{scale}/significance.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/significance.md",
        meta="results/{scale}/significance.meta.json",
        tasks="results/{scale}/significance.tasks.csv",
    params:
        resamples=lambda wc: A(wc)["significance"]["resamples"],
        seed=lambda wc: A(wc)["significance"]["seed"],
    log:
        "logs/{scale}/appendix/significance.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli report significance --runs data/{wildcards.scale}/runs --results results/{wildcards.scale}"
        " --resamples {params.resamples} --seed {params.seed} --out {output.csv} > {log} 2>&1"


# One line per claim of the paper: pass / fail / not significant / not built, over every table of the scale.
rule claims:
    input:
        lambda wc: [f"results/{wc.scale}/{t}.csv" for t in TABLES_OF_SCALE[wc.scale]],
    output:
        "results/{scale}/claims.md",
    params:
        resamples=lambda wc: A(wc)["significance"]["resamples"],
        seed=lambda wc: A(wc)["significance"]["seed"],
    log:
        "logs/{scale}/appendix/claims.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli report claims results/{wildcards.scale} --runs data/{wildcards.scale}/runs"
        " --resamples {params.resamples} --seed {params.seed} --out {output} > {log} 2>&1"


# --- T5-Base path (only runs where a T5 init is configured; Tables 8-10 otherwise say "not run")
rule t5_standin:
    output:
        "data/{scale}/t5/standin/config.json",
    params:
        vocab=lambda wc: A(wc)["t5"]["standin_vocab"],
        shape=shape_args,
        seed=lambda wc: S(wc)["seed"],
        out=lambda wc, output: os.path.dirname(output[0]),
    log:
        "logs/{scale}/appendix/t5-standin.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli t5 standin --vocab-size {params.vocab} {params.shape} --seed {params.seed}"
        " --out {params.out} > {log} 2>&1"


rule t5_ascii:
    input:
        "data/{scale}/natural/g2p/examples.parquet",
    output:
        tasks="data/{scale}/t5/g2p-ascii/examples.parquet",
        mapping="data/{scale}/t5/g2p-ascii/mapping.json",
    log:
        "logs/{scale}/appendix/t5-ascii.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli t5 ascii --tasks {input} --out {output.tasks} --mapping {output.mapping} > {log} 2>&1"


# Further pre-training from the T5 after vocabulary surgery (LR 1e-4, 100 warm-up steps, batch 16 x 2).
rule t5_pretrain:
    input:
        unpack(t5_init_inputs),
        data=lambda wc: f"data/{wc.scale}/pretrain/{'d4' if wc.model == 't5-sip-d4' else 'set'}/examples.parquet",
    output:
        "data/{scale}/t5/checkpoints/{model}/model.safetensors",
    wildcard_constraints:
        model="t5-sip-d4|t5-set",
    params:
        variant=lambda wc: "sip" if wc.model == "t5-sip-d4" else "set",
        init=t5_init_arg,
        train=t5_train_args,
        seed=lambda wc: S(wc)["seed"] + SEED_OFFSET,
        data=lambda wc, input: os.path.dirname(input.data),
        out=lambda wc, output: os.path.dirname(output[0]),
    log:
        "logs/{scale}/appendix/t5-pretrain-{model}.log",
    threads: 1
    resources:
        gpu=1,
        runtime=600,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli pretrain --variant {params.variant} --data {params.data} --init {params.init}"
        " {params.train} --seed {params.seed} --no-progress --out {params.out} > {log} 2>&1"


rule t5_finetune:
    input:
        model="data/{scale}/t5/checkpoints/{model}/model.safetensors",
        tasks=t5_task_file,
    output:
        directory("data/{scale}/t5/runs/{model}/{setting}"),
    wildcard_constraints:
        model="t5-sip-d4|t5-set",
    params:
        args=t5_finetune_args,
        model=lambda wc, input: os.path.dirname(input.model),
    log:
        "logs/{scale}/appendix/t5-finetune-{model}-{setting}.log",
    threads: 1
    resources:
        gpu=1,
        runtime=600,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli finetune --model {params.model} --model-name {wildcards.model} --tasks {input.tasks}"
        " --task-id all {params.args} --out {output} > {log} 2>&1"


rule t5_table:
    input:
        t5_table_runs,
    output:
        csv=report("results/{scale}/{table}.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/{table}.md",
        meta="results/{scale}/{table}.meta.json",
    wildcard_constraints:
        table="table8|table9|table10",
    log:
        "logs/{scale}/tables/{table}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli t5 table --table {wildcards.table} --scale {wildcards.scale}"
        " --runs data/{wildcards.scale}/t5/runs --out {output.csv} > {log} 2>&1"
