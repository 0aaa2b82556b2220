"""Reproduced verdicts: our measured effects beside the paper's, one per declared comparison (issue 14).

:func:`reproduce` expands the rows of ``eval/comparisons.yaml`` (its header documents the fields) and turns each
into a :class:`Verdict` with one evaluator (:func:`evaluate`) that reads only the tidy tables
``results/<scale>/tidy/<study>.csv`` (:mod:`yocou.tidy`) and the paper's printed numbers (an absent table: not run).
:func:`decide` keeps every verdict no stronger than the evidence: ``deterministic``, ``timing`` (stderr: half the
range over repeats), ``eval`` (item standard errors: the 2-standard-error rule, unchanged) or ``training``
(spread only from several seeds).

Training-side evidence (``training``, and ``eval`` rows without an item stderr, which fall back to it) with at least
two seeds on every side is decided by the effect's 95% confidence interval across seeds (:func:`decide_interval`):
a Student-t interval, Welch's for two sides (se = hypot(se_a, se_b) with the Welch-Satterthwaite degrees of freedom;
one side: df = n - 1). Each side's se is the standard deviation of its per-seed values over sqrt(n seeds). A
non-linear effect (``relative_decrease``, ``log_ratio``, ``ratio_minus_1``, ``monotone``) is propagated by the delta
method (the gradient of the effect at the seed means); an effect averaged over axis values or metrics of the same
runs is linearised per seed first, so the correlation between them is kept (:func:`t_interval`). "Same direction"
(and size) / "opposite" only when the interval excludes 0; "no difference" only when it lies inside the row's
``margin`` (:data:`MARGINS`); else inconclusive. One seed: inconclusive ("one seed, no interval").
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from .. import evaldefs, names
from ..tidy import NO_SEED, read_tidy
from .claims import Sources, cell_ref

__all__ = ["SAME_SIZE", "SAME", "NO_DIFFERENCE", "OPPOSITE", "INCONCLUSIVE", "VERDICTS", "NOT_RUN", "EFFECTS",
           "MARGINS", "CONFIDENCE", "Verdict", "decide", "decide_interval", "t_interval", "load_comparisons",
           "load_tidy", "evaluate", "reproduce", "seed_spread", "SPREAD_COLUMNS"]

SAME_SIZE, SAME, OPPOSITE, INCONCLUSIVE = "same direction and size", "same direction", "opposite", "inconclusive"
# the 95% interval across seeds lies inside the margin: the effect the paper claims is absent at this scale
NO_DIFFERENCE = "no difference"
VERDICTS = (SAME_SIZE, SAME, NO_DIFFERENCE, OPPOSITE, INCONCLUSIVE)
CONFIDENCE = 0.95
# "no difference" margins, by the metric's tidy unit (a row's `margin` overrides, per unit like `scale`): in the
# metric's unit before `scale` for difference/value effects; `relative` for relative effects (relative_decrease,
# log_ratio, ratio_minus_1, monotone), whatever the unit. A unit without one never gets "no difference".
MARGINS = {"relative": 0.02, "nats": 0.02, "fraction": 0.02}
_RELATIVE = ("relative_decrease", "log_ratio", "ratio_minus_1", "monotone")
NOT_RUN = "not run at this scale"
EVIDENCE = ("deterministic", "timing", "eval", "training")
_PAIRWISE = {"difference": (lambda a, b: a - b, lambda a, b, sa, sb: math.hypot(sa, sb)),
             "relative_decrease": (lambda a, b: (b - a) / b, lambda a, b, sa, sb: math.hypot(sa, sb) / b),
             "log_ratio": (lambda a, b: math.log(a / b), lambda a, b, sa, sb: math.hypot(sa / a, sb / b)),
             "ratio_minus_1": (lambda a, b: a / b - 1, lambda a, b, sa, sb: a / b * math.hypot(sa / a, sb / b))}
# the gradient of each pairwise effect in (a, b): the delta method of the seed interval
_GRAD = {"difference": lambda a, b: (1.0, -1.0), "relative_decrease": lambda a, b: (-1 / b, a / b ** 2),
         "log_ratio": lambda a, b: (1 / a, -1 / b), "ratio_minus_1": lambda a, b: (1 / b, -a / b ** 2)}
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
    effect: float | None = None      # our effect as a number (None: not run / not a number)
    ci_low: float | None = None      # its 95% interval across seeds (training-side evidence, >= 2 seeds)
    ci_high: float | None = None
    ci_method: str = ""              # e.g. "t, Welch, 95%, df 3.9, seeds 3/3"
    margin: float | None = None      # the "no difference" margin the interval was held against

    def as_row(self) -> dict:
        return {**self.__dict__, "claims": " ".join(self.claims), "files": " ".join(self.files)}


def decide(paper: float, ours: float | None, *, evidence: str, se: float | None = None, size_comparable: bool = True,
           n_seeds: int | None = 1, scale: str = "", floor: bool = False,
           tolerance: tuple[float, float, float] | None = None, ci: tuple[float, float] | None = None,
           margin: float | None = None, percent: bool = False) -> tuple[str, str]:
    """The verdict and its qualifier for one effect (signed: positive = the paper's claimed direction when
    ``paper > 0``). ``se``: standard error of ``ours``; ``n_seeds``: training seeds behind it (None: does not
    depend on training); ``floor``: both sides at a floor or ceiling; ``tolerance = (ours_raw, paper_raw, tol)``:
    the same size means within ``tol`` of the paper's raw value (an exponent) instead of within a factor of 2. At
    ``smoke`` every non-deterministic verdict is capped at inconclusive. ``training`` evidence with ``n_seeds >= 2``
    and ``ci`` (the 95% interval across seeds) is decided by :func:`decide_interval` against ``margin`` (``percent``:
    print them in percent); the other
    evidence kinds keep the 2-standard-error rule.

    Raises:
        ValueError: ``paper`` is 0 or not finite, or ``evidence`` is unknown.
    """
    if evidence not in EVIDENCE or not (paper and math.isfinite(paper)):
        raise ValueError(f"evidence must be one of {EVIDENCE} and the paper's effect a non-zero finite number, "
                         f"got {evidence!r}, {paper!r}")
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):  # +-inf keeps its sign (never reached)
        return INCONCLUSIVE, NOT_RUN
    seeds = n_seeds or 0
    if evidence == "training" and seeds >= 2 and ci is not None and math.isfinite(ours):
        return decide_interval(paper, ours, ci, margin=margin, scale=scale, floor=floor,
                               size_comparable=size_comparable, tolerance=tolerance, percent=percent)
    direction = SAME if (ours > 0) == (paper > 0) and ours != 0 else OPPOSITE
    observed = f"observed: {direction if ours != 0 else 'no difference'}"
    for undecided, why in ((floor, "at the floor for both (no signal)"),
                           (evidence == "training" and seeds < 2, f"one seed, no interval ({observed})"),
                           (evidence == "training" and math.isfinite(ours) and ci is None,
                            f"{seeds} seeds but no interval ({observed})"),
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


def decide_interval(paper: float | None, ours: float, ci: tuple[float, float], *, margin: float | None,
                    scale: str = "", floor: bool = False, size_comparable: bool = True,
                    tolerance: tuple[float, float, float] | None = None, percent: bool = False) -> tuple[str, str]:
    """The verdict of a training-side effect from its 95% interval ``ci = (low, high)`` across seeds.

    ``paper`` is the paper's signed effect, or None where the paper claims parity (``paper: {expect: parity}``).
    With a direction: the interval excludes 0 -> same direction (and size, by :func:`decide`'s size rule: within a
    factor of 2, or ``tolerance``) or opposite; else the interval inside ``±margin`` -> "no difference" (the
    paper's effect is absent at this scale); else inconclusive, saying what the interval straddles. Parity: the
    interval inside ``±margin`` -> "same direction and size" (the paper-agreeing verdict: no difference, as the
    paper says); wholly outside it -> opposite; else inconclusive. At ``smoke`` a decided verdict is capped at
    inconclusive. ``percent``: the qualifier prints interval and margin in percent (relative effects).
    """
    lo, hi = ci
    inside = margin is not None and -margin <= lo and hi <= margin
    iv = f"95% interval [{lo * 100:+.3g}%, {hi * 100:+.3g}%]" if percent else f"95% interval [{lo:+.3g}, {hi:+.3g}]"
    mtxt = "no margin stated" if margin is None else f"±{margin * 100:g}%" if percent else f"±{margin:g}"
    if floor:
        return INCONCLUSIVE, "at the floor for both (no signal)"
    if paper is None:
        if inside:
            verdict, why = SAME_SIZE, f"no difference: {iv} inside the margin {mtxt}, as the paper's parity"
        elif margin is not None and (lo > margin or hi < -margin):
            verdict, why = OPPOSITE, f"{iv} beyond the margin {mtxt}; the paper claims parity"
        else:
            return INCONCLUSIVE, f"{iv} straddles the margin {mtxt} (parity neither shown nor refuted)"
    elif lo > 0 or hi < 0:
        verdict = SAME if (ours > 0) == (paper > 0) else OPPOSITE
        quals = [f"{iv} excludes 0"] + ([f"inside the margin {mtxt}"] if inside else [])
        if verdict == SAME:
            if tolerance is not None:
                near = abs(tolerance[0] - tolerance[1]) <= tolerance[2]
                verdict = SAME_SIZE if near else SAME
                quals += [] if near else [f"not within {tolerance[2]:g} of the paper's {tolerance[1]:g}"]
            elif not size_comparable:
                quals.append("size not comparable across scales")
            elif 0.5 <= ours / paper <= 2.0:
                verdict = SAME_SIZE
            else:
                quals.append(f"size differs ({ours / paper:.2f}x the paper's)")
        why = "; ".join(quals)
    elif inside:
        pv = f"{paper * 100:+.3g}%" if percent else f"{paper:+.3g}"
        verdict, why = NO_DIFFERENCE, f"{iv} inside the margin {mtxt}; the paper's effect is {pv}"
    else:
        return INCONCLUSIVE, f"{iv} straddles 0 and the margin {mtxt}"
    if scale == "smoke":
        return INCONCLUSIVE, f"smoke scale checks the plumbing, not the paper (observed: {verdict}; {why})"
    return verdict, why


def t_interval(est: float, terms: list[tuple[str, Any, pd.Series, float]], level: float = CONFIDENCE) -> dict | None:
    """The Student-t interval of an effect ``est`` from its linearisation ``terms``: ``(group, key, per-seed values,
    weight)``, the effect's gradient in that value times its weight. Terms of one group (the same runs: a role) are
    combined per seed first (z_s = sum of weight * value), so their correlation counts; the groups are independent.
    A group whose terms were not all measured on the same seeds counts each term as independent. se =
    sqrt(sum of the groups' sd(z) / sqrt(n) squared); df by Welch-Satterthwaite (one group: n - 1). None when a term
    has fewer than 2 seeds.

    Returns ``{"lo", "hi", "se", "df", "seeds": {group: n}, "method"}``.
    """
    if not terms or any(len(t[2]) < 2 for t in terms):
        return None
    comps: list[tuple[float, int]] = []
    ns: dict[str, int] = {}
    for g in dict.fromkeys(t[0] for t in terms):
        ts = [t for t in terms if t[0] == g]
        tab = pd.concat([t[2].rename(i) for i, t in enumerate(ts)], axis=1)
        if not tab.isna().to_numpy().any():
            z = tab.to_numpy(dtype=float) @ np.array([t[3] for t in ts], dtype=float)
            comps.append((float(np.std(z, ddof=1)) / math.sqrt(len(z)), len(z) - 1))
            ns[g] = len(z)
        else:
            comps += [(abs(t[3]) * float(t[2].std(ddof=1)) / math.sqrt(len(t[2])), len(t[2]) - 1) for t in ts]
            ns[g] = min(len(t[2]) for t in ts)
    var = sum(se * se for se, _ in comps)
    den = sum(se ** 4 / d for se, d in comps)
    dof = var * var / den if den > 0 else float(sum(d for _, d in comps))
    se = math.sqrt(var)
    q = float(stats.t.ppf(0.5 + level / 2, dof))
    kind = "t, Welch" if len(ns) > 1 else "t"
    return {"lo": float(est - q * se), "hi": float(est + q * se), "se": se, "df": dof, "seeds": ns,
            "method": f"{kind}, {level:.0%}, df {dof:.3g}, seeds {'/'.join(str(n) for n in ns.values())}"}


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
    """One side's value at ``at`` (absent / number / already-resolved axis value), mean over seeds; ``by_seed``:
    the value of each seed (a Series indexed by seed)."""
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
    return {"value": float(v.mean()), "se": se, "seeds": seeds, "n": r["n"].iloc[0], "unit": r["unit"].iloc[0],
            "by_seed": v.astype(float)}


def _pairwise(row: dict, df: pd.DataFrame, src: Sources) -> dict:
    """difference / relative decrease / log-ratio / ratio - 1 of role a against role b: at an axis value, at the
    last one both have, or the mean of the effect over the shared values (``at: mean``); the mean over
    ``metrics`` when several are named. The paper's effect is the same transform of its cells. ``ci``: the
    interval across seeds (:func:`t_interval`; the delta method through ``_GRAD``) when every side has 2 seeds."""
    a, b = row["roles"]["a"], row["roles"]["b"]
    effs, ses, shown, seeds, floor, unit, eff, k = [], [], [], 1, True, "", "difference", 1
    mets, terms = row.get("metrics") or [row["metric"]], []
    for m in mets:
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
        for x, (sa, sb) in zip(ats, sides):
            da, db = _GRAD[eff](sa["value"] * k, sb["value"] * k)
            w = k / len(ats) / len(mets)
            terms += [(a, (m, x), sa["by_seed"], da * w), (b, (m, x), sb["by_seed"], db * w)]
        effs.append(sum(e) / len(e))
        ses.append(None if None in s else math.sqrt(sum(x * x for x in s)) / len(s))
        seeds = min(x["seeds"] for pair in sides for x in pair)
        floor &= unit == "fraction" and all({sa["value"], sb["value"]} in ({0.0}, {1.0}) for sa, sb in sides)
        where = "" if ats == [None] else f" at {names.len_label(ats[0])}" if len(ats) == 1 else (
            f" (mean, {names.len_label(ats[0])}-{names.len_label(ats[-1])})")
        va, vb = (sum(x[i]["value"] * k for x in sides) / len(sides) for i in (0, 1))
        shown.append(f"{m.split('.')[0] + ' ' if row.get('metrics') else ''}{va:.4g} vs {vb:.4g}{where}")
    ours = float(sum(effs) / len(effs))
    return {"ours": ours, "se": None if None in ses else math.sqrt(sum(x * x for x in ses)) / len(ses),
            "seeds": seeds, "floor": floor, "effect": eff, "unit": unit, "k": k, "shown": "; ".join(shown),
            "ci": t_interval(ours, terms) if math.isfinite(ours) else None}


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
    effs, parts, mono, terms = [], [], True, []
    for m in row["metrics"]:
        g = df[(df["metric"] == m) & (df["axis"] != "")]
        g = g if lim is None else g[g["axis_value"] <= lim]
        groups = g.groupby("role", sort=False) if row.get("series") == "per_role" else [("", g)]
        for role, s in groups:
            per_seed = s.groupby(["axis_value", "seed"])["value"].mean()
            owner = s.groupby("axis_value")["role"].agg(lambda r: "+".join(sorted(set(r))))
            s = per_seed.groupby(level=0).mean().sort_index()
            if len(s) < 2:
                continue
            effs.append((s.iloc[0] - s.iloc[-1]) / s.iloc[0])
            x0, v0, x1, v1 = s.index[0], s.iloc[0], s.index[-1], s.iloc[-1]
            da, db = _GRAD["relative_decrease"](v1, v0)   # (v0 - v1) / v0: a = the last, b = the first
            terms += [(owner[x1], (m, x1), per_seed.loc[x1], da), (owner[x0], (m, x0), per_seed.loc[x0], db)]
            mono &= all(y <= x for x, y in zip(s, s.iloc[1:]))
            parts.append(f"{role}/{m.split('.')[0]} {effs[-1] * 100:+.0f}%" if role else
                         " ".join(f"{g['axis'].iloc[0]}={x:g}: {v:.3f}" for x, v in s.items()))
    if not effs:
        return {"missing": "fewer than 2 axis values"}
    if len({e > 0 for e in effs}) > 1:
        return {"undecided": "mixed across models and splits", "shown": "; ".join(parts)}
    ours = float(sum(effs) / len(effs))
    terms = [(g, key, v, w / len(effs)) for g, key, v, w in terms]
    return {"ours": ours, "se": None, "seeds": min(len(t[2]) for t in terms), "effect": "monotone",
            "ci": t_interval(ours, terms), "unit": "",
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
    return {"ours": s["value"], "se": s["se"] if s["seeds"] > 1 else None, "seeds": s["seeds"], "unit": s["unit"],
            "ci": t_interval(s["value"], [(row["roles"]["a"], row["metric"], s["by_seed"], 1.0)]),
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
    ci = res.get("ci") if ev == "training" and "missing" not in res else None
    if ci is not None:
        se = ci["se"]
    kind = res.get("effect", eff if isinstance(eff, str) else "")
    pct = kind in ("relative_decrease", "ratio_minus_1", "monotone")
    margin = _margin(row, res.get("unit", ""), kind, res.get("k", 1))
    ours = "-" if "missing" in res else res.get("shown", "-") + (
        f" ({_eff_s(res['ours'], kind)}" + (f", 95% CI {_eff_s(ci['lo'], kind)} to {_eff_s(ci['hi'], kind)}"
                                             if ci else "") + ")" if "effect" in res or ci else "")
    one_se = "-" if se is None else f"±{se * 100:.2f}% (1 se)" if pct else f"±{se:.3g} (1 se)"

    def out(verdict: str, qualifier: str, message: str) -> Verdict:
        number = res.get("ours") if "missing" not in res and isinstance(res.get("ours"), (int, float)) else None
        return Verdict(row["id"], tuple(claims), row["comparison"], res.get("paper_shown") or (
            f"{paper:g}" if "claim" in p else str(p.get("text", paper))), ours, res.get("spread") or (
            one_se if ci is None else f"95% CI [{_eff_s(ci['lo'], kind)}, {_eff_s(ci['hi'], kind)}] "
                                      f"({ci['method']}); {one_se}"),
            None if "missing" in res else seeds, ev, verdict, qualifier, message, files,
            None if number is None else float(number), ci and ci["lo"], ci and ci["hi"], ci["method"] if ci else "",
            margin if ev == "training" else None)

    if "missing" in res:
        return out(INCONCLUSIVE, NOT_RUN, res["missing"])
    if "fixed" in res:
        return out(res["fixed"], f"measured at {scale} shapes", row["comparison"])
    if "undecided" in res:
        return out(INCONCLUSIVE, res["undecided"], f"{scale} scale")
    if p.get("expect") == "parity":
        if ci is not None and (seeds or 1) >= 2:
            return out(*decide_interval(None, res["ours"], (ci["lo"], ci["hi"]), margin=margin, scale=scale,
                                        floor=res.get("floor", False), percent=pct), f"{scale} scale, {row['study']}")
        return out(INCONCLUSIVE, "parity cannot be shown by a non-significant difference"
                   + ("; one seed, no interval" if (seeds or 1) < 2 else ""), f"{scale} scale")
    if not paper:
        return out(INCONCLUSIVE, "the paper shows no difference", "no direction to reproduce")
    tol = (*res["raw"], float(row["tolerance"])) if "tolerance" in row else None
    return out(*decide(paper, res["ours"], evidence=ev, se=se, n_seeds=seeds, scale=scale, tolerance=tol,
                       size_comparable=_by_unit(row.get("comparable"), res.get("unit", ""), True),
                       floor=res.get("floor", False), ci=None if ci is None else (ci["lo"], ci["hi"]),
                       margin=margin, percent=pct), f"{scale} scale, {row['study']}")


def _margin(row: dict, unit: str, effect: str, k: float) -> float | None:
    """The "no difference" margin of a row in the units of its effect: the row's ``margin`` (per unit or one
    number), else :data:`MARGINS` (``relative`` for relative effects); an absolute margin is scaled by ``scale``."""
    rel = effect in _RELATIVE
    m = _by_unit(row.get("margin"), unit, None)
    m = (MARGINS["relative"] if rel else MARGINS.get(unit)) if m is None else float(m)
    return None if m is None else m if rel else m * k


def _eff_s(x: float, effect: str) -> str:
    return f"{x * 100:+.2f}%" if effect in ("relative_decrease", "ratio_minus_1", "monotone") else f"{x:+.3g}"


def reproduce(src: Sources, results_dir: str | Path, scale: str, *,
              comparisons: str | Path | None = None) -> list[Verdict]:
    """Every declared comparison's verdict for one scale, reading ``results_dir/tidy/`` (``results/<scale>``).
    A row's ``axis_max: <metric>`` is the smallest value of that metric in the tidy ``runs`` table (e.g.
    ``seq_len``, the training length).

    Raises:
        ValueError: a declared row is malformed, or a tidy table present is invalid (naming the file).
    """
    rows = load_comparisons(comparisons)
    tidy = load_tidy(results_dir, rows)
    for r in (r for r in rows if "axis_max" in r):
        lim = tidy["runs"].query("metric == @r['axis_max']")["value"] if "runs" in tidy else pd.Series([], dtype=float)
        r["_axis_max"] = None if lim.empty else float(lim.min())
    return [evaluate(r, tidy, src, scale) for r in rows]


def load_tidy(results_dir: str | Path, rows: list[dict]) -> dict[str, pd.DataFrame]:
    """The tidy tables ``results_dir/tidy/<study>.csv`` the comparison ``rows`` read, plus ``runs`` (those present).

    Raises:
        ValueError: a table present is invalid (naming the file).
    """
    tdir = Path(results_dir) / "tidy"
    return {s: read_tidy(tdir / f"{s}.csv") for s in sorted({r["study"] for r in rows} | {"runs"})
            if (tdir / f"{s}.csv").is_file()}


SPREAD_COLUMNS = ("study", "role", "metric", "axis", "axis_value", "mean", "std", "n_seeds", "seeds", "unit")


def seed_spread(tidy: dict[str, pd.DataFrame], rows: list[dict]) -> pd.DataFrame:
    """The seed spread of every training-side metric the comparison ``rows`` read: per study, role, metric and axis
    value, the mean over seeds, the standard deviation across seeds (ddof 1; NaN with one seed) and the number of
    seeds. Training-side metrics: those of ``training`` rows, and those of ``eval`` rows that have no item stderr in
    the table (they fall back to training). Rows that do not depend on a seed (``seed`` = NO_SEED) are left out.
    Columns: :data:`SPREAD_COLUMNS`."""
    want: dict[str, set[str]] = {}
    for r in rows:
        if r["evidence"] not in ("training", "eval"):
            continue
        mets = r.get("metrics") or [r.get("metric")]
        mets = list(evaldefs.column_metrics(mets).values()) if isinstance(mets, str) else mets
        want.setdefault(r["study"], set()).update((m, r["evidence"]) for m in mets if m)
    out = []
    for study, ms in sorted(want.items()):
        df = tidy.get(study)
        if df is None:
            continue
        df = df[df["seed"] != NO_SEED]
        df = df[df["axis2"] == ""] if "axis2" in df else df
        keep = {m for m, ev in ms if ev == "training" or df.loc[df["metric"] == m, "stderr"].isna().all()}
        d = df[df["metric"].isin(keep)].fillna({"axis_value": -math.inf})
        if d.empty:
            continue
        per_seed = d.groupby(["role", "metric", "axis", "axis_value", "unit", "seed"], sort=True)["value"].mean()
        for (role, metric, axis, av, unit), v in per_seed.groupby(level=[0, 1, 2, 3, 4]):
            out.append({"study": study, "role": role, "metric": metric, "axis": axis,
                        "axis_value": math.nan if av == -math.inf else av, "mean": float(v.mean()),
                        "std": float(v.std(ddof=1)) if len(v) > 1 else math.nan, "n_seeds": int(len(v)),
                        "seeds": " ".join(str(int(x)) for x in v.index.get_level_values("seed")), "unit": unit})
    return pd.DataFrame(out, columns=list(SPREAD_COLUMNS))
