# One rule per table or figure, named after the paper's numbering.


rule fig2:
    input:
        tidy=f"{RES}/tidy/fig2.json",
        code=[f"{PKG}/results/render/fig2.py", f"{PKG}/results/render/common.py", f"{PKG}/results/tidy.py", f"{PKG}/results/names.py"],
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
        drawn=caption_drawn("fig2", config),  # the caption's words for the curves (yocou.results.render.labels)
    conda: CONDA_ENV
    script:
        "../scripts/fig2.py"


rule heldout_ppl:
    input:
        tidy=f"{RES}/tidy/heldout_ppl.json",
        runs=f"{RES}/tidy/runs.json",
        code=[f"{PKG}/results/render/heldout_ppl.py", f"{PKG}/results/render/common.py", f"{PKG}/results/tidy.py", f"{PKG}/results/names.py",
              *TRAINING_CODE, f"{PKG}/results/reported/table03.csv", f"{PKG}/results/reported/table05.csv"],
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
        code=[f"{PKG}/results/render/table10.py", f"{PKG}/results/render/common.py", f"{PKG}/results/names.py", f"{PKG}/results/reported/table10.csv"],
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
