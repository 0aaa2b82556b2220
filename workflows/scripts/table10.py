"""Rule table10: tidy table10 + kv -> Table 10 (formula at 1.3B, cells, measured) (yocou.render.table10)."""
from contextlib import redirect_stderr, redirect_stdout

from yocou.render.table10 import render

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
with open(sm.log[0], "w") as log, redirect_stdout(log), redirect_stderr(log):
    render(sm.input.table10, sm.input.kv, sm.output.csv, scale=sm.params.scale)
