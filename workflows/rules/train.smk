# One training run per variant. Runs resume from their last checkpoint after an interruption.


rule run_config:
    input:
        tok=f"{RUN}/tokenizer.json",
    output:
        f"{RUN}/models/{{variant}}/run_config.json",
    log:
        f"logs/{SCALE}/run_config_{{variant}}.log",
    params:
        # Only what a run depends on: editing evaluation settings never retrains.
        run=lambda w: json.dumps({k: config[k] for k in ("seed", "model", "train")} | {
            "variant": config["variants"][w.variant]}, sort_keys=True),
    shell:
        "python -m yocou.pipeline --config {CONFIG_JSON} --variant {wildcards.variant} "
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
