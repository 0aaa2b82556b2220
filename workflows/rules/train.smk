# One training run per variant. Runs resume from their last checkpoint after an interruption.


rule run_config:
    input:
        cfg=CONFIG_JSON,
        tok=f"{RUN}/tokenizer.json",
    output:
        f"{RUN}/models/{{variant}}/run_config.json",
    log:
        f"logs/{SCALE}/run_config_{{variant}}.log",
    shell:
        "python -m yocou.pipeline --config {input.cfg} --variant {wildcards.variant} "
        "--tokenizer {input.tok} --out {output} > {log} 2>&1"


def _launcher(wildcards):
    n = config["launch"].get("nproc", 1)
    return f"torchrun --standalone --nproc-per-node {n} -m yocou.cli" if n > 1 else "yocou"


rule train:
    input:
        rc=f"{RUN}/models/{{variant}}/run_config.json",
        data=f"{RUN}/tokens/train.bin",
    output:
        model=f"{RUN}/models/{{variant}}/model.pt",
        metrics=f"{RUN}/models/{{variant}}/metrics.jsonl",
        summary=f"{RUN}/models/{{variant}}/summary.json",
    log:
        f"logs/{SCALE}/train_{{variant}}.log",
    params:
        launch=_launcher,
    threads: workflow.cores
    # Keep the checkpoint (and metrics) of an interrupted run so the rerun resumes from it.
    shell:
        "OMP_NUM_THREADS={threads} {params.launch} train --run-config {input.rc} --data {input.data} "
        "--out {RUN}/models/{wildcards.variant} > {log} 2>&1"
