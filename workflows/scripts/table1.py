"""Rule table1: tidy efficiency_derived (exponents) -> Table 1 checked by measurement (yocou.render.table1)."""
from contextlib import redirect_stderr, redirect_stdout

from yocou.render.table1 import render

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
with open(sm.log[0], "w") as log, redirect_stdout(log), redirect_stderr(log):
    render(sm.input.derived, sm.input.efficiency, sm.output.csv, scale=sm.params.scale)
