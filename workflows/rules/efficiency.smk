# Efficiency (SPEC.md section 7; paper Figure 7, Tables 1, 8-10): prefill and decode throughput, time to
# first token, KV bytes and peak memory against N, one profile per scale. Settings come from
# config["eval"]["profile"] via params, so editing them reruns these rules and never retrains.
# Weights are random (timing does not depend on them): the profile needs the run configs, not the models.


rule profile:
    input:
        rc=expand(f"{RUN}/models/{{variant}}/run_config.json", variant=CORE),
    output:
        f"{RES}/profile.json",
    log:
        f"logs/{SCALE}/profile.log",
    params:
        lens=" ".join(str(n) for n in config["eval"]["profile"]["seq_lens"]),
        opts=" ".join(f"--{k.replace('_', '-')} {v}" for k, v in config["eval"]["profile"].items()
                      if k not in ("fit", "seq_lens")),
        gpu=lambda w: gpu_prefix(1),  # a free local GPU slot when launch.gpu_slots > 0 (common.smk)
    threads: workflow.cores
    shell:
        "OMP_NUM_THREADS={threads} {params.gpu}python -m yocou.bench.profile --run-configs {input.rc} --seq-lens {params.lens} "
        "{params.opts} --threads {threads} --out {output} > {log} 2>&1"


rule fig7:
    input:
        profile=f"{RES}/profile.json",
        code=[f"{PKG}/render/fig7.py", f"{PKG}/render/common.py"],
    output:
        png=in_report(f"{FIG}/fig7.png", "fig7"),
        pdf=f"{FIG}/fig7.pdf",
        data=in_report(f"{RES}/fig7_data.csv", "fig7"),
    log:
        f"logs/{SCALE}/fig7.log",
    params:
        scale=SCALE,
    shell:
        "python -m yocou.render.fig7 --profile {input.profile} --out {output.png:q} --data {output.data:q} "
        "--scale-name {params.scale} > {log} 2>&1"


rule tables8_9:
    input:
        profile=f"{RES}/profile.json",
        code=[f"{PKG}/render/tables8_9.py", f"{PKG}/render/fig7.py", f"{PKG}/render/common.py",
              f"{PKG}/reported/table08.csv", f"{PKG}/reported/table09.csv", f"{PKG}/reported/table10.csv"],
    output:
        t8=in_report(f"{RES}/table8.md", "tables8_10"),
        t8_ours=in_report(f"{RES}/table8_ours.md", "tables8_10"),
        t9=in_report(f"{RES}/table9.md", "tables8_10"),
        t9_ours=in_report(f"{RES}/table9_ours.md", "tables8_10"),
        t10=in_report(f"{RES}/table10_ratios.md", "tables8_10"),
    log:
        f"logs/{SCALE}/tables8_9.log",
    params:
        outdir=lambda w, output: str(Path(output.t8).parent),
        scale=SCALE,
    shell:
        "python -m yocou.render.tables8_9 --profile {input.profile} --out {params.outdir:q} "
        "--scale-name {params.scale} > {log} 2>&1"


rule table1:
    input:
        profile=f"{RES}/profile.json",
        code=[f"{PKG}/render/table1.py", f"{PKG}/render/fig7.py", f"{PKG}/render/common.py",
              f"{PKG}/bench/profile.py", f"{PKG}/reported/table01.csv"],
    output:
        csv=in_report(f"{RES}/table1.csv", "table1"),
        md=in_report(f"{RES}/table1.md", "table1"),
    log:
        f"logs/{SCALE}/table1.log",
    params:
        fit=config["eval"]["profile"]["fit"],
        scale=SCALE,
    shell:
        "python -m yocou.render.table1 --profile {input.profile} --out {output.csv:q} "
        "--lo {params.fit[lo]} --hi {params.fit[hi]} --scale-name {params.scale} > {log} 2>&1"


rule efficiency:
    input:
        rules.fig7.output,
        rules.tables8_9.output,
        rules.table1.output,
