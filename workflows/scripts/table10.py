"""Rule table10: tidy table10 + kv -> Table 10 (formula at 1.3B, cells, measured) (yocou.results.render.table10)."""
from yocou.results.render.table10 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
render(sm.input.table10, sm.input.kv, sm.output.csv, scale=sm.params.scale)
