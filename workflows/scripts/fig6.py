"""Rule fig6: Figure 6 and its data from results/<scale>/tidy/{fig6,runs} (yocou.results.render.fig6)."""
from yocou.results.render.common import configure
from yocou.results.render.fig6 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render(sm.input.tidy, sm.input.runs, out=sm.output.png, data=sm.output.data, scale=sm.params.scale)
