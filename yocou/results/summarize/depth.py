"""The ladder's positive control for depth: does extra depth pay per token in this regime, and does YOCO-U's
weight-tied loop capture it? (``eval/ladder.yaml``, ``depth_control``; the runs: ``depth_control`` of
``workflows/studies/ladder.yaml``.)

The control (``yoco_deep9`` at the tiny scale) is YOCO with 9 unshared window self layers and 3 cross layers: the
network YOCO-U T = 3 is the weight-tied version of, at the same training FLOPs per token (Saunshi et al. 2025,
arXiv 2502.17416, compare a k-layer block looped L times with the kL-layer unshared network). Per split and
budget, paired by seed (seed k of every variant sees the same batches), each a Student t interval (n - 1 df):

* ``D_deep = L(deep) - L(YOCO)``: what unshared extra depth buys per token;
* ``D_loop = L(YOCO-U) - L(YOCO)``: what the weight-tied loop buys;
* ``penalty = D_loop - D_deep = L(YOCO-U) - L(deep)``: what tying the weights costs;
* ``equal_flops = L(deep)(D) - L_YOCO(r D)``, ``r`` the FLOPs-per-token ratio, YOCO's side from seed k's own fit
  (:func:`yocou.results.summarize.ladder_fits.seed_fits`), where ``r D`` lies inside YOCO's measured budgets.

Decided at the control's largest budget (every seed there), Holm over the two splits per quantity, by the outcomes
``eval/ladder.yaml`` states before the runs (:func:`outcome`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from yocou.results.summarize.ladder_fits import (
    NOT_BRACKETED,
    NOT_COMPARABLE,
    SPLITS,
    _finite,
    holm,
    paired_t,
    power_law,
    regime_table,
    seed_fits,
)

QUANTITIES = ("D_deep", "D_loop", "penalty", "equal_flops")
DECIDED = ("D_deep", "D_loop", "penalty")
REGIME_LIMITED = "regime-limited: extra depth does not pay per token here"
TYING_FAILS = "weight-tied looping fails to capture depth that helps"
LOOP_CAPTURES = "looping captures the depth that helps"


def _by_seed(pts: pd.DataFrame, variant: str, tokens: int, split: str) -> dict[int, float]:
    g = pts[(pts["variant"] == variant) & (pts["tokens"] == tokens)]
    return {int(k): float(v) for k, v in zip(g["seed"], g[split])}


def readouts(pts: pd.DataFrame, deep: pd.DataFrame, level: float, yoco: str = "yoco", yocou: str = "yocou"
             ) -> tuple[pd.DataFrame, dict[tuple[str, str, int], list[float]]]:
    """The four readouts (nats/token) per split and budget of the control (``deep``: its annealed points, one variant; ``pts``:
    the ladder's, with ``yoco`` and ``yocou`` at those budgets).

    Returns the table (split, tokens, steps, tokens_per_param, the control's seed-mean loss and its distance from
    the budget's bigram, quantity, mean, low, high, p, n_seeds) and each row's per-seed
    differences keyed by (quantity, split, tokens), for re-reading the interval at another level.

    Raises:
        ValueError: ``deep`` holds more than one variant, or a budget of it has no YOCO or YOCO-U points.
    """
    if deep["variant"].nunique() != 1:
        raise ValueError(f"depth points: expected one variant, got {sorted(deep['variant'].unique())}")
    dv = str(deep["variant"].iloc[0])
    fpt = {v: float((g["train_flops"] / g["tokens"]).mean()) for v, g in pd.concat([pts, deep]).groupby("variant")}
    y_tokens = sorted(pts[pts["variant"] == yoco]["tokens"].unique())
    rows, diffs = [], {}
    for s in SPLITS:
        fits = seed_fits(pts, [yoco], s)[yoco]
        for tok in sorted(deep["tokens"].unique()):
            d, y, u = (_by_seed(pts if v != dv else deep, v, int(tok), s) for v in (dv, yoco, yocou))
            if not y or not u:
                raise ValueError(f"ladder points: no {yoco} or {yocou} points at {int(tok)} tokens for {dv}'s budget")
            ks = sorted(set(d) & set(y) & set(u))
            per = {"D_deep": [d[k] - y[k] for k in ks], "D_loop": [u[k] - y[k] for k in ks],
                   "penalty": [u[k] - d[k] for k in ks]}
            d_y = tok * fpt[dv] / fpt[yoco]
            if y_tokens and y_tokens[0] <= d_y <= y_tokens[-1]:
                per["equal_flops"] = [d[k] - float(power_law(d_y, *fits[k])) for k in sorted(set(d) & set(fits))
                                      if fits[k]]
            for q, x in per.items():
                t = paired_t(x, level)
                diffs[(q, s, int(tok))] = x
                rows.append({"split": s.removeprefix("heldout_"), "tokens": int(tok),
                             "steps": int(deep[deep["tokens"] == tok]["steps"].iloc[0]),
                             "tokens_per_param": float(deep[deep["tokens"] == tok]["tokens_per_param"].mean()),
                             "deep_loss": sum(d.values()) / len(d),
                             "deep_minus_bigram": sum(d.values()) / len(d) - float(
                                 deep[deep["tokens"] == tok][f"bigram_{s}"].iloc[0]),
                             "quantity": q, "mean": t["mean"], "low": t["low"], "high": t["high"], "p": t["p"],
                             "n_seeds": t["n"], "yoco_tokens": d_y if q == "equal_flops" else None})
    return pd.DataFrame(rows), diffs


def _inside(iv: Mapping[str, Any], margin: float) -> bool:
    return iv["low"] is not None and -margin < iv["low"] and iv["high"] < margin


def _below(iv: Mapping[str, Any]) -> bool:
    return iv["high"] is not None and iv["high"] < 0


def outcome(ivs: Mapping[str, Mapping[str, Any]], margin: float, helps: float) -> str:
    """eval/ladder.yaml (depth_control), from the intervals of D_deep, D_loop and penalty (each ``mean``, ``low``,
    ``high``; ``low`` None: no interval):

    * D_deep inside +-``margin`` -> :data:`REGIME_LIMITED`;
    * D_deep below 0 with its mean <= ``helps`` and D_loop inside +-``margin`` -> :data:`TYING_FAILS`;
    * D_deep and D_loop below 0, the penalty inside +-``margin`` -> :data:`LOOP_CAPTURES`;
    * else ``inconclusive``.
    """
    dd, dl, pen = ivs["D_deep"], ivs["D_loop"], ivs["penalty"]
    if _inside(dd, margin):
        return REGIME_LIMITED
    if _below(dd) and dd["mean"] <= helps and _inside(dl, margin):
        return TYING_FAILS
    if _below(dd) and _below(dl) and _inside(pen, margin):
        return LOOP_CAPTURES
    return "inconclusive"


def decide(diffs: Mapping[tuple[str, str, int], list[float]], pts: pd.DataFrame, deep: pd.DataFrame,
           rules: Mapping[str, Any], bracketed: bool, yoco: str = "yoco", yocou: str = "yocou") -> list[dict[str, Any]]:
    """One decision per split at the control's largest budget with every seed (eval/ladder.yaml, depth_control):
    each decided quantity's interval at its Holm level over the two splits, the regime gate (every side's seed
    mean at least ``regime.bigram_margin_nats`` below its own-budget bigram), the bracket cap, and :func:`outcome`."""
    dc = rules["depth_control"]
    level, alpha = float(rules["confidence"]), 1 - float(rules["confidence"])
    n_seeds = deep["seed"].nunique()
    full = [t for t, g in deep.groupby("tokens") if g["seed"].nunique() == n_seeds]
    tok = int(max(full))
    dv = str(deep["variant"].iloc[0])
    reg = regime_table(pd.concat([pts[pts["variant"].isin([yoco, yocou])], deep], ignore_index=True),
                       float(rules["regime"]["bigram_margin_nats"]))
    out = {s: {"split": s.removeprefix("heldout_"), "tokens": tok, "intervals": {}} for s in SPLITS}
    for q in DECIDED:
        ts = [paired_t(diffs[(q, s, tok)], level) for s in SPLITS]
        for s, t, h in zip(SPLITS, ts, holm([t["p"] for t in ts], alpha)):
            adj = paired_t(diffs[(q, s, tok)], h["level"]) if h["level"] is not None else t
            out[s]["intervals"][q] = {"mean": t["mean"], "low": adj["low"], "high": adj["high"], "level": h["level"],
                                      "p": t["p"], "p_adjusted": h["p_adjusted"], "n_seeds": t["n"]}
    for s, d in out.items():
        past = reg[(reg["split"] == s) & (reg["tokens"] == tok) & reg["variant"].isin([dv, yoco, yocou])]
        d["regime_past_bigram"] = bool(len(past) == 3 and past["past_bigram"].all())
        verdict = outcome(d["intervals"], float(dc["margin_nats"]), float(dc["deep_helps_nats"]))
        d["verdict_ungated"] = verdict
        d["verdict"] = NOT_COMPARABLE if not d["regime_past_bigram"] else (NOT_BRACKETED if not bracketed else verdict)
    return list(out.values())


def _iv(x: Mapping[str, Any]) -> str:
    if x.get("low") is None or math.isnan(x["low"]):
        return f"{x['mean']:+.3f} (no interval)"
    return f"{x['mean']:+.3f} [{x['low']:+.3f}, {x['high']:+.3f}]"


def write(points: str | Path, depth_points: str | Path, bracket: pd.DataFrame, rules: Mapping[str, Any],
          out_csv: str | Path, figure: str | Path, scale: str, planned: list[int], dpi: int = 150) -> dict[str, Any]:
    """``depth.{csv,md,json}`` (readouts per split, budget and quantity; the decisions) and the figure.

    ``bracket``: the control's bracket table (:func:`yocou.results.summarize.ladder.bracket_table`);
    ``planned``: the control's budgets in tokens by ``eval/ladder.yaml`` (the rungs not yet run are named).
    """
    from yocou.results.render.common import configure, write_table
    from yocou.results.summarize.ladder import bracket_best
    from yocou.utils.io import atomic_write_json

    pts, deep = pd.read_csv(points), pd.read_csv(depth_points)
    level = float(rules["confidence"])
    best = bracket_best(bracket)
    dv = str(deep["variant"].iloc[0])
    b = best[dv]
    trained = sorted({float(x) for x in deep["lr"]})
    if trained != [b["lr"]]:
        raise ValueError(f"{depth_points}: {dv} trained at {trained}, but its bracket's best rate is {b['lr']:g}")
    table, diffs = readouts(pts, deep, level)
    dec = decide(diffs, pts, deep, rules, bool(b["interior"]))
    fpt = float((deep["train_flops"] / deep["tokens"]).mean())
    fpt_y = float((pts[pts["variant"] == "yoco"]["train_flops"] / pts[pts["variant"] == "yoco"]["tokens"]).mean())
    left = [t for t in planned if t not in set(int(x) for x in deep["tokens"])]
    notes = [
        f"{dv}: YOCO with unshared self layers in place of YOCO-U's loop, {fpt / fpt_y:.2f}x YOCO's training FLOPs "
        f"per token; the ladder's protocol (warmup-stable-decay, the same cooldowns), its own bracket: best rate "
        f"{b['lr']:g} ({'interior' if b['interior'] else 'not interior: verdicts capped'}) of "
        + ", ".join(f"{r.lr:g} ({r.score:.4f})" for r in bracket.sort_values("lr").itertuples()) + ".",
        "D_deep = L(deep) - L(YOCO), D_loop = L(YOCO-U) - L(YOCO), penalty = L(YOCO-U) - L(deep), equal_flops = "
        "L(deep) at D - YOCO's per-seed fit at D x the FLOPs ratio (reported, not decided); nats/token, < 0: the first "
        f"named is lower. Paired by seed, Student t {level:.0%} intervals (n - 1 df).",
        *[f"**{d['split']}** at {d['tokens'] / 1e6:.2f}M tokens (Holm over the two splits; rules in "
          f"eval/ladder.yaml): D_deep {_iv(d['intervals']['D_deep'])}, D_loop {_iv(d['intervals']['D_loop'])}, "
          f"penalty {_iv(d['intervals']['penalty'])}: **{d['verdict']}**"
          + ("" if d["verdict"] == d["verdict_ungated"] else f" (ungated: {d['verdict_ungated']})") for d in dec],
        *([f"Not yet run: the {', '.join(f'{t / 1e6:.1f}M' for t in left)} rung; the decision moves there when it "
           "runs (eval/ladder.yaml)."] if left else []),
    ]
    cfg = {"scale": scale, "rules": {k: rules[k] for k in ("confidence", "regime", "depth_control")}}
    write_table(table, Path(out_csv).with_suffix(""), title=f"Positive control for depth beside the token ladder "
                f"({scale}, CPU)", notes=notes, config=cfg)
    stem = Path(out_csv).with_suffix("")
    doc = json.loads(stem.with_suffix(".json").read_text())
    doc = {"decisions": _finite(dec), "bracket": _finite(best), **doc}
    atomic_write_json(stem.with_suffix(".json"), doc)
    from yocou.results.render.ladder import draw_depth

    configure(dpi)
    draw_depth(pts, deep, figure, scale)
    return doc
