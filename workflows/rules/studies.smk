# The paper's studies (issue 6): the equal-FLOPs model of Table 2, Figure 5 (parameter scaling) and Figure 6
# (loop scaling). Which runs each study compares is config["studies"]; every run is trained once by train.smk
# and shared by every study that names it.

STUDIES = config.get("studies", {})


rule eqflops_model:
    # Table 2 "YOCO-U (Equal FLOPS)": the equal-steps run's snapshot at the step where its training FLOPs
    # reach the reference's full run (yocou.pipeline.resolve_run, equal_flops_to).
    input:
        model=f"{RUN}/models/{{base}}/model.pt",
        rc=f"{RUN}/models/{{base}}/run_config.json",
    output:
        model=f"{RUN}/models/{{base}}_eqflops/model.pt",
        summary=f"{RUN}/models/{{base}}_eqflops/summary.json",
    wildcard_constraints:
        base=_RUN_NAMES,
    log:
        f"logs/{SCALE}/eqflops_{{base}}.log",
    params:
        run=lambda w, input: os.path.dirname(input.model),
        out=lambda w, output: os.path.dirname(output.model),
    shell:
        "python -m yocou.studies eqflops --run {params.run} --out {params.out} > {log} 2>&1"


def _scaling_inputs(runs):
    return {"ppl": [f"{RES}/ppl/{r}.json" for r in runs],
            "summaries": [f"{RUN}/models/{r}/summary.json" for r in runs],
            "metrics": [f"{RUN}/models/{r}/metrics.jsonl" for r in runs]}


for _f, _runs in (("fig5", [r for rs in STUDIES.get("fig5", {}).values() for r in rs]),
                  ("fig6", list(STUDIES.get("fig6", {}).values()))):

    rule:
        name: _f
        input:
            **_scaling_inputs(_runs),
            code=[f"{PKG}/render/scaling.py", f"{PKG}/render/common.py"],
        output:
            png=in_report(f"{FIG}/{_f}.png", _f),
            pdf=f"{FIG}/{_f}.pdf",
            data=in_report(f"{RES}/{_f}_data.csv", _f),
        log:
            f"logs/{SCALE}/{_f}.log",
        params:
            what=_f,
            runs=shlex.quote(json.dumps(STUDIES.get(_f, {}))),
        shell:
            "python -m yocou.render.scaling {params.what} --runs {params.runs} --run-root {RUN}/models "
            "--ppl-root {RES}/ppl --out {FIG}/{params.what} --data {RES}/{params.what}_data "
            "--scale-name {SCALE} > {log} 2>&1"
