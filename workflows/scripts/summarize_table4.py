"""Rule summarize_table4: needle-in-a-haystack results per run -> tidy table4 (yocou.results.summarize.niah)."""
from yocou.results.summarize.niah import summarize_table4
from yocou.results.tidy import study_roles, write_tidy
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
# Table 4's run of each core run: itself, or its <run>_niah retrieval run (niah_train, workflows/rules/longctx.smk)
# and its seed replicas (niah_train.seeds), one role
own = dict(zip(sm.params.core, sm.params.runs))
roles = {role: list(sm.params.replicas[own.get(run, run)]) for role, run in study_roles(sm.config, "core").items()}
runs = list(sm.params.all_runs)
df = summarize_table4(dict(zip(runs, sm.input.niah)), roles, dict(zip(runs, sm.input.rc)))
write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "core": sm.params.core, "runs": runs,
                                      "niah": dict(sm.params.niah)}, inputs=[*sm.input.niah, *sm.input.rc])
