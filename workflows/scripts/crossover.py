"""Rules summarize_crossover and crossover: the crossover runs' held-out checkpoints -> results/<scale>/tidy/
crossover.{csv,json} (yocou.results.summarize.crossover), then the figure and the gap table (yocou.results.render.crossover)."""
import os

from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
if sm.rule == "summarize_crossover":
    from yocou.results.summarize.crossover import summarize_crossover
    from yocou.results.tidy import write_tidy

    runs = {role: [f"{sm.params.run_root}/{r}" for r in rs] for role, rs in sm.params.runs.items()}
    ppl = {os.path.basename(p).removesuffix(".json"): p for p in sm.input.ppl}
    df = summarize_crossover(runs, ppl)
    write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "crossover": sm.params.runs},
               inputs=[*sm.input.metrics, *sm.input.summaries, *sm.input.ppl])
    print(f"crossover: {len(df)} tidy rows -> {sm.output.csv}")
else:
    from yocou.results.render.common import configure
    from yocou.results.render.crossover import render

    configure(dpi=sm.params.dpi)  # render.dpi of the config

    v = render(sm.input.tidy, out=sm.output.png, data=sm.output.data, scale=sm.params.scale,
               budget_tokens=sm.params.budget_tokens)
    print(f"crossover: {v}")
