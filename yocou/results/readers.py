"""Validating readers of the result files that renderers and studies read back (JSON, JSONL, CSV).

Every reader checks what it returns: each file's fields are declared once as a pydantic model (types,
finiteness, ranges); what one field cannot say (unique increasing steps, one row per key, fields that must
agree) is checked after it. A file it cannot use raises :class:`ResultFileError` (a ``ValueError``) with one
line, ``<file>: <row or line>: <what was expected>``, and ``.field`` naming the field, so a truncated or
corrupt result never renders as a figure with missing or wrong points, and a caller never meets a bare
``KeyError`` or ``TypeError``.

* :func:`read_json`, :func:`read_jsonl`, :func:`read_csv`: parse, naming the file and the position on error.
* :func:`read_metrics`: a run's ``metrics.jsonl`` (:func:`yocou.training.train.train`).
* :func:`read_profile`: ``profile.json`` (:mod:`yocou.evaluation.bench.profile`).
* :func:`read_ppl`: a held-out perplexity result (``yocou ppl``).
* :func:`read_summary`: a run's ``summary.json``.
* :func:`read_kv_measure`, :func:`read_longppl`, :func:`read_angular`, :func:`read_niah`: the evaluations' results.
* :func:`number`, :func:`text`: one field of a file whose layout its own reader checks.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Annotated, Any, Iterable, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["ResultFileError", "read_json", "read_jsonl", "read_csv", "read_metrics", "read_profile", "read_ppl",
           "read_summary", "number", "text"]

Pathish = str | os.PathLike


class ResultFileError(ValueError):
    """A result file that cannot be used; ``str(e)`` is ``"<file>: <where>: <what was expected>"``.

    Attributes: ``path``; ``where`` (the line, row or object, ``""`` for the whole file); ``field`` (the field
    at fault, ``None`` where the fault is not one field's); ``expected``."""

    def __init__(self, path: Pathish, where: str, expected: str, *, field: str | None = None):
        self.path, self.where, self.expected, self.field = Path(path), where, expected, field
        super().__init__(f"{path}: {where}: {expected}" if where else f"{path}: {expected}")


def _read_text(p: Path, what: str) -> str:
    if not p.is_file():
        raise FileNotFoundError(f"{what} {p} not found")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ResultFileError(p, f"byte {e.start}", "not UTF-8 text (corrupt file?)") from None


def read_json(path: Pathish, *, what: str = "result file") -> Any:
    """Parse a JSON file.

    Raises:
        FileNotFoundError: no such file (``"<what> <file> not found"``).
        ResultFileError: empty, not UTF-8 or not valid JSON, naming the line and column.
    """
    p = Path(path)
    s = _read_text(p, what)
    if not s.strip():
        raise ResultFileError(p, "", "empty file; expected JSON (rerun the step that writes it)")
    from yocou.utils.io import DuplicateKeyError, loads_json

    try:
        return loads_json(s)
    except json.JSONDecodeError as e:
        raise ResultFileError(p, f"line {e.lineno} column {e.colno}", f"not valid JSON ({e.msg}); truncated or "
                                                                     "corrupt? rerun the step that writes it") from None
    except DuplicateKeyError as e:
        raise ResultFileError(p, "", f"{e}; edited by hand? rerun the step that writes it") from None


def read_jsonl(path: Pathish, *, what: str = "result file") -> list[tuple[int, dict]]:
    """``[(line number, object), ...]`` of a JSON-lines file (blank lines skipped; every other line an object).

    Raises:
        FileNotFoundError: no such file.
        ResultFileError: a line that is not a JSON object, naming it.
    """
    p = Path(path)
    out = []
    for i, line in enumerate(_read_text(p, what).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ResultFileError(p, f"line {i} column {e.colno}",
                                  f"not valid JSON ({e.msg}); truncated or corrupt? rerun the step that writes it") \
                from None
        if not isinstance(obj, dict):
            raise ResultFileError(p, f"line {i}", f"expected a JSON object, got {type(obj).__name__}")
        out.append((i, obj))
    return out


def read_csv(path: Pathish, *, what: str = "result file", required: Iterable[str] = ()) -> Any:
    """``pandas.read_csv`` naming the file on a parse error, an empty file or missing ``required`` columns."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what} {p} not found")
    try:
        df = pd.read_csv(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ResultFileError(p, "", f"cannot read as CSV ({str(e).strip().splitlines()[0]})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ResultFileError(p, "header", f"expected column(s) {missing}; has {list(df.columns)}")
    return df


# ------------------------------------------------------------------------------------------------ fields


def number(row: Any, key: str, path: Pathish, where: str, *, integer: bool = False, positive: bool = False,
           minimum: float | None = None, maximum: float | None = None, optional: bool = False) -> Any:
    """``row[key]`` checked to be a finite number (an ``int`` with ``integer``; not a bool), ``> 0`` with
    ``positive``, in ``[minimum, maximum]``; ``None`` where ``optional`` and absent or null. Else
    :class:`ResultFileError`."""
    if not isinstance(row, dict):
        raise ResultFileError(path, where, f"expected an object, got {type(row).__name__}")
    v = row.get(key)
    if v is None:
        if optional:
            return None
        raise ResultFileError(path, where, f"expected a field {key!r}" + (" (it is null)" if key in row else ""))
    kind = "an integer" if integer else "a number"
    if isinstance(v, bool) or not isinstance(v, int if integer else (int, float)):
        raise ResultFileError(path, where, f"{key} must be {kind}, got {v!r}")
    if not math.isfinite(v):
        raise ResultFileError(path, where, f"{key} must be finite, got {v!r}")
    if positive and v <= 0:
        raise ResultFileError(path, where, f"{key} must be > 0, got {v!r}")
    if minimum is not None and v < minimum:
        raise ResultFileError(path, where, f"{key} must be >= {minimum:g}, got {v!r}")
    if maximum is not None and v > maximum:
        raise ResultFileError(path, where, f"{key} must be <= {maximum:g}, got {v!r}")
    return v


def text(row: Any, key: str, path: Pathish, where: str) -> str:
    """``row[key]`` checked to be a non-empty string."""
    if not isinstance(row, dict):
        raise ResultFileError(path, where, f"expected an object, got {type(row).__name__}")
    v = row.get(key)
    if not isinstance(v, str) or not v:
        raise ResultFileError(path, where, f"{key} must be a non-empty string, got {v!r}")
    return v


def _object(d: Any, path: Pathish, where: str, what: str) -> dict:
    if not isinstance(d, dict):
        raise ResultFileError(path, where, f"expected {what}, got {type(d).__name__}")
    return d


# ------------------------------------------------------------------------------------------------ declarations
# Each result file's fields, declared once as a pydantic model (strict: no bool for a number, no float for an
# integer; extra fields allowed). A failed validation becomes one ResultFileError naming the file, the place and
# the field (:func:`_check`). What a field declaration cannot say (order, uniqueness, agreement between fields)
# is checked after it, in the reader.

_Finite = Annotated[float, Field(allow_inf_nan=False)]
_PosFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_NonNegFinite = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
_PosInt = Annotated[int, Field(gt=0)]
_NonNegInt = Annotated[int, Field(ge=0)]
_Bit = Annotated[int, Field(ge=0, le=1)]
_Name = Annotated[str, Field(min_length=1)]
_T = TypeVar("_T")
_NonEmpty = Annotated[list[_T], Field(min_length=1)]


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class _MetricsRow(_Model):
    step: _PosInt
    tokens: _NonNegInt
    train_flops: _NonNegFinite
    loss: _Finite
    heldout_loss: Annotated[dict[str, _Finite], Field(min_length=1)] = None  # absent, or split -> nats/token


class _Repeat(_Model):
    prefill_s: _PosFinite
    decode_s: _PosFinite


class _ProfileRow(_Model):
    variant: _Name
    dtype: _Name
    device: _Name
    mem_kind: _Name
    seq_len: _PosInt
    prompt_len: _PosInt
    n_decode: _PosInt
    n_threads: _PosInt
    n_repeats: _PosInt
    prefill_s: _PosFinite
    prefill_tokens_per_s: _PosFinite
    ttft_s: _PosFinite
    decode_s: _PosFinite
    decode_tokens_per_s: _PosFinite
    kv_bytes_measured: _PosInt
    kv_bytes_analytic: _PosInt
    kv_equal: bool
    peak_mem_bytes: _NonNegInt
    peak_mem_delta_bytes: _NonNegInt | None = None
    prefill_cpu_s: _PosFinite | None = None
    decode_cpu_s: _PosFinite | None = None
    loadavg_1m_before: _NonNegFinite | None = None
    loadavg_1m_after: _NonNegFinite | None = None
    repeats: list[_Repeat] = []


class _Profile(_Model):
    rows: _NonEmpty[_ProfileRow]
    provenance: dict = {}


class _Doc(_Model):
    id: _Name


class _PplSplit(_Model):
    ppl: _PosFinite
    nll: _NonNegFinite
    n_tokens: _PosInt
    seq_len: _PosInt
    max_tokens_per_doc: _PosInt | None = None
    docs: list[_Doc]


class _Ppl(_Model):
    splits: Annotated[dict[str, _PplSplit], Field(min_length=1)]


class _Summary(_Model):
    steps: _PosInt
    tokens: _PosInt
    train_flops: _PosFinite
    params: _PosInt | None = None
    active_params_per_token: _PosFinite | None = None
    train_flops_per_token: _PosFinite | None = None


class _KvRow(_Model):
    variant: _Name
    dtype: _Name
    seq_len: _PosInt
    measured_bytes: _PosInt
    analytic_bytes: _PosInt
    equal: bool


class _KvMeasure(_Model):
    rows: _NonEmpty[_KvRow]


class _Curve(_Model):
    length: _PosInt
    cum_ppl: _PosFinite
    span_ppl: _PosFinite | None = None  # null: no full span yet
    extrapolated: bool


class _LongSplit(_Model):
    n_docs: _PosInt
    docs: list[_Doc]
    curves: _NonEmpty[_Curve]


class _LongPpl(_Model):
    train_seq_len: _PosInt
    span: _PosInt
    lengths: _NonEmpty[_PosInt]
    splits: Annotated[dict[str, _LongSplit], Field(min_length=1)]


class _Application(_Model):
    kind: _Name
    index: _PosInt
    stage: _NonNegInt
    loop: _NonNegInt
    layer: _NonNegInt
    window: _PosInt | None = None


class _AngularAll(_Model):
    n_tokens: _PosInt
    distance: list[_Fraction]


class _AngularSplit(_AngularAll):
    n_windows: _PosInt
    n_docs: _PosInt
    docs: list[_Name]


class _Angular(_Model):
    seq_len: _PosInt
    applications: _NonEmpty[_Application]
    splits: Annotated[dict[str, _AngularSplit], Field(min_length=1)]
    all: _AngularAll


class _NiahRecord(_Model):
    task: _Name
    logp_value: _Finite
    logp_distractor: _Finite
    correct: _Bit
    choice_correct: _Bit = None  # the three multiple-choice fields come together or not at all
    n_choices: Annotated[int, Field(ge=2)] = None
    logp_choices: list[_Finite] = None


class _NiahCell(_Model):
    task: _Name
    logp_value: _Finite
    logp_distractor: _Finite
    length: _PosInt
    depth: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
    n: _PosInt
    acc: _Fraction
    choice_acc: _Fraction | None = None
    gain: _Finite


class _Niah(_Model):
    train_seq_len: _PosInt | None = None
    records: _NonEmpty[_NiahRecord]
    cells: _NonEmpty[_NiahCell]


_KIND = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
         "string_type": "a non-empty string", "string_too_short": "a non-empty string",
         "list_type": "a non-empty list", "too_short": "a non-empty list", "dict_type": "an object",
         "model_type": "an object", "finite_number": "finite"}
_BOUND = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="), "less_than": ("lt", "<"),
          "less_than_equal": ("le", "<=")}


def _place(loc: tuple) -> str:
    """``("splits", "book", "curves", 2)`` -> ``"splits.book.curves[2]"``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _check(model: type[BaseModel], data: Any, path: Pathish, where: str = "") -> None:
    """Validate ``data`` against ``model``; the first error as a :class:`ResultFileError` naming ``path``, the
    place (``where``, then the object the field sits in; ``top level`` for a file's own fields) and the field."""
    try:
        model.model_validate(data)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        loc = tuple(err["loc"])
        names = [i for i, part in enumerate(loc) if isinstance(part, str)]
        cut = names[-1] if names else len(loc)
        field = loc[cut] if names else None
        # a field's own place is the object it sits in; an item of a list field keeps its index (distance[2])
        inner = _place(loc[:cut]) if names and cut == len(loc) - 1 else _place(loc)
        place = " ".join(x for x in (where, inner) if x) or "top level"
        v, kind = err.get("input"), err["type"]
        if kind == "missing":
            msg = f"expected a field {field!r}"
        elif kind in _BOUND:
            key, op = _BOUND[kind]
            msg = f"{field} must be {op} {err['ctx'][key]:g}, got {v!r}"
        elif kind in _KIND:
            got = type(v).__name__ if kind in ("dict_type", "model_type") else f"{v!r:.60}"
            msg = f"{field} must be {_KIND[kind]}, got {got}"
        else:
            msg = f"{field}: {err['msg']}"
        raise ResultFileError(path, place, msg, field=None if field is None else str(field)) from None


# ------------------------------------------------------------------------------------------------ files


def read_metrics(path: Pathish) -> list[dict]:
    """Rows of a run's ``metrics.jsonl``: at least one, each with an integer ``step`` > 0, integer ``tokens``
    and ``train_flops`` >= 0 that never decrease, and a finite ``loss``; steps strictly increase (a duplicated
    or out-of-order row fails); a ``heldout_loss``, where present, is a non-empty object of finite numbers.

    Raises:
        FileNotFoundError: no such file.
        ResultFileError: naming the file and the line.
    """
    p = Path(path)
    rows = read_jsonl(p, what="training log")
    if not rows:
        raise ResultFileError(p, "", "no rows; expected one JSON object per logged step (train the run first)")
    prev: tuple[int, dict] | None = None
    for i, r in rows:
        where = f"line {i}"
        _check(_MetricsRow, r, p, where)
        if prev is not None:
            j, q = prev
            if r["step"] <= q["step"]:
                raise ResultFileError(p, where, f"step {r['step']} does not follow step {q['step']} of line {j}; "
                                                "expected strictly increasing steps (duplicated or out-of-order rows)",
                                      field="step")
            for k in ("tokens", "train_flops"):
                if r[k] < q[k]:
                    raise ResultFileError(p, where, f"{k} {r[k]!r} is below {q[k]!r} of line {j}; expected "
                                                    f"{k} never to decrease", field=k)
        prev = (i, r)
    return [r for _, r in rows]


def read_profile(path: Pathish) -> tuple[list[dict], dict]:
    """``(rows, provenance)`` of a ``profile.json``: at least one row, each with a variant, dtype and device,
    positive integer lengths and counts, finite positive times and throughputs (also of each repeat), positive KV
    bytes, non-negative memory and load; one row per (variant, seq_len, batch_rule) (``batch_rule`` absent:
    ``fixed``).

    Raises:
        FileNotFoundError: no such file.
        ResultFileError: naming the file and the row (0-based index into ``rows``).
    """
    p = Path(path)
    d = _object(read_json(p, what="profile"), p, "top level", "an object with 'rows' and 'provenance'")
    _check(_Profile, d, p)
    seen: dict[tuple[str, int, str], int] = {}
    for i, r in enumerate(d["rows"]):
        key = (r["variant"], r["seq_len"], r.get("batch_rule", "fixed"))
        if key in seen:
            raise ResultFileError(p, f"rows[{i}]", f"variant {key[0]!r} at seq_len {key[1]} ({key[2]} batch) repeats "
                                                   f"rows[{seen[key]}]; expected one row per (variant, seq_len, "
                                                   "batch_rule)", field="variant")
        seen[key] = i
    return d["rows"], d.get("provenance", {})


def read_ppl(path: Pathish) -> dict:
    """A held-out perplexity result: ``splits`` (at least one) each with a finite ``ppl`` > 0, a finite ``nll``
    >= 0, integer ``n_tokens`` > 0 and ``seq_len`` > 0, and its ``docs`` (objects with an ``id``).

    Raises:
        FileNotFoundError: no such file.
        ResultFileError: naming the file and the split.
    """
    p = Path(path)
    d = _object(read_json(p, what="perplexity result"), p, "top level", "an object with 'splits'")
    _check(_Ppl, d, p)
    return d


def read_summary(path: Pathish, require: Iterable[str] = ()) -> dict:
    """A run's ``summary.json``: integer ``steps`` and ``tokens`` > 0, ``train_flops`` > 0; ``params``,
    ``active_params_per_token`` and ``train_flops_per_token`` > 0 where present (or where listed in ``require``).

    Raises:
        FileNotFoundError: no such file.
        ResultFileError: naming the file and the field.
    """
    p = Path(path)
    d = _object(read_json(p, what="run summary"), p, "top level", "an object")
    _check(_Summary, d, p)
    for k in require:
        if d.get(k) is None:
            raise ResultFileError(p, "top level", f"expected a field {k!r}" + (" (it is null)" if k in d else ""),
                                  field=k)
    return d


def read_kv_measure(path: Pathish) -> list[dict]:
    """Rows of ``kv_measure.json`` (``yocou kv-measure``): variant, dtype, integer ``seq_len``,
    ``measured_bytes`` and ``analytic_bytes`` > 0, ``equal`` a bool."""
    p = Path(path)
    d = _object(read_json(p, what="KV measurement"), p, "top level", "an object with 'rows'")
    _check(_KvMeasure, d, p)
    return d["rows"]


def read_longppl(path: Pathish) -> dict:
    """A long-context perplexity result (:mod:`yocou.evaluation.longctx.longppl`): positive integer ``train_seq_len``,
    ``span`` and ``lengths``; per split its documents and a curve of strictly increasing lengths, each with a
    finite ``cum_ppl`` > 0, a ``span_ppl`` > 0 or null (no full span yet) and ``extrapolated``."""
    p = Path(path)
    d = _object(read_json(p, what="long-context perplexity result"), p, "top level", "an object")
    _check(_LongPpl, d, p)
    for name, s in d["splits"].items():
        prev = 0
        for i, c in enumerate(s["curves"]):
            if c["length"] <= prev:
                raise ResultFileError(p, f"splits.{name}.curves[{i}]", f"length {c['length']} does not follow {prev}; "
                                      "expected strictly increasing lengths", field="length")
            prev = c["length"]
    return d


def read_angular(path: Pathish) -> dict:
    """An angular-distance result (:mod:`yocou.evaluation.analysis.angular`): its layer applications and, per split and
    for ``all``, integer ``n_tokens`` > 0 and one finite distance in [0, 1] per application."""
    p = Path(path)
    d = _object(read_json(p, what="angular-distance result"), p, "top level", "an object")
    _check(_Angular, d, p)
    n_apps = len(d["applications"])
    for where, s in [*((f"splits.{k}", v) for k, v in d["splits"].items()), ("all", d["all"])]:
        if len(s["distance"]) != n_apps:
            raise ResultFileError(p, where, f"distance must have one value per application ({n_apps}), got "
                                            f"{len(s['distance'])}", field="distance")
    return d


def read_niah(path: Pathish, tasks: Iterable[str] | None = None) -> dict:
    """A needle-in-a-haystack result (:mod:`yocou.evaluation.longctx.niah`): its ``records`` (task, ``correct`` 0 or 1,
    finite log-probabilities; where present ``choice_correct`` 0 or 1, ``n_choices`` >= 2 with that many - 1
    finite ``logp_choices``, the same ``n_choices`` in every record) and ``cells`` (task, length, depth in
    [0, 100], ``n`` > 0, ``acc`` and where present ``choice_acc`` in [0, 1], finite log-probabilities and gain);
    tasks among ``tasks`` where given."""
    p = Path(path)
    d = _object(read_json(p, what="needle-in-a-haystack result"), p, "top level", "an object")
    _check(_Niah, d, p)
    known = None if tasks is None else set(tasks)
    for key in ("records", "cells"):
        for i, r in enumerate(d[key]):
            if known is not None and r["task"] not in known:
                raise ResultFileError(p, f"{key}[{i}]", f"task {r['task']!r} is not one of {sorted(known)}",
                                      field="task")
    choices: set[int] = set()
    mc = ("choice_correct", "n_choices", "logp_choices")
    for i, r in enumerate(d["records"]):
        where = f"records[{i}]"
        if not any(k in r for k in mc):
            continue
        for k in mc:
            if r.get(k) is None:
                raise ResultFileError(p, where, f"expected a field {k!r} (the multiple-choice fields come together)",
                                      field=k)
        k = r["n_choices"]
        if len(r["logp_choices"]) != k - 1:
            raise ResultFileError(p, where, f"logp_choices must hold n_choices - 1 = {k - 1} numbers, got "
                                            f"{len(r['logp_choices'])}", field="logp_choices")
        if r["choice_correct"] != int(r["logp_value"] > max(r["logp_choices"])):
            raise ResultFileError(p, where, "choice_correct disagrees with logp_value and logp_choices (1 exactly "
                                            "when logp_value is the highest)", field="choice_correct")
        choices.add(k)
        if len(choices) > 1:
            raise ResultFileError(p, where, f"n_choices differs between records ({sorted(choices)})",
                                  field="n_choices")
    return d
