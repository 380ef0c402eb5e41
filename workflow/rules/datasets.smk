# Datasets as Parquet (DESIGN §5): pre-training pools, synthetic evaluation tasks, natural tasks.


rule fst_pool:
    output:
        fsts="data/{scale}/pretrain/{pool}/fsts.parquet",
        examples="data/{scale}/pretrain/{pool}/examples.parquet",
    wildcard_constraints:
        pool="d4|d4plus|d4long|nd7",
    params:
        args=pool_args,
        out=lambda wc, output: os.path.dirname(output.fsts),
    log:
        "logs/{scale}/data/pool-{pool}.log",
    threads: config["workers"]
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli data {wildcards.pool} {params.args} --workers {threads} --out {params.out} > {log} 2>&1"


rule set_pool:
    output:
        examples="data/{scale}/pretrain/set/examples.parquet",
    params:
        args=lambda wc: pool_args(wc, "set"),
        out=lambda wc, output: os.path.dirname(output.examples),
    log:
        "logs/{scale}/data/pool-set.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli data set {params.args} --out {params.out} > {log} 2>&1"


rule eval_tasks:
    input:
        exclude=expand("data/{{scale}}/pretrain/{pool}/fsts.parquet", pool=EXCLUDE_POOLS),
    output:
        "data/{scale}/eval/{setting}/examples.parquet",
    wildcard_constraints:
        setting=r"(iteration|uc)-s\d+|bimachine-(iteration|uc)",
    params:
        args=eval_args,
        out=lambda wc, output: os.path.dirname(output[0]),
        scope=lambda wc: job_hash(wc, jobscope.data_keys(wc.setting)),  # incl. the excluded pools' settings
    log:
        "logs/{scale}/data/eval-{setting}.log",
    threads: config["workers"]
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli data eval --setting {wildcards.setting} {params.args} --exclude {input.exclude}"
        " --workers {threads} --out {params.out} > {log} 2>&1"


rule natural_tasks:
    input:
        raw="data/external",
    output:
        "data/{scale}/natural/{family}/examples.parquet",
    wildcard_constraints:
        family="g2p|sygus",
    params:
        args=natural_args,
        out=lambda wc, output: os.path.dirname(output[0]),
    log:
        "logs/{scale}/data/natural-{family}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli data {wildcards.family} --raw {input.raw} {params.args} --out {params.out} > {log} 2>&1"
