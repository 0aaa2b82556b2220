# The paper's studies (issue 6): the equal-FLOPs model of Table 2, Figure 5 (parameter scaling) and Figure 6
# (loop scaling). Which runs each study compares is config["studies"]; every run is trained once by train.smk
# and shared by every study that names it.

STUDIES = config.get("studies", {})


rule eqflops_model:
    # Table 2 "YOCO-U (Equal FLOPS)": the equal-steps run's snapshot at the step where its training FLOPs
    # reach the reference's full run (yocou.pipeline.resolve_run, equal_flops_to).
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
    params:
        run=lambda w, input: os.path.dirname(input.model),
        out=lambda w, output: os.path.dirname(output.model),
    conda: CONDA_ENV
    shell:
        "python -m yocou.studies eqflops --run {params.run} --out {params.out} > {log} 2>&1"


# Every run of the config: the variants, then the equal-FLOPs snapshot of each variant with equal_flops_to.
ALL_RUNS = list(config["variants"]) + [f"{v}_eqflops" for v, sp in config["variants"].items()
                                       if sp.get("equal_flops_to")]


rule summarize_runs:
    # {RES}/tidy/runs.{csv,json}: each run's parameters, tokens, FLOPs, steps and final training loss (the
    # budgets in the tables' and figures' notes).
    input:
        summaries=[f"{RUN}/models/{r}/summary.json" for r in ALL_RUNS],
        metrics=[f"{RUN}/models/{v}/metrics.jsonl" for v in config["variants"]],
        rc=[f"{RUN}/models/{v}/run_config.json" for v in config["variants"]],
        code=TRAINING_CODE,
    output:
        csv=f"{RES}/tidy/runs.csv",
        json=f"{RES}/tidy/runs.json",
    log:
        f"logs/{SCALE}/summarize_runs.log",
    params:
        cfg={"scale": SCALE, "runs": ALL_RUNS},
        job={"study": "runs", "roots": {"run_root": f"{RUN}/models"}},
    conda: CONDA_ENV
    script:
        "../scripts/summarize_training.py"


for _f, _runs in (("fig5", [x for rs in STUDIES.get("fig5", {}).values() for r in rs for x in _replicas_of(r)]),
                  ("fig6", [x for r in STUDIES.get("fig6", {}).values() for x in _replicas_of(r)])):

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
        params:
            cfg=training_cfg(_f),
            job={"study": _f, "roots": {"run_root": f"{RUN}/models", "ppl_root": f"{RES}/ppl"}},
        conda: CONDA_ENV
        script:
            "../scripts/summarize_training.py"

    rule:
        name: _f
        input:
            tidy=f"{RES}/tidy/{_f}.json",
            runs=f"{RES}/tidy/runs.json",
            code=[f"{PKG}/render/scaling.py", f"{PKG}/render/{_f}.py", f"{PKG}/render/common.py", f"{PKG}/tidy.py",
                  f"{PKG}/names.py", f"{PKG}/summarize/training.py"],
        output:
            png=in_report(f"{FIG}/{_f}.png", _f),
            pdf=f"{FIG}/{_f}.pdf",
            data=in_report(f"{RES}/{_f}_data.csv", _f),
        log:
            f"logs/{SCALE}/{_f}.log",
        params:
            script=_f,
            scale=SCALE,
        conda: CONDA_ENV
        script:
            "../scripts/{params.script}.py"  # formatted when the job runs (a loop variable here would be late-bound)
