# The compute rules of longctx.smk (defined only when computing: yocou.workflow.committed, common.smk).


rule niah_prompts:
    input:
        tok=f"{RUN}/tokenizer.json",
        book=f"{RUN}/tokens/heldout_book.bin",
        protocol=str(eval_dir() / "protocols.yaml"),  # the prompt template, key words, haystacks, depths
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
        "python -m yocou.evaluation.longctx.niah prompts --tokenizer {input.tok} --book {input.book} --tasks {params.tasks} "
        "--lengths {params.lens} --n-depths {params.p[n_depths]} --n-samples {params.p[n_samples]} "
        "--seed {params.seed} --out {output} > {log} 2>&1"


rule niah:
    input:
        model=f"{RUN}/models/{{variant}}/model.pt",
        tok=f"{RUN}/tokenizer.json",
        prompts=f"{RES}/niah/prompts.jsonl",
    output:
        f"{RES}/niah/{{variant}}.json",
    log:
        f"logs/{SCALE}/niah_{{variant}}.log",
    benchmark:
        bench("niah", "variant")
    params:
        p=NIAH,
        device=job_device,
    threads: job_threads("niah", "eval")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.evaluation.longctx.niah eval --model {input.model} --tokenizer {input.tok} "
        "--prompts {input.prompts} --max-new-tokens {params.p[max_new_tokens]} --chunk-size {params.p[chunk_size]} "
        "--batch {params.p[batch]} --dtype {params.p[dtype]} --device {params.device} --out {output} > {log} 2>&1"


rule longppl:
    input:
        model=f"{RUN}/models/{{variant}}/model.pt",
        data=expand(f"{RUN}/tokens/{{split}}.bin", split=list(LONGPPL_SPLITS.values())),
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
        tokens_dir=lambda w, input: os.path.dirname(input.data[0]),  # the folder of input.data
        device=job_device,
    threads: job_threads("longppl", "eval")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.evaluation.longctx.longppl --model {input.model} "
        "--tokens-dir {params.tokens_dir} --lengths {params.lens} --span {params.p[span]} "
        "--book-docs {params.p[book_docs]} --code-docs {params.p[code_docs]} --chunk-size {params.p[chunk_size]} "
        "--batch {params.p[batch]} --dtype {params.p[dtype]} --device {params.device} --out {output.json} > {log} 2>&1"


rule summarize_table4:
    input:
        niah=expand(f"{RES}/niah/{{variant}}.json", variant=TABLE4_ALL),
        rc=expand(f"{RUN}/models/{{variant}}/run_config.json", variant=TABLE4_ALL),
        code=[f"{PKG}/results/summarize/niah.py", f"{PKG}/results/tidy.py", f"{PKG}/results/names.py", f"{PKG}/results/readers.py",
              f"{PKG}/results/reported/table04.csv"],
    output:
        csv=f"{RES}/tidy/table4.csv",
        json=f"{RES}/tidy/table4.json",
    log:
        f"logs/{SCALE}/summarize_table4.log",
    benchmark:
        bench("summarize_table4")
    params:
        core=CORE,
        runs=TABLE4_RUNS,
        replicas={r: replicas(config, r) for r in TABLE4_RUNS},
        all_runs=TABLE4_ALL,
        niah=config["eval"]["niah"],
        scale=SCALE,
    conda: CONDA_ENV
    script:
        "../../scripts/summarize_table4.py"


rule summarize_fig4:
    input:
        # every core run and its seed replicas (Figure 4's verdicts take their interval across seeds)
        longppl=[f"{RES}/longppl/{r}.json" for v in CORE for r in replicas(config, v)],
        summaries=[f"{RUN}/models/{r}/summary.json" for v in CORE for r in replicas(config, v)],
        code=TRAINING_CODE,
    output:
        csv=f"{RES}/tidy/fig4.csv",
        json=f"{RES}/tidy/fig4.json",
    log:
        f"logs/{SCALE}/summarize_fig4.log",
    benchmark:
        bench("summarize_fig4")
    params:
        cfg={**training_cfg("core"), "replicas": {v: replicas(config, v) for v in CORE}},
        job={"study": "fig4", "roots": {"run_root": f"{RUN}/models", "longppl_root": f"{RES}/longppl"}},
    conda: CONDA_ENV
    script:
        "../../scripts/summarize_training.py"
