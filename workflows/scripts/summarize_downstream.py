"""Rules summarize_table2, summarize_table3, summarize_table5, summarize_fig3: the runs' lm-eval scores →
results/<scale>/tidy/<study>.{csv,json} (yocou.results.summarize.downstream)."""
from yocou.results.summarize.downstream import summarize_fig3, summarize_table
from yocou.results.tidy import write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
study, cfg = sm.params.study, sm.params.cfg
results, summaries = list(sm.input.results), list(sm.input.summaries)
df = summarize_fig3(results, cfg, summaries) if study == "fig3" else summarize_table(study, results, cfg, summaries)
write_tidy(df, sm.output.csv, config=cfg, inputs=[*results, *summaries])
print(f"{study}: {len(df)} tidy rows -> {sm.output.csv}")
