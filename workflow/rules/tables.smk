# Result tables (DESIGN §6): results/{scale}/tableN.{csv,md,meta.json}, built only from run outputs.
# results/tableN.csv is an alias of the default scale's copy; the scale is a param, so switching
# scale rebuilds it.


rule table:
    input:
        table_runs(None),
    output:
        csv=report("results/{scale}/{table}.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/{table}.md",
        meta="results/{scale}/{table}.meta.json",
    wildcard_constraints:
        table="table1|table2|table3|table4|table7",
    log:
        "logs/{scale}/tables/{table}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli table --table {wildcards.table} --scale {wildcards.scale} --runs data/{wildcards.scale}/runs"
        " --out {output.csv} > {log} 2>&1"


rule table6:
    input:
        table_runs("table6"),
    output:
        csv=report("results/{scale}/table6.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/table6.md",
        meta="results/{scale}/table6.meta.json",
        figure=report("results/{scale}/fig3_more_states.png", caption="../report/figure.rst", category="Figures"),
    log:
        "logs/{scale}/tables/table6.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli table --table table6 --scale {wildcards.scale} --runs data/{wildcards.scale}/runs"
        " --out {output.csv} --figure {output.figure} > {log} 2>&1"


rule table5:
    input:
        pretrain="data/{scale}/pretrain/d4/examples.parquet",
        eval=table5_eval,
    output:
        csv=report("results/{scale}/table5.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/table5.md",
        meta="results/{scale}/table5.meta.json",
    log:
        "logs/{scale}/tables/table5.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli table --table table5 --scale {wildcards.scale} --pretrain {input.pretrain} --eval {input.eval}"
        " --out {output.csv} > {log} 2>&1"


rule table_alias:
    input:
        lambda wc: f"results/{SCALE}/{wc.table}.csv",
    output:
        "results/{table}.csv",
    wildcard_constraints:
        table=r"table\d+|pretrain",
    params:
        scale=SCALE,
    log:
        "logs/alias-{table}.log",
    conda:
        CONDA_ENV
    shell:
        "cp {input} {output} 2> {log}"


rule pretrain_table:
    input:
        pretrain_checkpoints,
    output:
        csv=report("results/{scale}/pretrain.csv", caption="../report/table.rst", category="Tables"),
        md="results/{scale}/pretrain.md",
        meta="results/{scale}/pretrain.meta.json",
        figure=report("results/{scale}/fig_pretrain_curves.png", caption="../report/figure.rst", category="Figures"),
    params:
        checkpoints=lambda wc, input: " ".join(os.path.dirname(p) for p in input),
    log:
        "logs/{scale}/tables/pretrain.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli table --table pretrain --scale {wildcards.scale} --checkpoints {params.checkpoints}"
        " --out {output.csv} --figure {output.figure} > {log} 2>&1"
