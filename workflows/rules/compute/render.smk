# The compute rules of render.smk (defined only when computing: yocou.workflow.committed, common.smk).


# Summaries of the training-side studies (yocou.results.summarize.training, one generic script; TRAINING_CODE and
# training_cfg in common.smk): raw run results -> {RES}/tidy/<study>.{csv,json}; the figure and table rules
# read only those.
rule summarize_fig2:
    input:
        # the core runs and their seed replicas <run>_seed<k> (same role)
        metrics=[f"{RUN}/models/{r}/metrics.jsonl" for v in CORE for r in replicas(config, v)],
        summaries=[f"{RUN}/models/{r}/summary.json" for v in CORE for r in replicas(config, v)],
        code=[*TRAINING_CODE, f"{PKG}/workflow/studies.py"],
    output:
        csv=f"{RES}/tidy/fig2.csv",
        json=f"{RES}/tidy/fig2.json",
    log:
        f"logs/{SCALE}/summarize_fig2.log",
    benchmark:
        bench("summarize_fig2")
    params:
        cfg=training_cfg("core"),
        job={"study": "fig2", "roots": {"run_root": f"{RUN}/models"}},
    conda: CONDA_ENV
    script:
        "../../scripts/summarize_training.py"


rule summarize_heldout_ppl:
    # Every core run and its seed replicas (each gets its ppl JSON here), and the two baselines.
    input:
        ppl=[f"{RES}/ppl/{r}.json" for v in CORE for r in replicas(config, v)],
        summaries=[f"{RUN}/models/{r}/summary.json" for v in CORE for r in replicas(config, v)],
        baselines=f"{RES}/ppl/baselines.json",
        code=TRAINING_CODE,
    output:
        csv=f"{RES}/tidy/heldout_ppl.csv",
        json=f"{RES}/tidy/heldout_ppl.json",
    log:
        f"logs/{SCALE}/summarize_heldout_ppl.log",
    benchmark:
        bench("summarize_heldout_ppl")
    params:
        cfg={**training_cfg("core"), "replicas": {v: replicas(config, v) for v in CORE}},
        job={"study": "heldout_ppl", "roots": {"run_root": f"{RUN}/models", "ppl_root": f"{RES}/ppl",
                                               "baselines": f"{RES}/ppl/baselines.json"}},
    conda: CONDA_ENV
    script:
        "../../scripts/summarize_training.py"
