"""Rule paper_shape_summarize: results/paper_shape/raw.json -> the tidy study efficiency_paper_shape
(yocou.results.summarize.paper_shape)."""
from yocou.results.summarize.paper_shape import STUDY, VARIANTS, summarize_paper_shape
from yocou.results.tidy import write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
df = summarize_paper_shape(sm.input.raw)
write_tidy(df, sm.output.csv, config={"studies": {STUDY: list(VARIANTS)}}, inputs=[sm.input.raw])
