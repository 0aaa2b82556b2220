# The report's HTML pages: every table marked for `snakemake --report` (REPORT_PAGES, common.smk) as a page the
# report shows inline (yocou.results.render.pages: Markdown through Python-Markdown, CSV through pandas), captioned and filed
# like its table. One rule per report item, report_pages_<item>, since a caption is rendered with the params of
# the job that made the file: each carries the params its item's caption reads (the runs of a downstream table,
# Figure 3's benchmarks). Included last, after every rule that marks a table. Seconds; a rule reruns when one of
# its tables changes.

_PAGES_BY_ITEM = {}
for _page, (_src, _item) in REPORT_PAGES.items():
    _PAGES_BY_ITEM.setdefault(_item, []).append((_src, _page))

for _item, _pairs in sorted(_PAGES_BY_ITEM.items()):

    rule:
        name:
            f"report_pages_{_item}"
        input:
            tables=[src for src, _page in _pairs],
            code=[f"{PKG}/results/render/pages.py"],
        output:
            [report_page_output(page) for _src, page in _pairs],
        log:
            f"logs/{SCALE}/report_pages_{_item}.log",
        benchmark:
            bench(f"report_pages_{_item}")
        params:
            pairs=" ".join(f"{src}={page}" for src, page in _pairs),
            variants=" ".join(r for v in study_runs(_item) for r in ([v] if isinstance(v, str) else v)),  # the captions of table2, table3, table5 name them
            benchmarks=", ".join(c["label"] for c in _eval_columns("fig3")),  # fig3's caption lists them
            drawn=caption_drawn(_item, config),  # fig2, fig5, fig6: what the curves are
            n_choices=_protocol("niah")["n_choices"],  # table4: the multiple choice (eval/protocols.yaml)
        conda: CONDA_ENV
        shell:
            "python -m yocou.results.render.pages {params.pairs} > {log} 2>&1"


rule report_pages:
    # every page of a table reproduce_all makes (render_all's in render mode; the learning-rate study's only where
    # the scale configures it)
    input:
        lambda w: pages_of([str(f) for f in getattr(rules, "reproduce_all" if rules.has("reproduce_all")
                                                    else "render_all").input if not is_report_page(f)]),
