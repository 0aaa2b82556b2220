# The compute rules of efficiency.smk (defined only when computing: yocou.workflow.committed, common.smk).


rule profile:
    input:
        rc=expand(f"{RUN}/models/{{variant}}/run_config.json", variant=CORE),
    output:
        f"{RES}/profile.json",
    log:
        f"logs/{SCALE}/profile.log",
    benchmark:
        bench("profile")
    params:
        lens=" ".join(str(n) for n in config["eval"]["profile"]["seq_lens"]),
        opts=" ".join(f"--{k.replace('_', '-')} {v}" for k, v in config["eval"]["profile"].items()
                      if k not in ("fit", "seq_lens")),
        gpu=lambda w: gpu_prefix(1),  # a free local GPU slot when launch.gpu_slots > 0 (common.smk)
        device=job_device,
    threads: job_threads("profile")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} {params.gpu}python -m yocou.evaluation.bench.profile --run-configs {input.rc} --seq-lens {params.lens} "
        "{params.opts} --threads {threads} --device {params.device} --out {output} > {log} 2>&1"


rule summarize_kv:
    input:
        measured=f"{RES}/kv_measure.json",
        rc=expand(f"{RUN}/models/{{variant}}/run_config.json", variant=CORE),
        code=TIDY_CODE + [f"{PKG}/model/accounting.py", f"{PKG}/results/readers.py"],
    output:
        csv=f"{RES}/tidy/kv.csv",
        json=f"{RES}/tidy/kv.json",
    log:
        f"logs/{SCALE}/summarize_kv.log",
    benchmark:
        bench("summarize_kv")
    params:
        core=CORE,
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../../scripts/summarize_kv.py"
