"""Rule summarize_efficiency: profile.json -> tidy efficiency (yocou.results.summarize.efficiency)."""
from yocou.results.summarize.efficiency import summarize_efficiency
from yocou.results.tidy import study_roles, write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
df = summarize_efficiency(sm.input.profile, study_roles(sm.config, "core"))
write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "core": sm.params.core}, inputs=[sm.input.profile])
