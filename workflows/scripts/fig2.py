"""Rule fig2: Figure 2, its data and its caption numbers from results/<scale>/tidy/fig2 (yocou.results.render.fig2)."""
from yocou.results.render.common import configure
from yocou.results.render.fig2 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render(sm.input.tidy, out=sm.output.png, data=sm.output.data, summary=sm.output.summary, scale=sm.params.scale)
