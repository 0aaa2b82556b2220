# The compute rules of studies.smk (defined only when computing: yocou.workflow.committed, common.smk).


rule eqflops_model:
    # Table 2 "YOCO-U (Equal FLOPS)": the equal-steps run's snapshot at the step where its training FLOPs
    # reach the reference's full run (yocou.workflow.pipeline.resolve_run, equal_flops_to).
    input:
        model=f"{RUN}/models/{{base}}/model.pt",
        rc=f"{RUN}/models/{{base}}/run_config.json",
    output:
        model=f"{RUN}/models/{{base}}_eqflops/model.pt",
        summary=f"{RUN}/models/{{base}}_eqflops/summary.json",
    wildcard_constraints:
        base=_RUN_NAMES,
    log:
        f"logs/{SCALE}/eqflops_{{base}}.log",
    benchmark:
        bench("eqflops_model", "base")
    params:
        run=lambda w, input: os.path.dirname(input.model),
        out=lambda w, output: os.path.dirname(output.model),
    conda: CONDA_ENV
    shell:
        "python -m yocou.workflow.studies eqflops --run {params.run} --out {params.out} > {log} 2>&1"


rule summarize_runs:
    # {RES}/tidy/runs.{csv,json}: each run's parameters, tokens, FLOPs, steps and final training loss (the
    # budgets in the tables' and figures' notes).
    input:
        summaries=[f"{RUN}/models/{r}/summary.json" for r in ALL_RUNS],
        metrics=[f"{RUN}/models/{v}/metrics.jsonl" for v in PIPELINE_RUNS],
        rc=[f"{RUN}/models/{v}/run_config.json" for v in PIPELINE_RUNS],
        code=TRAINING_CODE,
    output:
        csv=f"{RES}/tidy/runs.csv",
        json=f"{RES}/tidy/runs.json",
    log:
        f"logs/{SCALE}/summarize_runs.log",
    benchmark:
        bench("summarize_runs")
    params:
        cfg={"scale": SCALE, "runs": ALL_RUNS},
        job={"study": "runs", "roots": {"run_root": f"{RUN}/models"}},
    conda: CONDA_ENV
    script:
        "../../scripts/summarize_training.py"


# The crossover study: `snakemake crossover`, outside reproduce_all. YOCO and YOCO-U for
# crossover.factor x the steps with crossover.seeds seeds (yocou.workflow.wfconfig.expand_runs), held-out loss at every
# train.eval_every steps; the gap YOCO-U - YOCO with its 95% interval across seeds at each checkpoint.
rule summarize_crossover:
    input:
        metrics=lambda w: crossover_files("metrics.jsonl"),
        summaries=lambda w: crossover_files("summary.json"),
        # the final models on the whole held-out set of each split (rule ppl)
        ppl=lambda w: [f"{RES}/ppl/{os.path.basename(os.path.dirname(p))}.json" for p in crossover_files("summary.json")],
        code=[f"{PKG}/results/summarize/crossover.py", f"{PKG}/results/readers.py"],
    output:
        csv=f"{RES}/tidy/crossover.csv",
        json=f"{RES}/tidy/crossover.json",
    log:
        f"logs/{SCALE}/summarize_crossover.log",
    benchmark:
        bench("summarize_crossover")
    params:
        runs=CROSSOVER_RUNS,
        run_root=f"{RUN}/models",
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../../scripts/crossover.py"


rule summarize_lr:
    input:
        ppl=[f"{RES}/ppl/{r}.json" for rs in _LR_RUNS.values() for r in rs],
        rc=[f"{RUN}/models/{r}/run_config.json" for rs in _LR_RUNS.values() for r in rs],
        summaries=[f"{RUN}/models/{r}/summary.json" for rs in _LR_RUNS.values() for r in rs],
        code=[f"{PKG}/results/summarize/lr.py"],
    output:
        csv=f"{RES}/tidy/lr.csv",
        json=f"{RES}/tidy/lr.json",
    log:
        f"logs/{SCALE}/summarize_lr.log",
    benchmark:
        bench("summarize_lr")
    params:
        runs=_LR_RUNS,
        run_root=lambda w, input: os.path.dirname(os.path.dirname(input.rc[0])),
        ppl_root=lambda w, input: os.path.dirname(input.ppl[0]),
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../../scripts/lr_sensitivity.py"


for _f, _runs in (("fig5", [x for rs in STUDIES.get("fig5", {}).values() for r in rs for x in replicas(config, r)]),
                  ("fig6", [x for r in STUDIES.get("fig6", {}).values() for x in replicas(config, r)])):

    rule:
        name: f"summarize_{_f}"
        input:
            ppl=[f"{RES}/ppl/{r}.json" for r in _runs],
            summaries=[f"{RUN}/models/{r}/summary.json" for r in _runs],
            metrics=[f"{RUN}/models/{r}/metrics.jsonl" for r in _runs if r in _V],
            rc=[f"{RUN}/models/{r}/run_config.json" for r in _runs if r in _V],
            code=TRAINING_CODE,
        output:
            csv=f"{RES}/tidy/{_f}.csv",
            json=f"{RES}/tidy/{_f}.json",
        log:
            f"logs/{SCALE}/summarize_{_f}.log",
        benchmark:
            bench(f"summarize_{_f}")
        params:
            cfg=training_cfg(_f),
            job={"study": _f, "roots": {"run_root": f"{RUN}/models", "ppl_root": f"{RES}/ppl"}},
        conda: CONDA_ENV
        script:
            "../../scripts/summarize_training.py"
