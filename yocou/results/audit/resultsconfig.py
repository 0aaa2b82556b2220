"""The resolved pipeline config a results folder was made with (``results/<scale>/config.json``, or
``runs/<scale>/started.json`` while computing), validated before the audit reads anything from it.

Only the fields the audit reads are checked (the rest is the pipeline's, already validated by the workflow's schema
when it ran): ``scale``, ``seed``, ``seeds`` (replica counts), ``core_variants``, ``lr_sensitivity`` and the
``train`` schedule fields. The seed count of the core variants is also checked against the tidy ``runs`` table:
a config that says 3 seeds beside tables of 11 is refused, not used to size intervals or power.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt, ValidationError

from yocou.results.readers import read_json

__all__ = ["read_results_config", "results_config", "results_config_path", "check_seed_counts"]


class _Seeds(BaseModel):
    model_config = ConfigDict(extra="allow")
    core: PositiveInt | None = None
    fig6: PositiveInt | None = None
    runs: dict[str, PositiveInt] = {}


class _Train(BaseModel):
    model_config = ConfigDict(extra="allow")
    steps: PositiveInt | None = None
    min_lr_ratio: float | None = None


class _ResultsConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    scale: str | None = None
    seed: NonNegativeInt | None = None
    seeds: _Seeds = _Seeds()
    core_variants: list[str] = []
    lr_sensitivity: Any = None
    train: _Train = _Train()


def read_results_config(path: str | Path) -> dict[str, Any]:
    """The resolved config in ``path`` (a ``{"config": {...}, ...}`` record or the bare config), validated.

    Raises:
        FileNotFoundError / ValueError: a missing file, not JSON, not a mapping, or a field of the wrong type,
            naming the file and the field (``seeds.core``, ``train.steps``, ...).
    """
    p = Path(path)
    raw = read_json(p, what="resolved pipeline config")
    cfg = raw.get("config", raw) if isinstance(raw, dict) else raw
    if not isinstance(cfg, dict):
        raise ValueError(f"{p}: expected a mapping (the resolved pipeline config, or {{\"config\": ...}}), got "
                         f"{type(cfg).__name__}")
    try:
        _ResultsConfig.model_validate(cfg)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise ValueError(f"{p}: {field}: {err['msg']} (got {err.get('input')!r})") from None
    return cfg


def results_config(results_dir: str | Path) -> dict[str, Any] | None:
    """The resolved config that made ``results_dir`` (``results/<scale>``), validated: ``runs/<scale>/started.json``
    beside it while computing (the config the runs were started with; ``results/<scale>/config.json`` is written only
    after the audit, so until then it is the previous results' config), else ``results_dir/config.json`` (the
    committed results'); None without either.

    Raises:
        ValueError: the file found is not a valid resolved config (:func:`read_results_config`).
    """
    p = results_config_path(results_dir)
    return None if p is None else read_results_config(p)


def results_config_path(results_dir: str | Path) -> Path | None:
    """The file :func:`results_config` reads for ``results_dir``: ``runs/<scale>/started.json`` where it exists,
    else ``results_dir/config.json`` where that does; None without either."""
    rd = Path(results_dir)
    return next((p for p in (rd.parent.parent / "runs" / rd.name / "started.json", rd / "config.json")
                 if p.is_file()), None)


def check_seed_counts(cfg: dict[str, Any], path: str | Path, runs: pd.DataFrame | None) -> None:
    """Refuse a config whose ``seeds.core`` contradicts the tidy ``runs`` table: each core variant present there
    must have exactly that many seed replicas (the run ``<v>`` and ``<v>_seed<k>``).

    Raises:
        ValueError: naming the file, ``seeds.core``, the variant and the count the table has.
    """
    want = (cfg.get("seeds") or {}).get("core")
    if want is None or runs is None or "run" not in runs:
        return
    names = set(runs["run"].astype(str))
    for v in cfg.get("core_variants") or []:
        have = sum(1 for n in names if re.fullmatch(rf"{re.escape(v)}(_seed\d+)?", n))
        if have and have != want:
            raise ValueError(f"{path}: seeds.core is {want}, but the tidy runs table has {have} seed replica(s) of "
                             f"{v}: the config is not the one that made these results")
