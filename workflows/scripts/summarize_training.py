"""Rules summarize_runs, summarize_fig2, summarize_heldout_ppl, summarize_fig4, summarize_fig5, summarize_fig6,
summarize_fig8: raw run results → results/<scale>/tidy/<study>.{csv,json} (yocou.results.summarize.training)."""
from yocou.results.summarize.training import summarize_study
from yocou.results.tidy import write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
cfg, study = sm.params.cfg, sm.params.job["study"]
df = summarize_study(study, cfg, **sm.params.job["roots"])
code = set(sm.input.code)
write_tidy(df, sm.output.csv, config=cfg, inputs=[p for p in sm.input if p not in code])
print(f"{study}: {len(df)} tidy rows -> {sm.output.csv}")
