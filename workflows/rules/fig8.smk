# Figure 8: angular distance between consecutive layer applications on held-out text (docs/design.md section 7).
# Settings from config["eval"]["angular"] via params (editing them reruns these rules, never training);
# the variants from config["studies"]["fig8"] when the config has it, else the core variants.

FIG8_VARIANTS = config.get("studies", {}).get("fig8", CORE)


rule angular:
    input:
        unpack(from_runs("angular",
            model=f"{RUN}/models/{{variant}}/model.pt",
            data=expand(f"{RUN}/tokens/{{split}}.bin", split=["heldout_book", "heldout_code"]),
            code=f"{PKG}/analysis/angular.py",
        )),
    output:
        f"{RES}/angular/{{variant}}.json",
    log:
        f"logs/{SCALE}/angular_{{variant}}.log",
    benchmark:
        bench("angular", "variant")
    params:
        p=config["eval"]["angular"],
        tokens=f"{RUN}/tokens",  # the folder of input.data
        batch=config["eval"]["angular"]["batch"],
        dtype=config["eval"]["angular"]["dtype"],
    threads: eval_threads
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.analysis.angular --model {input.model} --data {params.tokens} "
        "--max-tokens {params.p[max_tokens]} --seq-len {params.p[seq_len]} --batch {params.batch} "
        "--dtype {params.dtype} --out {output} > {log} 2>&1"


rule summarize_fig8:
    input:
        unpack(from_runs("summarize_fig8",
            angular=expand(f"{RES}/angular/{{variant}}.json", variant=FIG8_VARIANTS),
            summaries=expand(f"{RUN}/models/{{variant}}/summary.json", variant=FIG8_VARIANTS),
            code=TRAINING_CODE,
        )),
    output:
        csv=f"{RES}/tidy/fig8.csv",
        json=f"{RES}/tidy/fig8.json",
    log:
        f"logs/{SCALE}/summarize_fig8.log",
    benchmark:
        bench("summarize_fig8")
    params:
        script=compute_script("summarize_fig8", "summarize_training.py"),
        cfg=training_cfg("fig8"),
        job={"study": "fig8", "roots": {"run_root": f"{RUN}/models", "angular_root": f"{RES}/angular"}},
    conda: CONDA_ENV
    script:
        "../scripts/{params.script}"  # summarize_training.py, see compute_script (common.smk)


rule fig8:
    input:
        tidy=f"{RES}/tidy/fig8.json",
        code=[f"{PKG}/render/fig8.py", f"{PKG}/render/common.py", f"{PKG}/tidy.py", f"{PKG}/names.py"],
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
    output:
        png=in_report(f"{FIG}/fig8.png", "fig8"),
        pdf=f"{FIG}/fig8.pdf",
        data=in_report(f"{RES}/fig8_data.csv", "fig8"),
    log:
        f"logs/{SCALE}/fig8.log",
    benchmark:
        bench("fig8")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],  # render-only: never recomputes
    conda: CONDA_ENV
    script:
        "../scripts/fig8.py"
