# Wall time as a measured budget: every job's benchmark file (logs/<scale>/bench/, the
# `benchmark:` of each rule, bench() in common.smk) -> results/<scale>/timing.{csv,md,json}: one row per job, totals
# per rule group, the summed job time, training's share of it and the elapsed span (yocou.results.timing).
#
# It reads every benchmark file present, so it tolerates jobs that have not run. Its inputs are the products
# reproduce_all lists (not its own outputs), so it runs after every job of that DAG, and again when any of them
# reruns. It does not list the benchmark files themselves: a job that ran before benchmarks were recorded has
# none, and asking for it would retrain that run only to time it. The audit leaves timing's outputs out of its
# inputs (audit.smk), so there is no cycle. For a subset of targets: `python -m yocou.results.timing --scale <scale>`.

TIMING_OUT = f"{RES}/timing"


rule timing:
    input:
        done=lambda w: [str(f) for f in (rules.reproduce_all.input if rules.has("reproduce_all") else [])
                        if not str(f).startswith(f"{TIMING_OUT}.") and not is_report_page(f)],
        code=[f"{PKG}/results/timing.py", f"{PKG}/utils/io.py"],
    output:
        csv=f"{TIMING_OUT}.csv",
        md=in_report(f"{TIMING_OUT}.md", "timing"),
        json=f"{TIMING_OUT}.json",
    log:
        f"logs/{SCALE}/timing.log",
    params:
        bench=BENCH,
        out=lambda w, output: os.path.splitext(output.csv)[0],  # the stem: timing.{csv,md,json}
        scale=SCALE,
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.timing --scale {params.scale} --bench {params.bench} --out {params.out} > {log} 2>&1"
