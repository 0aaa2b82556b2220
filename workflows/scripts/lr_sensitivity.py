"""Rules summarize_lr and lr_sensitivity: the learning-rate runs' ppl JSONs -> results/<scale>/tidy/lr.{csv,json}
(yocou.results.summarize.lr), then results/<scale>/lr_sensitivity.{csv,md,json} (yocou.results.render.lr)."""
from yocou.utils.guard import start_script

sm = snakemake  # noqa: F821 - set by Snakemake's script directive
start_script(sm)
if sm.rule == "summarize_lr":
    from yocou.results.summarize.lr import summarize_lr
    from yocou.results.tidy import write_tidy

    runs = {role: [f"{sm.params.run_root}/{r}" for r in rs] for role, rs in sm.params.runs.items()}
    df = summarize_lr(runs, ppl_root=sm.params.ppl_root)
    write_tidy(df, sm.output.csv, config={"scale": sm.params.scale, "lr_runs": sm.params.runs}, inputs=list(sm.input))
    print(f"lr: {len(df)} tidy rows -> {sm.output.csv}")
else:
    from yocou.results.render.lr import render

    render(sm.input.tidy, out=sm.output.md, scale=sm.params.scale)
