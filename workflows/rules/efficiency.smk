# Efficiency (docs/design.md section 7; paper Figure 7, Tables 1, 8-10): prefill and decode throughput, time to
# first token, KV bytes and peak memory against N, one profile per scale. Settings come from
# config["eval"]["profile"] via params, so editing them reruns these rules and never retrains.
# Weights are random (timing does not depend on them): the profile needs the run configs, not the models.


# Summarize steps (yocou.results.summarize.efficiency): raw results -> tidy tables {RES}/tidy/<study>.{csv,json}, which the
# renderers below and the audit read. All fits and ratios happen here.
TIDY_CODE = [f"{PKG}/results/summarize/efficiency.py", f"{PKG}/results/tidy.py", f"{PKG}/results/names.py"]


rule summarize_efficiency:
    input:
        profile=f"{RES}/profile.json",
        code=TIDY_CODE + [f"{PKG}/results/readers.py"],
    output:
        csv=f"{RES}/tidy/efficiency.csv",
        json=f"{RES}/tidy/efficiency.json",
    log:
        f"logs/{SCALE}/summarize_efficiency.log",
    benchmark:
        bench("summarize_efficiency")
    params:
        core=CORE,
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/summarize_efficiency.py"


rule summarize_efficiency_derived:
    input:
        efficiency=f"{RES}/tidy/efficiency.csv",
        code=TIDY_CODE + [f"{PKG}/evaluation/bench/profile.py", f"{PKG}/results/reported/table08.csv", f"{PKG}/results/reported/table09.csv",
                          f"{PKG}/results/reported/table10.csv"],
    output:
        csv=f"{RES}/tidy/efficiency_derived.csv",
        json=f"{RES}/tidy/efficiency_derived.json",
    log:
        f"logs/{SCALE}/summarize_efficiency_derived.log",
    benchmark:
        bench("summarize_efficiency_derived")
    params:
        fit=config["eval"]["profile"]["fit"],
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/summarize_efficiency_derived.py"


rule summarize_table10:
    input:
        code=TIDY_CODE + [f"{PKG}/model/accounting.py", f"{PKG}/model/config.py"],
    output:
        csv=f"{RES}/tidy/table10.csv",
        json=f"{RES}/tidy/table10.json",
    log:
        f"logs/{SCALE}/summarize_table10.log",
    benchmark:
        bench("summarize_table10")
    params:
        presets={v: config["variants"][v]["preset"] for v in CORE},
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/summarize_table10.py"


rule fig7:
    input:
        efficiency=f"{RES}/tidy/efficiency.csv",
        code=[f"{PKG}/results/render/fig7.py", f"{PKG}/results/render/common.py", f"{PKG}/results/names.py",
              f"{PKG}/results/reported/table08.csv", f"{PKG}/results/reported/table09.csv", f"{PKG}/results/reported/table10.csv"],
    output:
        png=in_report(f"{FIG}/fig7.png", "fig7"),
        pdf=f"{FIG}/fig7.pdf",
        data=in_report(f"{RES}/fig7_data.csv", "fig7"),
    log:
        f"logs/{SCALE}/fig7.log",
    benchmark:
        bench("fig7")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],  # render-only: never recomputes
    conda: CONDA_ENV
    script:
        "../scripts/fig7.py"


rule tables8_9:
    input:
        efficiency=f"{RES}/tidy/efficiency.csv",
        derived=f"{RES}/tidy/efficiency_derived.csv",
        gpu=GPU_SERVING,  # the prepared GPU check's rows, where a GPU ran it
        code=[f"{PKG}/results/render/tables8_9.py", f"{PKG}/results/render/fig7.py", f"{PKG}/results/render/common.py", f"{PKG}/results/names.py",
              f"{PKG}/results/summarize/gpu.py"],
    output:
        t8=in_report(f"{RES}/table8.md", "tables8_10"),
        t8_ours=in_report(f"{RES}/table8_ours.md", "tables8_10"),
        t9=in_report(f"{RES}/table9.md", "tables8_10"),
        t9_ours=in_report(f"{RES}/table9_ours.md", "tables8_10"),
        t10=in_report(f"{RES}/table10_ratios.md", "tables8_10"),
        # the same tables as CSV and JSON (write_table writes all three)
        twins=expand(f"{RES}/{{t}}.{{ext}}", t=["table8", "table8_ours", "table9", "table9_ours", "table10_ratios"],
                     ext=["csv", "json"]),
    log:
        f"logs/{SCALE}/tables8_9.log",
    benchmark:
        bench("tables8_9")
    params:
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/tables8_9.py"


rule gpu_summarize:
    # The prepared GPU check's serving.json -> results/gpu/tidy/efficiency_gpu (the audit's GPU rows); planned only
    # where a GPU ran the check (common.smk: measured_elsewhere).
    input:
        serving=GPU_SERVING,
        code=[f"{PKG}/results/summarize/gpu.py", f"{PKG}/results/tidy.py"],
    output:
        csv="results/gpu/tidy/efficiency_gpu.csv",
        json="results/gpu/tidy/efficiency_gpu.json",
    log:
        "results/gpu/logs/summarize.log",
    conda: CONDA_ENV
    script:
        "../scripts/gpu_summarize.py"


rule table1:
    input:
        derived=f"{RES}/tidy/efficiency_derived.csv",
        efficiency=f"{RES}/tidy/efficiency.csv",
        code=[f"{PKG}/results/render/table1.py", f"{PKG}/results/render/fig7.py", f"{PKG}/results/render/common.py", f"{PKG}/results/names.py",
              f"{PKG}/results/reported/table01.csv"],
    output:
        csv=in_report(f"{RES}/table1.csv", "table1"),
        md=in_report(f"{RES}/table1.md", "table1"),
        json=f"{RES}/table1.json",
    log:
        f"logs/{SCALE}/table1.log",
    benchmark:
        bench("table1")
    params:
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/table1.py"


rule efficiency:
    input:
        rules.summarize_efficiency.output,
        rules.summarize_efficiency_derived.output,
        f"{RES}/tidy/kv.csv",  # rule summarize_kv (compute/efficiency.smk)
        rules.summarize_table10.output,
        rules.table10.output,
        rules.fig7.output,
        rules.tables8_9.output,
        rules.table1.output,
