"""Command-line options of ``yocou audit`` and ``python -m yocou.results.audit`` (argparse only: cheap to import)."""

from __future__ import annotations

import argparse

DEFAULT_BASELINE = "results/audit/baseline.json"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Add the audit options to ``ap`` (see :mod:`yocou.results.audit.report`); :func:`extra_paths` adds what
    the defaults imply."""
    from yocou.utils.guard import inside, reads, replaces, writes

    ap.add_argument("--scale", default="tiny",
                    help="scale whose results to read (results/<scale>); one with workflows/config/<scale>.yaml or "
                         "results/<scale>/ in the working directory")
    ap.add_argument("--results", default=None, type=reads("--results (tidy tables)", paths=inside("tidy")),
                    help="results folder (default results/<scale>); given, --scale only labels the report")
    ap.add_argument("--baseline", default=None, type=reads(),
                    help=f"baseline JSON of check results (default {DEFAULT_BASELINE} when it exists)")
    ap.add_argument("--out", default=None, type=replaces(), help="write the report here (e.g. results/<scale>/audit)")
    ap.add_argument("--figures", nargs="*", default=None, type=reads(),
                    help="PNG figures to show in the report (default: figures/<scale>/*.png when --out is given)")
    ap.add_argument("--reported-dir", default=None, type=reads(), help="folder of tableNN.csv to audit instead of yocou/results/reported")
    ap.add_argument("--registry", default=None, type=reads(), help="claims registry YAML instead of yocou/results/audit/claims.yaml")
    ap.add_argument("--write-baseline", default=None, metavar="PATH", type=writes(),
                    help="write the current check results as a baseline to PATH")
    ap.add_argument("--report-only", action="store_true", help="exit 0 even when a check regressed (pipeline use)")



def extra_paths(a: argparse.Namespace):
    """The input the defaults imply: the tidy tables of ``results/<scale>`` when ``--results`` is not given."""
    import os

    from yocou.utils.guard import IOPaths

    return IOPaths({} if a.results else {"--results (tidy tables)": os.path.join("results", a.scale, "tidy")})
