"""Rule fig5: Figure 5 and its data from results/<scale>/tidy/{fig5,runs} (yocou.results.render.fig5)."""
from yocou.results.render.common import configure
from yocou.results.render.fig5 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render(sm.input.tidy, sm.input.runs, out=sm.output.png, data=sm.output.data, scale=sm.params.scale)
