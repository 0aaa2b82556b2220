"""Audit of the paper's reported numbers: a claims registry, consistency checks that need no training,
and verdicts from our own runs.

- :mod:`yocou.results.audit.claims`: the registry (``claims.yaml``) and the reported tables as one ``Sources``.
- :mod:`yocou.results.audit.checks`: consistency checks (holds / does not hold / cannot be checked from what is published).
- :mod:`yocou.results.audit.complexity`: the analytic cost model and Table 1's expressions.
- :mod:`yocou.results.audit.verdicts`: our measured values beside the paper's, with a verdict no stronger than the evidence.
- :mod:`yocou.results.audit.regime`: the regime of each learning-side verdict (tokens per parameter, annealed, held-out loss
  minus the bigram of the models' own budget) and the gate that makes a pre-bigram one "not comparable"
  (``eval/regime.yaml``).
- :mod:`yocou.results.audit.report`: ``report.md``, a self-contained ``report.html``, tidy CSV/JSON, the baseline, and
  the command (``yocou audit``, ``python -m yocou.results.audit``).

Source: the paper, arXiv 2604.01220 (Universal YOCO); docs/design.md sections 5, 6 and 8. Submodules are
imported on first use, so that ``yocou audit -h`` stays cheap.
"""

from __future__ import annotations

import importlib

__all__ = ["Sources", "load_claims", "load_registry", "load_sources", "run_checks", "reproduce", "audit"]

_WHERE = {"Sources": "claims", "load_claims": "claims", "load_registry": "claims", "load_sources": "claims",
          "run_checks": "checks", "reproduce": "verdicts", "audit": "report"}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
