# The paper-shape efficiency study (docs/design.md section 7; yocou.bench.paper_shape): Transformer, YOCO, RINS and
# YOCO-U at the paper's 1.3B shape (workflows/config/paper.yaml), timed on this machine beside its memory bandwidth
# and matmul peak. Not part of reproduce_all (about 45 minutes on a 2-core CPU): `snakemake --cores all
# efficiency_paper_shape`. The measurement is committed (results/paper_shape/raw.json) and scale-independent:
# the target renders from it, and measures only where it is absent or on request
# (`--forcerun paper_shape_measure`). Nothing else may run on the machine while it measures.

PS_RES = "results/paper_shape"
PS_FIG = "figures/paper_shape"
PS_CONFIGS = ["workflows/config/paper.yaml", "workflows/config/paper_shape.yaml"]


def _paper_shape_inputs(wildcards):
    """The study's two configs, or nothing once its measurement exists (a fresh clone's checkout order must not
    make Snakemake plan 45 minutes of timing): --forcerun paper_shape_measure measures again."""
    return {} if os.path.exists(f"{PS_RES}/raw.json") else {"configs": PS_CONFIGS}


rule paper_shape_measure:
    input:
        unpack(_paper_shape_inputs),
    output:
        f"{PS_RES}/raw.json",
    log:
        f"{PS_RES}/measure.log",
    benchmark:
        f"{PS_RES}/measure_benchmark.tsv"
    threads: all_cores
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.bench.paper_shape --paper-config {PS_CONFIGS[0]} "
        "--study-config {PS_CONFIGS[1]} --out {output} 2> {log}"
