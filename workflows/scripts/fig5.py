"""Rule fig5: Figure 5 and its data from results/<scale>/tidy/{fig5,runs} (yocou.results.render.fig5)."""
from yocou.results.render.common import configure
from yocou.results.render.fig5 import render
from yocou.utils.guard import start_script
from yocou.workflow.pipeline import embedding_params

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
configure(dpi=sm.params.dpi)  # render.dpi of the config
start_script(sm)
# the non-embedding axis: each run's embedding and LM head from its model config (yocou.workflow.pipeline)
studies = sm.config["studies"]["fig5"]
embedding = {run: embedding_params(sm.config, run) for runs in studies.values() for run in runs}
render(sm.input.tidy, sm.input.runs, out=sm.output.png, data=sm.output.data, scale=sm.params.scale,
       embedding=embedding)
