# The compute rules of probe.smk (defined only when computing: yocou.workflow.committed, common.smk).


rule probe_train:
    output:
        f"{RUN}/probe/{{pmodel}}_seed{{pseed}}.json",
    wildcard_constraints:
        pmodel="|".join(PROBE_MODELS),
        pseed=r"\d+",
    log:
        f"logs/{SCALE}/probe/train_{{pmodel}}_seed{{pseed}}.log",
    benchmark:
        f"logs/{SCALE}/bench/probe_train/{{pmodel}}_seed{{pseed}}.tsv"
    params:
        args=lambda w: PROBE_MODELS[w.pmodel],
        scale=PROBE_SCALE,
    threads: 1
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS=1 python -m yocou.evaluation.probe train {params.args} "
        "--seed {wildcards.pseed} --scale {params.scale} --no-progress --out {output} > {log} 2>&1"


rule probe_summarize:
    input:
        results=[f"{RUN}/probe/{m}_seed{k}.json" for m in PROBE_MODELS for k in range(PROBE_SEEDS)],
        code=[f"{PKG}/evaluation/probe/summarize.py", f"{PKG}/results/render/common.py"],
    output:
        tidy=f"{RES}/probe/probe_tidy.csv",
        summary=f"{RES}/probe/probe_summary.csv",
        table=f"{RES}/probe/probe_table.md",
        png=f"{RES}/probe/probe.png",
        pdf=f"{RES}/probe/probe.pdf",
    log:
        f"logs/{SCALE}/probe/summarize.log",
    params:
        out=lambda w, output: os.path.dirname(output.tidy),
        title=f"The mechanism probe (ours, {SCALE} scale, CPU; {PROBE_SEEDS} seeds, 95% intervals)",
    conda: CONDA_ENV
    shell:
        "python -m yocou.evaluation.probe summarize --title {params.title:q} --out {params.out} {input.results} "
        "> {log} 2>&1"
