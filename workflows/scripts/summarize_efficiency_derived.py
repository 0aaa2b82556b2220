"""Rule summarize_efficiency_derived: tidy efficiency -> ratios and Table 1 exponents (yocou.summarize.efficiency)."""
from contextlib import redirect_stderr, redirect_stdout

from yocou.summarize.efficiency import summarize_efficiency_derived
from yocou.tidy import write_tidy

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
with open(sm.log[0], "w") as log, redirect_stdout(log), redirect_stderr(log):
    df = summarize_efficiency_derived(sm.input.efficiency, sm.params.fit)
    write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "fit": dict(sm.params.fit)},
               inputs=[sm.input.efficiency])
