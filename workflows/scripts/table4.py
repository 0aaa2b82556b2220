"""Rule table4: tidy table4 -> Table 4, its cells and the NIAH heatmap (yocou.render.table4)."""
from yocou.guard import start_script
from yocou.render.common import configure
from yocou.render.table4 import render

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render(sm.input.table4, sm.output.csv, sm.output.png, scale=sm.params.scale, seed=sm.params.seed)
