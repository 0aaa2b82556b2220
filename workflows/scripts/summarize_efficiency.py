"""Rule summarize_efficiency: profile.json -> tidy efficiency (yocou.summarize.efficiency)."""
from contextlib import redirect_stderr, redirect_stdout

from yocou.summarize.efficiency import summarize_efficiency
from yocou.tidy import study_roles, write_tidy

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
with open(sm.log[0], "w") as log, redirect_stdout(log), redirect_stderr(log):
    df = summarize_efficiency(sm.input.profile, study_roles(sm.config, "core"))
    write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "core": sm.params.core}, inputs=[sm.input.profile])
