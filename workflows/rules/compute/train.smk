# One training run per variant. Runs resume from their last checkpoint after an interruption.
import re


# A run is one of the config's variants (derived models such as <variant>_eqflops come from studies.smk).
_RUN_NAMES = "|".join(re.escape(v) for v in sorted(config["variants"], key=len, reverse=True))


rule run_config:
    input:
        tok=f"{RUN}/tokenizer.json",
    output:
        f"{RUN}/models/{{variant}}/run_config.json",
    wildcard_constraints:
        variant=_RUN_NAMES,
    log:
        f"logs/{SCALE}/run_config_{{variant}}.log",
    benchmark:
        bench("run_config", "variant")
    params:
        # Only what a run depends on, on the command line: editing evaluation settings never retrains.
        cfg=lambda w: run_config_json(w.variant),
    conda: CONDA_ENV
    shell:
        "python -m yocou.workflow.pipeline --config {params.cfg} --variant {wildcards.variant} "
        "--tokenizer {input.tok} --out {output} > {log} 2>&1"


rule train:
    input:
        rc=f"{RUN}/models/{{variant}}/run_config.json",
        data=f"{RUN}/tokens/train.bin",
        heldout=heldout_bins,
        tok=f"{RUN}/tokenizer.json",  # train.needle_mix encodes its needles with it (already an input of run_config)
    output:
        model=f"{RUN}/models/{{variant}}/model.pt",
        metrics=f"{RUN}/models/{{variant}}/metrics.jsonl",
        summary=f"{RUN}/models/{{variant}}/summary.json",
    wildcard_constraints:
        variant=_RUN_NAMES,
    log:
        f"logs/{SCALE}/train_{{variant}}.log",
    benchmark:
        bench("train", "variant")
    params:
        launch=launcher,
        out=lambda w, output: os.path.dirname(output.model),
        heldout=lambda w, input: f"--heldout {' '.join(input.heldout)}" if input.heldout else "",
        needle_template=lambda w: needle_template(w.variant),  # a rerun trigger only
    threads: job_threads("train", "train")
    # An interrupted run resumes from its checkpoint (ckpt.pt, or ckpt.dcp/ under FSDP; it also holds the metrics rows). A trainer
    # holds its run folder's lock (yocou.utils.runlock); the check comes before the log is opened, so that a second
    # snakemake run on the same folder refuses in its own terminal, naming the trainer's PID, and leaves the running
    # trainer's log alone.
    conda: CONDA_ENV
    shell:
        "python -m yocou.utils.runlock {params.out} && "
        "OMP_NUM_THREADS={threads} {params.launch} train --run-config {input.rc} --data {input.data} "
        "--tokenizer {input.tok} --out {params.out} {params.heldout} > {log} 2>&1"
