"""Rule paper_shape_batched_summarize: results/paper_shape/batched/raw.json -> the tidy study
efficiency_paper_shape_batched (yocou.results.summarize.paper_shape.summarize_batched), read by the audit's batched
Table 9 rows."""
from yocou.results.summarize.paper_shape import (
    BATCHED_STUDY,
    VARIANTS,
    summarize_batched,
)
from yocou.results.tidy import write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
df = summarize_batched(sm.input.raw)
write_tidy(df, sm.output.csv, config={"studies": {BATCHED_STUDY: list(VARIANTS)}}, inputs=[sm.input.raw])
