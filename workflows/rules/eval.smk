# Held-out perplexity per model; measured KV-cache bytes per variant.


rule ppl:
    input:
        model=f"{RUN}/models/{{variant}}/model.pt",
        data=expand(f"{RUN}/tokens/{{split}}.bin", split=["heldout_book", "heldout_code"]),
    output:
        f"{RES}/ppl/{{variant}}.json",
    log:
        f"logs/{SCALE}/ppl_{{variant}}.log",
    benchmark:
        bench("ppl", "variant")
    params:
        p=config["eval"]["ppl"],
        tokens=lambda w, input: os.path.dirname(input.data[0]),
        max_tokens=lambda w: (f"--max-tokens {config['eval']['ppl']['max_tokens']}"
                              if config["eval"]["ppl"]["max_tokens"] else ""),
    threads: workflow.cores
    conda: CONDA_ENV
    shell:
        "python -m yocou.cli ppl --model {input.model} --data {params.tokens} --seq-len {params.p[seq_len]} {params.max_tokens} "
        "--dtype {params.p[dtype]} --batch {params.p[batch]} --out {output} > {log} 2>&1"


rule kv_measure:
    input:
        expand(f"{RUN}/models/{{variant}}/run_config.json", variant=CORE),
    output:
        f"{RES}/kv_measure.json",
    log:
        f"logs/{SCALE}/kv_measure.log",
    benchmark:
        bench("kv_measure")
    params:
        lens=" ".join(str(n) for n in config["eval"]["kv_measure"]["seq_lens"]),
        dtype=config["eval"]["kv_measure"]["dtype"],
    threads: workflow.cores
    conda: CONDA_ENV
    shell:
        "python -m yocou.cli kv-measure --run-configs {input} --seq-lens {params.lens} --dtype {params.dtype} "
        "--out {output} > {log} 2>&1"
