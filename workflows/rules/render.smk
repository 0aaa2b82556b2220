# One rule per table or figure, named after the paper's numbering.


rule fig2:
    input:
        metrics=expand(f"{RUN}/models/{{variant}}/metrics.jsonl", variant=CORE),
        code=[f"{PKG}/render/fig2.py", f"{PKG}/render/common.py"],
    output:
        png=in_report(f"{FIG}/fig2.png", "fig2"),
        pdf=f"{FIG}/fig2.pdf",
        data=in_report(f"{RES}/fig2_data.csv", "fig2"),
        summary=in_report(f"{RES}/fig2_summary.csv", "fig2"),
    log:
        f"logs/{SCALE}/fig2.log",
    params:
        runs=" ".join(f"{RUN}/models/{v}" for v in CORE),
        scale=SCALE,
        summary=f"{RES}/fig2_summary",
    shell:
        "python -m yocou.render.fig2 --runs {params.runs} --out {output.png:q} --data {output.data:q} "
        "--summary {params.summary} --ref yoco --new yocou --scale-name {params.scale} > {log} 2>&1"


rule heldout_ppl:
    input:
        ppl=expand(f"{RES}/ppl/{{variant}}.json", variant=CORE),
        summaries=expand(f"{RUN}/models/{{variant}}/summary.json", variant=CORE),
        code=[f"{PKG}/render/heldout_ppl.py", f"{PKG}/render/common.py"],
    output:
        csv=in_report(f"{RES}/heldout_ppl.csv", "heldout_ppl"),
        md=in_report(f"{RES}/heldout_ppl.md", "heldout_ppl"),
    log:
        f"logs/{SCALE}/heldout_ppl.log",
    params:
        scale=SCALE,
    shell:
        "python -m yocou.render.heldout_ppl --ppl {input.ppl} --summaries {input.summaries} "
        "--out {output.csv} --scale-name {params.scale} > {log} 2>&1"


rule table10:
    input:
        table10=f"{RES}/tidy/table10.csv",  # rules summarize_table10 and summarize_kv (efficiency.smk)
        kv=f"{RES}/tidy/kv.csv",
        code=[f"{PKG}/render/table10.py", f"{PKG}/render/common.py", f"{PKG}/names.py", f"{PKG}/reported/table10.csv"],
    output:
        csv=in_report(f"{RES}/table10.csv", "tables8_10"),
        md=in_report(f"{RES}/table10.md", "tables8_10"),
        cells=f"{RES}/table10_cells.csv",
        measured=in_report(f"{RES}/table10_measured.md", "tables8_10"),
    log:
        f"logs/{SCALE}/table10.log",
    params:
        scale=SCALE,
    script:
        "../scripts/table10.py"
