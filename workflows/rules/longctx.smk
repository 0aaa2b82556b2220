# Long context (SPEC.md section 7): needle in a haystack (Table 4) and perplexity against input
# length (Figure 4). Evaluation settings come from config["eval"]["niah"] / ["longppl"] via params,
# so editing them reruns these rules and never retrains.


rule niah_prompts:
    input:
        tok=f"{RUN}/tokenizer.json",
        book=f"{RUN}/tokens/heldout_book.bin",
    output:
        f"{RES}/niah/prompts.jsonl",
    log:
        f"logs/{SCALE}/niah_prompts.log",
    params:
        p=config["eval"]["niah"],
        tasks=" ".join(config["eval"]["niah"]["tasks"]),
        lens=" ".join(str(n) for n in config["eval"]["niah"]["lengths"]),
        seed=config["seed"],
    shell:
        "python -m yocou.longctx.niah prompts --tokenizer {input.tok} --book {input.book} --tasks {params.tasks} "
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
    params:
        p=config["eval"]["niah"],
    threads: workflow.cores
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.longctx.niah eval --model {input.model} --tokenizer {input.tok} "
        "--prompts {input.prompts} --max-new-tokens {params.p[max_new_tokens]} --chunk-size {params.p[chunk_size]} "
        "--batch {params.p[batch]} --dtype {params.p[dtype]} --out {output} > {log} 2>&1"


rule longppl:
    input:
        model=f"{RUN}/models/{{variant}}/model.pt",
        data=expand(f"{RUN}/tokens/{{split}}.bin", split=["heldout_book", "heldout_code"]),
    output:
        json=f"{RES}/longppl/{{variant}}.json",
        npz=f"{RES}/longppl/{{variant}}.npz",
    log:
        f"logs/{SCALE}/longppl_{{variant}}.log",
    params:
        p=config["eval"]["longppl"],
        lens=" ".join(str(n) for n in config["eval"]["longppl"]["lengths"]),
    threads: workflow.cores
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.longctx.longppl --model {input.model} --tokens-dir {RUN}/tokens "
        "--lengths {params.lens} --span {params.p[span]} --book-docs {params.p[book_docs]} "
        "--code-docs {params.p[code_docs]} --chunk-size {params.p[chunk_size]} --batch {params.p[batch]} "
        "--dtype {params.p[dtype]} --out {output.json} > {log} 2>&1"


rule table4:
    input:
        niah=expand(f"{RES}/niah/{{variant}}.json", variant=CORE),
        code=[f"{PKG}/render/table4.py", f"{PKG}/render/common.py", f"{PKG}/reported/table04.csv"],
    output:
        csv=in_report(f"{RES}/table4.csv", "table4"),
        md=in_report(f"{RES}/table4.md", "table4"),
        cells=f"{RES}/table4_cells.csv",
        png=in_report(f"{FIG}/niah_heatmap.png", "table4"),
        pdf=f"{FIG}/niah_heatmap.pdf",
    log:
        f"logs/{SCALE}/table4.log",
    shell:
        "python -m yocou.render.table4 --niah {input.niah} --out {RES}/table4 --fig {FIG}/niah_heatmap "
        "--scale-name {SCALE} > {log} 2>&1"


rule fig4:
    input:
        tidy=f"{RES}/tidy/fig4.json",
        code=[f"{PKG}/render/fig4.py", f"{PKG}/render/common.py", f"{PKG}/tidy.py", f"{PKG}/names.py"],
    output:
        png=in_report(f"{FIG}/fig4.png", "fig4"),
        pdf=f"{FIG}/fig4.pdf",
        data=in_report(f"{RES}/fig4_data.csv", "fig4"),
    log:
        f"logs/{SCALE}/fig4.log",
    params:
        scale=SCALE,
    script:
        "../scripts/fig4.py"


rule summarize_fig4:
    input:
        longppl=expand(f"{RES}/longppl/{{variant}}.json", variant=CORE),
        summaries=expand(f"{RUN}/models/{{variant}}/summary.json", variant=CORE),
        code=TRAINING_CODE,
    output:
        csv=f"{RES}/tidy/fig4.csv",
        json=f"{RES}/tidy/fig4.json",
    log:
        f"logs/{SCALE}/summarize_fig4.log",
    params:
        cfg=training_cfg("core"),
        job={"study": "fig4", "roots": {"run_root": f"{RUN}/models", "longppl_root": f"{RES}/longppl"}},
    script:
        "../scripts/summarize_training.py"
