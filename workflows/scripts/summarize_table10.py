"""Rule summarize_table10: the KV formula at the paper's 1.3B configuration -> tidy table10."""
from yocou.results.summarize.efficiency import summarize_table10
from yocou.results.tidy import study_roles, write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
df = summarize_table10(study_roles(sm.config, "core"), sm.params.presets)
write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "presets": dict(sm.params.presets)})
