# The annealed token ladder and its learning-rate bracket (yocou.training.ladder; settings per scale in
# workflows/studies/ladder.yaml; decision rules in eval/ladder.yaml). Targets: `bracket` (each variant's learning
# rate, bracketed) and `ladder` (annealed held-out losses per variant, seed and budget; the fits, gaps and Figure 2
# redrawn from them). Runs live under runs/<scale>/ladder/<run>/, apart from the pipeline's short-budget runs.


rule bracket_summary:
    # Each variant's held-out loss at every rate; its best rate and whether a rate on each side is worse.
    input:
        ppl=lambda w: [f"{LRES}/ppl/{n}.json" for n in ladder_names("bracket")],
        baseline=lambda w: [f"{LRES}/baselines/d{LADDER.bracket.steps}.json"],
        code=[f"{PKG}/results/summarize/ladder.py", f"{PKG}/training/ladder.py"],
    output:
        json=f"{LRES}/bracket.json",
        csv=f"{LRES}/bracket.csv",
        md=in_report(f"{LRES}/bracket.md", "bracket"),
    log:
        f"logs/{SCALE}/ladder/bracket_summary.log",
    benchmark:
        bench("bracket_summary")
    params:
        scale=SCALE,
        ppl_root=lambda w, input: os.path.dirname(input.ppl[0]),
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.summarize.ladder bracket --scale {params.scale} --ppl-root {params.ppl_root} "
        "--baseline {input.baseline} --out {output.json} > {log} 2>&1"


rule ladder_fits:
    # The fits L(D) = E + B D^-beta with t bands over per-seed fits, the equal-tokens and equal-FLOPs gaps, the
    # token saving and the crossovers, decided by eval/ladder.yaml (a variant whose bracketed rate is not interior caps
    # the verdicts that read it: bracket.json); Figure 2 redrawn from them.
    input:
        points=f"{LRES}/points.csv",
        rules=str(_eval_dir() / "ladder.yaml"),  # eval/ beside the package (downstream.smk)
        bracket=rules.bracket_summary.output.json,
        code=[f"{PKG}/results/summarize/ladder.py", f"{PKG}/results/summarize/ladder_fits.py",
              f"{PKG}/results/render/ladder.py", f"{PKG}/results/render/common.py"],
    output:
        md=in_report(f"{LRES}/ladder.md", "ladder"),
        json=f"{LRES}/ladder.json",
        csv=f"{LRES}/ladder.csv",
        png=in_report(f"{FIG}/fig2_ladder.png", "ladder"),
        pdf=f"{FIG}/fig2_ladder.pdf",
    log:
        f"logs/{SCALE}/ladder/fits.log",
    benchmark:
        bench("ladder_fits")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.summarize.ladder fits --scale {params.scale} --points {input.points} --rules {input.rules} "
        "--bracket {input.bracket} --out {output.json} --figure {output.png} --dpi {params.dpi} > {log} 2>&1"


rule depth_summary:
    # The depth control beside YOCO and YOCO-U: D_deep, D_loop, the sharing penalty and deep-vs-YOCO at equal FLOPs
    # per split and budget, decided by eval/ladder.yaml (depth_control); its figure.
    input:
        points=f"{LRES}/points.csv",
        depth=f"{LRES}/depth_points.csv",
        ppl=lambda w: [f"{LRES}/ppl/{n}.json" for n in ladder_names("depth_bracket")],
        rules=str(_eval_dir() / "ladder.yaml"),
        code=[f"{PKG}/results/summarize/depth.py", f"{PKG}/results/summarize/ladder.py",
              f"{PKG}/results/summarize/ladder_fits.py", f"{PKG}/results/render/ladder.py"],
    output:
        md=f"{LRES}/depth.md",
        json=f"{LRES}/depth.json",
        csv=f"{LRES}/depth.csv",
        png=f"{FIG}/ladder_depth.png",
        pdf=f"{FIG}/ladder_depth.pdf",
    log:
        f"logs/{SCALE}/ladder/depth.log",
    benchmark:
        bench("depth_summary")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],
        ppl_root=f"{LRES}/ppl",
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.summarize.ladder depth --scale {params.scale} --points {input.points} "
        "--depth-points {input.depth} --ppl-root {params.ppl_root} --rules {input.rules} --out {output.csv} "
        "--figure {output.png} --dpi {params.dpi} > {log} 2>&1"


rule context_summary:
    # Context use beyond the window of the depth control's top-rung models (every seed): the table and the
    # loss-against-position figure (yocou.evaluation.analysis.context_use).
    input:
        # the depth control's top rung, every seed
        runs=lambda w: [f"{LRES}/context/{n}.json" for n, p in LADDER_RUNS.items()
                        if p.kind == "depth" and p.steps == max(LADDER.depth_control.budgets)],
        code=[f"{PKG}/evaluation/analysis/context_use.py"],
    output:
        md=f"{LRES}/context.md",
        json=f"{LRES}/context.json",
        csv=f"{LRES}/context.csv",
        png=f"{FIG}/ladder_context.png",
        pdf=f"{FIG}/ladder_context.pdf",
    log:
        f"logs/{SCALE}/ladder/context.log",
    benchmark:
        bench("context_summary")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],
    conda: CONDA_ENV
    shell:
        "python -m yocou.evaluation.analysis.context_use summarize --inputs {input.runs} --scale {params.scale} "
        "--out {output.csv} --figure {output.png} --dpi {params.dpi} > {log} 2>&1"


# The ladder's positive control for depth (depth_control of workflows/studies/ladder.yaml): its own target, not in
# reproduce_all; compute it with --config mode=compute.
_DEPTH_MISSING = LADDER and LADDER.depth_control and uncommitted([f"{LRES}/depth_points.csv"], "depth_control")
if not _DEPTH_MISSING:

    rule depth_control:
        input:
            # the readouts, context use, and the seed-0 top-rung weights (committed, yocou.training.weights)
            [f"{LRES}/depth.md", f"{LRES}/context.md",
             f"{LRES}/weights/{LADDER.depth_control.variant}_seed0_d{max(LADDER.depth_control.budgets)}.safetensors"]
            if LADDER and LADDER.depth_control else [],

else:

    rule depth_control:
        localrule: True
        log:
            f"logs/{SCALE}/depth_control.log",
        conda: CONDA_ENV
        params:
            text=_DEPTH_MISSING,
        shell:
            "echo {params.text:q} | tee {log} >&2; exit 1"


rule bracket:
    input:
        rules.bracket_summary.output if LADDER else [],


rule ladder_checks:
    # The checks beside the ladder (checks: of workflows/studies/ladder.yaml): compute them with --config mode=compute.
    input:
        f"{LRES}/checks.md" if LADDER and LADDER.checks else [],


if not (LADDER and uncommitted([f"{LRES}/points.csv"], "ladder")):

    rule ladder:
        input:
            rules.ladder_fits.output if LADDER else [],

else:

    rule ladder:
        localrule: True
        log:
            f"logs/{SCALE}/ladder.log",
        conda: CONDA_ENV
        params:
            text=uncommitted([f"{LRES}/points.csv"], "ladder"),
        shell:
            "echo {params.text:q} | tee {log} >&2; exit 1"
