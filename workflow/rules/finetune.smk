# Fine-tuning: one job per (model, setting) loops over the setting's tasks in one process and writes
# data/{scale}/runs/{model}/{setting}/{task_id}/metrics.json + predictions.parquet per task.


rule finetune:
    input:
        unpack(finetune_inputs),
    output:
        directory("data/{scale}/runs/{model}/{setting}"),
    params:
        args=finetune_args,
        model=model_arg,
    log:
        "logs/{scale}/finetune/{model}-{setting}.log",
    threads: 1
    resources:
        gpu=1,
        runtime=600,
    conda:
        CONDA_ENV
    shell:
        "python -m sip_core.cli finetune {params.model} --model-name {wildcards.model} --tasks {input.tasks}"
        " --task-id all {params.args} --out {output} > {log} 2>&1"
