"""Rule fig6: Figure 6 and its data from results/<scale>/tidy/{fig6,runs} (yocou.render.fig6)."""
from yocou.guard import start_script
from yocou.render.common import configure
from yocou.render.fig6 import render

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render(sm.input.tidy, sm.input.runs, out=sm.output.png, data=sm.output.data, scale=sm.params.scale)
