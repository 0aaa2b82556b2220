"""Evaluation defined as data: the readers of the top-level ``eval/`` folder (issue 14).

``eval/`` holds what every scale shares and the scale configs may not redefine:

* ``eval/columns.yaml``: the column maps of Tables 2, 3, 5 and Figure 3 (:func:`columns`, :func:`metric_id`);
* ``eval/lmeval/``: the lm-eval task templates the offline pack fills (:mod:`yocou.lmeval.pack`);
* ``eval/protocols.yaml``: the NIAH and long-context protocol settings shared by every scale;
* ``eval/comparisons.yaml``: the audit's reproduced comparisons (:mod:`yocou.audit.verdicts`);
* ``eval/checks.yaml``: the audit's consistency checks that are table arithmetic (:mod:`yocou.audit.arith`).

The folder is found next to the package (a source checkout or an editable install) or at ``$YOCOU_EVAL_DIR``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

__all__ = ["eval_dir", "load", "columns", "metric_id", "column_metrics", "FORBIDDEN_IN_SCALE_CONFIG"]

# config paths a scale config may not set: they live in eval/ (tests/test_evaldefs.py, the schema)
FORBIDDEN_IN_SCALE_CONFIG = (("eval", "downstream", "tables"),)


def eval_dir() -> Path:
    """The ``eval/`` folder: ``$YOCOU_EVAL_DIR`` or ``<repo>/eval`` beside the package.

    Raises:
        FileNotFoundError: neither exists (names both places).
    """
    env = os.environ.get("YOCOU_EVAL_DIR")
    here = Path(__file__).resolve().parent.parent / "eval"
    d = Path(env) if env else here
    if not d.is_dir():
        raise FileNotFoundError(f"eval/ folder not found at {d}" + ("" if env else " (set YOCOU_EVAL_DIR)"))
    return d


@lru_cache(maxsize=None)
def _load(path: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p} not found (part of the eval/ definitions)")
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: not valid YAML: {e}") from None


def load(name: str) -> Any:
    """``eval/<name>`` parsed (YAML), cached per path."""
    return _load(str(eval_dir() / name))


def columns(table: str) -> dict[str, dict] | list[dict]:
    """The column map of ``table`` (``table2``, ``table3``, ``table5``: display column → spec; ``fig3``: a list
    of specs with ``label``). A spec has ``task`` and ``metric`` (and ``filter``, ``substitute``), or
    ``unavailable`` (why), or ``average`` (the columns it averages).

    Raises:
        KeyError: no such table in ``eval/columns.yaml`` (names the tables it has).
    """
    maps = load("columns.yaml")
    if not isinstance(maps, dict) or table not in maps:
        raise KeyError(f"eval/columns.yaml: no column map {table!r} (it has {sorted(maps or {})})")
    return maps[table]


def metric_id(spec: dict) -> str:
    """The tidy ``metric`` of a column spec: ``"<task>.<metric>"`` or ``"<task>.<metric>.<filter>"``
    (e.g. ``gsm8k.exact_match.flexible-extract``); ``"average"`` for an average column.

    Raises:
        ValueError: the spec is ``unavailable`` or lacks ``task``/``metric``.
    """
    if "average" in spec:
        return "average"
    if "task" not in spec or "metric" not in spec:
        raise ValueError(f"column spec {spec!r} has no task and metric (unavailable: {spec.get('unavailable')!r})")
    return ".".join([spec["task"], spec["metric"]] + ([spec["filter"]] if spec.get("filter") else []))


def column_metrics(table: str) -> dict[str, str | None]:
    """Display column → tidy metric for ``table`` (``None`` for an unavailable column)."""
    cols = columns(table)
    items = [(c["label"], c) for c in cols] if isinstance(cols, list) else list(cols.items())
    return {label: (None if "unavailable" in spec else metric_id(spec)) for label, spec in items}
