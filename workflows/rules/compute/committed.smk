# results/<scale>/config.json: the resolved config that made results/<scale>/ (yocou.workflow.committed). Written after
# every other product of reproduce_all (its inputs), so it is rewritten whenever any of them is recomputed; a
# render target compares the config it runs with it (mode: auto or render) before reading committed results.

COMMITTED_CONFIG = f"{RES}/config.json"


rule committed_config:
    input:
        done=lambda w: [str(f) for f in (rules.reproduce_all.input if rules.has("reproduce_all") else [])
                        if str(f) != COMMITTED_CONFIG and not str(f).startswith(f"{TIMING_OUT}.")
                        and not is_report_page(f)],  # the report's pages come after (they show timing.md)
        code=f"{PKG}/workflow/committed.py",
    output:
        COMMITTED_CONFIG,
    log:
        f"logs/{SCALE}/committed_config.log",
    benchmark:
        bench("committed_config")
    params:
        config=config_json(*[k for k in config if k != "scale"]),
    conda: CONDA_ENV
    shell:
        "python -m yocou.workflow.committed --config-json {params.config} --out {output} > {log} 2>&1"


rule start_runs:
    # The stamp every compute job reads (STARTED, common.smk): the config computing started with, and provenance.
    output:
        STARTED,
    log:
        f"logs/{SCALE}/start_runs.log",
    benchmark:
        bench("start_runs")
    params:
        config=config_json(*[k for k in config if k != "scale"]),
    conda: CONDA_ENV
    shell:
        "python -m yocou.workflow.committed --config-json {params.config} --out {output} > {log} 2>&1"
