"""Reproduced verdicts: our measured effects beside the paper's, one per declared comparison.

:func:`reproduce` expands the rows of ``eval/comparisons.yaml`` (its header documents the fields) and turns each
into a :class:`Verdict` with one evaluator (:func:`evaluate`) that reads only the tidy tables
``results/<scale>/tidy/<study>.csv`` (:mod:`yocou.results.tidy`) and the paper's printed numbers (an absent table: not run).
How an effect is decided (the evidence kinds, the 95% interval across seeds for training-side evidence, the
"no difference" margin) is :mod:`yocou.results.audit.decision`; the seed-spread table is :mod:`yocou.results.audit.spread`.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yocou.results import evaldefs, names
from yocou.results.audit import family, regime
from yocou.results.audit.claims import Sources, cell_ref
from yocou.results.audit.decision import (
    _GRAD,
    _PAIRWISE,
    _RELATIVE,
    CENSORED,
    CONFIDENCE,
    DIFFERS,
    EFFECTS,
    EVIDENCE,
    INCONCLUSIVE,
    MARGINS,
    NO_DIFFERENCE,
    NOT_COMPARABLE,
    NOT_COMPARABLE_UNKNOWN,
    NOT_RUN,
    OPPOSITE,
    SAME,
    SAME_SIZE,
    VERDICTS,
    Verdict,
    decide,
    decide_interval,
    t_interval,
    t_p_value,
)
from yocou.results.audit.spread import SPREAD_COLUMNS, load_tidy, seed_spread

__all__ = [
    "CENSORED",
    "CONFIDENCE",
    "DIFFERS",
    "EFFECTS",
    "INCONCLUSIVE",
    "MARGINS",
    "NOT_COMPARABLE",
    "NOT_COMPARABLE_UNKNOWN",
    "NOT_RUN",
    "NO_DIFFERENCE",
    "OPPOSITE",
    "SAME",
    "SAME_SIZE",
    "SPREAD_COLUMNS",
    "VERDICTS",
    "Verdict",
    "decide",
    "decide_interval",
    "evaluate",
    "load_comparisons",
    "load_tidy",
    "reproduce",
    "restated_at_base",
    "seed_spread",
    "t_interval",
]


def _fill(x: Any, subs: dict[str, str]) -> Any:
    return (x.format(**subs) if isinstance(x, str) and "{" in x else [_fill(v, subs) for v in x] if isinstance(x, list)
            else {k: _fill(v, subs) for k, v in x.items()} if isinstance(x, dict) else x)


#: The fields a declared row (and, but for id, pairs and columns, a ``pairs`` entry, which may also set ``column``)
#: may have: the header of eval/comparisons.yaml documents them. A misspelled field is refused, not ignored.
ROW_KEYS = frozenset({"id", "claims", "comparison", "study", "a", "b", "metric", "metrics", "metric_b", "at", "effect",
                      "paper", "evidence", "margin", "scale", "comparable", "tolerance", "pairs", "columns",
                      "axis_max", "series", "reached", "unreached", "unit", "results", "label", "k", "fallback",
                      "restates", "power_from", "restates_at_base", "mid_schedule", "unreached_bound"})


def load_comparisons(path: str | Path | None = None) -> list[dict]:
    """The declared comparisons, expanded over ``pairs`` × ``columns``, with ``{a}``, ``{b}``, ``{column}``
    filled (``{a}``: the paper's row label of role ``a`` in the row's paper table, else its display label). Each
    expanded row keeps the file it came from under ``_source``.

    Raises:
        ValueError: a row lacks id/study/effect/evidence, has a field not in :data:`ROW_KEYS`, names an unknown
            effect or evidence kind, maps ``restates``/``power_from`` from a column it does not expand to, or two
            expanded rows share an id (naming the file and the row).
    """
    p = Path(path or evaldefs.eval_dir() / "comparisons.yaml")
    if not isinstance(raw := evaldefs._load(str(p)), list):
        raise ValueError(f"{p}: expected a list of comparison rows")
    if not raw:
        raise ValueError(f"{p}: no comparison rows; the audit needs at least one (the file's header documents them)")
    out: list[dict] = []
    for i, row in enumerate(raw):
        if not isinstance(row, dict):
            raise ValueError(f"{p}: row {i}: expected a mapping of fields, got {row!r}")
        if miss := [k for k in ("id", "study", "effect", "evidence") if k not in row]:
            raise ValueError(f"{p}: row {i} ({row.get('id')}): missing {miss}")
        for where, keys, allowed in [("", set(row), ROW_KEYS)] + [
                (f" pairs[{j}]", set(pr) if isinstance(pr, dict) else {"?"},
                 (ROW_KEYS - {"id", "pairs", "columns"}) | {"column"})
                for j, pr in enumerate(row.get("pairs") or [])]:
            if bad := sorted(map(str, keys - allowed)):
                raise ValueError(f"{p}: row {i} ({row['id']}){where}: unknown field {bad[0]!r} (the fields are "
                                 f"{', '.join(sorted(allowed))})")
        effs = row["effect"].values() if isinstance(row["effect"], dict) else [row["effect"]]
        if any(e not in EFFECTS for e in effs) or row["evidence"] not in EVIDENCE:
            raise ValueError(f"{p}: row {i} ({row['id']}): effect must be one of {EFFECTS} and evidence one of "
                             f"{EVIDENCE}, got {row['effect']!r}, {row['evidence']!r}")
        cols = row.get("columns")
        if isinstance(cols, str):
            spec = evaldefs.columns(cols)
            cols = [{"column": c, "metric": m, "unit": spec[c].get("unit", "fraction"),
                     **({"unavailable": spec[c]["unavailable"]} if m is None else
                        {"unavailable": spec[c]["if_missing"]} if "if_missing" in spec[c] else {})}
                    for c, m in evaldefs.column_metrics(cols).items()]
        expanded_cols = {c.get("column", "") for c in cols or [{}]}
        for pair in row.get("pairs") or [{}]:
            for key in ("restates", "power_from", "restates_at_base"):
                m = pair.get(key, row.get(key))
                if isinstance(m, dict) and (bad := sorted(map(str, set(m) - expanded_cols))):
                    raise ValueError(f"{p}: row {i} ({row['id']}): {key} names column {bad[0]!r}, which the row "
                                     f"does not expand to (its columns: {sorted(expanded_cols)})")
                if m is not None and not isinstance(m, (str, dict)):
                    raise ValueError(f"{p}: row {i} ({row['id']}): {key} must be a row id or {{column: id}}, "
                                     f"got {m!r}")
        for pair, col in itertools.product(row.get("pairs") or [{}], cols or [{}]):
            r = {**{k: v for k, v in row.items() if k not in ("pairs", "columns")}, **pair, **col,
                 "claims": list(row.get("claims", [])) + list(pair.get("claims", [])),
                 "paper": {**row.get("paper", {}), **pair.get("paper", {})}}
            ptab = f"table{r['paper'].get('table', '')}"
            subs = {s: (names.paper_row(ptab, r[s]) or names.label(r[s])) if s in r else "" for s in ("a", "b")}
            subs |= {k: v for k, v in col.items() if isinstance(v, str)}  # e.g. {split} of a columns entry
            subs |= {"column": r.get("column", ""), "a_role": r.get("a", ""), "b_role": r.get("b", "")}
            out.append(_fill(r, subs) | {"roles": {s: r[s] for s in ("a", "b") if s in r}, "_source": str(p)})
    if len(ids := [r["id"] for r in out]) != len(set(ids)):
        raise ValueError(f"{p}: duplicate ids {sorted({i for i in ids if ids.count(i) > 1})}")
    return out


def _by_unit(x: Any, unit: str, default: Any) -> Any:  # a per-unit setting ({ppl: ..., fraction: ...}) or one value
    return x.get(unit, default) if isinstance(x, dict) else (default if x is None else x)


def _side(df: pd.DataFrame, role: str, metric: str, at: Any) -> dict | None:
    """One side's value at ``at`` (absent / number / ``max`` / ``min`` / ``best``: the axis value the study's
    ``best_<axis>`` row names for the role), mean over seeds; ``by_seed``: the value of each seed (a Series indexed
    by seed); ``runs``: the runs read. None when nothing matches (or ``best`` has no such row)."""
    r = df[(df["role"] == role) & (df["metric"] == metric)]
    if at == "best":  # one axis value for every metric of the role, chosen by the study (e.g. best_lr)
        axis = next((a for a in r["axis"] if isinstance(a, str) and a), None)
        b = None if axis is None else df[(df["role"] == role) & (df["metric"] == f"best_{axis}")]["value"]
        if b is None or b.empty:
            return None
        r = r[np.isclose(r["axis_value"].astype(float), float(b.iloc[0]), rtol=1e-9, atol=0.0)]
    elif at in ("max", "min"):  # each side's axis value with the largest (Figure 5's best rung) / smallest mean
        if not r.empty:
            m = r.groupby("axis_value", dropna=False)["value"].mean()
            best = m.idxmax() if at == "max" else m.idxmin()
            r = r[r["axis_value"].isna()] if pd.isna(best) else r[r["axis_value"] == best]
    else:
        r = r[(r["axis"] == "") if at is None else (r["axis_value"] == float(at))]
    r = r[r["axis2"] == ""] if "axis2" in r else r
    if r.empty:
        return None
    seeds, v = int(r["seed"].nunique()), r.groupby("seed")["value"].mean()
    se = float(v.std(ddof=1) / math.sqrt(seeds)) if seeds > 1 else (
        None if r["stderr"].isna().all() else float(r["stderr"].iloc[0]))
    return {"value": float(v.mean()), "se": se, "seeds": seeds, "n": r["n"].iloc[0], "unit": r["unit"].iloc[0],
            "by_seed": v.astype(float), "at": (r["axis"].iloc[0], float(r["axis_value"].iloc[0])),
            "runs": sorted(set(r["run"])) if "run" in r else []}


def _pairwise(row: dict, df: pd.DataFrame, src: Sources) -> dict:
    """difference / relative decrease / log-ratio / ratio - 1 of role a against role b: at an axis value, at the
    last one both have, or the mean of the effect over the shared values (``at: mean``); the mean over
    ``metrics`` when several are named. The paper's effect is the same transform of its cells. ``ci``: the
    interval across seeds (:func:`t_interval`; the delta method through ``_GRAD``) when every side has 2 seeds."""
    a, b = row["roles"]["a"], row["roles"]["b"]
    effs, ses, shown, seeds, floor, unit, eff, k = [], [], [], 1, True, "", "difference", 1
    mets, terms, runs, lim = row.get("metrics") or [row["metric"]], [], set(), row.get("_axis_max")
    for m in mets:
        ats: list[Any] = [row.get("at")] if row.get("at") not in ("last", "mean") else sorted(set.intersection(*(
            set(df[(df["role"] == x) & (df["metric"] == m) & (df["axis"] != "")]["axis_value"]) for x in (a, b))))
        if lim is not None and row.get("at") in ("last", "mean"):   # within the training length (axis_max)
            ats = [x for x in ats if x <= lim]
        ats = ats[-1:] if row.get("at") == "last" else ats
        sides = [(_side(df, a, m, x), _side(df, b, m, x)) for x in ats]
        if not ats or any(sa is None or sb is None for sa, sb in sides):
            return {"missing": row.get("unavailable") or f"{m} not measured for {a} or {b}"}
        unit = sides[0][0]["unit"]
        runs |= {x for pair in sides for sd in pair for x in sd["runs"]}
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
        best = [x["at"] for x in sides[0]] if ats[0] in ("min", "max", "best") else None  # each side's own value
        where = "" if ats == [None] else f" at {best[0][0]} {best[0][1]:g} vs {best[1][1]:g}" if best else (
            f" at {names.len_label(ats[0])}") if len(ats) == 1 else (
            f" (mean, {names.len_label(ats[0])}-{names.len_label(ats[-1])})")
        va, vb = (sum(x[i]["value"] * k for x in sides) / len(sides) for i in (0, 1))
        shown.append(f"{m.split('.')[0] + ' ' if row.get('metrics') else ''}{va:.4g} vs {vb:.4g}{where}")
    ours = float(sum(effs) / len(effs))
    return {"ours": ours, "se": None if None in ses else math.sqrt(sum(x * x for x in ses)) / len(ses),
            "seeds": seeds, "floor": floor, "effect": eff, "unit": unit, "k": k, "shown": "; ".join(shown),
            "ci": t_interval(ours, terms, row.get("_level", CONFIDENCE)) if math.isfinite(ours) else None,
            "runs": sorted(runs)}


def _paper_pairwise(row: dict, src: Sources) -> dict:
    """The paper's side of a pairwise row with ``paper.table``: the same transform of the cells of the rows of a and
    b (yocou.results.names.PAPER_ROWS) in the row's column, or at the printed lengths (the last only with ``at: last``)."""
    n, col = row["paper"]["table"], row["paper"].get("column") or row.get("column")
    ra, rb = (names.paper_row(f"table{n}", row["roles"][s]) for s in ("a", "b"))
    if ra is None or rb is None:
        raise ValueError(f"{row['id']}: the paper prints no row for {row['roles']} in Table {n} (names.PAPER_ROWS)")
    cols = [col] if col else [str(x) for x in names.PAPER_LENGTHS][-1 if row.get("at") == "last" else 0:]
    cells = [(src.num(cell_ref(n, ra, c)), src.num(cell_ref(n, rb, c))) for c in cols]
    refs = [cell_ref(n, r, c) for r in (ra, rb) for c in cols]
    eff = _by_unit(row["effect"], row.get("unit", "fraction"), "difference")
    if eff in ("log_ratio", "ratio_minus_1", "relative_decrease"):
        for (x, y), c in zip(cells, cols):
            for v, r in ((x, ra), (y, rb)):
                if not v > 0:
                    raise ValueError(f"reported {cell_ref(n, r, c)} is {v:g}: a {eff} needs numbers > 0 (is "
                                     f"the reported table{n:02d}.csv edited?)")
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
    effs, parts, mono, rises, terms, runs = [], [], True, True, [], set()
    for m in row["metrics"]:
        g = df[(df["metric"] == m) & (df["axis"] != "")]
        g = g if lim is None else g[g["axis_value"] <= lim]
        runs |= set(g["run"]) if "run" in g else set()
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
            rises &= all(y > x for x, y in zip(s, s.iloc[1:]))
            parts.append(f"{role}/{m.split('.')[0]} {effs[-1] * 100:+.0f}%" if role else
                         " ".join(f"{g['axis'].iloc[0]}={x:g}: {v:.3f}" for x, v in s.items()))
    if not effs:
        return {"missing": "fewer than 2 axis values"}
    if len({e > 0 for e in effs}) > 1:
        return {"undecided": "mixed across models and splits", "shown": "; ".join(parts), "runs": sorted(runs)}
    ours = float(sum(effs) / len(effs))
    terms = [(g, key, v, w / len(effs)) for g, key, v, w in terms]
    return {"ours": ours, "se": None, "seeds": min(len(t[2]) for t in terms), "effect": "monotone",
            "ci": t_interval(ours, terms, row.get("_level", CONFIDENCE)), "unit": "", "runs": sorted(runs),
            "shown": "; ".join(parts) + ("" if row.get("series") == "per_role" else
                                         " (" + ("improving at every step" if mono else "not improving: "
                                                 "the loss rises at every step" if rises else
                                                 "not improving at every step") + ")")}


def _special(row: dict, df: pd.DataFrame, src: Sources) -> dict:
    eff = row["effect"]
    if eff == "equal":  # every (role, axis value) of metric equals metric_b's
        j = pd.concat([df[df["metric"] == row[k]].set_index(["role", "axis_value"])["value"]
                       for k in ("metric", "metric_b")], axis=1, join="inner")
        ok, n = int((j.iloc[:, 0] == j.iloc[:, 1]).sum()), len(j)
        # an equality claim has no direction: one that fails "differs"
        return {"fixed": SAME_SIZE if n and ok == n else DIFFERS, "shown": f"{ok} of {n} measured = formula"}
    if eff == "wins_ties_losses":
        a, b = row["roles"]["a"], row["roles"]["b"]
        mets = row["metrics"] if isinstance(row["metrics"], list) else evaldefs.column_metrics(row["metrics"]).values()
        w = t = lo = sig = seeds = 0
        runs: set[str] = set()
        for m in mets:
            sa, sb = _side(df, a, m, None), _side(df, b, m, None)
            if sa is None or sb is None:
                continue
            runs |= {*sa["runs"], *sb["runs"]}
            d, se = sa["value"] - sb["value"], math.hypot(sa["se"] or 0, sb["se"] or 0)
            w, t, lo, sig = w + (d > 0), t + (d == 0), lo + (d < 0), sig + (se > 0 and abs(d) > 2 * se)
            seeds = min(sa["seeds"], sb["seeds"], seeds or sa["seeds"])
        if (n := w + t + lo) == 0:
            return {"missing": f"no metric measured for both {a} and {b}"}
        if w == lo == 0:
            return {"undecided": "at the floor for both (no signal)", "shown": f"tied on {t} of {n}",
                    "runs": sorted(runs)}
        x = (w - lo) / n
        return {"ours": x, "se": None if sig else abs(x), "seeds": seeds, "spread": f"{sig} beyond 2 se",
                "shown": f"better on {w}, tied on {t}, worse on {lo} of {n}", "runs": sorted(runs)}
    s = _side(df, row["roles"]["a"], row["metric"], row.get("at"))  # value
    reached = _side(df, row["roles"]["a"], row["reached"], row.get("at")) if row.get("reached") else None
    if s is None and reached is not None and reached["value"] == 0:
        if row.get("unreached") == "never":   # censored: below every saving the run could show
            return {"ours": -math.inf, "se": None, "seeds": reached["seeds"], "shown": "never reaches the reference",
                    "runs": reached["runs"]}
        return {"missing": "outside the measured range (no rung reaches the reference loss)"}
    if s is None:
        return {"missing": f"{row['metric']} not in the table"}
    return {"ours": s["value"], "se": s["se"] if s["seeds"] > 1 else None, "seeds": s["seeds"], "unit": s["unit"],
            "ci": t_interval(s["value"], [(row["roles"]["a"], row["metric"], s["by_seed"], 1.0)],
                             row.get("_level", CONFIDENCE)),
            "shown": f"{s['value']:.3f} {row.get('unit', '')}".strip(), "runs": s["runs"]}


def evaluate(row: dict, tidy: dict[str, pd.DataFrame], src: Sources, scale: str,
             level: float = CONFIDENCE, ctx: regime.Context | None = None) -> Verdict:
    """The verdict of one expanded comparison row, reading the tidy table ``tidy[row['study']]``. A row with
    ``results: <name>`` reads a study that does not depend on the scale (``results/<name>/tidy``): it is judged
    as measured there (``scale`` is ``<name>``, so the smoke scale's cap does not apply) and labelled with the
    row's ``label`` (what was measured, e.g. "CPU, 1.3B shape, fp32") instead of the scale. ``level``: the
    confidence level of a training-side interval (95%; :mod:`yocou.results.audit.family` asks again at the level Holm's
    adjustment gives the row). The verdict's ``p_value`` is the two-sided p of "no effect" of that interval's t.

    ``ctx`` (:func:`yocou.results.audit.regime.context` of the results folder; :func:`reproduce` passes it): a
    learning-side row gets its regime columns, and one the rules gate (eval/regime.yaml: its models not past the
    bigram of their own budget) is "not comparable", its own reading kept in ``verdict_unadjusted`` and
    ``qualifier_unadjusted``. Without ``ctx`` no regime is assessed. An effect of +-inf (e.g. YOCO-U never reaches
    YOCO's final loss) is "censored": not a decision."""
    row = {**row, "_level": level}
    p, ev, eff = row["paper"], row["evidence"], row["effect"]
    files = (f"{'../' + row['results'] + '/' if row.get('results') else ''}tidy/{row['study']}.csv",)
    if row.get("results"):
        scale, where = row["results"], row.get("label") or row["results"]
    else:
        where = f"{scale} scale"
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
    reg = None if "missing" in res else regime.of_row(row, res.get("runs", []), ctx, ev)
    number = res.get("ours") if "missing" not in res and isinstance(res.get("ours"), (int, float)) else None

    def out(verdict: str, qualifier: str, message: str, reading: tuple[str, str] = ("", "")) -> Verdict:
        return Verdict(row["id"], tuple(claims), row["comparison"], res.get("paper_shown") or (
            f"{paper:g}" if "claim" in p else str(p.get("text", paper))), ours, res.get("spread") or (
            one_se if ci is None else f"95% CI [{_eff_s(ci['lo'], kind)}, {_eff_s(ci['hi'], kind)}] "
                                      f"({ci['method']}); {one_se}"),
            None if "missing" in res else seeds, ev, verdict, qualifier, message, files,
            None if number is None else float(number), ci and ci["lo"], ci and ci["hi"], ci["method"] if ci else "",
            margin if ev == "training" else None,
            p_value=t_p_value(res["ours"], ci["se"], ci["df"]) if ci and "missing" not in res else None,
            ci_se=ci and ci["se"], ci_df=ci and ci["df"], verdict_unadjusted=reading[0],
            qualifier_unadjusted=reading[1], **{k: reg[k] for k in regime.REGIME_FIELDS} if reg else {})

    def reading() -> tuple[str, str, str]:
        """The verdict from the evidence alone (before the regime's gate), its qualifier and message."""
        if "undecided" in res:
            return INCONCLUSIVE, res["undecided"], where
        if p.get("expect") == "parity":
            if ci is not None and (seeds or 1) >= 2:
                return (*decide_interval(None, res["ours"], (ci["lo"], ci["hi"]), margin=margin, scale=scale,
                                         floor=res.get("floor", False), percent=pct, level=level),
                        f"{where}, {row['study']}")
            return (INCONCLUSIVE, "parity cannot be shown by a non-significant difference"
                    + ("; one seed, no interval" if (seeds or 1) < 2 else ""), where)
        if not paper:
            return INCONCLUSIVE, "the paper shows no difference", "no direction to reproduce"
        tol = (*res["raw"], float(row["tolerance"])) if "tolerance" in row else None
        return (*decide(paper, res["ours"], evidence=ev, se=se, n_seeds=seeds, scale=scale, tolerance=tol,
                        size_comparable=_by_unit(row.get("comparable"), res.get("unit", ""), True),
                        floor=res.get("floor", False), ci=None if ci is None else (ci["lo"], ci["hi"]),
                        margin=margin, percent=pct, level=level), f"{where}, {row['study']}")

    if "missing" in res:
        return out(INCONCLUSIVE, NOT_RUN, res["missing"])
    if "fixed" in res:
        return out(res["fixed"], f"measured at {scale} shapes", row["comparison"])
    regime_text = "" if reg is None else f"{reg['regime']}: {reg['regime_detail']}"
    bound = row.get("unreached_bound")
    if number is not None and math.isinf(number) and bound is not None and isinstance(paper, (int, float)) \
            and (number < 0 < paper - bound or number > 0 > paper - bound):
        # never reached within the run, but the claim's value lies inside what the run measured: the effect is
        # below (above) the bound, which excludes the paper's value; decided, then gated by the regime like any row
        verdict = OPPOSITE
        qualifier = (f"{res.get('shown', 'not reached')} within the run: the effect is {'below' if number < 0 else 'above'} "
                     f"{bound:g}, which excludes the paper's {paper:g} (no interval: a bound)")
        if reg is not None and reg["gate"]:
            kind_nc = NOT_COMPARABLE if reg["regime"] == regime.PRE else NOT_COMPARABLE_UNKNOWN
            return out(kind_nc, f"{regime_text}; alone: {verdict} ({qualifier})", f"{where}, {row['study']}",
                       (verdict, qualifier))
        return out(verdict, qualifier, f"{where}, {row['study']}")
    if number is not None and math.isinf(number):
        return out(CENSORED, f"censored: {res.get('shown', 'outside the measured range')} within the run (effect "
                             f"{_eff_s(number, kind)}, no interval): not a decision"
                   + (f"; {regime_text}" if regime_text else ""), f"{where}, {row['study']}")
    verdict, qualifier, message = reading()
    if reg is not None and reg["gate"]:
        kind_nc = NOT_COMPARABLE if reg["regime"] == regime.PRE else NOT_COMPARABLE_UNKNOWN
        return out(kind_nc, f"{regime_text}; alone: {verdict}" + (f" ({qualifier})" if qualifier else ""), message,
                   (verdict, qualifier))
    if reg is not None and reg["regime"] == regime.UNKNOWN:
        qualifier = "; ".join(x for x in (qualifier, ("regime unknown (regime_detail), decided without it "
                                                      "(eval/regime.yaml: unknown: decide)")) if x)
    return out(verdict, qualifier, message)


def _margin(row: dict, unit: str, effect: str, k: float) -> float | None:
    """The "no difference" margin of a row in the units of its effect: the row's ``margin`` (per unit or one
    number), else :data:`MARGINS` (``relative`` for relative effects); an absolute margin is scaled by ``scale``."""
    rel = effect in _RELATIVE
    m = _by_unit(row.get("margin"), unit, None)
    if m is not None and (isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m < 0):
        raise ValueError(f"eval/comparisons.yaml: row {row.get('id')}: margin {m!r} is not a number >= 0")
    m = (MARGINS["relative"] if rel else MARGINS.get(unit)) if m is None else float(m)
    return None if m is None else m if rel else m * k


def _eff_s(x: float, effect: str) -> str:
    return f"{x * 100:+.2f}%" if effect in ("relative_decrease", "ratio_minus_1", "monotone") else f"{x:+.3g}"


def reproduce(src: Sources, results_dir: str | Path, scale: str, *, comparisons: str | Path | None = None,
              regime_rules: str | Path | None = None, tidy: dict[str, pd.DataFrame] | None = None) -> list[Verdict]:
    """Every declared comparison's verdict for one scale, reading ``results_dir/tidy/`` (``results/<scale>``),
    each learning-side row with its regime (:mod:`yocou.results.audit.regime`, the rules of ``eval/regime.yaml`` or
    ``regime_rules``: a pre-bigram row is "not comparable"), the training-side intervals of the rest decided as one
    family with Holm's adjustment and restatements marked (:func:`yocou.results.audit.family.adjust`).
    A row's ``axis_max: <metric>`` is the smallest value of that metric in the tidy ``runs`` table (e.g.
    ``seq_len``, the training length). ``tidy``: the tables :func:`yocou.results.audit.spread.load_tidy` read for
    these comparisons, when the caller has them (read here otherwise).

    Raises:
        ValueError: a declared row is malformed, or a tidy table present is invalid (naming the file).
    """
    rows = load_comparisons(comparisons)
    tidy = load_tidy(results_dir, rows) if tidy is None else tidy
    require_tables(results_dir, rows, tidy)
    require_known_roles(rows, tidy)
    set_axis_max(rows, tidy)
    ctx = regime.context(results_dir, tidy, regime.load_rules(regime_rules))
    rows = [{**r, "restates": t} if (t := restated_at_base(r, tidy)) else r for r in rows]
    return family.adjust([evaluate(r, tidy, src, scale, ctx=ctx) for r in rows], rows,
                         lambda r, level: evaluate(r, tidy, src, scale, level, ctx=ctx), scale)


def restated_at_base(row: dict, tidy: dict[str, pd.DataFrame]) -> str | None:
    """The id of ``row["restates_at_base"]`` when the row, as evaluated, reads the same runs as that row: every
    side of every metric chose its base run (runs named ``<role>`` or ``<role>_seed<k>``, e.g. a model whose best
    learning rate is the shared one); else None. Such a row is a restatement, counted once (yocou.results.audit.family)."""
    t, df = row.get("restates_at_base"), tidy.get(row.get("study", ""))
    if not t or df is None or "run" not in df:
        return None
    for m in row.get("metrics") or [row["metric"]]:
        for role in row["roles"].values():
            side = _side(df, role, m, row.get("at"))
            if side is None or not side["runs"] or not all(
                    re.fullmatch(rf"{re.escape(role)}(_seed\d+)?", x) for x in side["runs"]):
                return None
    return t


def require_known_roles(rows: list[dict], tidy: dict[str, pd.DataFrame]) -> None:
    """Refuse a comparison row whose role is neither a known role (:data:`yocou.results.names.LABELS`, the configs' role
    names) nor a role of any tidy table read, so a misspelt role is an error, not a verdict "not run".

    Raises:
        ValueError: naming the row's file, id, side and role.
    """
    known = set(names.LABELS) | {r for df in tidy.values() if "role" in df for r in df["role"].astype(str)}
    for r in rows:
        for side, role in r["roles"].items():
            if not all(part in known for part in str(role).split("|")):
                raise ValueError(f"{r['_source']}: row {r['id']}: {side}: unknown role {role!r} (not a role of any "
                                 f"tidy table read, nor one of {', '.join(sorted(names.LABELS))})")


def require_tables(results_dir: str | Path, rows: list[dict], tidy: dict[str, pd.DataFrame]) -> None:
    """Refuse a results folder made by the pipeline (it has a resolved config:
    :func:`~yocou.results.audit.resultsconfig.results_config_path`) that lacks a tidy table the comparisons read:
    the pipeline writes every one of them at every scale (the learning-rate study only where ``lr_sensitivity`` is
    set), so an absent table is a lost file, not a study this scale does not run.
    A folder without a resolved config (made by hand, or by part of the pipeline) keeps "not run" for absent tables.

    Raises:
        FileNotFoundError: naming the first absent table, the study and the config.
    """
    from yocou.results.audit.resultsconfig import (
        check_seed_counts,
        read_results_config,
        results_config_path,
    )

    cfg_path = results_config_path(results_dir)  # while computing, the config the runs were started with
    if cfg_path is None:
        return
    cfg = read_results_config(cfg_path)
    check_seed_counts(cfg, cfg_path, tidy.get("runs"))
    want = sorted({r["study"] for r in rows if not r.get("results")}  # another folder's study: "not run" if absent
                  - ({"lr"} if not cfg.get("lr_sensitivity") else set()))
    absent = [s for s in want if s not in tidy]
    if absent:
        raise FileNotFoundError(
            f"{Path(results_dir) / 'tidy' / (absent[0] + '.csv')} not found: study {absent[0]} is run by the "
            f"config that made {results_dir} ({cfg_path.name}), so its table was lost"
            + (f" (and {len(absent) - 1} more: {', '.join(absent[1:4])}{', ...' if len(absent) > 4 else ''})"
               if len(absent) > 1 else "") + "; rerun the audit target to remake it")


def set_axis_max(rows: list[dict], tidy: dict[str, pd.DataFrame]) -> None:
    """Fill ``_axis_max`` of each row with ``axis_max: <metric>``: the smallest value of that metric in the tidy
    ``runs`` table (e.g. ``seq_len``, the training length), None where the table or the metric is absent."""
    for r in (r for r in rows if "axis_max" in r):
        lim = tidy["runs"].query("metric == @r['axis_max']")["value"] if "runs" in tidy else pd.Series([], dtype=float)
        r["_axis_max"] = None if lim.empty else float(lim.min())
