# The paper's studies: the equal-FLOPs model of Table 2, Figure 5 (parameter scaling) and Figure 6
# (loop scaling). Which runs each study compares is config["studies"]; every run is trained once by train.smk
# and shared by every study that names it.

STUDIES = config.get("studies", {})


# Every run of the config: the variants, then the equal-FLOPs snapshot of each variant with equal_flops_to.
# The crossover target's runs (yocou.workflow.wfconfig.crossover_runs) are not part of reproduce_all.
from yocou.workflow.wfconfig import pipeline_runs as _pipeline_runs

PIPELINE_RUNS = _pipeline_runs(config)
ALL_RUNS = PIPELINE_RUNS + [f"{v}_eqflops" for v in PIPELINE_RUNS if config["variants"][v].get("equal_flops_to")]


for _f in ("fig5", "fig6"):

    rule:
        name: _f
        input:
            tidy=f"{RES}/tidy/{_f}.json",
            runs=f"{RES}/tidy/runs.json",
            code=[f"{PKG}/results/render/scaling.py", f"{PKG}/results/render/{_f}.py", f"{PKG}/results/render/common.py", f"{PKG}/results/tidy.py",
                  f"{PKG}/results/names.py", f"{PKG}/results/summarize/training.py"]
                 + ([f"{PKG}/workflow/pipeline.py"] if _f == "fig5" else []),  # fig5: the config's embedding sizes
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
            drawn=caption_drawn(_f, config),  # the caption's words for the curves (yocou.results.render.labels)
        conda: CONDA_ENV
        script:
            "../scripts/{params.script}.py"  # formatted when the job runs (a loop variable here would be late-bound)


rule crossover:
    input:
        tidy=f"{RES}/tidy/crossover.csv",  # rule summarize_crossover (compute/studies.smk)
        code=[f"{PKG}/results/render/crossover.py", f"{PKG}/results/summarize/crossover.py"],
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
# shared rate (yocou.workflow.wfconfig.lr_runs; every rate's run and its seed replicas: seeds.lr_rates).
from yocou.workflow.wfconfig import lr_runs as _lr_runs

_LR_RUNS = {r: [y for f, x in sorted(by.items()) if f != 1.0 for y in replicas(config, x)] + replicas(config, r)
            for r, by in _lr_runs(config).items()}


rule lr_sensitivity:
    input:
        tidy=f"{RES}/tidy/lr.csv",  # rule summarize_lr (compute/studies.smk)
        code=[f"{PKG}/results/render/lr.py", f"{PKG}/results/summarize/lr.py"],
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
