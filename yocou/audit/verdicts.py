"""Reproduced verdicts: our measured effects beside the paper's, one per declared comparison (issue 14).

:func:`reproduce` expands the rows of ``eval/comparisons.yaml`` (its header documents the fields) and turns each
into a :class:`Verdict` with one evaluator (:func:`evaluate`) that reads only the tidy tables
``results/<scale>/tidy/<study>.csv`` (:mod:`yocou.tidy`) and the paper's printed numbers (an absent table: not run).
:func:`decide` keeps every verdict no stronger than the evidence: ``deterministic``, ``timing`` (stderr: half the
range over repeats), ``eval`` (item standard errors) or ``training`` (spread only from several seeds).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .. import evaldefs, names
from ..tidy import read_tidy
from .claims import Sources, cell_ref

__all__ = ["SAME_SIZE", "SAME", "OPPOSITE", "INCONCLUSIVE", "VERDICTS", "NOT_RUN", "EFFECTS", "Verdict", "decide",
           "load_comparisons", "evaluate", "reproduce"]

SAME_SIZE, SAME, OPPOSITE, INCONCLUSIVE = "same direction and size", "same direction", "opposite", "inconclusive"
VERDICTS = (SAME_SIZE, SAME, OPPOSITE, INCONCLUSIVE)
NOT_RUN = "not run at this scale"
EVIDENCE = ("deterministic", "timing", "eval", "training")
_PAIRWISE = {"difference": (lambda a, b: a - b, lambda a, b, sa, sb: math.hypot(sa, sb)),
             "relative_decrease": (lambda a, b: (b - a) / b, lambda a, b, sa, sb: math.hypot(sa, sb) / b),
             "log_ratio": (lambda a, b: math.log(a / b), lambda a, b, sa, sb: math.hypot(sa / a, sb / b)),
             "ratio_minus_1": (lambda a, b: a / b - 1, lambda a, b, sa, sb: a / b * math.hypot(sa / a, sb / b))}
EFFECTS = (*_PAIRWISE, "exponent_minus", "monotone", "wins_ties_losses", "value", "equal")


@dataclass(frozen=True)
class Verdict:
    """One reproduced comparison: the paper's effect, ours, the noise we could estimate, and the verdict."""

    id: str
    claims: tuple[str, ...]
    comparison: str
    paper: str
    ours: str
    spread: str
    n_seeds: int | None
    evidence: str
    verdict: str
    qualifier: str
    message: str
    files: tuple[str, ...]

    def as_row(self) -> dict:
        return {**self.__dict__, "claims": " ".join(self.claims), "files": " ".join(self.files)}


def decide(paper: float, ours: float | None, *, evidence: str, se: float | None = None, size_comparable: bool = True,
           n_seeds: int | None = 1, scale: str = "", floor: bool = False,
           tolerance: tuple[float, float, float] | None = None) -> tuple[str, str]:
    """The verdict and its qualifier for one effect (signed: positive = the paper's claimed direction when
    ``paper > 0``). ``se``: standard error of ``ours``; ``n_seeds``: training seeds behind it (None: does not
    depend on training); ``floor``: both sides at a floor or ceiling; ``tolerance = (ours_raw, paper_raw, tol)``:
    the same size means within ``tol`` of the paper's raw value (an exponent) instead of within a factor of 2. At
    ``smoke`` every non-deterministic verdict is capped at inconclusive.

    Raises:
        ValueError: ``paper`` is 0 or not finite, or ``evidence`` is unknown.
    """
    if evidence not in EVIDENCE or not (paper and math.isfinite(paper)):
        raise ValueError(f"evidence must be one of {EVIDENCE} and the paper's effect a non-zero finite number, "
                         f"got {evidence!r}, {paper!r}")
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):  # +-inf keeps its sign (never reached)
        return INCONCLUSIVE, NOT_RUN
    seeds = n_seeds or 0
    direction = SAME if (ours > 0) == (paper > 0) and ours != 0 else OPPOSITE
    observed = f"observed: {direction if ours != 0 else 'no difference'}"
    for undecided, why in ((floor, "at the floor for both (no signal)"),
                           (evidence == "training" and seeds < 2, f"one seed, no spread ({observed})"),
                           (se is not None and abs(ours) <= 2 * se, f"within 2 standard errors ({observed})"),
                           (ours == 0, "no difference"),
                           (scale == "smoke" and evidence != "deterministic",
                            f"smoke scale checks the plumbing, not the paper ({observed})")):
        if undecided:
            return INCONCLUSIVE, why
    quals = (["one seed"] if evidence in ("eval", "training") and seeds < 2 else []) + (
        ["no repeat spread"] if evidence == "timing" and se is None else [])
    if direction == OPPOSITE:
        return OPPOSITE, "; ".join(quals)
    ratio, strong = ours / paper, evidence in ("deterministic", "timing") or seeds >= 2
    if tolerance is not None and strong:
        near = abs(tolerance[0] - tolerance[1]) <= tolerance[2]
        return (SAME_SIZE, "; ".join(quals)) if near else (SAME, "; ".join(quals + [
            f"not within {tolerance[2]:g} of the paper's {tolerance[1]:g}"]))
    if size_comparable and strong and 0.5 <= ratio <= 2.0:
        return SAME_SIZE, "; ".join(quals)
    quals.append("size not comparable across scales" if not size_comparable else
                 "size not judged with one seed" if not strong else f"size differs ({ratio:.2f}x the paper's)")
    return SAME, "; ".join(quals)


def _fill(x: Any, subs: dict[str, str]) -> Any:
    return (x.format(**subs) if isinstance(x, str) and "{" in x else [_fill(v, subs) for v in x] if isinstance(x, list)
            else {k: _fill(v, subs) for k, v in x.items()} if isinstance(x, dict) else x)


def load_comparisons(path: str | Path | None = None) -> list[dict]:
    """The declared comparisons, expanded over ``pairs`` × ``columns``, with ``{a}``, ``{b}``, ``{column}``
    filled (``{a}``: the paper's row label of role ``a`` in the row's paper table, else its display label).

    Raises:
        ValueError: a row lacks id/study/effect/evidence, names an unknown effect or evidence kind, or two expanded
            rows share an id (naming the file and the row).
    """
    p = Path(path or evaldefs.eval_dir() / "comparisons.yaml")
    if not isinstance(raw := evaldefs._load(str(p)), list):
        raise ValueError(f"{p}: expected a list of comparison rows")
    out: list[dict] = []
    for i, row in enumerate(raw):
        if miss := [k for k in ("id", "study", "effect", "evidence") if k not in row]:
            raise ValueError(f"{p}: row {i} ({row.get('id')}): missing {miss}")
        effs = row["effect"].values() if isinstance(row["effect"], dict) else [row["effect"]]
        if any(e not in EFFECTS for e in effs) or row["evidence"] not in EVIDENCE:
            raise ValueError(f"{p}: row {i} ({row['id']}): effect must be one of {EFFECTS} and evidence one of "
                             f"{EVIDENCE}, got {row['effect']!r}, {row['evidence']!r}")
        cols = row.get("columns")
        if isinstance(cols, str):
            spec = evaldefs.columns(cols)
            cols = [{"column": c, "metric": m, "unit": spec[c].get("unit", "fraction"),
                     **({"unavailable": spec[c]["unavailable"]} if m is None else {})}
                    for c, m in evaldefs.column_metrics(cols).items()]
        for pair, col in itertools.product(row.get("pairs") or [{}], cols or [{}]):
            r = {**{k: v for k, v in row.items() if k not in ("pairs", "columns")}, **pair, **col,
                 "claims": list(row.get("claims", [])) + list(pair.get("claims", [])),
                 "paper": {**row.get("paper", {}), **pair.get("paper", {})}}
            ptab = f"table{r['paper'].get('table', '')}"
            subs = {s: (names.paper_row(ptab, r[s]) or names.label(r[s])) if s in r else "" for s in ("a", "b")}
            subs |= {"column": r.get("column", ""), "a_role": r.get("a", ""), "b_role": r.get("b", "")}
            out.append(_fill(r, subs) | {"roles": {s: r[s] for s in ("a", "b") if s in r}})
    if len(ids := [r["id"] for r in out]) != len(set(ids)):
        raise ValueError(f"{p}: duplicate ids {sorted({i for i in ids if ids.count(i) > 1})}")
    return out


def _by_unit(x: Any, unit: str, default: Any) -> Any:  # a per-unit setting ({ppl: ..., fraction: ...}) or one value
    return x.get(unit, default) if isinstance(x, dict) else (default if x is None else x)


def _side(df: pd.DataFrame, role: str, metric: str, at: Any) -> dict | None:
    """One side's value at ``at`` (absent / number / already-resolved axis value), mean over seeds."""
    r = df[(df["role"] == role) & (df["metric"] == metric)]
    if at == "max":  # the largest value over the axis (e.g. Figure 5's best rung)
        r = r[r["axis_value"] == r.loc[r["value"].idxmax(), "axis_value"]] if not r.empty else r
    else:
        r = r[(r["axis"] == "") if at is None else (r["axis_value"] == float(at))]
    r = r[r["axis2"] == ""] if "axis2" in r else r
    if r.empty:
        return None
    seeds, v = int(r["seed"].nunique()), r.groupby("seed")["value"].mean()
    se = float(v.std(ddof=1) / math.sqrt(seeds)) if seeds > 1 else (
        None if r["stderr"].isna().all() else float(r["stderr"].iloc[0]))
    return {"value": float(v.mean()), "se": se, "seeds": seeds, "n": r["n"].iloc[0], "unit": r["unit"].iloc[0]}


def _pairwise(row: dict, df: pd.DataFrame, src: Sources) -> dict:
    """difference / relative decrease / log-ratio / ratio - 1 of role a against role b: at an axis value, at the
    last one both have, or the mean of the effect over the shared values (``at: mean``); the mean over
    ``metrics`` when several are named. The paper's effect is the same transform of its cells."""
    a, b = row["roles"]["a"], row["roles"]["b"]
    effs, ses, shown, seeds, floor, unit, eff = [], [], [], 1, True, "", "difference"
    for m in row.get("metrics") or [row["metric"]]:
        ats: list[Any] = [row.get("at")] if row.get("at") not in ("last", "mean") else sorted(set.intersection(*(
            set(df[(df["role"] == x) & (df["metric"] == m) & (df["axis"] != "")]["axis_value"]) for x in (a, b))))
        ats = ats[-1:] if row.get("at") == "last" else ats
        sides = [(_side(df, a, m, x), _side(df, b, m, x)) for x in ats]
        if not ats or any(sa is None or sb is None for sa, sb in sides):
            return {"missing": row.get("unavailable") or f"{m} not measured for {a} or {b}"}
        unit = sides[0][0]["unit"]
        k, eff = _by_unit(row.get("scale"), unit, 1), _by_unit(row["effect"], unit, "difference")
        f, g = _PAIRWISE[eff]
        e = [f(sa["value"] * k, sb["value"] * k) for sa, sb in sides]
        s = [None if sa["se"] is None or sb["se"] is None else
             g(sa["value"] * k, sb["value"] * k, sa["se"] * k, sb["se"] * k) for sa, sb in sides]
        effs.append(sum(e) / len(e))
        ses.append(None if None in s else math.sqrt(sum(x * x for x in s)) / len(s))
        seeds = min(x["seeds"] for pair in sides for x in pair)
        floor &= unit == "fraction" and all({sa["value"], sb["value"]} in ({0.0}, {1.0}) for sa, sb in sides)
        where = "" if ats == [None] else f" at {names.len_label(ats[0])}" if len(ats) == 1 else (
            f" (mean, {names.len_label(ats[0])}-{names.len_label(ats[-1])})")
        va, vb = (sum(x[i]["value"] * k for x in sides) / len(sides) for i in (0, 1))
        shown.append(f"{m.split('.')[0] + ' ' if row.get('metrics') else ''}{va:.4g} vs {vb:.4g}{where}")
    return {"ours": sum(effs) / len(effs), "se": None if None in ses else math.sqrt(sum(x * x for x in ses)) / len(ses),
            "seeds": seeds, "floor": floor, "effect": eff, "unit": unit, "shown": "; ".join(shown)}


def _paper_pairwise(row: dict, src: Sources) -> dict:
    """The paper's side of a pairwise row with ``paper.table``: the same transform of the cells of the rows of a and
    b (yocou.names.PAPER_ROWS) in the row's column, or at the printed lengths (the last only with ``at: last``)."""
    n, col = row["paper"]["table"], row["paper"].get("column") or row.get("column")
    ra, rb = (names.paper_row(f"table{n}", row["roles"][s]) for s in ("a", "b"))
    if ra is None or rb is None:
        raise ValueError(f"{row['id']}: the paper prints no row for {row['roles']} in Table {n} (names.PAPER_ROWS)")
    cols = [col] if col else [str(x) for x in names.PAPER_LENGTHS][-1 if row.get("at") == "last" else 0:]
    cells = [(src.num(cell_ref(n, ra, c)), src.num(cell_ref(n, rb, c))) for c in cols]
    refs = [cell_ref(n, r, c) for r in (ra, rb) for c in cols]
    eff = _by_unit(row["effect"], row.get("unit", "fraction"), "difference")
    pe = [_PAIRWISE[eff][0](x, y) for x, y in cells]
    shown = f"{cells[0][0]:g} vs {cells[0][1]:g}" if len(cells) == 1 else (
        f"{cells[-1][0]:g} vs {cells[-1][1]:g} at 256K (mean effect, 8K-256K)")
    return {"paper": sum(pe) / len(pe), "refs": refs, "paper_shown": f"{shown} ({_eff_s(sum(pe) / len(pe), eff)})"}


def _exponent(row: dict, df: pd.DataFrame, src: Sources) -> dict:
    s = _side(df, row["roles"]["a"], row["metric"], None) or _side(df, row["roles"]["a"], row.get("fallback"), None)
    if s is None:
        return {"missing": f"{row['metric']} not measured for {row['roles']['a']}"}
    k, pv, cell = float(row["k"]), float(row["paper"]["value"]), row["paper"].get("cell")
    return {"ours": s["value"] - k, "se": s["se"], "seeds": None, "paper": pv - k, "raw": (s["value"], pv),
            "paper_shown": f"{pv:g}" + (f" ({src.text(cell)})" if cell else ""), "shown": f"{s['value']:.2f}",
            "refs": [cell] if cell else []}


def _monotone(row: dict, df: pd.DataFrame, src: Sources) -> dict:
    """Relative decrease from the first to the last axis value (up to ``axis_max``) of each series; mixed signs
    across series are inconclusive."""
    lim = row.get("_axis_max")
    effs, parts, mono = [], [], True
    for m in row["metrics"]:
        g = df[(df["metric"] == m) & (df["axis"] != "")]
        g = g if lim is None else g[g["axis_value"] <= lim]
        groups = g.groupby("role", sort=False) if row.get("series") == "per_role" else [("", g)]
        for role, s in groups:
            s = s.groupby("axis_value")["value"].mean().sort_index()
            if len(s) < 2:
                continue
            effs.append((s.iloc[0] - s.iloc[-1]) / s.iloc[0])
            mono &= all(y <= x for x, y in zip(s, s.iloc[1:]))
            parts.append(f"{role}/{m.split('.')[0]} {effs[-1] * 100:+.0f}%" if role else
                         " ".join(f"{g['axis'].iloc[0]}={x:g}: {v:.3f}" for x, v in s.items()))
    if not effs:
        return {"missing": "fewer than 2 axis values"}
    if len({e > 0 for e in effs}) > 1:
        return {"undecided": "mixed across models and splits", "shown": "; ".join(parts)}
    return {"ours": sum(effs) / len(effs), "se": None, "seeds": int(df["seed"].nunique()),
            "shown": "; ".join(parts) + ("" if row.get("series") == "per_role" else
                                         f" ({'monotone' if mono else 'not monotone'})")}


def _special(row: dict, df: pd.DataFrame, src: Sources) -> dict:
    eff = row["effect"]
    if eff == "equal":  # every (role, axis value) of metric equals metric_b's
        j = pd.concat([df[df["metric"] == row[k]].set_index(["role", "axis_value"])["value"]
                       for k in ("metric", "metric_b")], axis=1, join="inner")
        ok, n = int((j.iloc[:, 0] == j.iloc[:, 1]).sum()), len(j)
        return {"fixed": SAME_SIZE if n and ok == n else OPPOSITE, "shown": f"{ok} of {n} measured = formula"}
    if eff == "wins_ties_losses":
        a, b = row["roles"]["a"], row["roles"]["b"]
        mets = row["metrics"] if isinstance(row["metrics"], list) else evaldefs.column_metrics(row["metrics"]).values()
        w = t = lo = sig = seeds = 0
        for m in mets:
            sa, sb = _side(df, a, m, None), _side(df, b, m, None)
            if sa is None or sb is None:
                continue
            d, se = sa["value"] - sb["value"], math.hypot(sa["se"] or 0, sb["se"] or 0)
            w, t, lo, sig = w + (d > 0), t + (d == 0), lo + (d < 0), sig + (se > 0 and abs(d) > 2 * se)
            seeds = min(sa["seeds"], sb["seeds"], seeds or sa["seeds"])
        if (n := w + t + lo) == 0:
            return {"missing": f"no metric measured for both {a} and {b}"}
        if w == lo == 0:
            return {"undecided": "at the floor for both (no signal)", "shown": f"tied on {t} of {n}"}
        x = (w - lo) / n
        return {"ours": x, "se": None if sig else abs(x), "seeds": seeds, "spread": f"{sig} beyond 2 se",
                "shown": f"better on {w}, tied on {t}, worse on {lo} of {n}"}
    s = _side(df, row["roles"]["a"], row["metric"], row.get("at"))  # value
    reached = _side(df, row["roles"]["a"], row["reached"], row.get("at")) if row.get("reached") else None
    if s is None and reached is not None and reached["value"] == 0:
        if row.get("unreached") == "never":
            return {"ours": -math.inf, "se": None, "seeds": reached["seeds"], "shown": "never reaches the reference"}
        return {"missing": "outside the measured range (no rung reaches the reference loss)"}
    if s is None:
        return {"missing": f"{row['metric']} not in the table"}
    return {"ours": s["value"], "se": s["se"] if s["seeds"] > 1 else None, "seeds": s["seeds"],
            "shown": f"{s['value']:.3f} {row.get('unit', '')}".strip()}


def evaluate(row: dict, tidy: dict[str, pd.DataFrame], src: Sources, scale: str) -> Verdict:
    """The verdict of one expanded comparison row, reading the tidy table ``tidy[row['study']]``."""
    p, ev, eff = row["paper"], row["evidence"], row["effect"]
    files = (f"tidy/{row['study']}.csv",)
    claims = [r for c in row["claims"] for r in (src.refs(10) if c == "table10:all" else [c])]
    p = {**p, "value": src.num(p["claim"]) / p.get("divide", 1)} if "claim" in p else p
    df = tidy.get(row["study"])
    fn = _pairwise if isinstance(eff, dict) or eff in _PAIRWISE else {"exponent_minus": _exponent,
                                                                      "monotone": _monotone}.get(eff, _special)
    res = {**(_paper_pairwise(row, src) if "table" in p else {}),
           **({"missing": f"{files[0]} not found"} if df is None else fn(row, df, src))}
    claims += [r for r in res.get("refs", []) if r not in claims]
    paper = res.get("paper", p.get("value"))
    se, seeds = res.get("se"), res.get("seeds")
    if ev == "eval" and se is None and "effect" in res:
        ev = "training"  # no item stderr (e.g. word perplexity): the training seed is all the noise we know
    pct = res.get("effect") in ("relative_decrease", "ratio_minus_1")
    ours = "-" if "missing" in res else res.get("shown", "-") + (
        f" ({_eff_s(res['ours'], res['effect'])})" if "effect" in res else "")

    def out(verdict: str, qualifier: str, message: str) -> Verdict:
        return Verdict(row["id"], tuple(claims), row["comparison"], res.get("paper_shown") or (
            f"{paper:g}" if "claim" in p else str(p.get("text", paper))), ours, res.get("spread") or (
            "-" if se is None else f"±{se * 100:.2f}% (1 se)" if pct else f"±{se:.3g} (1 se)"),
            None if "missing" in res else seeds, ev, verdict, qualifier, message, files)

    if "missing" in res:
        return out(INCONCLUSIVE, NOT_RUN, res["missing"])
    if "fixed" in res:
        return out(res["fixed"], f"measured at {scale} shapes", row["comparison"])
    if "undecided" in res:
        return out(INCONCLUSIVE, res["undecided"], f"{scale} scale")
    if p.get("expect") == "parity":
        return out(INCONCLUSIVE, "parity cannot be shown by a non-significant difference"
                   + ("; one seed" if (seeds or 1) < 2 else ""), f"{scale} scale")
    if not paper:
        return out(INCONCLUSIVE, "the paper shows no difference", "no direction to reproduce")
    tol = (*res["raw"], float(row["tolerance"])) if "tolerance" in row else None
    return out(*decide(paper, res["ours"], evidence=ev, se=se, n_seeds=seeds, scale=scale, tolerance=tol,
                       size_comparable=_by_unit(row.get("comparable"), res.get("unit", ""), True),
                       floor=res.get("floor", False)), f"{scale} scale, {row['study']}")


def _eff_s(x: float, effect: str) -> str:
    return f"{x * 100:+.2f}%" if effect in ("relative_decrease", "ratio_minus_1") else f"{x:+.3g}"


def reproduce(src: Sources, results_dir: str | Path, scale: str, *,
              comparisons: str | Path | None = None) -> list[Verdict]:
    """Every declared comparison's verdict for one scale, reading ``results_dir/tidy/`` (``results/<scale>``).
    A row's ``axis_max: <metric>`` is the smallest value of that metric in the tidy ``runs`` table (e.g.
    ``seq_len``, the training length).

    Raises:
        ValueError: a declared row is malformed, or a tidy table present is invalid (naming the file).
    """
    rows, tdir = load_comparisons(comparisons), Path(results_dir) / "tidy"
    tidy = {s: read_tidy(tdir / f"{s}.csv") for s in {r["study"] for r in rows} | {"runs"}
            if (tdir / f"{s}.csv").is_file()}
    for r in (r for r in rows if "axis_max" in r):
        lim = tidy["runs"].query("metric == @r['axis_max']")["value"] if "runs" in tidy else pd.Series([], dtype=float)
        r["_axis_max"] = None if lim.empty else float(lim.min())
    return [evaluate(r, tidy, src, scale) for r in rows]
