"""The tidy results layer: one long-format table per study, one row per observation.

Flow: runs (``runs/<scale>/``) and per-run evaluation outputs → a *summarize* step per study (library functions in
:mod:`yocou.results.summarize`, which do every fit, interpolation and ratio) → ``results/<scale>/tidy/<study>.{csv,json}``
→ renderers that only select, format and draw, and the audit (:mod:`yocou.results.audit.verdicts`), which reads the same
files.

Columns (:data:`COLUMNS`):

=============  ==========================================================================================
``study``      the study the row belongs to (``table3``, ``fig2``, ``efficiency``, ...)
``run``        the run (model folder name) the observation is of; for a derived row over several runs
               their names joined by ``|`` in the order of ``role``
``role``       the run's role in the study, resolved from the config's ``studies:`` (:func:`study_roles`),
               never from the run's name; a derived row over two roles is ``"<a>|<b>"``
``seed``       the training seed of the run (integer); ``-1`` for rows that do not depend on training
``metric``     what was measured, an identifier (``hellaswag.acc_norm``, ``train_loss``, ``kv_bytes``, ...)
``axis``       the independent variable (``tokens``, ``seq_len``, ``T``, ...) or ``""`` for none
``axis_value`` its value (number), ``NaN`` when ``axis`` is ``""``
``value``      the observation (finite number)
``stderr``     its standard error (``NaN`` when unknown); for timings half the range over repeats
``n``          the items, documents, repeats or tokens behind ``value`` (``NaN`` when not applicable)
``unit``       ``fraction``, ``nats``, ``ppl``, ``tokens/s``, ``bytes``, ``MiB``, ``s``, ``params``, ...
=============  ==========================================================================================

A study may add columns after these; readers keep them. Two have a fixed meaning: ``axis2``/``axis2_value``, a
second independent variable (e.g. the needle depth of Table 4), part of the row's key when present, and
``detail``, a free-text note.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
import pandera.pandas as pa

from yocou.results.readers import ResultFileError, read_json
from yocou.utils.io import atomic_write_json, atomic_write_text, provenance

__all__ = ["COLUMNS", "KEY", "NO_SEED", "tidy_frame", "write_tidy", "read_tidy", "read_tidy_dir", "study_roles",
           "select", "one", "role_of"]

COLUMNS = ("study", "run", "role", "seed", "metric", "axis", "axis_value", "value", "stderr", "n", "unit")
KEY = ("study", "run", "role", "seed", "metric", "axis", "axis_value")
NO_SEED = -1
_TEXT = ("study", "run", "role", "metric", "axis", "unit")


def tidy_frame(rows: Iterable[Mapping[str, Any]], *, where: str = "tidy rows") -> pd.DataFrame:
    """Rows (dicts with at least :data:`COLUMNS`; ``axis``/``axis_value``/``stderr``/``n``/``seed`` may be
    omitted) as a validated DataFrame with the columns in order.

    Raises:
        ValueError: a required column is missing, a value is not finite, ``n`` is below 1, a text column is
            not a string, or two rows share a key (:data:`KEY`); the message names ``where`` and the row.
    """
    rows = [dict(r) for r in rows]
    for r in rows:
        r.setdefault("axis", "")
        r.setdefault("axis_value", math.nan)
        r.setdefault("stderr", math.nan)
        r.setdefault("n", math.nan)
        r.setdefault("seed", NO_SEED)
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=list(COLUMNS))
    return _validate(df, where)


def _finite_or_nan(lo: float) -> pa.Check:
    return pa.Check(lambda s: s.isna() | (np.isfinite(s) & (s >= lo)), error=f"NaN or a finite number >= {lo:g}")


#: The tidy columns as a pandera schema: the one declaration of their types and ranges. A study may add columns
#: after them (``strict=False``); the key's uniqueness is checked after it (``axis2`` joins the key where present).
SCHEMA = pa.DataFrameSchema(
    {**{c: pa.Column(str, pa.Check.str_length(min_value=1, error="a non-empty string"))
        for c in ("study", "run", "role", "metric", "unit")},
     "seed": pa.Column(float, pa.Check(lambda s: s == s.round(), error="an integer"), coerce=True),
     "axis": pa.Column(str),
     "axis_value": pa.Column(float, nullable=True, coerce=True),
     "value": pa.Column(float, pa.Check(lambda s: np.isfinite(s), error="a finite number"), coerce=True),
     "stderr": pa.Column(float, _finite_or_nan(0), nullable=True, coerce=True),
     "n": pa.Column(float, _finite_or_nan(1), nullable=True, coerce=True)},
    checks=[pa.Check(lambda df: ((df["axis"] == "") & df["axis_value"].isna())
                     | ((df["axis"] != "") & np.isfinite(df["axis_value"])),
                     error="axis_value: expected a finite number when axis is set, NaN when it is not")],
    strict=False)


def _validate(df: pd.DataFrame, where: str) -> pd.DataFrame:
    """``df`` with the :data:`COLUMNS` first, validated by :data:`SCHEMA` (numbers coerced to float, ``seed`` to
    int), then its key checked for duplicates; ValueError in one line naming ``where``, the row and the column."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing}; expected {list(COLUMNS)}")
    df = df[list(COLUMNS) + [c for c in df.columns if c not in COLUMNS]].copy()
    df["axis"] = df["axis"].fillna("")
    for c in ("seed", "axis_value", "value", "stderr", "n"):  # coercion would read True as 1
        bad = [i for i, v in df[c].items() if isinstance(v, (bool, np.bool_))]
        if bad:
            raise ValueError(f"{where}: row {bad[0]}: {c} = {df[c][bad[0]]!r}, expected a number, not a boolean")
    if df.empty:  # no rows to check (a header-only file, say): pandas has typed none of the columns
        return df.astype({c: float for c in ("axis_value", "value", "stderr", "n")} | {"seed": int})
    try:
        df = SCHEMA.validate(df, lazy=True)
    except pa.errors.SchemaErrors as e:
        raise ValueError(f"{where}: {_schema_error(e)}") from None
    df["seed"] = df["seed"].astype(int)
    key = list(KEY)
    if "axis2" in df.columns:
        df["axis2"] = df["axis2"].fillna("").astype(str)
        df["axis2_value"] = pd.to_numeric(df.get("axis2_value", math.nan), errors="coerce").astype(float)
        key += ["axis2", "axis2_value"]
    dup = df.duplicated(key, keep=False)
    if dup.any():
        r = df[dup].iloc[0]
        raise ValueError(f"{where}: two rows share the key {dict((k, r[k]) for k in key)}")
    return df.reset_index(drop=True)


def _schema_error(e: pa.errors.SchemaErrors) -> str:
    """pandera's first failure in one line: ``row <i>: <column> = <value>, expected <what>``, or ``column <c>: ...``
    for a failure of a whole column."""
    fc = e.failure_cases.iloc[0]
    col, idx, check = fc["column"], fc["index"], str(fc["check"])
    case = fc["failure_case"].item() if isinstance(fc["failure_case"], np.generic) else fc["failure_case"]
    if check.startswith(("dtype(", "coerce_dtype(")):  # a value of the wrong type
        check = "a string" if col in _TEXT else "a number"
    if fc["schema_context"] == "DataFrameSchema":  # a check across columns: its message names them
        return f"row {idx}: {check}"
    if pd.isna(idx):
        return f"column {col!r}: expected {check}, got {case!r}"
    return f"row {idx}: {col} = {case!r}, expected {check}"


def write_tidy(df: pd.DataFrame | Iterable[Mapping[str, Any]], stem: str | Path, *,
               config: dict[str, Any] | None = None, inputs: Iterable[str] = ()) -> dict[str, Path]:
    """Write ``<stem>.csv`` and ``<stem>.json`` (``{"columns", "rows", "provenance"}``) atomically, after
    :func:`tidy_frame` validation. ``config``: the resolved config section the study used (stored in the
    provenance); ``inputs``: the files it read."""
    stem = Path(stem)
    if stem.suffix in (".csv", ".json"):
        stem = stem.with_suffix("")
    df = df if isinstance(df, pd.DataFrame) else tidy_frame(df, where=str(stem))
    df = _validate(df, str(stem))
    stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(stem.with_suffix(".csv"), df.to_csv(index=False))
    prov = provenance({**(config or {}), "inputs": [str(p) for p in inputs]}, None)
    atomic_write_json(stem.with_suffix(".json"), {"columns": list(df.columns),
                                                  "rows": json.loads(df.to_json(orient="records")),
                                                  "provenance": prov})
    return {"csv": stem.with_suffix(".csv"), "json": stem.with_suffix(".json")}


def _ends_with_newline(path: Path) -> bool:
    """True for an empty file or one whose last byte is a newline."""
    size = path.stat().st_size
    if not size:
        return True
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) == b"\n"


def read_tidy(path: str | Path, *, complete: bool = True) -> pd.DataFrame:
    """A tidy table (``.csv``, or ``.json`` written by :func:`write_tidy`), validated as :func:`tidy_frame` does,
    and with ``complete`` (the default) checked complete (:func:`check_complete`).

    Raises:
        FileNotFoundError: no such file.
        ResultFileError: unreadable, cut short (a CSV whose last row has no newline), a missing column, a
            non-finite value, a duplicate key, or rows missing (:func:`check_complete`), naming the file.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"tidy table {p} not found (run its summarize step)")
    try:
        if p.suffix == ".json":
            d = read_json(p, what="tidy table")
            if not isinstance(d, dict) or not isinstance(d.get("rows"), list):
                raise ResultFileError(p, "top level", "expected an object with a 'rows' list")
            df = pd.DataFrame(d["rows"])
        else:
            if not _ends_with_newline(p):  # write_tidy ends every row with one: without it, the file was cut
                raise ResultFileError(p, "last row", "the file does not end with a newline: truncated (rerun its "
                                      "summarize step)")
            df = pd.read_csv(p, keep_default_na=False, na_values={c: [""] for c in
                                                                   ("axis_value", "stderr", "n", "value")})
    except ResultFileError:
        raise
    except Exception as e:  # noqa: BLE001 - re-raised with the file's name
        raise ResultFileError(p, "", f"cannot read as a tidy table: {e}") from None
    try:
        df = _validate(df, str(p))
    except ValueError as e:
        raise ResultFileError(p, "", str(e).removeprefix(f"{p}: ")) from None
    if complete:
        check_complete(df, p)
    return df


def _row_key(df: pd.DataFrame) -> list[tuple]:
    cols = list(KEY) + (["axis2", "axis2_value"] if "axis2" in df.columns else [])
    return [tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in r)
            for r in df[cols].itertuples(index=False, name=None)]


def _key_text(df: pd.DataFrame, key: tuple) -> str:
    cols = list(KEY) + (["axis2", "axis2_value"] if "axis2" in df.columns else [])
    return ", ".join(f"{c}={v!r}" for c, v in zip(cols, key) if v not in ("", "nan"))


#: Keys of a study's provenance config that name the runs the study was made from: a list of runs, or a mapping
#: role -> run or list of runs. ``studies`` is read at the study's own entry.
_RUN_KEYS = ("core_variants", "core", "runs", "replicas", "crossover", "lr_runs")


def expected_runs(study: str, config: Mapping[str, Any]) -> dict[str, str]:
    """The runs a tidy table must have rows for, from the config section its summarize step recorded
    (``provenance.config`` of ``<study>.json``): run -> the config key that names it."""
    out: dict[str, str] = {}

    def add(v: Any, where: str) -> None:
        if isinstance(v, str):
            out.setdefault(v, where)
        elif isinstance(v, Mapping):
            for k, x in v.items():
                add(x, f"{where}.{k}")
        elif isinstance(v, (list, tuple)):
            for x in v:
                add(x, where)

    own = (config.get("studies") or {}).get(study)
    if own:  # the study names its own runs: the shared lists (core_variants, ...) are not all in it
        add(own, f"studies.{study}")
        return out
    for k in _RUN_KEYS:
        if k in config:
            add(config[k], k)
    return out


def check_complete(df: pd.DataFrame, path: str | Path) -> None:
    """Refuse a tidy table with rows missing or edited: the CSV and the JSON that :func:`write_tidy` wrote beside
    it must hold the same rows with the same values (:func:`_check_twins`; a CSV without its JSON is refused), the
    table must have rows for every run its recorded config names (:func:`expected_runs`), and the seeds of one
    role must have each curve at the same axis values (:func:`_check_seeds_alike`).

    Raises:
        ResultFileError: naming the study, the file and the first missing key.
    """
    p = Path(path)
    study = str(df["study"].iloc[0]) if len(df) else p.stem
    sib = p.with_suffix(".json")  # the provenance (config) is in the JSON
    config: Mapping[str, Any] = {}
    if p.suffix == ".csv" and not sib.is_file():
        raise ResultFileError(p, "", f"study {study}: {sib.name} is missing beside it (the table's rows and "
                              "provenance, against which the CSV is checked complete): rerun its summarize step")
    if sib.is_file():
        d = read_json(sib, what="tidy table")
        prov = d.get("provenance") if isinstance(d, dict) else None
        config = (prov.get("config") or {}) if isinstance(prov, dict) else {}
    other = p.with_suffix(".csv") if p.suffix == ".json" else sib
    if other.is_file() and other != p:
        _check_twins(df, p, other, study)
    runs = set(df["run"]) | set(df["role"])
    for run, where in expected_runs(study, config).items():
        if run not in runs:
            raise ResultFileError(p, "", f"study {study}: no rows for run {run!r}, which the config runs "
                                  f"({where}): the table is incomplete (first missing key: run={run!r}); rerun "
                                  "its summarize step")
    _check_seeds_alike(df, p, study)


def _check_twins(df: pd.DataFrame, p: Path, other: Path, study: str) -> None:
    """The CSV and the JSON of one table hold the same rows with the same values (write_tidy writes both)."""
    twin = read_tidy(other, complete=False)
    have, want = _row_key(df), _row_key(twin)
    hs, ws = set(have), set(want)
    missing = [k for k in want if k not in hs]
    if missing:
        raise ResultFileError(p, "", f"study {study}: {len(missing)} of {len(want)} rows missing (first missing key: "
                              f"{_key_text(twin, missing[0])}); it does not match {other.name} (cut or edited): "
                              "rerun its summarize step")
    extra = [k for k in have if k not in ws]
    if extra:
        raise ResultFileError(p, "", f"study {study}: {len(extra)} rows not in {other.name} (first: "
                              f"{_key_text(df, extra[0])}): rerun its summarize step")
    a = df.assign(_k=have).set_index("_k")
    b = twin.assign(_k=want).set_index("_k").loc[a.index]
    for col in ("value", "stderr", "n"):
        x, y = a[col].to_numpy(dtype=float), b[col].to_numpy(dtype=float)
        # the JSON keeps 10 decimal places (pandas to_json), the CSV every digit
        same = np.isclose(x, y, rtol=1e-9, atol=1e-10) | (np.isnan(x) & np.isnan(y))
        if not same.all():
            i = int(np.nonzero(~same)[0][0])
            raise ResultFileError(p, "", f"study {study}: {col} of row ({_key_text(df, have[i])}) is "
                                  f"{float(x[i])!r} here but {float(y[i])!r} in {other.name} (one of them was "
                                  "edited): rerun its summarize step")


def _check_seeds_alike(df: pd.DataFrame, p: Path, study: str) -> None:
    """Within one role, every run that has a metric has it at the same axis values (a seed's curve is not shorter
    than the others'). Only curves are compared (a metric with several axis values per run): a single value per
    run is a property of the run (its parameters, its learning rate). Derived roles (a ``|`` in the role: a
    comparison of two roles) are skipped."""
    cols = ["axis", "axis_value"] + (["axis2", "axis2_value"] if "axis2" in df.columns else [])
    base = df[~df["role"].astype(str).str.contains("|", regex=False)]
    # each row's axis values as a tuple of strings, made once for the table (not per group: thousands of groups)
    keys = pd.Series(list(zip(*(base[c].map(str) for c in cols))), index=base.index, dtype=object)
    per_run = keys.groupby([base["role"], base["metric"], base["axis"], base["run"]], sort=False).agg(set)
    for (role, metric, _), g in per_run.groupby(level=[0, 1, 2], sort=False):
        sets = {idx[3]: have for idx, have in g.items()}
        if len(sets) < 2 or max(len(v) for v in sets.values()) < 2:
            continue
        union = set().union(*sets.values())
        for run, have in sets.items():
            if have != union:
                k = sorted(union - have)[0]
                what = ", ".join(f"{c}={v!r}" for c, v in zip(cols, k) if v not in ("", "nan"))
                raise ResultFileError(p, "", f"study {study}: run {run!r} (role {role!r}) lacks a {metric} row the "
                                      f"role's other runs have (first missing key: run={run!r}, metric={metric!r}, "
                                      f"{what}): the table is incomplete; rerun its summarize step")


def read_tidy_dir(tidy_dir: str | Path, studies: Iterable[str] | None = None) -> pd.DataFrame:
    """Every ``<study>.csv`` under ``tidy_dir`` (or only ``studies``; an absent one is skipped) in one frame."""
    d = Path(tidy_dir)
    names = sorted(p.stem for p in d.glob("*.csv")) if studies is None else list(studies)
    frames = [read_tidy(d / f"{s}.csv") for s in names if (d / f"{s}.csv").is_file()]
    return pd.concat(frames, ignore_index=True) if frames else tidy_frame([])


def study_roles(config: Mapping[str, Any], study: str) -> dict[str, str | list[str]]:
    """The runs of ``study`` by role, from the config: ``studies.<study>`` as a mapping role → run (or role →
    list of runs, e.g. Figure 5's ladders), or a list of runs whose roles are the run names as written there;
    ``core`` is ``core_variants`` (roles = run names).

    Raises:
        KeyError: the config has no such study (the message names it and the studies it has).
    """
    if study == "core":
        return {r: r for r in config["core_variants"]}
    studies = config.get("studies") or {}
    if study not in studies:
        raise KeyError(f"studies.{study}: not in the config (it has {sorted(studies)})")
    s = studies[study]
    return {str(k): v for k, v in s.items()} if isinstance(s, Mapping) else {r: r for r in s}


def role_of(roles: Mapping[str, str | list[str]]) -> dict[str, str]:
    """Inverse of :func:`study_roles`: run → role (a run in a ladder gets its ladder's role)."""
    out: dict[str, str] = {}
    for role, runs in roles.items():
        for r in ([runs] if isinstance(runs, str) else runs):
            out.setdefault(r, role)
    return out


def select(df: pd.DataFrame, **eq: Any) -> pd.DataFrame:
    """Rows of ``df`` whose columns equal the given values (``axis_value`` compared as float)."""
    m = pd.Series(True, index=df.index)
    for k, v in eq.items():
        m &= (df[k].astype(float) == float(v)) if k == "axis_value" else (df[k] == v)
    return df[m]


def one(df: pd.DataFrame, **eq: Any) -> pd.Series | None:
    """The single row matching ``eq`` (:func:`select`), ``None`` if none.

    Raises:
        ValueError: more than one row matches (the key is incomplete).
    """
    s = select(df, **eq)
    if len(s) > 1:
        raise ValueError(f"{len(s)} tidy rows match {eq}; expected at most one")
    return None if s.empty else s.iloc[0]
