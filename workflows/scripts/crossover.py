"""Rules summarize_crossover and crossover: the crossover runs' held-out checkpoints -> results/<scale>/tidy/
crossover.{csv,json} (yocou.summarize.crossover), then the figure and the gap table (yocou.render.crossover)."""
import sys

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
sys.stdout = sys.stderr = open(sm.log[0], "w", encoding="utf-8")
if sm.rule == "summarize_crossover":
    from yocou.summarize.crossover import summarize_crossover
    from yocou.tidy import write_tidy

    runs = {role: [f"{sm.params.run_root}/{r}" for r in rs] for role, rs in sm.params.runs.items()}
    df = summarize_crossover(runs)
    write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "crossover": sm.params.runs},
               inputs=list(sm.input))
    print(f"crossover: {len(df)} tidy rows -> {sm.output.csv}")
else:
    from yocou.render.crossover import render

    v = render(sm.input.tidy, out=sm.output.png, data=sm.output.data, scale=sm.params.scale)
    print(f"crossover: {v}")
