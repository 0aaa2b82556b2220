"""Rule fig8: Figure 8 and its data from results/<scale>/tidy/fig8 (yocou.results.render.fig8)."""
from yocou.results.render.common import configure
from yocou.results.render.fig8 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
print(render(sm.input.tidy, fig=sm.output.png, data=sm.output.data, scale=sm.params.scale).to_string(index=False))
