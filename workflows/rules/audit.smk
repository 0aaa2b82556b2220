# Audit of the paper's reported numbers: consistency checks of the printed tables (no training) and
# verdicts from our results at this scale: the declared comparisons of eval/comparisons.yaml, evaluated on the tidy
# tables results/<scale>/tidy/. Writes results/<scale>/audit/{report.md,report.html,...}; the baseline
# of the consistency checks is the committed results/audit/baseline.json (see `yocou audit`).
#
# The inputs are the render outputs the audit reads. They are gathered by an input function (a lambda), so rules that are
# included after this file (or do not exist in this checkout) are handled: every rule named in AUDIT_FROM that
# exists, plus whatever else reproduce_all lists under results/<scale>/ or figures/<scale>/ (not timing's outputs:
# the rule timing runs after the audit, timing.smk; nor results/<scale>/config.json, written after it, committed.smk).

AUDIT_FROM = ["fig2", "heldout_ppl", "table10", "table4", "fig4", "table2", "table3", "table5", "fig3", "fig7",
              "tables8_9", "table1", "profile", "fig2_summary", "fig5", "fig6", "fig8"]
AUDIT_OUT = f"{RES}/audit"
# the tidy tables the declared comparisons read (eval/comparisons.yaml), plus `runs`
from yocou.results.evaldefs import eval_dir as _eval_dir  # PyYAML only; eval/ beside the package (or $YOCOU_EVAL_DIR)
from yocou.utils.yamlio import load_yaml as _load_yaml  # a duplicated key is an error naming it

_EVAL_DIR = _eval_dir()
_COMPARISONS = _load_yaml(_EVAL_DIR / "comparisons.yaml")
AUDIT_STUDIES = sorted({_r["study"] for _r in _COMPARISONS if not _r.get("results")} | {"runs"})
# studies that do not depend on the scale (`results: <name>`: results/<name>/tidy, e.g. the paper-shape study)
AUDIT_ELSEWHERE = sorted({f"results/{_r['results']}/tidy/{_r['study']}.csv" for _r in _COMPARISONS
                          if _r.get("results")})
# the learning-rate study only where the scale configures one (its verdicts are "not run" elsewhere)
AUDIT_STUDIES = [s for s in AUDIT_STUDIES if s != "lr" or config.get("lr_sensitivity")]


rule audit:
    input:
        # every existing rule of AUDIT_FROM, then the rest of reproduce_all under RES/FIG (not the audit's own)
        results=lambda w: list(dict.fromkeys(
            [str(f) for name in AUDIT_FROM if rules.has(name) for f in getattr(rules, name).output]
            + [str(f) for f in (rules.reproduce_all.input if rules.has("reproduce_all") else [])
               if str(f).startswith((f"{RES}/", f"{FIG}/")) and not str(f).startswith(f"{AUDIT_OUT}/")
               and not str(f).startswith(f"{RES}/timing.") and not is_report_page(f)
               and str(f) != f"{RES}/config.json"])),  # timing comes after the audit (timing.smk)
        tidy=lambda w: [f"{RES}/tidy/{s}.csv" for s in AUDIT_STUDIES] + measured_elsewhere(AUDIT_ELSEWHERE),
        comparisons=[str(_EVAL_DIR / f) for f in ("comparisons.yaml", "checks.yaml", "columns.yaml", "regime.yaml")],
        baseline="results/audit/baseline.json",
        # the annealed token ladder's fits (yocou.results.audit.ladder): computed with it where the scale has a ladder
        # (reproduce_all runs the ladder), read where committed in render mode
        ladder=lambda w: [f"{LRES}/ladder.json"] if LADDER and (COMPUTE or os.path.exists(f"{LRES}/ladder.json")) else [],
        # the config the results were made with (its schedules: the regime of each verdict): while computing, the
        # one computing runs with (rule start_runs); in render mode, the committed results' own
        config=STARTED if COMPUTE else f"{RES}/config.json",
        code=[f"{PKG}/results/audit/{m}" for m in ("claims.yaml", "claims.py", "checks.py", "complexity.py",
                                           "verdicts.py", "decision.py", "family.py", "spread.py", "report.py",
                                           "args.py", "arith.py", "regime.py", "ladder.py")]
             + [f"{PKG}/results/tidy.py", f"{PKG}/results/names.py", f"{PKG}/results/evaldefs.py"]
             + [f"{PKG}/results/reported/table{n:02d}.csv" for n in range(1, 11)],
    output:
        md=in_report(f"{AUDIT_OUT}/report.md", "audit"),
        # the standalone page, figures inline (about 3 MB: over a browser's 2 MiB data: URL limit, so the report
        # shows the audit as report.md's HTML page, html/report.html, and the figures as their own items)
        html=f"{AUDIT_OUT}/report.html",
        checks=in_report(f"{AUDIT_OUT}/checks.csv", "audit"),
        verdicts=in_report(f"{AUDIT_OUT}/verdicts.csv", "audit"),
        claims=f"{AUDIT_OUT}/claims.csv",
        summary=f"{AUDIT_OUT}/summary.json",
        seed_spread=f"{AUDIT_OUT}/seed_spread.csv",
        seed_spread_md=in_report(f"{AUDIT_OUT}/seed_spread.md", "audit"),
        # the seeds each comparison would need; its cost column reads results/<scale>/timing.csv where one is
        # already there (the committed run's: timing is written after the audit)
        power=f"{AUDIT_OUT}/power.csv",
        power_md=in_report(f"{AUDIT_OUT}/power.md", "audit"),
    log:
        f"logs/{SCALE}/audit.log",
    benchmark:
        bench("audit")
    params:
        figs=lambda w, input: " ".join(f for f in input.results if f.endswith(".png")),
        out=lambda w, output: os.path.dirname(output.md),
        results=lambda w, output: os.path.dirname(os.path.dirname(output.md)),
        scale=SCALE,
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.audit --scale {params.scale} --results {params.results:q} --baseline {input.baseline:q} "
        "--figures {params.figs} --out {params.out:q} --report-only > {log} 2>&1"
