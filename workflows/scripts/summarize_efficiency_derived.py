"""Rule summarize_efficiency_derived: tidy efficiency -> ratios and Table 1 exponents (yocou.summarize.efficiency)."""
from yocou.guard import start_script
from yocou.summarize.efficiency import summarize_efficiency_derived
from yocou.tidy import write_tidy

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
df = summarize_efficiency_derived(sm.input.efficiency, sm.params.fit)
write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "fit": dict(sm.params.fit)},
           inputs=[sm.input.efficiency])
