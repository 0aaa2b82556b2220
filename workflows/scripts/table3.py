"""Rule table3: Table 3 from results/<scale>/tidy/table3.csv (yocou.results.render.downstream.render_table)."""
from yocou.results.render.downstream import render_table
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
render_table("table3", sm.input.tidy, out=sm.output.csv, scale=sm.params.scale,
             runs=sm.input.runs[0] if sm.input.get("runs") else None,
             snapshots={k: tuple(v) for k, v in sm.params.snapshots.items()}, config=sm.params.cfg)
