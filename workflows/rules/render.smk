# One rule per table or figure, named after the paper's numbering.


# Summaries of the training-side studies (yocou.summarize.training, one generic script; TRAINING_CODE and
# training_cfg in common.smk): raw run results -> {RES}/tidy/<study>.{csv,json}; the figure and table rules
# read only those.
rule summarize_fig2:
    input:
        unpack(from_runs("summarize_fig2",
            # the core runs and their seed replicas <run>_seed<k> (same role)
            metrics=[f"{RUN}/models/{r}/metrics.jsonl" for v in CORE for r in replicas(config, v)],
            summaries=[f"{RUN}/models/{r}/summary.json" for v in CORE for r in replicas(config, v)],
            code=[*TRAINING_CODE, f"{PKG}/studies.py"],
        )),
    output:
        csv=f"{RES}/tidy/fig2.csv",
        json=f"{RES}/tidy/fig2.json",
    log:
        f"logs/{SCALE}/summarize_fig2.log",
    benchmark:
        bench("summarize_fig2")
    params:
        script=compute_script("summarize_fig2", "summarize_training.py"),
        cfg=training_cfg("core"),
        job={"study": "fig2", "roots": {"run_root": f"{RUN}/models"}},
    conda: CONDA_ENV
    script:
        "../scripts/{params.script}"  # summarize_training.py, see compute_script (common.smk)


rule summarize_heldout_ppl:
    # Every core run and its seed replicas (each gets its ppl JSON here), and the two baselines.
    input:
        unpack(from_runs("summarize_heldout_ppl",
            ppl=[f"{RES}/ppl/{r}.json" for v in CORE for r in replicas(config, v)],
            summaries=[f"{RUN}/models/{r}/summary.json" for v in CORE for r in replicas(config, v)],
            baselines=f"{RES}/ppl/baselines.json",
            code=TRAINING_CODE,
        )),
    output:
        csv=f"{RES}/tidy/heldout_ppl.csv",
        json=f"{RES}/tidy/heldout_ppl.json",
    log:
        f"logs/{SCALE}/summarize_heldout_ppl.log",
    benchmark:
        bench("summarize_heldout_ppl")
    params:
        script=compute_script("summarize_heldout_ppl", "summarize_training.py"),
        cfg={**training_cfg("core"), "replicas": {v: replicas(config, v) for v in CORE}},
        job={"study": "heldout_ppl", "roots": {"run_root": f"{RUN}/models", "ppl_root": f"{RES}/ppl",
                                               "baselines": f"{RES}/ppl/baselines.json"}},
    conda: CONDA_ENV
    script:
        "../scripts/{params.script}"  # summarize_training.py, see compute_script (common.smk)


rule fig2:
    input:
        tidy=f"{RES}/tidy/fig2.json",
        code=[f"{PKG}/render/fig2.py", f"{PKG}/render/common.py", f"{PKG}/tidy.py", f"{PKG}/names.py"],
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
    output:
        png=in_report(f"{FIG}/fig2.png", "fig2"),
        pdf=f"{FIG}/fig2.pdf",
        data=in_report(f"{RES}/fig2_data.csv", "fig2"),
        summary=in_report(f"{RES}/fig2_summary.csv", "fig2"),
    log:
        f"logs/{SCALE}/fig2.log",
    benchmark:
        bench("fig2")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],  # render-only: never recomputes
        drawn=caption_drawn("fig2", config),  # the caption's words for the curves (yocou.render.labels)
    conda: CONDA_ENV
    script:
        "../scripts/fig2.py"


rule heldout_ppl:
    input:
        tidy=f"{RES}/tidy/heldout_ppl.json",
        runs=f"{RES}/tidy/runs.json",
        code=[f"{PKG}/render/heldout_ppl.py", f"{PKG}/render/common.py", f"{PKG}/tidy.py", f"{PKG}/names.py",
              *TRAINING_CODE, f"{PKG}/reported/table03.csv", f"{PKG}/reported/table05.csv"],
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
    output:
        csv=in_report(f"{RES}/heldout_ppl.csv", "heldout_ppl"),
        md=in_report(f"{RES}/heldout_ppl.md", "heldout_ppl"),
        json=f"{RES}/heldout_ppl.json",
    log:
        f"logs/{SCALE}/heldout_ppl.log",
    benchmark:
        bench("heldout_ppl")
    params:
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/heldout_ppl.py"


rule table10:
    input:
        table10=f"{RES}/tidy/table10.csv",  # rules summarize_table10 and summarize_kv (efficiency.smk)
        kv=f"{RES}/tidy/kv.csv",
        code=[f"{PKG}/render/table10.py", f"{PKG}/render/common.py", f"{PKG}/names.py", f"{PKG}/reported/table10.csv"],
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
    output:
        csv=in_report(f"{RES}/table10.csv", "tables8_10"),
        md=in_report(f"{RES}/table10.md", "tables8_10"),
        json=f"{RES}/table10.json",
        cells=f"{RES}/table10_cells.csv",
        cells_md=in_report(f"{RES}/table10_cells.md", "tables8_10"),
        cells_json=f"{RES}/table10_cells.json",
        measured=in_report(f"{RES}/table10_measured.md", "tables8_10"),
        measured_csv=f"{RES}/table10_measured.csv",
        measured_json=f"{RES}/table10_measured.json",
    log:
        f"logs/{SCALE}/table10.log",
    benchmark:
        bench("table10")
    params:
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/table10.py"
