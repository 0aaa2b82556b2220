"""The token ladder's fits and the paper's Figure 2 quantities, decided by ``eval/ladder.yaml``.

From the annealed points (``results/<scale>/ladder/points.csv``: one row per variant, seed and budget, with the
held-out loss per split and the bigram fitted on that budget's own training windows):

* **regime** per variant, split and budget: the seed mean minus its own-budget bigram; past the bigram when at least
  ``regime.bigram_margin_nats`` below it;
* **equal-tokens gaps** at every budget (YOCO-U - YOCO, YOCO-U - RINS, YOCO - Transformer), paired by seed, Student t
  intervals; YOCO-U - YOCO decided at the largest budget, Holm over the splits, only where both sides are past the
  bigram (else "not comparable (pre-bigram regime)");
* **fits** ``L(D) = E + B D^-beta`` per variant and split on the seed means, and on each seed's own budgets (the
  band: the t interval of the per-seed curves);
* **equal-FLOPs gap** at the largest training FLOPs C inside both variants' measured ranges (never extrapolated),
  each side at D = C / its FLOPs per token: per seed the difference of that seed's two fits, a t interval over the
  seeds, Holm over the splits; its gate reads each side's measured budgets on either side of its D; beside it its
  decomposition into the equal-tokens gap at YOCO-U's tokens and YOCO's own loss over the doublings of tokens that
  YOCO-U's FLOPs per token cost;
* **token saving** (the paper's 62%), decided where the claim's point lies inside YOCO-U's measured budgets: YOCO-U's
  per-seed fit at (1 - 0.62) D_max against YOCO's measured loss at D_max, paired by seed, a t interval, Holm over the
  splits; each seed's own saving beside it; **crossovers** of the fits (every one), labelled "extrapolated" outside
  the budgets both variants measured.

Losses are nats/token; D is in tokens; C (training FLOPs) from :mod:`yocou.model.accounting` as recorded by each run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SPLITS = ("book", "code")
#: every held-out split the ladder reports (regime, gaps per budget, fits): the decided ones and ``plays``, the plays held
#: out of the ladder's training (workflows/studies/ladder.yaml), reported, not decided (eval/ladder.yaml decides on
#: book and code); a split whose column the points lack is left out
REPORTED = (*SPLITS, "plays")


def _reported(pts: pd.DataFrame) -> list[str]:
    return [s for s in REPORTED if s in pts.columns and f"bigram_{s}" in pts.columns]
PAIRS = (("yocou", "yoco"), ("yocou", "rins"), ("transformer", "yoco"))
NOT_COMPARABLE = "not comparable (pre-bigram regime)"
#: eval/ladder.yaml (bracket): the cap on a verdict that reads a variant whose best bracketed rate is not interior
NOT_BRACKETED = "inconclusive (rate not bracketed)"
INTERIM = "interim (the decision budget is not reached)"


def read_rules(path: str | Path) -> dict[str, Any]:
    """``eval/ladder.yaml``, checked for the keys this module reads.

    Raises:
        FileNotFoundError: no such file. ValueError: a key is missing or not a number, naming it.
    """
    import yaml

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"ladder rules {p} not found")
    r = yaml.safe_load(p.read_text(encoding="utf-8"))
    need = {"confidence": (), "regime": ("bigram_margin_nats",), "gaps": ("margin_nats",),
            "equal_flops": ("paper_gap_nats",), "token_saving": ("paper",)}
    if not isinstance(r, Mapping):
        raise ValueError(f"{p}: expected a mapping")
    for sec, keys in need.items():
        if sec not in r:
            raise ValueError(f"{p}: missing {sec!r}")
        for k in keys:
            v = (r[sec] or {}).get(k) if isinstance(r[sec], Mapping) else None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"{p}: {sec}.{k}: expected a number, got {v!r}")
    return r


# --- the power law ---------------------------------------------------------------------------------------------


def power_law(d: np.ndarray | float, e: float, b: float, beta: float) -> np.ndarray | float:
    """``E + B * (D / 1e6)^-beta``: loss in nats/token at D tokens (D in millions inside, for conditioning)."""
    return e + b * np.power(np.asarray(d, dtype=float) / 1e6, -beta)


def fit_power_law(tokens: Sequence[float], loss: Sequence[float]) -> tuple[float, float, float] | None:
    """Least-squares ``(E, B, beta)`` of :func:`power_law` (bounds E >= 0, B > 0, 0 < beta < 3); None if the fit
    fails or there are fewer than 3 distinct budgets."""
    from scipy.optimize import curve_fit

    d, y = np.asarray(tokens, dtype=float), np.asarray(loss, dtype=float)
    if len(np.unique(d)) < 3:
        return None
    p0 = (max(0.0, float(y.min()) - 0.5), 0.5, 0.3)
    try:
        (e, b, beta), _ = curve_fit(power_law, d, y, p0=p0, bounds=([0.0, 1e-9, 1e-4], [np.inf, np.inf, 3.0]),
                                    maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    return float(e), float(b), float(beta)


def tokens_to_reach(target: float, params: tuple[float, float, float]) -> float:
    """The D at which the fit reaches loss ``target`` (inf when ``target <= E``: never)."""
    e, b, beta = params
    if target <= e:
        return math.inf
    return 1e6 * (b / (target - e)) ** (1.0 / beta)


def crossover(pu: tuple[float, float, float], py: tuple[float, float, float], lo: float = 1e4,
              hi: float = 1e12) -> list[float]:
    """Every D in [lo, hi] where the two fitted curves cross, ascending (sign changes of their difference on a log
    grid, each refined by bisection); empty when they do not cross there."""
    grid = np.logspace(math.log10(lo), math.log10(hi), 2000)
    diff = power_law(grid, *pu) - power_law(grid, *py)
    out = []
    for i in np.nonzero(np.sign(diff[:-1]) * np.sign(diff[1:]) < 0)[0]:
        a, b = grid[i], grid[i + 1]
        for _ in range(60):
            m = math.sqrt(a * b)
            fa = power_law(a, *pu) - power_law(a, *py)
            fm = power_law(m, *pu) - power_law(m, *py)
            a, b = (a, m) if np.sign(fa) != np.sign(fm) else (m, b)
        out.append(float(math.sqrt(a * b)))
    return out


# --- intervals -------------------------------------------------------------------------------------------------


def paired_t(diffs: Sequence[float], level: float) -> dict[str, Any]:
    """Mean of per-seed differences with its Student t interval (n - 1 df) at ``level`` and the two-sided p of
    mean 0; with one difference, no interval (``low``/``high``/``p`` None)."""
    from scipy import stats

    x = np.asarray(diffs, dtype=float)
    n = len(x)
    out: dict[str, Any] = {"n": n, "mean": float(x.mean()) if n else math.nan, "low": None, "high": None, "p": None}
    if n >= 2:
        se = float(x.std(ddof=1)) / math.sqrt(n)
        t = float(stats.t.ppf(0.5 + level / 2, n - 1))
        out.update(low=out["mean"] - t * se, high=out["mean"] + t * se, sd=float(x.std(ddof=1)))
        out["p"] = float(2 * stats.t.sf(abs(out["mean"]) / se, n - 1)) if se > 0 else (0.0 if out["mean"] else 1.0)
    return out


def t_band(grid: np.ndarray, fits: Sequence[tuple[float, float, float]], level: float
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """At each D of ``grid`` the Student t interval (n - 1 df) at ``level`` of the curves of the per-seed ``fits``
    (mean +- t * sd / sqrt(n)); None with fewer than 2 fits."""
    from scipy import stats

    if len(fits) < 2:
        return None
    curves = np.array([power_law(grid, *f) for f in fits])
    n = len(fits)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * curves.std(axis=0, ddof=1) / math.sqrt(n)
    return curves.mean(axis=0) - half, curves.mean(axis=0) + half


def holm(pvals: Sequence[float | None], alpha: float) -> list[dict[str, Any]]:
    """Holm's step-down over the non-None p-values (:func:`yocou.results.audit.family.holm`): per entry the adjusted
    p and the level at which its interval is read, ``1 - alpha / (m - i + 1)`` for the i-th rejected row and
    ``1 - alpha / (m - r)`` for every row not rejected (r rejected), so an interval excludes 0 at its level exactly
    when Holm rejects the row; None entries stay None."""
    from yocou.results.audit.family import holm as _holm

    h = _holm({i: float(p) for i, p in enumerate(pvals) if p is not None}, alpha)
    return [{"p_adjusted": h[i]["p_adjusted"], "level": h[i]["level"]} if i in h else
            {"p_adjusted": None, "level": None} for i in range(len(pvals))]


# --- the analysis ----------------------------------------------------------------------------------------------


def _means(pts: pd.DataFrame, split: str) -> pd.DataFrame:
    g = pts.groupby(["variant", "tokens"], sort=True)
    return pd.DataFrame({"mean": g[split].mean(), "sd": g[split].std(ddof=1), "n": g[split].count(),
                         "bigram": g[f"bigram_{split}"].first(), "train_flops": g["train_flops"].mean(),
                         "steps": g["steps"].first(), "tokens_per_param": g["tokens_per_param"].mean(),
                         "train_loss": g["train_loss"].mean(), "epochs": g["epochs"].first()}).reset_index()


def regime_table(pts: pd.DataFrame, margin: float) -> pd.DataFrame:
    """Per variant, split and budget: seed mean, sd, n, its own-budget bigram, mean minus bigram, past the bigram
    (at least ``margin`` below it), tokens per parameter, train loss and epochs."""
    rows = []
    for s in _reported(pts):
        m = _means(pts, s)
        m["split"] = s
        m["minus_bigram"] = m["mean"] - m["bigram"]
        m["past_bigram"] = m["minus_bigram"] <= -margin
        rows.append(m)
    return pd.concat(rows, ignore_index=True)


def equal_token_gaps(pts: pd.DataFrame, level: float) -> pd.DataFrame:
    """Every pair of :data:`PAIRS` present, at every budget and split: a - b paired by seed (the seeds both have)."""
    rows = []
    for a, b in PAIRS:
        if a not in set(pts["variant"]) or b not in set(pts["variant"]):
            continue
        for s in _reported(pts):
            for tok, g in pts.groupby("tokens", sort=True):
                ga = g[g["variant"] == a].set_index("seed")[s]
                gb = g[g["variant"] == b].set_index("seed")[s]
                common = sorted(set(ga.index) & set(gb.index))
                if not common:
                    continue
                res = paired_t([ga[k] - gb[k] for k in common], level)
                rows.append({"a": a, "b": b, "split": s, "tokens": int(tok), "steps": int(g["steps"].iloc[0]),
                             "gap": res["mean"], "low": res["low"], "high": res["high"], "p": res["p"],
                             "n_seeds": res["n"]})
    return pd.DataFrame(rows)


def _decide(low: float | None, high: float | None, margin: float, paper_sign: int) -> str:
    """eval/ladder.yaml (gaps): "same direction" (the paper's sign) or "opposite" when the interval excludes 0,
    else "no difference" when it lies inside +-``margin``, else "inconclusive"; no interval (one seed):
    "inconclusive (no interval)"."""
    if low is None or high is None:
        return "inconclusive (no interval)"
    if high < 0 or low > 0:
        return "same direction" if (np.sign(high if high < 0 else low) == paper_sign) else "opposite"
    if -margin < low and high < margin:
        return "no difference"
    return "inconclusive"


def seed_fits(pts: pd.DataFrame, variants: Sequence[str], split: str
              ) -> dict[str, dict[int, tuple[float, float, float] | None]]:
    """Per variant and seed, :func:`fit_power_law` on that seed's own budgets (None where it fails)."""
    out: dict[str, dict[int, tuple[float, float, float] | None]] = {}
    for v in variants:
        g = pts[pts["variant"] == v]
        out[v] = {int(k): fit_power_law(x["tokens"].to_numpy(), x[split].to_numpy())
                  for k, x in g.groupby("seed", sort=True)}
    return out


def _paired(fa: Mapping[int, Any], fb: Mapping[int, Any], f) -> list[float]:
    """``f(fit_a, fit_b)`` for every seed both sides fitted (seed k of both sees the same batches)."""
    return [float(f(fa[k], fb[k])) for k in sorted(set(fa) & set(fb)) if fa[k] and fb[k]]


def _neighbours(variant: str, d: float, toks: Mapping[str, Sequence[float]]) -> list[tuple[str, int]]:
    """The measured budgets of ``variant`` on either side of ``d`` tokens (one where ``d`` is measured, to 1e-6
    relative): the points whose regime gates a comparison read from the fit at ``d``."""
    near = [t for t in toks[variant] if math.isclose(t, d, rel_tol=1e-6)]
    if near:
        return [(variant, int(near[0]))]
    below = [t for t in toks[variant] if t < d]
    above = [t for t in toks[variant] if t > d]
    return [(variant, int(t)) for t in (below[-1:] + above[:1])]


def analyse(pts: pd.DataFrame, rules: Mapping[str, Any], planned_steps: int | None = None,
            bracketed: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """Everything the ladder report states: regime, gaps, decisions, fits, equal FLOPs, token saving, crossover.

    ``planned_steps``: the ladder's largest budget (optimizer steps, workflows/studies/ladder.yaml). Where the points
    stop short of it (the ladder still training), every decision's verdict is :data:`INTERIM`: the rules decide at
    the largest budget only, and an earlier rung is reported with its interval, not decided.

    ``bracketed``: per variant, whether its best bracketed rate is interior (``bracket.json``'s ``best``); a
    verdict that reads a variant that is not is capped at :data:`NOT_BRACKETED` (eval/ladder.yaml, bracket).

    Raises:
        ValueError: ``pts`` lacks a column this needs, naming it.
    """
    need = {"variant", "seed", "tokens", "steps", "train_flops", "tokens_per_param", "train_loss", "epochs",
            *SPLITS, *(f"bigram_{s}" for s in SPLITS)}
    if missing := sorted(need - set(pts.columns)):
        raise ValueError(f"ladder points: missing column(s) {missing}")
    level, alpha = float(rules["confidence"]), 1 - float(rules["confidence"])
    margin_big, margin = float(rules["regime"]["bigram_margin_nats"]), float(rules["gaps"]["margin_nats"])
    regime = regime_table(pts, margin_big)
    gaps = equal_token_gaps(pts, level)
    variants = list(dict.fromkeys(pts["variant"]))
    fpt = {v: float((g["train_flops"] / g["tokens"]).mean()) for v, g in pts.groupby("variant")}
    past = {(r.variant, r.split, int(r.tokens)): bool(r.past_bigram) for r in regime.itertuples()}
    d_max = int(pts["tokens"].max())
    decisions = []
    for s in SPLITS:
        row = gaps[(gaps["a"] == "yocou") & (gaps["b"] == "yoco") & (gaps["split"] == s) & (gaps["tokens"] == d_max)]
        if len(row):
            decisions.append({"quantity": "equal_tokens", "split": s, **row.iloc[0].to_dict()})
    fits: dict[str, dict[str, Any]] = {}
    per_seed: dict[str, dict[str, dict[int, Any]]] = {}
    for s in _reported(pts):
        fits[s] = {}
        m = _means(pts, s)
        for v in variants:
            mv = m[m["variant"] == v]
            fits[s][v] = fit_power_law(mv["tokens"].to_numpy(), mv["mean"].to_numpy())
        per_seed[s] = seed_fits(pts, variants, s)
    flops, saving, cross = [], [], []
    if {"yocou", "yoco"} <= set(variants):
        toks = {v: sorted(pts[pts["variant"] == v]["tokens"].unique()) for v in ("yocou", "yoco")}
        for s in SPLITS:
            pu, py = fits[s]["yocou"], fits[s]["yoco"]
            # equal FLOPs (eval/ladder.yaml): the largest C inside both measured FLOPs ranges, each side read from
            # its fit at D = C / its FLOPs per token (one side at a measured budget, the other interpolated)
            c_lo = max(toks["yocou"][0] * fpt["yocou"], toks["yoco"][0] * fpt["yoco"])
            c_hi = min(toks["yocou"][-1] * fpt["yocou"], toks["yoco"][-1] * fpt["yoco"])
            su, sy = per_seed[s]["yocou"], per_seed[s]["yoco"]
            if pu and py and c_lo <= c_hi:
                du, dy = c_hi / fpt["yocou"], c_hi / fpt["yoco"]
                t = paired_t(_paired(su, sy, lambda a, b: power_law(du, *a) - power_law(dy, *b)), level)
                at_du = float(power_law(du, *pu) - power_law(du, *py))      # the equal-tokens gap at YOCO-U's D
                data = float(power_law(du, *py) - power_law(dy, *py))       # YOCO's own curve from dy down to du
                doublings = math.log2(dy / du)
                flops.append({"quantity": "equal_flops", "split": s, "yocou_tokens": du, "yoco_tokens": dy,
                              "train_flops": c_hi, "gap": t["mean"], "gap_mean_fits": at_du + data,
                              "low": t["low"], "high": t["high"], "p": t["p"], "n_seeds": t["n"],
                              "equal_tokens_at_yocou_tokens": at_du, "yoco_data_term": data, "doublings": doublings,
                              "yoco_nats_per_doubling": data / doublings if doublings else None,
                              "paper": float(rules["equal_flops"]["paper_gap_nats"])})
                decisions.append({"quantity": "equal_flops", "split": s, "a": "yocou", "b": "yoco", "gap": t["mean"],
                                  "low": t["low"], "high": t["high"], "p": t["p"], "n_seeds": t["n"],
                                  "tokens": int(round(du)),
                                  "gate_points": _neighbours("yocou", du, toks) + _neighbours("yoco", dy, toks)})
            if pu and py:
                m = _means(pts, s)
                d_max = toks["yoco"][-1]
                target = float(m[(m["variant"] == "yoco") & (m["tokens"] == d_max)]["mean"].iloc[0])
                dstar = tokens_to_reach(target, pu)
                paper = float(rules["token_saving"]["paper"])
                d_claim = (1 - paper) * d_max
                inside = toks["yocou"][0] <= d_claim <= toks["yocou"][-1]
                y_final = {int(k): float(x[s].iloc[0]) for k, x in
                           pts[(pts["variant"] == "yoco") & (pts["tokens"] == d_max)].groupby("seed")}
                yf = {k: (y,) for k, y in y_final.items()}
                t = paired_t(_paired(su, yf, lambda a, y: power_law(d_claim, *a) - y[0]), level)
                # each seed's saving: where seed k's fit reaches seed k's YOCO loss at D_max, if within its budgets
                reach = {k: tokens_to_reach(y_final[k], su[k]) for k in sorted(set(su) & set(y_final)) if su[k]}
                within = {k: d <= toks["yocou"][-1] for k, d in reach.items()}
                savings = [1 - reach[k] / d_max for k in reach if within[k]]
                st = paired_t(savings, level) if reach and all(within.values()) else None
                saving.append({"split": s, "yoco_final_loss": target, "yoco_tokens": d_max,
                               "yocou_tokens_needed": dstar if math.isfinite(dstar) else None,
                               "saving": None if not dstar <= toks["yocou"][-1] else 1 - dstar / d_max,
                               "censored": not inside, "claim_tokens": d_claim,
                               "delta": t["mean"], "low": t["low"], "high": t["high"], "p": t["p"], "n_seeds": t["n"],
                               "seeds_reaching": sum(within.values()), "seeds": len(reach),
                               "seed_savings": [1 - reach[k] / d_max if within[k] else None for k in sorted(reach)],
                               "saving_bound": 1 - toks["yocou"][-1] / d_max,
                               "saving_mean": st["mean"] if st else None, "saving_low": st["low"] if st else None,
                               "saving_high": st["high"] if st else None, "paper": paper})
                if inside:
                    decisions.append({"quantity": "token_saving", "split": s, "a": "yocou", "b": "yoco",
                                      "gap": t["mean"], "low": t["low"], "high": t["high"], "p": t["p"],
                                      "n_seeds": t["n"], "tokens": int(round(d_claim)),
                                      "gate_points": _neighbours("yocou", d_claim, toks) + [("yoco", int(d_max))]})
                lo_d, hi_d = max(toks["yocou"][0], toks["yoco"][0]), min(toks["yocou"][-1], toks["yoco"][-1])
                cross += [{"split": s, "tokens": dx, "extrapolated": not lo_d <= dx <= hi_d}
                          for dx in crossover(pu, py)] or [{"split": s, "tokens": None, "extrapolated": True}]
    order = ("equal_tokens", "equal_flops", "token_saving")
    decisions.sort(key=lambda d: (order.index(d["quantity"]), SPLITS.index(d["split"])))
    # Holm over the splits, per quantity; the gate and the decision.
    for q in ("equal_tokens", "equal_flops", "token_saving"):
        rows = [d for d in decisions if d["quantity"] == q]
        adj = holm([d["p"] for d in rows], alpha)
        for d, h in zip(rows, adj):
            d.update(h)
            # the measured points whose regime gates the row (kept in ladder.json: the audit states their regime)
            d["gate_points"] = [[v, int(t)] for v, t in
                                d.get("gate_points") or [("yocou", d["tokens"]), ("yoco", d["tokens"])]]
            gate_ok = all(past.get((v, d["split"], t), False) for v, t in d["gate_points"])
            lo, hi = d["low"], d["high"]
            if d["p"] is not None and h["level"] is not None and d["high"] > d["low"]:
                # the t interval at the Holm level of this row
                from scipy import stats
                n, half = d["n_seeds"], (d["high"] - d["low"]) / 2
                se = half / float(stats.t.ppf(0.5 + level / 2, n - 1))
                t = float(stats.t.ppf(0.5 + h["level"] / 2, n - 1))
                lo, hi = d["gap"] - t * se, d["gap"] + t * se
            d["low_adjusted"], d["high_adjusted"] = lo, hi
            m_q = 0.0 if q == "token_saving" else margin   # delta ~ 0 is the paper's saving: no margin
            verdict = _decide(lo, hi, m_q, paper_sign=-1)
            d["verdict_unadjusted"] = _decide(d["low"], d["high"], m_q, paper_sign=-1)
            d["regime_past_bigram"] = gate_ok
            d["verdict"] = verdict if gate_ok else NOT_COMPARABLE
            unbracketed = [v for v in (d["a"], d["b"]) if bracketed is not None and not bracketed[v]]
            if unbracketed and gate_ok:
                d["verdict"], d["not_bracketed"] = NOT_BRACKETED, unbracketed
            if planned_steps is not None and int(pts["steps"].max()) < planned_steps:
                d["verdict"] = INTERIM
    return {"regime": regime, "gaps": gaps, "decisions": decisions, "fits": fits, "equal_flops": flops,
            "token_saving": saving, "crossover": cross, "flops_per_token": fpt,
            "seed_fits": per_seed}


def _fmt(x: Any, f: str = "+.4f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, f)


def read_bracketed(path: str | Path, variants: Sequence[str]) -> dict[str, bool]:
    """Per variant of ``variants``, whether ``path`` (the bracket's ``bracket.json``) has its best rate interior.

    Raises:
        ValueError: the file is not JSON, or lacks ``best.<variant>.interior`` (a boolean) for one of ``variants``,
            naming the file and the field.
    """
    import json

    try:
        best = json.loads(Path(path).read_text(encoding="utf-8"))["best"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not the bracket's JSON with a 'best' section ({type(e).__name__}: {e})") from None
    out = {}
    for v in variants:
        got = best.get(v, {}).get("interior") if isinstance(best, dict) and isinstance(best.get(v), dict) else None
        if not isinstance(got, bool):
            raise ValueError(f"{path}: best.{v}.interior: expected true or false, got {got!r}")
        out[v] = got
    return out


def write_fits(points: str | Path, rules_path: str | Path, out_json: str | Path, figure: str | Path, scale: str,
               dpi: int = 150, planned_steps: int | None = None, bracket: str | Path | None = None) -> dict[str, Any]:
    """Write ``ladder.{json,csv,md}`` beside ``out_json`` and the figure (:mod:`yocou.results.render.ladder`);
    ``planned_steps``: see :func:`analyse`; ``bracket``: the bracket's ``bracket.json``, whose best rates cap the
    verdicts of variants not bracketed (:func:`read_bracketed`, :func:`analyse`)."""
    from yocou.results.render.common import configure
    from yocou.results.render.ladder import draw
    from yocou.utils.io import atomic_write_json, atomic_write_text, provenance

    pts = pd.read_csv(points)
    rules = read_rules(rules_path)
    bracketed = None if bracket is None else read_bracketed(bracket, list(dict.fromkeys(pts["variant"])))
    res = analyse(pts, rules, planned_steps, bracketed)
    res["planned_steps"], res["steps_reached"] = planned_steps, int(pts["steps"].max())
    stem = Path(out_json).with_suffix("")
    prov = provenance({"scale": scale, "rules": rules}, None)
    atomic_write_text(stem.with_suffix(".csv"), res["gaps"].to_csv(index=False))
    doc = {"regime": res["regime"].to_dict(orient="records"), "gaps": res["gaps"].to_dict(orient="records"),
           "decisions": res["decisions"], "fits": {s: {v: (dict(zip(("E", "B", "beta"), p)) if p else None)
                                                         for v, p in f.items()} for s, f in res["fits"].items()},
           "equal_flops": res["equal_flops"], "token_saving": res["token_saving"], "crossover": res["crossover"],
           "flops_per_token": res["flops_per_token"], "planned_steps": planned_steps,
           "steps_reached": res["steps_reached"], "provenance": prov}
    atomic_write_json(out_json, _finite(doc))
    atomic_write_text(stem.with_suffix(".md"), report_md(res, rules, scale, prov))
    configure(dpi)
    draw(pts, res, figure, rules, scale)
    return doc


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return _finite(obj.item())
    return obj


def report_md(res: Mapping[str, Any], rules: Mapping[str, Any], scale: str, prov: Mapping[str, Any]) -> str:
    """The ladder's Markdown report: regime, decisions, gaps per budget, fits, the paper's quantities."""
    reg, gaps = res["regime"], res["gaps"]
    out = [f"### The annealed token ladder ({scale}, CPU)\n",
           "Each point is an annealed model (warmup-stable-decay, cooled down at its own budget), every variant at its "
           "bracketed learning rate (bracket.md); held-out loss in nats/token; bigram: Kneser-Ney fitted on the "
           "training windows of the point's own budget. Decision rules: eval/ladder.yaml (committed before the runs).\n",
           *([f"**Interim: the ladder has reached {res['steps_reached']} of its {res['planned_steps']} steps "
              f"(budgets past {res['steps_reached']} still training). The rules decide at the largest budget only: "
              "nothing below is a decision.**\n"] if res.get("planned_steps") and res["steps_reached"] <
             res["planned_steps"] else []),
           *(["The plays split holds out whole plays of the ladder's training stream (in distribution; "
              "workflows/studies/ladder.yaml); it is reported beside book and code, not decided: eval/ladder.yaml "
              "decides on book and code.\n"] if "plays" in set(reg["split"]) else []),
           "#### Regime: seed means against the bigram of their own budget\n",
           "| variant | split | tokens | tokens/param | seeds | held-out loss | bigram | minus bigram | past the bigram "
           f"(by {rules['regime']['bigram_margin_nats']:g}) | train loss | epochs |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in reg.itertuples():
        out.append(f"| {r.variant} | {r.split} | {r.tokens / 1e6:.2f}M | {r.tokens_per_param:.1f} | {r.n} | "
                   f"{r.mean:.4f} | {r.bigram:.4f} | {r.minus_bigram:+.4f} | {'yes' if r.past_bigram else 'no'} | "
                   f"{r.train_loss:.4f} | {r.epochs:.2f} |")
    out += ["", "#### Decided comparisons (the paper: YOCO-U lower than YOCO)\n",
            "| quantity | split | tokens (YOCO-U) | YOCO-U - YOCO | 95% interval | Holm p | interval at the Holm level "
            "| verdict (95%, alone) | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for d in res["decisions"]:
        out.append(f"| {d['quantity'].replace('_', ' ')} | {d['split']} | {d['tokens'] / 1e6:.2f}M | {_fmt(d['gap'])} | "
                   f"[{_fmt(d['low'])}, {_fmt(d['high'])}] | {_fmt(d.get('p_adjusted'), '.3f')} | "
                   f"[{_fmt(d.get('low_adjusted'))}, {_fmt(d.get('high_adjusted'))}] | {d['verdict_unadjusted']} | "
                   f"**{d['verdict']}** |")
    out += ["", "#### Equal-tokens gaps at every budget (paired by seed; > 0: the first is worse)\n",
            "| pair | split | tokens | gap | 95% interval | seeds |", "|---|---|---|---|---|---|"]
    for r in gaps.itertuples():
        out.append(f"| {r.a} - {r.b} | {r.split} | {r.tokens / 1e6:.2f}M | {r.gap:+.4f} | "
                   f"[{_fmt(r.low)}, {_fmt(r.high)}] | {r.n_seeds} |")
    out += ["", "#### Fits L(D) = E + B (D / 1M tokens)^-beta on the seed means\n",
            "| split | variant | E | B | beta |", "|---|---|---|---|---|"]
    for s, f in res["fits"].items():
        for v, p in f.items():
            out.append(f"| {s} | {v} | " + (" | ".join(f"{x:.4f}" for x in p) if p else "fit failed | | ") + " |")
    out += ["", "#### The paper's quantities\n"]
    for e in res["equal_flops"]:
        out.append(f"- Equal FLOPs ({e['split']}): YOCO-U at {e['yocou_tokens'] / 1e6:.2f}M tokens against YOCO at "
                   f"{e['yoco_tokens'] / 1e6:.2f}M (both fitted, at {e['train_flops']:.3g} training FLOPs), YOCO-U - YOCO = "
                   f"{_fmt(e['gap'])} [{_fmt(e['low'])}, {_fmt(e['high'])}] (per-seed fits, paired, Student t over "
                   f"{e['n_seeds']} seeds, {e['n_seeds'] - 1} df); the paper: {e['paper']:+.3f}. Not an independent "
                   f"finding: from the seed-mean fits it is the equal-tokens gap at {e['yocou_tokens'] / 1e6:.2f}M "
                   f"({_fmt(e['equal_tokens_at_yocou_tokens'])}) plus YOCO's own loss over the "
                   f"{e['doublings']:.2f} doublings of tokens that YOCO-U's FLOPs per token cost "
                   f"({_fmt(e['yoco_data_term'])}, {_fmt(e['yoco_nats_per_doubling'], '.3f')} nats per doubling at "
                   "this scale); only its sign is comparable with the paper's.")
    for t in res["token_saving"]:
        seeds = ", ".join("n/a" if x is None else f"{x:.1%}" for x in t["seed_savings"])
        own = (f"each seed's own saving: {seeds}"
               + (f" (mean {t['saving_mean']:.1%} [{t['saving_low']:.1%}, {t['saving_high']:.1%}], t)"
                  if t["saving_mean"] is not None else
                  f"; {t['seeds'] - t['seeds_reaching']} of {t['seeds']} seeds do not reach YOCO's loss within the "
                  f"measured budgets: their saving is below {t['saving_bound']:.0%}"))
        if t["censored"]:
            out.append(f"- Token saving ({t['split']}): **censored**: the paper's point, {t['claim_tokens'] / 1e6:.2f}M "
                       f"tokens ({1 - t['paper']:.0%} of {t['yoco_tokens'] / 1e6:.2f}M), lies outside YOCO-U's "
                       f"measured budgets; {own}; the paper: {t['paper']:.0%}. Not a decision either way.")
        else:
            out.append(f"- Token saving ({t['split']}): at the paper's {t['paper']:.0%}, YOCO-U at "
                       f"{t['claim_tokens'] / 1e6:.2f}M tokens (its per-seed fits, inside its measured budgets) minus "
                       f"YOCO at {t['yoco_tokens'] / 1e6:.2f}M (measured) = {_fmt(t['delta'])} "
                       f"[{_fmt(t['low'])}, {_fmt(t['high'])}] nats (paired t over {t['n_seeds']} seeds; > 0: the "
                       f"saving is below the paper's); {own}.")
    for c in res["crossover"]:
        where = "none in 1e4-1e12 tokens" if c["tokens"] is None else f"at {c['tokens'] / 1e6:.3g}M tokens"
        out.append(f"- Crossover of the fits ({c['split']}): {where}"
                   + (" (**extrapolated**, outside both variants' measured budgets; not decided)" if c["extrapolated"]
                      else " (inside the measured budgets; not decided)")
                   + ".")
    out.append(f"\n<sub>yocou · commit {prov['git_commit'][:10]}{' (dirty)' if prov.get('git_dirty') else ''} · "
               f"{prov['device'].get('cpu_model', '')} · CPU</sub>\n")
    return "\n".join(out) + "\n"
