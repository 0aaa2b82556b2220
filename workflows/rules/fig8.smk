# Figure 8: angular distance between consecutive layer applications on held-out text (docs/design.md section 7).
# Settings from config["eval"]["angular"] via params (editing them reruns these rules, never training);
# the variants from config["studies"]["fig8"] when the config has it, else the core variants.

FIG8_VARIANTS = config.get("studies", {}).get("fig8", CORE)


rule fig8:
    input:
        tidy=f"{RES}/tidy/fig8.json",
        code=[f"{PKG}/results/render/fig8.py", f"{PKG}/results/render/common.py", f"{PKG}/results/tidy.py", f"{PKG}/results/names.py"],
    output:
        png=in_report(f"{FIG}/fig8.png", "fig8"),
        pdf=f"{FIG}/fig8.pdf",
        data=in_report(f"{RES}/fig8_data.csv", "fig8"),
    log:
        f"logs/{SCALE}/fig8.log",
    benchmark:
        bench("fig8")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],  # render-only: never recomputes
    conda: CONDA_ENV
    script:
        "../scripts/fig8.py"
