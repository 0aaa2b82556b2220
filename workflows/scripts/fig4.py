"""Rule fig4: Figure 4 and its data from results/<scale>/tidy/fig4 (yocou.results.render.fig4)."""
from yocou.results.render.common import configure
from yocou.results.render.fig4 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
print(render(sm.input.tidy, fig=sm.output.png, data=sm.output.data, scale=sm.params.scale).to_string(index=False))
