# The paper-shape efficiency study (docs/design.md section 7; yocou.evaluation.bench.paper_shape): Transformer, YOCO, RINS and
# YOCO-U at the paper's 1.3B shape (workflows/config/paper.yaml), timed on this machine beside its memory bandwidth
# and matmul peak. Not part of reproduce_all (about 52 minutes on a 2-core CPU): `snakemake --cores all
# efficiency_paper_shape`. The measurement is committed (results/paper_shape/raw.json) and scale-independent:
# the target renders from it, and measures only where it is absent or on request
# (`--forcerun paper_shape_measure`). Nothing else may run on the machine while it measures. PS_RES, PS_FIG,
# PS_CONFIGS and paper_shape_inputs are in common.smk.


rule paper_shape_summarize:
    input:
        raw=f"{PS_RES}/raw.json",
        code=[f"{PKG}/results/summarize/paper_shape.py", f"{PKG}/results/tidy.py", f"{PKG}/results/readers.py", f"{PKG}/results/names.py",
              f"{PKG}/results/reported/table08.csv", f"{PKG}/results/reported/table09.csv"],
    output:
        csv=f"{PS_RES}/tidy/efficiency_paper_shape.csv",
        json=f"{PS_RES}/tidy/efficiency_paper_shape.json",
    log:
        f"{PS_RES}/logs/summarize.log",
    conda: CONDA_ENV
    script:
        "../scripts/paper_shape_summarize.py"


rule paper_shape_render:
    input:
        tidy=f"{PS_RES}/tidy/efficiency_paper_shape.csv",
        benchmark=f"{PS_RES}/measure_benchmark.tsv",
        code=[f"{PKG}/results/render/paper_shape.py", f"{PKG}/results/render/common.py", f"{PKG}/results/names.py"],
    output:
        png=in_report(f"{PS_FIG}/fig7_paper_shape.png", "paper_shape"),
        pdf=f"{PS_FIG}/fig7_paper_shape.pdf",
        ratios=multiext(f"{PS_RES}/ratios", ".csv", ".md", ".json"),
        rows=multiext(f"{PS_RES}/rows", ".csv", ".md", ".json"),
    log:
        f"{PS_RES}/logs/render.log",
    params:
        dpi=config["render"]["dpi"],  # render-only: never recomputes
    conda: CONDA_ENV
    script:
        "../scripts/paper_shape_render.py"


rule paper_shape_serving:
    # decode at batch B and at a fixed memory budget, modelled from the formulas and the measured limits
    # (yocou.evaluation.analysis.serving): the paper's Table 9 ratios against the batch that reproduces them
    input:
        raw=f"{PS_RES}/raw.json",
        # the batched decode measured on this CPU, the figure's last panel, where it is committed
        batched=[f"{PS_RES}/batched/raw.json"] if os.path.exists(f"{PS_RES}/batched/raw.json") else [],
        code=[f"{PKG}/evaluation/analysis/serving.py", f"{PKG}/results/summarize/paper_shape.py",
              f"{PKG}/evaluation/bench/hardware.py", f"{PKG}/model/accounting.py",
              f"{PKG}/results/reported/table09.csv"],
    output:
        png=in_report(f"{PS_FIG}/fig7_serving.png", "serving"),
        pdf=f"{PS_FIG}/fig7_serving.pdf",
        rows=multiext(f"{PS_RES}/serving", ".csv", ".md", ".json"),
        ratios=multiext(f"{PS_RES}/serving_ratios", ".csv", ".json"),
        ratios_md=in_report(f"{PS_RES}/serving_ratios.md", "serving"),
        fit=multiext(f"{PS_RES}/serving_fit", ".csv", ".md", ".json"),
    log:
        f"{PS_RES}/logs/serving.log",
    params:
        out=lambda w, output: os.path.splitext(output.rows[0])[0],  # the tables' stem
        panel=lambda w, input: f"--panel-batched {shlex.quote(input.batched[0])}" if input.batched else "",
    conda: CONDA_ENV
    shell:
        "python -m yocou.evaluation.analysis.serving --raw {input.raw:q} {params.panel} --out {params.out:q} "
        "--figure {output.png:q} > {log} 2>&1"


rule paper_shape_batched:
    # the batched decode measured on this CPU beside the model (yocou.evaluation.analysis.serving --batched); its measurement
    # is rule paper_shape_batched_measure's (compute mode)
    input:
        batched=f"{PS_RES}/batched/raw.json",
        raw=f"{PS_RES}/raw.json",
        code=[f"{PKG}/evaluation/analysis/serving.py", f"{PKG}/results/summarize/paper_shape.py",
              f"{PKG}/evaluation/bench/hardware.py", f"{PKG}/model/accounting.py"],
    output:
        rows=multiext(f"{PS_RES}/serving_measured", ".csv", ".md", ".json"),
        ratios=multiext(f"{PS_RES}/serving_measured_ratios", ".csv", ".json"),
        ratios_md=in_report(f"{PS_RES}/serving_measured_ratios.md", "serving"),
    log:
        f"{PS_RES}/logs/serving_measured.log",
    params:
        out=lambda w, output: os.path.splitext(output.rows[0])[0].removesuffix("_measured"),
    conda: CONDA_ENV
    shell:
        "python -m yocou.evaluation.analysis.serving --raw {input.raw:q} --batched {input.batched:q} --measured-only "
        "--out {params.out:q} > {log} 2>&1"


rule paper_shape_batched_summarize:
    # the batched decode as a tidy study, for the audit's Table 9 rows at batch B
    input:
        raw=f"{PS_RES}/batched/raw.json",
        code=[f"{PKG}/results/summarize/paper_shape.py", f"{PKG}/results/tidy.py", f"{PKG}/results/readers.py"],
    output:
        csv=f"{PS_RES}/batched/tidy/efficiency_paper_shape_batched.csv",
        json=f"{PS_RES}/batched/tidy/efficiency_paper_shape_batched.json",
    log:
        f"{PS_RES}/logs/batched_summarize.log",
    conda: CONDA_ENV
    script:
        "../scripts/paper_shape_batched_summarize.py"


rule efficiency_paper_shape:
    input:
        rules.paper_shape_render.output,
        rules.paper_shape_serving.output,
        # the batched decode where it is measured (committed); planning never measures it
        rules.paper_shape_batched.output if os.path.exists(f"{PS_RES}/batched/raw.json") else [],
        rules.paper_shape_batched_summarize.output if os.path.exists(f"{PS_RES}/batched/raw.json") else [],
