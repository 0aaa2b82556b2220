"""Evaluation defined as data: the readers of the top-level ``eval/`` folder.

``eval/`` holds what every scale shares and the scale configs may not redefine:

* ``eval/columns.yaml``: the column maps of Tables 2, 3, 5 and Figure 3 (:func:`columns`, :func:`metric_id`);
* ``eval/lmeval/``: the lm-eval task templates the offline pack fills (:mod:`yocou.evaluation.lmeval.pack`);
* ``eval/protocols.yaml``: the NIAH and long-context protocol settings shared by every scale;
* ``eval/comparisons.yaml``: the audit's reproduced comparisons (:mod:`yocou.results.audit.verdicts`);
* ``eval/checks.yaml``: the audit's consistency checks that are table arithmetic (:mod:`yocou.results.audit.arith`).

The folder is found next to the package (a source checkout or an editable install) or at ``$YOCOU_EVAL_DIR``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from yocou.utils.yamlio import load_yaml

__all__ = ["eval_dir", "load", "columns", "metric_id", "column_metrics", "protocol", "niah_settings",
           "defined_in_eval", "redefined_in_scale_config"]

# The eval.niah keys in the order the scale configs had them: the niah rules pass them as one params mapping and
# Snakemake compares params by repr, so this order keeps results made before eval/protocols.yaml current.
NIAH_KEYS = ("tasks", "lengths", "n_depths", "n_samples", "max_new_tokens", "chunk_size", "batch", "dtype")


def eval_dir() -> Path:
    """The ``eval/`` folder: ``$YOCOU_EVAL_DIR`` or ``<repo>/eval`` beside the package.

    Raises:
        FileNotFoundError: neither exists (names both places).
    """
    env = os.environ.get("YOCOU_EVAL_DIR")
    here = Path(__file__).resolve().parents[2] / "eval"   # yocou/results/evaldefs.py -> the repository root
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
        return load_yaml(p)  # a duplicated key: DuplicateKeyError (a ValueError) naming the file, key and lines
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: not valid YAML: {e}") from None


def load(name: str) -> Any:
    """``eval/<name>`` parsed (YAML), cached per path."""
    return _load(str(eval_dir() / name))


def columns(table: str) -> dict[str, dict] | list[dict]:
    """The column map of ``table`` (``table2``, ``table3``, ``table5``: display column → spec; ``fig3``: a list
    of specs with ``label``). A spec has ``task`` and ``metric`` (and ``filter``, ``substitute``), or
    ``unavailable`` (why), or ``average`` (the columns it averages); ``if_missing`` says why a measured column
    can be absent from a scale's results (the config does not run it), shown as the audit's "not run" reason.

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


def protocol(name: str) -> dict[str, Any]:
    """The protocol ``name`` (``niah``, ``longppl``) of ``eval/protocols.yaml``: the settings every scale shares.

    Raises:
        KeyError: no such protocol (names the ones it has).
    """
    protos = load("protocols.yaml")
    if not isinstance(protos, dict) or not isinstance(protos.get(name), dict):
        raise KeyError(f"eval/protocols.yaml: no protocol {name!r} (it has {sorted(protos or {})})")
    return protos[name]


def niah_settings(scale: dict[str, Any]) -> dict[str, Any]:
    """The NIAH settings the rules pass on: the scale's ``eval.niah`` (lengths, depths, samples, chunk size, batch,
    dtype) with the protocol's ``tasks`` and ``max_new_tokens``, in :data:`NIAH_KEYS` order."""
    merged = {**scale, **{k: v for k, v in protocol("niah").items() if k in NIAH_KEYS}}
    return {k: merged[k] for k in NIAH_KEYS if k in merged}


def defined_in_eval() -> dict[str, str]:
    """Every config key (dotted) that ``eval/`` defines, with the file that does: a scale config may not set them.

    ``eval.downstream.tables`` and ``eval.downstream.<map>`` (``eval/columns.yaml``), ``eval.downstream.tasks.<key>.
    <field>`` for a field of the task template (``eval/lmeval/<key>.yaml``), ``eval.niah.<key>`` /
    ``eval.longppl.<key>`` for a key of the protocol (``eval/protocols.yaml``), ``comparisons`` and
    ``eval.comparisons`` (``eval/comparisons.yaml``).
    """
    out = {"eval.downstream.tables": "eval/columns.yaml"}
    out.update({f"eval.downstream.{t}": "eval/columns.yaml" for t in load("columns.yaml") or {}})
    for tmpl in sorted((eval_dir() / "lmeval").glob("*.yaml")):
        body = load(f"lmeval/{tmpl.name}") or {}
        for field in (body.get("task") or {}):
            out[f"eval.downstream.tasks.{tmpl.stem}.{field}"] = f"eval/lmeval/{tmpl.name}"
    for name, keys in (load("protocols.yaml") or {}).items():
        out.update({f"eval.{name}.{k}": "eval/protocols.yaml" for k in keys})
    out.update({"comparisons": "eval/comparisons.yaml", "eval.comparisons": "eval/comparisons.yaml"})
    return out


def redefined_in_scale_config(config: dict[str, Any]) -> list[tuple[str, str]]:
    """``(dotted key, eval/ file)`` of every key of :func:`defined_in_eval` that ``config`` sets."""
    found = []
    for dotted, where in defined_in_eval().items():
        node: Any = config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            found.append((dotted, where))
    return found
