"""Rule gpu_summarize: results/gpu/<device>/serving.json -> the tidy study efficiency_gpu (yocou.results.summarize.gpu)."""
from yocou.results.summarize.gpu import STUDY, VARIANTS, summarize_gpu
from yocou.results.tidy import write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
df = summarize_gpu(list(sm.input.serving))
write_tidy(df, sm.output.csv, config={"studies": {STUDY: list(VARIANTS)}}, inputs=list(sm.input.serving))
