# Held-out perplexity per model; measured KV-cache bytes per variant.


rule ppl:
    # Per held-out split: ppl, nats/token, bits/byte (bytes of the predicted tokens from the run's tokenizer),
    # stderr; eval.ppl.max_tokens caps the tokens read per split (yocou.evaluation.heldout).
    input:
        model=f"{RUN}/models/{{variant}}/model.pt",
        data=expand(f"{RUN}/tokens/{{split}}.bin", split=["heldout_book", "heldout_code"]),
        tok=f"{RUN}/tokenizer.json",
    output:
        f"{RES}/ppl/{{variant}}.json",
    wildcard_constraints:
        variant=_RUN_NAMES,  # a run's name: ppl/baselines.json is rule baselines'
    log:
        f"logs/{SCALE}/ppl_{{variant}}.log",
    benchmark:
        bench("ppl", "variant")
    params:
        p=config["eval"]["ppl"],
        tokens=lambda w, input: os.path.dirname(input.data[0]),  # the folder of input.data
        max_tokens=lambda w: (f"--max-tokens {config['eval']['ppl']['max_tokens']}"
                              if config["eval"]["ppl"]["max_tokens"] else ""),
        device=job_device,
    threads: job_threads("ppl", "eval")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.cli ppl --model {input.model} --data {params.tokens} --seq-len {params.p[seq_len]} {params.max_tokens} "
        "--tokenizer {input.tok} --dtype {params.p[dtype]} --batch {params.p[batch]} --device {params.device} --out {output} > {log} 2>&1"


# The trivial references of the loss tables (yocou.evaluation.baselines): an add-one unigram and an interpolated Kneser-Ney
# bigram fitted on train.bin, and the bigram fitted on the training windows of one run's budget (train.steps x
# batch_size windows of the base seed's sampler, that of the first core run), scored on the same held-out tokens
# and windows as rule ppl.
rule baselines:
    input:
        train=f"{RUN}/tokens/train.bin",
        data=expand(f"{RUN}/tokens/{{split}}.bin", split=["heldout_book", "heldout_code"]),
        tok=f"{RUN}/tokenizer.json",
        code=[f"{PKG}/evaluation/baselines.py", f"{PKG}/evaluation/heldout.py"],
    output:
        f"{RES}/ppl/baselines.json",
    log:
        f"logs/{SCALE}/ppl_baselines.log",
    benchmark:
        bench("baselines")
    params:
        seq_len=config["eval"]["ppl"]["seq_len"],
        tokens=lambda w, input: os.path.dirname(input.data[0]),  # the folder of input.data
        max_tokens=lambda w: (f"--max-tokens {config['eval']['ppl']['max_tokens']}"
                              if config["eval"]["ppl"]["max_tokens"] else ""),
        budget=(f"--budget-steps {config['train']['steps']} --budget-batch {config['train']['batch_size']} "
                f"--budget-seq-len {config['train']['seq_len']} --budget-seed {seed_of(config, CORE[0])}"),
    conda: CONDA_ENV
    shell:
        "python -m yocou.cli baselines --train {input.train} --data {params.tokens} --seq-len {params.seq_len} "
        "{params.max_tokens} --tokenizer {input.tok} {params.budget} --out {output} > {log} 2>&1"



rule kv_measure:
    input:
        rc=expand(f"{RUN}/models/{{variant}}/run_config.json", variant=CORE),
    output:
        f"{RES}/kv_measure.json",
    log:
        f"logs/{SCALE}/kv_measure.log",
    benchmark:
        bench("kv_measure")
    params:
        lens=" ".join(str(n) for n in config["eval"]["kv_measure"]["seq_lens"]),
        dtype=config["eval"]["kv_measure"]["dtype"],
        device=job_device,
    threads: job_threads("kv_measure", "eval")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.cli kv-measure --run-configs {input.rc} --seq-lens {params.lens} --dtype {params.dtype} "
        "--device {params.device} --out {output} > {log} 2>&1"


# Every run reproduce_all trains (seed replicas and learning-rate runs included; not the crossover runs, trained
# by their own target) gets its held-out ppl JSON, whether or not a table reads it (pipeline_runs:
# common.smk).
rule ppl_all:
    input:
        [f"{RES}/ppl/{r}.json" for r in pipeline_runs(config)],
