"""The consistency checks that are table arithmetic, declared in ``eval/checks.yaml``.

The rows are data (the file's header documents the fields). :func:`load_rows` reads and validates them;
:func:`declared_checks` expands them over ``for`` (and ``over``) on the layout of a
:class:`~yocou.results.audit.claims.Sources` and turns each into a :class:`~yocou.results.audit.checks.Check` decided by one
evaluator (:func:`evaluate`) with a closed set of operations (:data:`OPS`). Checks that need model formulas stay
in :mod:`yocou.results.audit.checks`.
"""

from __future__ import annotations

import itertools
import re
import string
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from yocou.results import evaldefs
from yocou.results.audit.checks import (
    FAILS,
    HOLDS,
    SEQ,
    VARIANT_OF,
    Check,
    _paper_cfg,
    _rel,
)
from yocou.results.audit.claims import Sources

__all__ = ["OPS", "VALUES", "GROUPS", "load_rows", "expand", "declared_checks", "evaluate"]

OPS = ("mean_rounds_to", "rounds_to", "equals", "greater", "ratio", "ratios")
VALUES = ("ratio", "excess", "excess_of_c", "saved_percent", "gap_of_largest")
GROUPS = ("averages", "cross-table", "kv-formula", "throughput-vs-compute", "params-vs-shapes", "quoted-numbers")
FLOPS = ("prefill_per_token", "decode")
TESTS = {"ratio": ("within", "near", "at_most"), "ratios": ("within", "near", "rising_below")}
NEEDS = {"mean_rounds_to": ("of", "printed", "over"), "rounds_to": ("a", "b"), "equals": ("a", "b"),
         "greater": ("a", "b"), "ratio": ("a", "b", "value"), "ratios": ("a", "b", "over")}
FIELDS = {"id", "group", "kind", "tolerance", "claims", "op", "of", "printed", "a", "b", "c", "value", "expect",
          "within", "near", "at_most", "rising_below", "for", "over", "covers", "judges", "message",
          "message_if_fails", "digits"}
ROLES = ("of", "a", "b", "printed", "expect")
NAMES = {"mean_rounds_to": {"n", "mean", "unit", "rounded", "printed", "diff", "bound", "within"},
         "rounds_to": {"a", "b", "rounded"}, "equals": {"a", "b"}, "greater": {"a", "b"},
         "ratio": {"a", "b", "c", "x", "x_pct", "want", "want_inv", "dev_pct", "d", "absd", "d_over_c_pct", "top"},
         "ratios": {"xs", "wants", "worst_pct", "bad"}}


class _Each(list):
    """A list whose format spec applies to each item, space-separated (``{xs:.3f}``)."""

    def __format__(self, spec: str) -> str:
        return " ".join(format(x, spec) for x in self)


# --------------------------------------------------------------------------------------------- declared rows


def _default_path() -> Path:
    return evaldefs.eval_dir() / "checks.yaml"


def load_rows(path: str | Path | None = None) -> list[dict]:
    """The declared rows of ``eval/checks.yaml`` (or ``path``), validated, not yet expanded.

    Raises:
        ValueError: the file is not a list of mappings, or a row lacks a field, has an unknown field, names an
            unknown op, group, kind or value, or a test that does not fit its op; one line naming the file, the
            row's index and its id.
    """
    p = Path(path) if path else _default_path()
    raw = evaldefs._load(str(p))
    if not isinstance(raw, list):
        raise ValueError(f"{p}: expected a list of check rows")
    for i, row in enumerate(raw):
        where = f"{p}: row {i} ({row.get('id') if isinstance(row, dict) else row!r})"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a mapping")
        miss = [k for k in ("id", "group", "kind", "tolerance", "op") if k not in row]
        if miss:
            raise ValueError(f"{where}: missing {miss}")
        unknown = sorted(set(row) - FIELDS)
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown}")
        op = row["op"]
        if op not in OPS or row["group"] not in GROUPS or row["kind"] not in ("equality", "bound"):
            raise ValueError(f"{where}: op must be one of {OPS}, group one of {GROUPS} and kind equality or bound, "
                             f"got {op!r}, {row['group']!r}, {row['kind']!r}")
        miss = [k for k in NEEDS[op] if k not in row]
        if miss:
            raise ValueError(f"{where}: op {op} needs {miss}")
        if op == "ratio" and row["value"] not in VALUES:
            raise ValueError(f"{where}: value must be one of {VALUES}, got {row['value']!r}")
        if op == "ratio" and row["value"] == "excess_of_c" and "c" not in row:
            raise ValueError(f"{where}: value excess_of_c needs c (the cell the excess is a share of)")
        if op in TESTS:
            tests = [t for t in TESTS[op] if t in row]
            if len(tests) != 1:
                raise ValueError(f"{where}: op {op} needs exactly one of {TESTS[op]}, got {tests}")
            if tests[0] in ("within", "near") and "expect" not in row:
                raise ValueError(f"{where}: {tests[0]} needs expect")
        e = row.get("expect")
        if isinstance(e, dict) and not (e.get("flops") in FLOPS and all(
                isinstance(e.get(k), list) and len(e[k]) == 2 for k in ("num", "den"))):
            raise ValueError(f"{where}: expect must be a reference, a number or {{flops: one of {FLOPS}, "
                             f"num: [model, N], den: [model, N]}}, got {e!r}")
        for k in ("covers", "judges"):
            if k in row and not isinstance(row[k], list):
                raise ValueError(f"{where}: {k} must be a list")
        for k in ("for", "over"):
            if k in row and not isinstance(row[k], dict):
                raise ValueError(f"{where}: {k} must be a mapping of var -> values")
        if isinstance(row.get("over"), dict) and len(row["over"]) != 1:
            raise ValueError(f"{where}: over must name one var")
        names = NAMES[op] | {"note"} | set(row.get("for") or {}) | _item_keys(row.get("for") or {})
        for k in ("message", "message_if_fails"):
            try:
                bad = {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(str(row.get(k, "")))
                       if f is not None} - names
            except ValueError as err:
                raise ValueError(f"{where}: {k}: {err}") from None
            if bad:
                raise ValueError(f"{where}: {k} names {sorted(bad)}, not a var of `for` nor of op {op}")
        clash = (set(row.get("for") or {}) | _item_keys(row.get("for") or {})) & NAMES[op]
        if clash:
            raise ValueError(f"{where}: `for` var(s) {sorted(clash)} clash with the names op {op} gives its message")
    return raw


def _item_keys(spec: dict) -> set[str]:
    """The vars that mapping items of a ``for`` spec (or its ``extra``) set."""
    keys: set[str] = set()
    for v in spec.values():
        items = v if isinstance(v, list) else list((v.get("extra") or {}).values()) if isinstance(v, dict) else []
        keys |= {k for x in items if isinstance(x, dict) for k in x if k != "claims"}
    return keys


def _values(spec: Any, src: Sources, where: str) -> list[dict]:
    """One ``for``/``over`` spec's values, each as ``{var: value, ..., "claims": [...]}`` (var set by the caller)."""
    if isinstance(spec, list):
        return [dict(x) if isinstance(x, dict) else {"": x} for x in spec]
    if isinstance(spec, dict) and len({"rows_of", "columns_of"} & set(spec)) == 1:
        n = spec.get("rows_of", spec.get("columns_of"))
        labels = src.rows(n) if "rows_of" in spec else src.columns(n)
        extra = spec.get("extra") or {}
        return [{"": x, **extra.get(x, {})} for x in labels if x not in (spec.get("except") or [])]
    raise ValueError(f"{where}: values must be a list or {{rows_of: n}} / {{columns_of: n}}, got {spec!r}")


def _product(spec: dict, src: Sources, where: str) -> list[dict]:
    """The product of a ``for``/``over`` mapping: each item is {var: value} plus an item's own vars and claims."""
    axes = []
    for var, vals in spec.items():
        axes.append([{(var if k == "" else k): v for k, v in item.items()} for item in _values(vals, src, where)])
    out = []
    for combo in itertools.product(*axes):
        d: dict = {"claims": []}
        for item in combo:
            d["claims"] += list(item.get("claims", []))
            d.update({k: v for k, v in item.items() if k != "claims"})
        out.append(d)
    return out


def _fill(x: Any, subs: dict) -> Any:
    if isinstance(x, str):
        return x.format(**subs) if "{" in x else x
    if isinstance(x, list):
        return [_fill(v, subs) for v in x]
    return {k: _fill(v, subs) for k, v in x.items()} if isinstance(x, dict) else x


def expand(rows: list[dict], src: Sources, path: str | Path | None = None) -> list[dict]:
    """The declared rows expanded over ``for`` on ``src``'s layout, ids and references filled; ``over`` turns
    ``of`` / ``a``, ``b``, ``expect`` into lists. Each expanded row keeps its ``vars`` (for the message).

    Raises:
        ValueError: a placeholder names no var, or two expanded rows share an id (naming the file and the row).
    """
    p = Path(path) if path else _default_path()
    out = []
    for i, row in enumerate(rows):
        where = f"{p}: row {i} ({row['id']})"
        for v in _product(row.get("for") or {}, src, where):
            subs = {k: x for k, x in v.items() if k != "claims"}
            listed = ("of", "a", "b", "expect") if "over" in row else ()
            try:
                r = _fill({k: x for k, x in row.items() if k not in ("for", "over", "message", "message_if_fails",
                                                                     *listed)}, subs)
                if "over" in row:
                    items = _product(row["over"], src, where)
                    for k in (k for k in listed if k in row):
                        r[k] = [_fill(row[k], subs | {kk: x for kk, x in it.items() if kk != "claims"})
                                for it in items]
                    r["over_values"] = [it[next(iter(row["over"]))] for it in items]
            except (KeyError, IndexError) as e:
                raise ValueError(f"{where}: placeholder {e} names no var of `for`/`over`") from None
            r["claims"] = list(r.get("claims", [])) + v["claims"]
            r.update(vars=subs, message=row.get("message", ""), _row=f"row {i} ({row['id']})",
                     message_if_fails=row.get("message_if_fails", row.get("message", "")))
            out.append(r)
    seen: dict[str, str] = {}
    for r in out:
        if r["id"] in seen:
            raise ValueError(f"{p}: {r['_row']}: duplicate check id {r['id']!r} (also made by {seen[r['id']]})")
        seen[r["id"]] = r["_row"]
    return out


def _refs(row: dict, role: str) -> list[str]:
    """The cell and claim references of one role (a flops mapping or a number is none)."""
    xs = row.get(role) if isinstance(row.get(role), list) else [row.get(role)]
    return [x for x in dict.fromkeys(x for x in xs if isinstance(x, str)) if re.match(r"C:|T\d+:", x)]


def _covers(row: dict) -> tuple[str, ...]:
    roles = row.get("covers") or [k for k in ROLES if k in row]
    return tuple(dict.fromkeys(r for role in roles for r in _refs(row, role)))


def declared_checks(src: Sources, path: str | Path | None = None) -> list[Check]:
    """Every declared check of ``eval/checks.yaml`` (or ``path``), expanded on ``src``'s layout, in file order."""
    out = []
    for r in expand(load_rows(path), src, path):
        judges = None if "judges" not in r else tuple(
            x for j in r["judges"] for x in (_refs(r, j) if j in ROLES else [j]))
        out.append(Check(r["id"], r["group"], r["kind"], _covers(r), tuple(r["claims"]), r["tolerance"],
                         partial(evaluate, r), judges=judges))
    return out


# --------------------------------------------------------------------------------------------- evaluation


def _half_up(x: Decimal, like: Decimal) -> Decimal:
    return x.quantize(like, rounding=ROUND_HALF_UP)


def _dec(src: Sources, ref: str) -> Decimal:
    s = src.text(ref)
    try:
        return Decimal(s)
    except Exception:  # noqa: BLE001 - decimal raises InvalidOperation
        raise ValueError(f"{ref} ({src.origin}): expected a number, got {s!r}") from None


@lru_cache(maxsize=1)
def _paper_flops() -> tuple[dict, dict]:
    """Prefill FLOPs per prompt token and decode FLOPs per step, per Table 8/9 model and length (1.3B shapes)."""
    from yocou.results.audit.complexity import decode_flops, prefill_flops

    cfgs = {m: _paper_cfg(v) for m, v in VARIANT_OF.items()}
    pre = {m: {n: prefill_flops(c, n) / n for n in SEQ} for m, c in cfgs.items()}
    dec = {m: {n: decode_flops(c, n) for n in SEQ} for m, c in cfgs.items()}
    return pre, dec


def _expect(x: Any, s: Sources) -> float:
    if isinstance(x, dict):
        pre, dec = _paper_flops()
        t = pre if x["flops"] == "prefill_per_token" else dec
        (m0, n0), (m1, n1) = x["num"], x["den"]
        return t[m0][int(n0)] / t[m1][int(n1)]
    return s.num(x) if isinstance(x, str) else x  # a number as written (128 shows as 128)


def _ratio(r: dict, s: Sources) -> tuple[bool, Any, Any, dict]:
    a, b = s.num(r["a"]), s.num(r["b"])
    c = s.num(r["c"]) if "c" in r else None
    value = r["value"]
    ns: dict = {"a": a, "b": b, "c": c, "d": a - b, "absd": abs(a - b)}
    if value == "ratio":
        x = a / b
    elif value == "excess":
        x = (a - b) / b
    elif value == "excess_of_c":  # a's excess over b as a share of c (load_rows requires c)
        x = (a - b) / c
    elif value == "saved_percent":
        x = 100 * (1 - a / b)
    else:  # gap_of_largest
        n = r["a"][1:r["a"].index(":")]
        ns["top"] = max(s.num(ref) for ref in s.refs(int(n)))
        x = abs(a - b) / ns["top"]
    ns |= {"x": x, "x_pct": 100 * x, "d_over_c_pct": None if c is None else 100 * (a - b) / c}
    if "at_most" in r:
        return x <= float(r["at_most"]), x, f"<= {r['at_most']}", ns
    want = _expect(r["expect"], s)
    ns |= {"want": want, "want_inv": 1 / want if want else float("inf"), "dev_pct": 100 * (x / want - 1) if want else
           float("inf")}
    ok = _rel(x, want) <= r["within"] if "within" in r else abs(x - want) <= r["near"]
    return ok, x, want, ns


def _ratios(r: dict, s: Sources) -> tuple[bool, Any, Any, dict]:
    xs = _Each(s.num(a) / s.num(b) for a, b in zip(r["a"], r["b"]))
    wants = _Each(_expect(e, s) for e in r["expect"])
    shown = " ".join(f"{x:.{r.get('digits', 4)}f}" for x in xs)
    ns: dict = {"xs": xs, "wants": wants, "worst_pct": None, "bad": ""}
    if "rising_below" in r:
        lim = r["rising_below"]
        ok = all(x < lim for x in xs) and all(y >= x for x, y in zip(xs, xs[1:]))
        return ok, shown, f"< {lim:g}, non-decreasing in N", ns
    if "within" in r:
        fails = [_rel(x, w) > r["within"] for x, w in zip(xs, wants)]
        ns["worst_pct"] = 100 * max(_rel(x, w) for x, w in zip(xs, wants))
    else:
        fails = [abs(x - w) > r["near"] for x, w in zip(xs, wants)]
    ns["bad"] = ", ".join(f"{int(n) // 1024}K: {x:.4f}" for n, x, f in zip(r["over_values"], xs, fails) if f)
    want = wants[0] if len(set(wants)) == 1 else wants
    return not any(fails), shown, want, ns


def evaluate(r: dict, s: Sources) -> tuple[str, Any, Any, str]:
    """``(result, observed, expected, message)`` of one expanded row on ``s``."""
    op = r["op"]
    if op == "mean_rounds_to":
        printed, cells = _dec(s, r["printed"]), [_dec(s, ref) for ref in r["of"]]
        mean = sum(cells) / len(cells)
        unit = Decimal(1).scaleb(printed.as_tuple().exponent)
        bound = max(Decimal(1).scaleb(c.as_tuple().exponent) for c in cells) / 2 + unit / 2
        ok = _half_up(mean, printed) == printed
        obs, exp = float(mean), float(printed)
        ns = {"n": len(cells), "mean": mean, "unit": unit, "rounded": _half_up(mean, printed), "printed": printed,
              "diff": abs(mean - printed), "bound": bound, "within": "within" if abs(mean - printed) <= bound else
              "beyond"}
    elif op == "rounds_to":
        a, b = _dec(s, r["a"]), _dec(s, r["b"])
        ok, obs, exp = _half_up(b, a) == a, float(a), float(_half_up(b, a))
        ns = {"a": a, "b": b, "rounded": _half_up(b, a)}
    elif op in ("equals", "greater"):
        a, b = s.num(r["a"]), s.num(r["b"])
        ok, obs, exp = (a == b, a, b) if op == "equals" else (a > b, a - b, "> 0")
        ns = {"a": a, "b": b}
    else:
        ok, obs, exp, ns = (_ratio if op == "ratio" else _ratios)(r, s)
    msg = (r["message"] if ok else r["message_if_fails"]).format(**({"note": ""} | r["vars"] | ns))
    return (HOLDS if ok else FAILS), obs, exp, msg
