# reproduce_all: everything, computed. The render targets (RENDER_ALL, Snakefile) and the compute jobs' own results
# under results/<scale>/ (the tidy tables, the raw evaluations), then timing and the committed config; with the
# report's HTML pages (report.smk) of the tables among them. RENDER_ALL holds the annealed token ladder and its
# bracket where the scale has one. Not here: the mechanism probe, the crossover and the other studies of their own
# targets.

_REPRODUCE_ALL = [
    RENDER_ALL,
    rules.summarize_table2.output,
    rules.summarize_table3.output,
    rules.summarize_table5.output,
    rules.summarize_fig3.output,
    rules.summarize_runs.output,
    rules.summarize_fig2.output,
    rules.summarize_heldout_ppl.output,
    rules.ppl_all.input,
    rules.summarize_fig4.output,
    rules.summarize_fig5.output,
    rules.summarize_fig6.output,
    rules.summarize_fig8.output,
    rules.summarize_lr.output if config.get("lr_sensitivity") else [],
    rules.timing.output,
    rules.committed_config.output,
]


rule reproduce_all:
    input:
        _REPRODUCE_ALL,
        pages_of(_REPRODUCE_ALL),
