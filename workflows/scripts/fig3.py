"""Rule fig3: Figure 3 from results/<scale>/tidy/fig3.csv (yocou.results.render.downstream.render_fig3)."""
from yocou.results.render.common import configure
from yocou.results.render.downstream import render_fig3
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render_fig3(sm.input.tidy, out=sm.output.png, data_out=sm.output.data, scale=sm.params.scale,
            config=sm.params.cfg)
