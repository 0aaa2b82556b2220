"""Rule table4: tidy table4 -> Table 4, its cells and the NIAH heatmap (yocou.results.render.table4)."""
from yocou.results.render.common import configure
from yocou.results.render.table4 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render(sm.input.table4, sm.output.csv, sm.output.png, scale=sm.params.scale, seed=sm.params.seed)
