# Long context (docs/design.md section 7): needle in a haystack (Table 4) and perplexity against input
# length (Figure 4). Evaluation settings come from config["eval"]["niah"] / ["longppl"] (this scale's sizes)
# and eval/protocols.yaml (what every scale shares: NIAH's tasks, template and max_new_tokens, the held-out
# splits scored) via params, so editing them reruns these rules and never retrains.
from yocou.evaldefs import eval_dir, niah_settings, protocol  # PyYAML only

NIAH = niah_settings(config["eval"]["niah"])  # the scale's eval.niah with the protocol's tasks, max_new_tokens
LONGPPL_SPLITS = protocol("longppl")["splits"]  # {"book": "heldout_book", "code": "heldout_code"}


rule niah_prompts:
    input:
        unpack(from_runs("niah_prompts",
            tok=f"{RUN}/tokenizer.json",
            book=f"{RUN}/tokens/heldout_book.bin",
            protocol=str(eval_dir() / "protocols.yaml"),  # the prompt template, key words, haystacks, depths
        )),
    output:
        f"{RES}/niah/prompts.jsonl",
    log:
        f"logs/{SCALE}/niah_prompts.log",
    benchmark:
        bench("niah_prompts")
    params:
        p=NIAH,
        tasks=" ".join(NIAH["tasks"]),
        lens=" ".join(str(n) for n in NIAH["lengths"]),
        seed=config["seed"],
    conda: CONDA_ENV
    shell:
        "python -m yocou.longctx.niah prompts --tokenizer {input.tok} --book {input.book} --tasks {params.tasks} "
        "--lengths {params.lens} --n-depths {params.p[n_depths]} --n-samples {params.p[n_samples]} "
        "--seed {params.seed} --out {output} > {log} 2>&1"


rule niah:
    input:
        unpack(from_runs("niah",
            model=f"{RUN}/models/{{variant}}/model.pt",
            tok=f"{RUN}/tokenizer.json",
            prompts=f"{RES}/niah/prompts.jsonl",
        )),
    output:
        f"{RES}/niah/{{variant}}.json",
    log:
        f"logs/{SCALE}/niah_{{variant}}.log",
    benchmark:
        bench("niah", "variant")
    params:
        p=NIAH,
    threads: eval_threads
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.longctx.niah eval --model {input.model} --tokenizer {input.tok} "
        "--prompts {input.prompts} --max-new-tokens {params.p[max_new_tokens]} --chunk-size {params.p[chunk_size]} "
        "--batch {params.p[batch]} --dtype {params.p[dtype]} --out {output} > {log} 2>&1"


rule longppl:
    input:
        unpack(from_runs("longppl",
            model=f"{RUN}/models/{{variant}}/model.pt",
            data=expand(f"{RUN}/tokens/{{split}}.bin", split=list(LONGPPL_SPLITS.values())),
        )),
    output:
        json=f"{RES}/longppl/{{variant}}.json",
        npz=f"{RES}/longppl/{{variant}}.npz",
    log:
        f"logs/{SCALE}/longppl_{{variant}}.log",
    benchmark:
        bench("longppl", "variant")
    params:
        p=config["eval"]["longppl"],
        lens=" ".join(str(n) for n in config["eval"]["longppl"]["lengths"]),
        tokens_dir=f"{RUN}/tokens",  # the folder of input.data
    threads: eval_threads
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.longctx.longppl --model {input.model} "
        "--tokens-dir {params.tokens_dir} --lengths {params.lens} --span {params.p[span]} "
        "--book-docs {params.p[book_docs]} --code-docs {params.p[code_docs]} --chunk-size {params.p[chunk_size]} "
        "--batch {params.p[batch]} --dtype {params.p[dtype]} --out {output.json} > {log} 2>&1"


# The runs Table 4 evaluates, in CORE's order: each core run's <run>_niah retrieval run where niah_train names
# it (yocou.wfconfig.niah_runs; a labelled substitute protocol), else the core run itself.
from yocou.wfconfig import niah_runs as _niah_runs

_NIAH_OWN = set(_niah_runs(config))
TABLE4_RUNS = [f"{v}_niah" if f"{v}_niah" in _NIAH_OWN else v for v in CORE]
# ... and each one's seed replicas (niah_train.seeds: <run>_niah_seed<k>; Table 4's verdicts take their interval
# across seeds where a role has 2 or more)
TABLE4_ALL = [x for r in TABLE4_RUNS for x in replicas(config, r)]


rule summarize_table4:
    input:
        unpack(from_runs("summarize_table4",
            niah=expand(f"{RES}/niah/{{variant}}.json", variant=TABLE4_ALL),
            rc=expand(f"{RUN}/models/{{variant}}/run_config.json", variant=TABLE4_ALL),
            code=[f"{PKG}/summarize/niah.py", f"{PKG}/tidy.py", f"{PKG}/names.py", f"{PKG}/readers.py",
                  f"{PKG}/reported/table04.csv"],
        )),
    output:
        csv=f"{RES}/tidy/table4.csv",
        json=f"{RES}/tidy/table4.json",
    log:
        f"logs/{SCALE}/summarize_table4.log",
    benchmark:
        bench("summarize_table4")
    params:
        script=compute_script("summarize_table4", "summarize_table4.py"),
        core=CORE,
        runs=TABLE4_RUNS,
        replicas={r: replicas(config, r) for r in TABLE4_RUNS},
        all_runs=TABLE4_ALL,
        niah=config["eval"]["niah"],
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../scripts/{params.script}"  # summarize_table4.py, see compute_script (common.smk)


rule table4:
    input:
        table4=f"{RES}/tidy/table4.csv",
        code=[f"{PKG}/render/table4.py", f"{PKG}/render/common.py", f"{PKG}/names.py", f"{PKG}/reported/table04.csv"],
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
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
        code=[f"{PKG}/render/fig4.py", f"{PKG}/render/common.py", f"{PKG}/tidy.py", f"{PKG}/names.py"],
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
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


rule summarize_fig4:
    input:
        unpack(from_runs("summarize_fig4",
            # every core run and its seed replicas (Figure 4's verdicts take their interval across seeds)
            longppl=[f"{RES}/longppl/{r}.json" for v in CORE for r in replicas(config, v)],
            summaries=[f"{RUN}/models/{r}/summary.json" for v in CORE for r in replicas(config, v)],
            code=TRAINING_CODE,
        )),
    output:
        csv=f"{RES}/tidy/fig4.csv",
        json=f"{RES}/tidy/fig4.json",
    log:
        f"logs/{SCALE}/summarize_fig4.log",
    benchmark:
        bench("summarize_fig4")
    params:
        script=compute_script("summarize_fig4", "summarize_training.py"),
        cfg={**training_cfg("core"), "replicas": {v: replicas(config, v) for v in CORE}},
        job={"study": "fig4", "roots": {"run_root": f"{RUN}/models", "longppl_root": f"{RES}/longppl"}},
    conda: CONDA_ENV
    script:
        "../scripts/{params.script}"  # summarize_training.py, see compute_script (common.smk)
