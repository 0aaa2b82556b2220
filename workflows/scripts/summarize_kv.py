"""Rule summarize_kv: kv_measure.json + run configs -> tidy kv, measured vs formula (yocou.results.summarize.efficiency)."""
from yocou.results.summarize.efficiency import summarize_kv
from yocou.results.tidy import study_roles, write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
rcs = dict(zip(sm.params.core, sm.input.rc))
df = summarize_kv(sm.input.measured, study_roles(sm.config, "core"), rcs)
write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "core": sm.params.core},
           inputs=[sm.input.measured, *sm.input.rc])
