"""Rule fig7: tidy efficiency -> Figure 7 and its data (yocou.results.render.fig7)."""
from yocou.results.render.common import configure
from yocou.results.render.fig7 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render(sm.input.efficiency, sm.output.png, sm.output.data, scale=sm.params.scale)
