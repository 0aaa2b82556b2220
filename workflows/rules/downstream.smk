# Downstream evaluation through lm-eval on real benchmark items (Tables 2, 3, 5 and Figure 3).
# Depends only on model.pt, the tokenizer, the task pack and eval.downstream (params): changing evaluation
# settings never retrains.

DS = config["eval"]["downstream"]
import shlex

from yocou.results.evaldefs import columns as _eval_columns, eval_dir as _eval_dir  # PyYAML only

_EVAL_COLUMNS = str(_eval_dir() / "columns.yaml")  # the column maps (beside the package, like PKG)

_DS_JSON = shlex.quote(json.dumps(DS, sort_keys=True))  # quoted for the shell


# equal-FLOPs snapshot run -> [the run it is a snapshot of, the run whose training FLOPs it matches]
_SNAPSHOTS = {f"{v}_eqflops": [v, s["equal_flops_to"]] for v, s in config["variants"].items()
              if s.get("equal_flops_to")}
_SUMMARIZE_CODE = [f"{PKG}/results/summarize/downstream.py", f"{PKG}/results/tidy.py", f"{PKG}/results/evaldefs.py", _EVAL_COLUMNS]
_RENDER_CODE = [f"{PKG}/results/render/downstream.py", f"{PKG}/results/render/common.py", f"{PKG}/results/tidy.py", _EVAL_COLUMNS]


for _t in ("table2", "table3", "table5"):

    rule:
        name: _t
        input:
            tidy=f"{RES}/tidy/{_t}.csv",
            runs=_runs_tidy,
            code=[*_RENDER_CODE, f"{PKG}/results/reported/table0{_t[-1]}.csv"],
        output:
            csv=in_report(f"{RES}/{_t}.csv", _t),
            md=in_report(f"{RES}/{_t}.md", _t),
            json=f"{RES}/{_t}.json",
            cells=f"{RES}/{_t}_cells.csv",
        log:
            f"logs/{SCALE}/{_t}.log",
        benchmark:
            bench(_t)
        params:
            script=_t,
            scale=SCALE,
            variants=" ".join(study_runs(_t)),  # the report's captions name them
            snapshots={r: _SNAPSHOTS[r] for r in study_runs(_t) if r in _SNAPSHOTS},
            cfg=_summarize_cfg(_t),
        conda: CONDA_ENV
        script:
            "../scripts/{params.script}.py"  # formatted when the job runs (a loop variable here would be late-bound)


rule fig3:
    input:
        tidy=f"{RES}/tidy/fig3.csv",
        code=_RENDER_CODE,
    output:
        png=in_report(f"{FIG}/fig3.png", "fig3"),
        pdf=f"{FIG}/fig3.pdf",
        data=in_report(f"{RES}/fig3_data.csv", "fig3"),
    log:
        f"logs/{SCALE}/fig3.log",
    benchmark:
        bench("fig3")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],  # render-only: never recomputes
        variants=" ".join(CORE),
        benchmarks=", ".join(c["label"] for c in _eval_columns("fig3")),  # the report's caption lists them
        cfg=_summarize_cfg("fig3"),
    conda: CONDA_ENV
    script:
        "../scripts/fig3.py"
