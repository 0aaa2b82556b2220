"""Rule tables8_9: tidy efficiency + efficiency_derived -> Tables 8, 9 (ours and ratios) and table10_ratios."""
from yocou.results.render.tables8_9 import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
out = {k: getattr(sm.output, k) for k in ("t8", "t8_ours", "t9", "t9_ours", "t10")}
render(sm.input.efficiency, sm.input.derived, out, scale=sm.params.scale, gpu=list(sm.input.gpu))
