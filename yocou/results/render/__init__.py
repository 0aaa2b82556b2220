"""One module per rendered table or figure (showyourwork style), fed only by the tidy tables
``results/<scale>/tidy/<study>.{csv,json}`` (:mod:`yocou.results.tidy`, written by :mod:`yocou.results.summarize`), the paper's
printed tables (:mod:`yocou.results.reported`) and the definitions in ``eval/``.

Each module has a ``render(...)`` function, called by one Snakemake ``script:`` per table or figure
(``workflows/scripts/<name>.py``). A renderer selects, pivots, formats and draws; every number it prints was
computed by a summarize step.
"""
