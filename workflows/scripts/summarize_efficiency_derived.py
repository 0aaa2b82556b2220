"""Rule summarize_efficiency_derived: tidy efficiency -> ratios and Table 1 exponents (yocou.results.summarize.efficiency)."""
from yocou.results.summarize.efficiency import summarize_efficiency_derived
from yocou.results.tidy import write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
df = summarize_efficiency_derived(sm.input.efficiency, sm.params.fit)
write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "fit": dict(sm.params.fit)},
           inputs=[sm.input.efficiency])
