"""Rule heldout_ppl: the held-out perplexity table from results/<scale>/tidy/{heldout_ppl,runs}
(yocou.results.render.heldout_ppl)."""
from yocou.results.render.heldout_ppl import render
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
print(render(sm.input.tidy, sm.input.runs, out=sm.output.csv, scale=sm.params.scale).to_string(index=False))
