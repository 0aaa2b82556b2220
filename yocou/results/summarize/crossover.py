"""The crossover study: does YOCO-U's equal-steps gap to YOCO close or reverse with more tokens?

The ``crossover`` target trains the config's ``crossover.runs`` (YOCO and YOCO-U) for ``crossover.factor`` times
the tiny budget with ``crossover.seeds`` seeds; each run logs its held-out loss at ``train.eval_every`` steps
(``heldout_loss`` in ``metrics.jsonl``, nats per token on the first ``train.eval_tokens`` tokens of each held-out
split). This module turns those rows into a tidy table (:func:`summarize_crossover`) and the gap between the two
runs at each checkpoint with a 95% interval across seeds (:func:`gap_by_tokens`), and states what happened
(:func:`crossover_verdict`). The final models are also scored on the whole held-out set of each split by the
``ppl`` rule (``results/<scale>/ppl/<run>.json``, at least 10^5 tokens at tiny): rows ``heldout_full.<split>``
(nats/token) and ``heldout_full_bpb.<split>`` (bits per byte) at the run's final token count, whose gap
(:func:`final_gap`) is the verdict's last word on ``split``. No published result answers this at small scale; the
verdict is ours.

Intervals: when both sides have the same seeds the gap is paired by seed (the same seed gives both runs the same
data order): mean of the per-seed differences ± t(0.975, n-1) · sd / sqrt(n). Otherwise Welch's interval.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from yocou.results.readers import ResultFileError, read_jsonl, read_ppl, read_summary
from yocou.results.summarize import run_seed
from yocou.results.tidy import tidy_frame

__all__ = ["summarize_crossover", "gap_by_tokens", "crossover_verdict", "final_gap", "t_interval"]


def t_interval(a: Sequence[float], b: Sequence[float] | None = None, *, paired: bool = False,
               level: float = 0.95) -> tuple[float, float, float, str]:
    """``(effect, low, high, method)``: the mean of ``a`` (``b`` None), of ``a - b`` (``paired``) or the difference of
    means with Welch's interval, at confidence ``level`` (Student t, scipy.stats' ttest_1samp / ttest_rel /
    ttest_ind(equal_var=False) intervals). Fewer than 2 values on a side: an infinite interval.

    Raises:
        ValueError: an empty side, or paired sides of different lengths.
    """
    from scipy import stats

    a = np.asarray(a, dtype=float)
    bb = None if b is None else np.asarray(b, dtype=float)
    if a.size == 0 or (bb is not None and bb.size == 0):
        raise ValueError("t_interval: each side needs at least one value")
    if paired and (bb is None or bb.size != a.size):
        raise ValueError(f"t_interval: paired sides need equal lengths, got {a.size} and {0 if bb is None else bb.size}")
    m = float(a.mean() - (0 if bb is None else bb.mean()))
    if a.size < 2 or (bb is not None and bb.size < 2):
        return m, -math.inf, math.inf, "one value on a side"
    if bb is None:
        r, how = stats.ttest_1samp(a, 0.0), f"t, n={a.size}"
    elif paired:
        r, how = stats.ttest_rel(a, bb), f"t, paired, n={a.size}"
    else:
        r, how = stats.ttest_ind(a, bb, equal_var=False), f"t, Welch, n={a.size}/{bb.size}"
    ci = r.confidence_interval(level)
    lo, hi = float(ci.low), float(ci.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):  # every value equal: scipy's interval is NaN, the effect exact
        return m, m, m, how + " (no spread)"
    return m, lo, hi, how


def summarize_crossover(runs: Mapping[str, Sequence[str | Path]],
                        ppl: Mapping[str, str | Path] | None = None) -> pd.DataFrame:
    """Tidy rows (study ``crossover``) of the held-out loss at every checkpoint of each run, and of its final model
    on the whole held-out set.

    Args:
        runs: role (``yoco``, ``yocou``) → the run folders of its seeds (each with ``metrics.jsonl`` and
            ``summary.json``).
        ppl: run name (the folder's name) → its held-out perplexity result (:func:`yocou.results.readers.read_ppl`;
            splits ``heldout_<split>``), for the final rows; a run without one has none.

    Returns:
        rows ``metric = heldout_loss.<split>`` (checkpoints), ``heldout_full.<split>`` (nats/token, stderr over
        windows, ``n`` = tokens) and ``heldout_full_bpb.<split>`` (bits/byte), ``axis = tokens``, ``seed`` the run's
        seed.

    Raises:
        ResultFileError: a run's metrics.jsonl has no ``heldout_loss`` row (trained without ``train.eval_every``),
            or a result file is malformed (naming it).
    """
    rows: list[dict[str, Any]] = []
    for role, dirs in runs.items():
        for d in map(Path, dirs):
            if ppl and d.name in ppl:
                tokens = float(read_summary(d / "summary.json")["tokens"])
                for split, r in read_ppl(ppl[d.name])["splits"].items():
                    short = split.removeprefix("heldout_")
                    base = {"study": "crossover", "run": d.name, "role": role, "seed": run_seed(d), "axis": "tokens",
                            "axis_value": tokens, "n": float(r["n_tokens"])}
                    rows.append({**base, "metric": f"heldout_full.{short}", "value": float(r["nll"]), "unit": "nats",
                                 "stderr": float(r.get("stderr_nats", math.nan))})
                    if isinstance(r.get("bits_per_byte"), (int, float)):
                        rows.append({**base, "metric": f"heldout_full_bpb.{short}", "value": float(r["bits_per_byte"]),
                                     "unit": "bits/byte"})
            seed, path = run_seed(d), d / "metrics.jsonl"
            evals = [r for _, r in read_jsonl(path, what="metrics log") if isinstance(r.get("heldout_loss"), Mapping)]
            if not evals:
                raise ResultFileError(path, "heldout_loss", "no row has it; train with train.eval_every > 0")
            for r in evals:
                for split, v in r["heldout_loss"].items():
                    rows.append({"study": "crossover", "run": d.name, "role": role, "seed": seed,
                                 "metric": f"heldout_loss.{split}", "axis": "tokens", "axis_value": float(r["tokens"]),
                                 "value": float(v), "unit": "nats"})
    return tidy_frame(rows)


def gap_by_tokens(df: pd.DataFrame, metric: str, a: str = "yocou", b: str = "yoco") -> pd.DataFrame:
    """The gap ``a - b`` of ``metric`` at each token count both roles reached with every seed: columns
    ``tokens, gap, low, high, method, n_a, n_b`` (95% interval, paired by seed when both have the same seeds)."""
    out = []
    sub = df[df["metric"] == metric]
    for tok, g in sub.groupby("axis_value"):
        sa = g[g["role"] == a].set_index("seed")["value"]
        sb = g[g["role"] == b].set_index("seed")["value"]
        if sa.empty or sb.empty:
            continue
        paired = sorted(sa.index) == sorted(sb.index) and len(sa) > 1
        if paired:
            sb = sb.loc[sa.index]
        m, lo, hi, how = t_interval(sa.to_numpy(), sb.to_numpy(), paired=paired)
        out.append({"tokens": float(tok), "gap": m, "low": lo, "high": hi, "method": how,
                    "n_a": len(sa), "n_b": len(sb)})
    return pd.DataFrame(out, columns=["tokens", "gap", "low", "high", "method", "n_a", "n_b"])


def final_gap(df: pd.DataFrame, split: str, a: str = "yocou", b: str = "yoco") -> dict[str, Any] | None:
    """The gap ``a - b`` (nats/token) of the final models on the whole held-out ``split`` (rows
    ``heldout_full.<split>``), at the last token count both roles reached with every seed: ``{tokens, gap, low, high,
    method, n_a, n_b, n_tokens}`` (95%, paired by seed when both have the same seeds; ``n_tokens``: the fewest
    held-out tokens a run was scored on); None without such rows."""
    g = gap_by_tokens(df, f"heldout_full.{split}", a, b)
    if g.empty:
        return None
    r = g.sort_values("tokens").iloc[-1]
    sub = df[(df["metric"] == f"heldout_full.{split}") & (df["axis_value"].astype(float) == float(r["tokens"]))]
    return {"tokens": float(r["tokens"]), "gap": float(r["gap"]), "low": float(r["low"]), "high": float(r["high"]),
            "method": str(r["method"]), "n_a": int(r["n_a"]), "n_b": int(r["n_b"]),
            "n_tokens": int(sub["n"].min()) if "n" in sub and sub["n"].notna().all() else None}


def crossover_verdict(gaps: pd.DataFrame, *, ref_tokens: float | None = None,
                      final: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the gap (:func:`gap_by_tokens`, YOCO-U minus YOCO; positive: YOCO-U worse) did over training.

    The end point is ``final`` (:func:`final_gap`: the final models on the whole held-out set) where given, else the
    last checkpoint; the reference is the checkpoint nearest ``ref_tokens`` (the core runs' budget: the gap the
    question is about) where given, else the first checkpoint.

    ``status``: ``reversed`` (the end point's interval lies below 0: YOCO-U better), ``persists`` (above 0),
    ``closed`` (the reference's interval lies above 0 and the end point's contains 0) or ``undecided``;
    ``at_tokens``: the first checkpoint from which every later checkpoint's interval lies below 0 (reversed) or
    contains or lies below 0 (closed).

    Raises:
        ValueError: no checkpoint.
    """
    if gaps.empty:
        raise ValueError("crossover_verdict: no checkpoint with both runs")
    g = gaps.sort_values("tokens").reset_index(drop=True)
    last, first = g.iloc[-1], g.iloc[0]
    ref = first if ref_tokens is None else g.iloc[int((g["tokens"] - float(ref_tokens)).abs().idxmin())]
    end = final if final is not None else last
    below, above = g["high"] < 0, g["low"] > 0
    if end["high"] < 0:
        status, ok = "reversed", below
    elif end["low"] > 0:
        status, ok = "persists", None
    elif ref["low"] > 0:
        status, ok = "closed", ~above
    else:
        status, ok = "undecided", None
    at = None
    if ok is not None:
        k = len(g)
        while k > 0 and ok.iloc[k - 1]:
            k -= 1
        at = float(g["tokens"].iloc[min(k, len(g) - 1)])
    def pick(r: Mapping[str, Any]) -> dict[str, Any]:
        return {"tokens": float(r["tokens"]), "gap": float(r["gap"]), "low": float(r["low"]), "high": float(r["high"]),
                "method": str(r["method"])}

    return {"status": status, "at_tokens": at, "first": pick(first), "reference": pick(ref), "last": pick(last),
            "end": "final models, whole held-out set" if final is not None else "last checkpoint"}
