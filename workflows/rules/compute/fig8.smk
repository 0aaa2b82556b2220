# The compute rules of fig8.smk (defined only when computing: yocou.workflow.committed, common.smk).


rule angular:
    input:
        model=f"{RUN}/models/{{variant}}/model.pt",
        data=expand(f"{RUN}/tokens/{{split}}.bin", split=["heldout_book", "heldout_code"]),
        code=f"{PKG}/evaluation/analysis/angular.py",
    output:
        f"{RES}/angular/{{variant}}.json",
    log:
        f"logs/{SCALE}/angular_{{variant}}.log",
    benchmark:
        bench("angular", "variant")
    params:
        p=config["eval"]["angular"],
        tokens=lambda w, input: os.path.dirname(input.data[0]),  # the folder of input.data
        batch=config["eval"]["angular"]["batch"],
        dtype=config["eval"]["angular"]["dtype"],
        device=job_device,
    threads: job_threads("angular", "eval")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.evaluation.analysis.angular --model {input.model} --data {params.tokens} "
        "--max-tokens {params.p[max_tokens]} --seq-len {params.p[seq_len]} --batch {params.batch} "
        "--dtype {params.dtype} --device {params.device} --out {output} > {log} 2>&1"


rule summarize_fig8:
    input:
        angular=expand(f"{RES}/angular/{{variant}}.json", variant=FIG8_VARIANTS),
        summaries=expand(f"{RUN}/models/{{variant}}/summary.json", variant=FIG8_VARIANTS),
        code=TRAINING_CODE,
    output:
        csv=f"{RES}/tidy/fig8.csv",
        json=f"{RES}/tidy/fig8.json",
    log:
        f"logs/{SCALE}/summarize_fig8.log",
    benchmark:
        bench("summarize_fig8")
    params:
        cfg=training_cfg("fig8"),
        job={"study": "fig8", "roots": {"run_root": f"{RUN}/models", "angular_root": f"{RES}/angular"}},
    conda: CONDA_ENV
    script:
        "../../scripts/summarize_training.py"
