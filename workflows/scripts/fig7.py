"""Rule fig7: tidy efficiency -> Figure 7 and its data (yocou.render.fig7)."""
from contextlib import redirect_stderr, redirect_stdout

from yocou.render.common import configure
from yocou.render.fig7 import render

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
with open(sm.log[0], "w") as log, redirect_stdout(log), redirect_stderr(log):
    render(sm.input.efficiency, sm.output.png, sm.output.data, scale=sm.params.scale)
