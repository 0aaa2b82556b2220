# The compute rules of paper_shape.smk (defined only when computing: yocou.workflow.committed, common.smk).


rule paper_shape_measure:
    input:
        unpack(paper_shape_inputs),
    output:
        f"{PS_RES}/raw.json",
    log:
        f"{PS_RES}/measure.log",
    benchmark:
        f"{PS_RES}/measure_benchmark.tsv"
    threads: job_threads("paper_shape_measure")
    params:
        paper=PS_CONFIGS[0],
        study=PS_CONFIGS[1],
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.evaluation.bench.paper_shape --paper-config {params.paper:q} "
        "--study-config {params.study:q} --out {output:q} 2> {log:q}"


rule paper_shape_batched_measure:
    # decode at B in {1, 4, 8} with the bandwidth beside each block (workflows/studies/paper_shape_batched.yaml):
    # `snakemake --cores all --config mode=compute -- results/paper_shape/batched/raw.json`, alone on the machine
    input:
        unpack(paper_shape_batched_inputs),
    output:
        f"{PS_RES}/batched/raw.json",
    log:
        f"{PS_RES}/batched/measure.log",
    benchmark:
        f"{PS_RES}/batched/measure_benchmark.tsv"
    threads: job_threads("paper_shape_batched_measure")
    params:
        paper=PS_CONFIGS[0],
        study=PS_BATCHED_CONFIG,
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.evaluation.bench.paper_shape --paper-config {params.paper:q} "
        "--study-config {params.study:q} --out {output:q} 2> {log:q}"
