"""The summarize functions (issue 14): per-run evaluation outputs → one tidy table per study
(:mod:`yocou.tidy`), one module per area (``downstream``, ``training``, ``efficiency``, ``niah``, ...).

Every computed number (averages, fits, interpolations, ratios, savings) is made here, never in a renderer.
"""
