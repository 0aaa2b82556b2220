# Long context (docs/design.md section 7): needle in a haystack (Table 4) and perplexity against input
# length (Figure 4). Evaluation settings come from config["eval"]["niah"] / ["longppl"] (this scale's sizes)
# and eval/protocols.yaml (what every scale shares: NIAH's tasks, template and max_new_tokens, the held-out
# splits scored) via params, so editing them reruns these rules and never retrains.
from yocou.results.evaldefs import eval_dir, niah_settings, protocol  # PyYAML only

NIAH = niah_settings(config["eval"]["niah"])  # the scale's eval.niah with the protocol's tasks, max_new_tokens
LONGPPL_SPLITS = protocol("longppl")["splits"]  # {"book": "heldout_book", "code": "heldout_code"}


# The runs Table 4 evaluates, in CORE's order: each core run's <run>_niah retrieval run where niah_train names
# it (yocou.workflow.wfconfig.niah_runs; a labelled substitute protocol), else the core run itself.
from yocou.workflow.wfconfig import niah_runs as _niah_runs

_NIAH_OWN = set(_niah_runs(config))
TABLE4_RUNS = [f"{v}_niah" if f"{v}_niah" in _NIAH_OWN else v for v in CORE]
# ... and each one's seed replicas (niah_train.seeds: <run>_niah_seed<k>; Table 4's verdicts take their interval
# across seeds where a role has 2 or more)
TABLE4_ALL = [x for r in TABLE4_RUNS for x in replicas(config, r)]


rule table4:
    input:
        table4=f"{RES}/tidy/table4.csv",
        code=[f"{PKG}/results/render/table4.py", f"{PKG}/results/render/common.py", f"{PKG}/results/names.py", f"{PKG}/results/reported/table04.csv"],
    output:
        csv=in_report(f"{RES}/table4.csv", "table4"),
        md=in_report(f"{RES}/table4.md", "table4"),
        json=f"{RES}/table4.json",
        cells=f"{RES}/table4_cells.csv",
        cells_md=in_report(f"{RES}/table4_cells.md", "table4"),
        cells_json=f"{RES}/table4_cells.json",
        by_length=in_report(f"{RES}/table4_by_length.md", "table4"),
        by_length_csv=f"{RES}/table4_by_length.csv",
        by_length_json=f"{RES}/table4_by_length.json",
        seeds=in_report(f"{RES}/table4_seeds.md", "table4"),
        seeds_csv=f"{RES}/table4_seeds.csv",
        seeds_json=f"{RES}/table4_seeds.json",
        png=in_report(f"{FIG}/niah_heatmap.png", "table4"),
        pdf=f"{FIG}/niah_heatmap.pdf",
    log:
        f"logs/{SCALE}/table4.log",
    benchmark:
        bench("table4")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],  # render-only: never recomputes
        seed=config["seed"],
        n_choices=_protocol("niah")["n_choices"],  # the caption's multiple choice (eval/protocols.yaml)
    conda: CONDA_ENV
    script:
        "../scripts/table4.py"


rule fig4:
    input:
        tidy=f"{RES}/tidy/fig4.json",
        code=[f"{PKG}/results/render/fig4.py", f"{PKG}/results/render/common.py", f"{PKG}/results/tidy.py", f"{PKG}/results/names.py"],
    output:
        png=in_report(f"{FIG}/fig4.png", "fig4"),
        pdf=f"{FIG}/fig4.pdf",
        data=in_report(f"{RES}/fig4_data.csv", "fig4"),
    log:
        f"logs/{SCALE}/fig4.log",
    benchmark:
        bench("fig4")
    params:
        scale=SCALE,
        dpi=config["render"]["dpi"],  # render-only: never recomputes
    conda: CONDA_ENV
    script:
        "../scripts/fig4.py"


