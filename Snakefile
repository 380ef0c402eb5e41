# SIP pipeline: FST sampling -> datasets -> pre-training -> fine-tuning -> tables.
# `snakemake results/table1.csv` builds the default scale's Table 1; `--config scale=ci` picks another.
# Every path carries its scale, so scales never mix; rules are thin calls of the `sip` CLI.
from snakemake.utils import min_version

min_version("9.0")

configfile: "params.yaml"


report: "workflow/report/workflow.rst"  # `snakemake --report`: tables and figures (README)


include: "workflow/rules/common.smk"


wildcard_constraints:
    scale="ci|cpu|gpu|paper",
    pool="d4|d4plus|d4long|nd7|set",
    model="|".join(pipeline.MODELS),


include: "workflow/rules/external.smk"
include: "workflow/rules/datasets.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/finetune.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/appendix.smk"


rule all:
    input:
        [f"results/{SCALE}/{name}.csv" for name in TABLES_OF_SCALE[SCALE]],
        f"results/{SCALE}/claims.md",
