"""Rule paper_shape_render: the tidy efficiency_paper_shape -> its figure and tables (yocou.results.render.paper_shape)."""
from yocou.results.render.common import configure
from yocou.results.render.paper_shape import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
render(sm.input.tidy, sm.input.benchmark, sm.output.png, sm.output.ratios[0], sm.output.rows[0])
