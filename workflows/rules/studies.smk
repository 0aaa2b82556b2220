# The paper's studies: the equal-FLOPs model of Table 2, Figure 5 (parameter scaling) and Figure 6
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
    benchmark:
        bench("eqflops_model", "base")
    params:
        run=lambda w, input: os.path.dirname(input.model),
        out=lambda w, output: os.path.dirname(output.model),
    conda: CONDA_ENV
    shell:
        "python -m yocou.studies eqflops --run {params.run} --out {params.out} > {log} 2>&1"


# Every run of the config: the variants, then the equal-FLOPs snapshot of each variant with equal_flops_to.
# The crossover target's runs (yocou.wfconfig.crossover_runs) are not part of reproduce_all.
from yocou.wfconfig import pipeline_runs as _pipeline_runs

PIPELINE_RUNS = _pipeline_runs(config)
ALL_RUNS = PIPELINE_RUNS + [f"{v}_eqflops" for v in PIPELINE_RUNS if config["variants"][v].get("equal_flops_to")]


rule summarize_runs:
    # {RES}/tidy/runs.{csv,json}: each run's parameters, tokens, FLOPs, steps and final training loss (the
    # budgets in the tables' and figures' notes).
    input:
        unpack(from_runs("summarize_runs",
            summaries=[f"{RUN}/models/{r}/summary.json" for r in ALL_RUNS],
            metrics=[f"{RUN}/models/{v}/metrics.jsonl" for v in PIPELINE_RUNS],
            rc=[f"{RUN}/models/{v}/run_config.json" for v in PIPELINE_RUNS],
            code=TRAINING_CODE,
        )),
    output:
        csv=f"{RES}/tidy/runs.csv",
        json=f"{RES}/tidy/runs.json",
    log:
        f"logs/{SCALE}/summarize_runs.log",
    benchmark:
        bench("summarize_runs")
    params:
        script=compute_script("summarize_runs", "summarize_training.py"),
        cfg={"scale": SCALE, "runs": ALL_RUNS},
        job={"study": "runs", "roots": {"run_root": f"{RUN}/models"}},
    conda: CONDA_ENV
    script:
        "../scripts/{params.script}"  # summarize_training.py, see compute_script (common.smk)


for _f, _runs in (("fig5", [x for rs in STUDIES.get("fig5", {}).values() for r in rs for x in replicas(config, r)]),
                  ("fig6", [x for r in STUDIES.get("fig6", {}).values() for x in replicas(config, r)])):

    rule:
        name: f"summarize_{_f}"
        input:
            unpack(from_runs(f"summarize_{_f}",
                ppl=[f"{RES}/ppl/{r}.json" for r in _runs],
                summaries=[f"{RUN}/models/{r}/summary.json" for r in _runs],
                metrics=[f"{RUN}/models/{r}/metrics.jsonl" for r in _runs if r in _V],
                rc=[f"{RUN}/models/{r}/run_config.json" for r in _runs if r in _V],
                code=TRAINING_CODE,
            )),
        output:
            csv=f"{RES}/tidy/{_f}.csv",
            json=f"{RES}/tidy/{_f}.json",
        log:
            f"logs/{SCALE}/summarize_{_f}.log",
        benchmark:
            bench(f"summarize_{_f}")
        params:
            script=compute_script(f"summarize_{_f}", "summarize_training.py"),
            cfg=training_cfg(_f),
            job={"study": _f, "roots": {"run_root": f"{RUN}/models", "ppl_root": f"{RES}/ppl"}},
        conda: CONDA_ENV
        script:
            "../scripts/{params.script}"  # summarize_training.py, see compute_script (common.smk)

    rule:
        name: _f
        input:
            tidy=f"{RES}/tidy/{_f}.json",
            runs=f"{RES}/tidy/runs.json",
            code=[f"{PKG}/render/scaling.py", f"{PKG}/render/{_f}.py", f"{PKG}/render/common.py", f"{PKG}/tidy.py",
                  f"{PKG}/names.py", f"{PKG}/summarize/training.py"],
            started=started_input,  # runs/<scale>/started.json when computing (common.smk)
        output:
            png=in_report(f"{FIG}/{_f}.png", _f),
            pdf=f"{FIG}/{_f}.pdf",
            data=in_report(f"{RES}/{_f}_data.csv", _f),
        log:
            f"logs/{SCALE}/{_f}.log",
        benchmark:
            bench(_f)
        params:
            script=_f,
            scale=SCALE,
            dpi=config["render"]["dpi"],  # render-only: never recomputes
            drawn=caption_drawn(_f, config),  # the caption's words for the curves (yocou.render.labels)
        conda: CONDA_ENV
        script:
            "../scripts/{params.script}.py"  # formatted when the job runs (a loop variable here would be late-bound)


# The crossover study: `snakemake crossover`, outside reproduce_all. YOCO and YOCO-U for
# crossover.factor x the steps with crossover.seeds seeds (yocou.wfconfig.expand_runs), held-out loss at every
# train.eval_every steps; the gap YOCO-U - YOCO with its 95% interval across seeds at each checkpoint.
rule summarize_crossover:
    input:
        unpack(from_runs("summarize_crossover",
            metrics=lambda w: crossover_files("metrics.jsonl"),
            summaries=lambda w: crossover_files("summary.json"),
            # the final models on the whole held-out set of each split (rule ppl)
            ppl=lambda w: [f"{RES}/ppl/{os.path.basename(os.path.dirname(p))}.json" for p in crossover_files("summary.json")],
            code=[f"{PKG}/summarize/crossover.py", f"{PKG}/readers.py"],
        )),
    output:
        csv=f"{RES}/tidy/crossover.csv",
        json=f"{RES}/tidy/crossover.json",
    log:
        f"logs/{SCALE}/summarize_crossover.log",
    benchmark:
        bench("summarize_crossover")
    params:
        script=compute_script("summarize_crossover", "crossover.py"),
        runs=CROSSOVER_RUNS,
        run_root=f"{RUN}/models",
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/{params.script}"  # crossover.py, see compute_script (common.smk)


rule crossover:
    input:
        tidy=rules.summarize_crossover.output.csv,
        code=[f"{PKG}/render/crossover.py", f"{PKG}/summarize/crossover.py"],
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
    output:
        png=in_report(f"{FIG}/crossover.png", "crossover"),
        pdf=f"{FIG}/crossover.pdf",
        data=f"{RES}/crossover.csv",
        md=f"{RES}/crossover.md",
        json=f"{RES}/crossover.json",
    log:
        f"logs/{SCALE}/crossover.log",
    benchmark:
        bench("crossover")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],  # render-only: never recomputes
        budget_tokens=config["train"]["steps"] * config["train"]["batch_size"] * config["train"]["seq_len"],
    conda: CONDA_ENV
    script:
        "../scripts/crossover.py"


# Learning-rate sensitivity: the core runs at train.lr x each factor of lr_sensitivity, beside the
# shared rate (yocou.wfconfig.lr_runs; every rate's run and its seed replicas: seeds.lr_rates).
from yocou.wfconfig import lr_runs as _lr_runs

_LR_RUNS = {r: [y for f, x in sorted(by.items()) if f != 1.0 for y in replicas(config, x)] + replicas(config, r)
            for r, by in _lr_runs(config).items()}


rule summarize_lr:
    input:
        unpack(from_runs("summarize_lr",
            ppl=[f"{RES}/ppl/{r}.json" for rs in _LR_RUNS.values() for r in rs],
            rc=[f"{RUN}/models/{r}/run_config.json" for rs in _LR_RUNS.values() for r in rs],
            summaries=[f"{RUN}/models/{r}/summary.json" for rs in _LR_RUNS.values() for r in rs],
            code=[f"{PKG}/summarize/lr.py"],
        )),
    output:
        csv=f"{RES}/tidy/lr.csv",
        json=f"{RES}/tidy/lr.json",
    log:
        f"logs/{SCALE}/summarize_lr.log",
    benchmark:
        bench("summarize_lr")
    params:
        script=compute_script("summarize_lr", "lr_sensitivity.py"),
        runs=_LR_RUNS,
        run_root=f"{RUN}/models",
        ppl_root=f"{RES}/ppl",
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/{params.script}"  # lr_sensitivity.py, see compute_script (common.smk)


rule lr_sensitivity:
    input:
        tidy=rules.summarize_lr.output.csv,
        code=[f"{PKG}/render/lr.py", f"{PKG}/summarize/lr.py"],
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
    output:
        csv=f"{RES}/lr_sensitivity.csv",
        md=in_report(f"{RES}/lr_sensitivity.md", "lr_sensitivity"),
        json=f"{RES}/lr_sensitivity.json",
    log:
        f"logs/{SCALE}/lr_sensitivity.log",
    benchmark:
        bench("lr_sensitivity")
    params:
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/lr_sensitivity.py"
