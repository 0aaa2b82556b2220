"""Validating readers of the result files that renderers and studies read back (JSON, JSONL, CSV).

Every reader checks what it returns: types, finiteness, ranges and, for training logs, unique increasing
steps. A file it cannot use raises :class:`ResultFileError` (a ``ValueError``) with one line,
``<file>: <row or line>: <what was expected>``, so a truncated or corrupt result never renders as a
figure with missing or wrong points, and a caller never meets a bare ``KeyError`` or ``TypeError``.

* :func:`read_json`, :func:`read_jsonl`, :func:`read_csv`: parse, naming the file and the position on error.
* :func:`read_metrics`: a run's ``metrics.jsonl`` (:func:`yocou.training.train.train`).
* :func:`read_profile`: ``profile.json`` (:mod:`yocou.evaluation.bench.profile`).
* :func:`read_ppl`: a held-out perplexity result (``yocou ppl``).
* :func:`read_summary`: a run's ``summary.json``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable

__all__ = ["ResultFileError", "read_json", "read_jsonl", "read_csv", "read_metrics", "read_profile", "read_ppl",
           "read_summary", "number", "text"]

Pathish = str | os.PathLike


class ResultFileError(ValueError):
    """A result file that cannot be used; ``str(e)`` is ``"<file>: <where>: <what was expected>"``."""

    def __init__(self, path: Pathish, where: str, expected: str):
        self.path, self.where, self.expected = Path(path), where, expected
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
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        raise ResultFileError(p, f"line {e.lineno} column {e.colno}", f"not valid JSON ({e.msg}); truncated or "
                                                                     "corrupt? rerun the step that writes it") from None


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


def _rows(d: dict, key: str, path: Pathish, where: str = "") -> list[dict]:
    """``d[key]``: a non-empty list of objects."""
    at = f"{where}.{key}" if where else key
    rows = d.get(key)
    if not isinstance(rows, list) or not rows:
        raise ResultFileError(path, at, f"expected a non-empty list, got {rows!r:.60}")
    for i, r in enumerate(rows):
        _object(r, path, f"{at}[{i}]", "an object")
    return rows


def _splits(d: dict, path: Pathish) -> dict[str, dict]:
    splits = d.get("splits")
    if not isinstance(splits, dict) or not splits:
        raise ResultFileError(path, "splits", "expected a non-empty object of split -> result")
    for name, s in splits.items():
        _object(s, path, f"splits.{name}", "an object")
    return splits


def _flag(row: dict, key: str, path: Pathish, where: str) -> bool:
    if not isinstance(row.get(key), bool):
        raise ResultFileError(path, where, f"{key} must be true or false, got {row.get(key)!r}")
    return row[key]


def _doc_ids(s: dict, path: Pathish, where: str, *, as_strings: bool = False) -> None:
    """``s["docs"]``: a list of documents, ``{"id": ...}`` objects (or id strings with ``as_strings``)."""
    docs = s.get("docs")
    if not isinstance(docs, list):
        raise ResultFileError(path, where, f"docs must be a list of documents, got {docs!r:.60}")
    for j, doc in enumerate(docs):
        if not as_strings:
            text(doc, "id", path, f"{where}.docs[{j}]")
        elif not (isinstance(doc, str) and doc):
            raise ResultFileError(path, f"{where}.docs[{j}]", f"expected a document id, got {doc!r:.60}")


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
        step = number(r, "step", p, where, integer=True, positive=True)
        number(r, "tokens", p, where, integer=True, minimum=0)
        number(r, "train_flops", p, where, minimum=0)
        number(r, "loss", p, where)
        if "heldout_loss" in r:  # train-time held-out NLL per split (yocou.training.train.HeldoutEval)
            h = r["heldout_loss"]
            if not isinstance(h, dict) or not h:
                raise ResultFileError(p, where, f"heldout_loss is {h!r}; expected an object split -> nats/token")
            for split in h:
                number(h, split, p, f"{where} heldout_loss")
        if prev is not None:
            j, q = prev
            if step <= q["step"]:
                raise ResultFileError(p, where, f"step {step} does not follow step {q['step']} of line {j}; "
                                                "expected strictly increasing steps (duplicated or out-of-order rows)")
            for k in ("tokens", "train_flops"):
                if r[k] < q[k]:
                    raise ResultFileError(p, where, f"{k} {r[k]!r} is below {q[k]!r} of line {j}; expected "
                                                    f"{k} never to decrease")
        prev = (i, r)
    return [r for _, r in rows]


#: Profile-row fields: (key, integer, positive, optional).
_PROFILE_FIELDS = (("seq_len", True, True, False), ("prompt_len", True, True, False), ("n_decode", True, True, False),
                   ("n_threads", True, True, False), ("n_repeats", True, True, False),
                   ("prefill_s", False, True, False), ("prefill_tokens_per_s", False, True, False),
                   ("ttft_s", False, True, False), ("decode_s", False, True, False),
                   ("decode_tokens_per_s", False, True, False), ("kv_bytes_measured", True, True, False),
                   ("kv_bytes_analytic", True, True, False), ("peak_mem_bytes", True, False, False),
                   ("peak_mem_delta_bytes", True, False, True), ("prefill_cpu_s", False, True, True),
                   ("decode_cpu_s", False, True, True), ("loadavg_1m_before", False, False, True),
                   ("loadavg_1m_after", False, False, True))


def read_profile(path: Pathish) -> tuple[list[dict], dict]:
    """``(rows, provenance)`` of a ``profile.json``: at least one row, each with a variant, dtype and device,
    positive integer lengths and counts, finite positive times and throughputs (also of each repeat), positive KV
    bytes, non-negative memory and load; one row per (variant, seq_len).

    Raises:
        FileNotFoundError: no such file.
        ResultFileError: naming the file and the row (0-based index into ``rows``).
    """
    p = Path(path)
    d = _object(read_json(p, what="profile"), p, "top level", "an object with 'rows' and 'provenance'")
    rows = _rows(d, "rows", p)
    seen: dict[tuple[str, int], int] = {}
    for i, r in enumerate(rows):
        where = f"rows[{i}]"
        for k in ("variant", "dtype", "device", "mem_kind"):
            text(r, k, p, where)
        for k, integer, positive, optional in _PROFILE_FIELDS:
            number(r, k, p, where, integer=integer, positive=positive, minimum=None if positive else 0,
                   optional=optional)
        _flag(r, "kv_equal", p, where)
        reps = r.get("repeats", [])
        if not isinstance(reps, list):
            raise ResultFileError(p, where, f"repeats must be a list, got {reps!r:.60}")
        for j, x in enumerate(reps):
            for k in ("prefill_s", "decode_s"):
                number(x, k, p, f"{where}.repeats[{j}]", positive=True)
        key = (r["variant"], r["seq_len"])
        if key in seen:
            raise ResultFileError(p, where, f"variant {key[0]!r} at seq_len {key[1]} repeats rows[{seen[key]}]; "
                                            "expected one row per (variant, seq_len)")
        seen[key] = i
    prov = d.get("provenance", {})
    return rows, _object(prov, p, "provenance", "an object")


def read_ppl(path: Pathish) -> dict:
    """A held-out perplexity result: ``splits`` (at least one) each with a finite ``ppl`` > 0, a finite ``nll``
    >= 0, integer ``n_tokens`` > 0 and ``seq_len`` > 0, and its ``docs`` (objects with an ``id``).

    Raises:
        FileNotFoundError: no such file.
        ResultFileError: naming the file and the split.
    """
    p = Path(path)
    d = _object(read_json(p, what="perplexity result"), p, "top level", "an object with 'splits'")
    for name, s in _splits(d, p).items():
        where = f"splits.{name}"
        number(s, "ppl", p, where, positive=True)
        number(s, "nll", p, where, minimum=0)
        number(s, "n_tokens", p, where, integer=True, positive=True)
        number(s, "seq_len", p, where, integer=True, positive=True)
        number(s, "max_tokens_per_doc", p, where, integer=True, positive=True, optional=True)
        _doc_ids(s, p, where)
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
    req = set(require)
    for k, integer in (("steps", True), ("tokens", True), ("train_flops", False), ("params", True),
                       ("active_params_per_token", False), ("train_flops_per_token", False)):
        optional = k not in ("steps", "tokens", "train_flops") and k not in req
        number(d, k, p, "top level", integer=integer, positive=True, optional=optional)
    return d


def read_kv_measure(path: Pathish) -> list[dict]:
    """Rows of ``kv_measure.json`` (``yocou kv-measure``): variant, dtype, integer ``seq_len``,
    ``measured_bytes`` and ``analytic_bytes`` > 0, ``equal`` a bool."""
    p = Path(path)
    d = _object(read_json(p, what="KV measurement"), p, "top level", "an object with 'rows'")
    rows = _rows(d, "rows", p)
    for i, r in enumerate(rows):
        where = f"rows[{i}]"
        text(r, "variant", p, where)
        text(r, "dtype", p, where)
        for k in ("seq_len", "measured_bytes", "analytic_bytes"):
            number(r, k, p, where, integer=True, positive=True)
        _flag(r, "equal", p, where)
    return rows


def read_longppl(path: Pathish) -> dict:
    """A long-context perplexity result (:mod:`yocou.evaluation.longctx.longppl`): positive integer ``train_seq_len``,
    ``span`` and ``lengths``; per split its documents and a curve of strictly increasing lengths, each with a
    finite ``cum_ppl`` > 0, a ``span_ppl`` > 0 or null (no full span yet) and ``extrapolated``."""
    p = Path(path)
    d = _object(read_json(p, what="long-context perplexity result"), p, "top level", "an object")
    for k in ("train_seq_len", "span"):
        number(d, k, p, "top level", integer=True, positive=True)
    lengths = d.get("lengths")
    if not isinstance(lengths, list) or not lengths:
        raise ResultFileError(p, "lengths", f"expected a non-empty list of lengths, got {lengths!r:.60}")
    for i in range(len(lengths)):
        number({"length": lengths[i]}, "length", p, f"lengths[{i}]", integer=True, positive=True)
    for name, s in _splits(d, p).items():
        where = f"splits.{name}"
        number(s, "n_docs", p, where, integer=True, positive=True)
        _doc_ids(s, p, where)
        prev = 0
        for i, c in enumerate(_rows(s, "curves", p, where)):
            at = f"{where}.curves[{i}]"
            n = number(c, "length", p, at, integer=True, positive=True)
            if n <= prev:
                raise ResultFileError(p, at, f"length {n} does not follow {prev}; expected strictly increasing lengths")
            prev = n
            number(c, "cum_ppl", p, at, positive=True)
            number(c, "span_ppl", p, at, positive=True, optional=True)
            _flag(c, "extrapolated", p, at)
    return d


def read_angular(path: Pathish) -> dict:
    """An angular-distance result (:mod:`yocou.evaluation.analysis.angular`): its layer applications and, per split and
    for ``all``, integer ``n_tokens`` > 0 and one finite distance in [0, 1] per application."""
    p = Path(path)
    d = _object(read_json(p, what="angular-distance result"), p, "top level", "an object")
    number(d, "seq_len", p, "top level", integer=True, positive=True)
    apps = _rows(d, "applications", p)
    for i, a in enumerate(apps):
        where = f"applications[{i}]"
        text(a, "kind", p, where)
        number(a, "index", p, where, integer=True, positive=True)
        for k in ("stage", "loop", "layer"):
            number(a, k, p, where, integer=True, minimum=0)
        number(a, "window", p, where, integer=True, positive=True, optional=True)
    parts = dict(_splits(d, p))
    parts["all"] = _object(d.get("all"), p, "all", "an object")
    for name, s in parts.items():
        where = "all" if name == "all" else f"splits.{name}"
        number(s, "n_tokens", p, where, integer=True, positive=True)
        if name != "all":
            for k in ("n_windows", "n_docs"):
                number(s, k, p, where, integer=True, positive=True)
            _doc_ids(s, p, where, as_strings=True)
        dist = s.get("distance")
        if not isinstance(dist, list) or len(dist) != len(apps):
            raise ResultFileError(p, f"{where}.distance", f"expected one distance per application ({len(apps)}), "
                                                          f"got {dist!r:.60}")
        for j in range(len(dist)):
            number({"distance": dist[j]}, "distance", p, f"{where}.distance[{j}]", minimum=0, maximum=1)
    return d


def read_niah(path: Pathish, tasks: Iterable[str] | None = None) -> dict:
    """A needle-in-a-haystack result (:mod:`yocou.evaluation.longctx.niah`): its ``records`` (task, ``correct`` 0 or 1,
    finite log-probabilities; where present ``choice_correct`` 0 or 1, ``n_choices`` >= 2 with that many - 1
    finite ``logp_choices``, the same ``n_choices`` in every record) and ``cells`` (task, length, depth in
    [0, 100], ``n`` > 0, ``acc`` and where present ``choice_acc`` in [0, 1], finite log-probabilities and gain);
    tasks among ``tasks`` where given."""
    p = Path(path)
    d = _object(read_json(p, what="needle-in-a-haystack result"), p, "top level", "an object")
    number(d, "train_seq_len", p, "top level", integer=True, positive=True, optional=True)
    known = None if tasks is None else set(tasks)
    choices: set[int] = set()
    for key in ("records", "cells"):
        for i, r in enumerate(_rows(d, key, p)):
            where = f"{key}[{i}]"
            t = text(r, "task", p, where)
            if known is not None and t not in known:
                raise ResultFileError(p, where, f"task {t!r} is not one of {sorted(known)}")
            for k in ("logp_value", "logp_distractor"):
                number(r, k, p, where)
            if key == "records":
                number(r, "correct", p, where, integer=True, minimum=0, maximum=1)
                if "choice_correct" in r or "n_choices" in r or "logp_choices" in r:
                    number(r, "choice_correct", p, where, integer=True, minimum=0, maximum=1)
                    k = number(r, "n_choices", p, where, integer=True, minimum=2)
                    lpc = r.get("logp_choices")
                    if not isinstance(lpc, list) or len(lpc) != k - 1 or not all(
                            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in lpc):
                        raise ResultFileError(p, f"{where}.logp_choices",
                                              f"expected {k - 1} finite numbers (n_choices - 1), got {lpc!r}")
                    if r["choice_correct"] != int(r["logp_value"] > max(lpc)):
                        raise ResultFileError(p, f"{where}.choice_correct", "disagrees with logp_value and "
                                              "logp_choices (1 exactly when logp_value is the highest)")
                    choices.add(k)
                    if len(choices) > 1:
                        raise ResultFileError(p, f"{where}.n_choices", f"differs between records ({sorted(choices)})")
            else:
                number(r, "length", p, where, integer=True, positive=True)
                number(r, "depth", p, where, minimum=0, maximum=100)
                number(r, "n", p, where, integer=True, positive=True)
                number(r, "acc", p, where, minimum=0, maximum=1)
                number(r, "choice_acc", p, where, minimum=0, maximum=1, optional=True)
                number(r, "gain", p, where)
    return d
