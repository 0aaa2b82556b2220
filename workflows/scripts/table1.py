"""Rule table1: tidy efficiency_derived (exponents) -> Table 1 checked by measurement (yocou.results.render.table1)."""
from yocou.results.render.table1 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
render(sm.input.derived, sm.input.efficiency, sm.output.csv, scale=sm.params.scale)
