"""Many comparisons at once: the family of training-side intervals at one scale, Holm's adjustment, rows that
restate another (counted once), and how many seeds a comparison would need (a power calculation).

**The family.** Every training-side row decided by an interval across seeds (:mod:`yocou.results.audit.decision`) at one
scale belongs to one family, but for the rows that are not comparable with the paper (their models not past the
bigram of their own budget: :mod:`yocou.results.audit.regime`), which speak neither for nor against it. With m such rows each held to 95% on its own, about 0.05·m of them would be decided by
chance if no variant differed from another; so the audit decides them together.

**Holm's step-down** (Holm 1979, "A simple sequentially rejective multiple test procedure"): sort the family's
p-values of "no effect" (:func:`yocou.results.audit.decision.t_p_value`, the test each t interval inverts) and reject the
i-th smallest while p_(i) < alpha / (m - i + 1); stop at the first that is not. The adjusted p-value is
max over j <= i of min(1, (m - j + 1) p_(j)). It holds the chance of deciding any true null at alpha (here 0.05).

**Intervals at the Holm levels** ("Holm on the intervals"): each row is decided again, by the same rule, on its t
interval at a wider level: 1 - alpha / (m - i + 1) for the i-th rejected row (that interval excludes 0 exactly
because Holm rejected it), and 1 - alpha / (m - r) for every row Holm does not reject (r rejected; these intervals
contain 0, and together with the rejections they are the simultaneous intervals compatible with Holm's test:
Strassburger and Bretz 2008). So the adjusted verdict is "same direction"/"opposite" exactly when Holm rejects,
and "no difference" only when the wider interval lies inside the margin. The row's ``verdict`` is the adjusted
one; ``verdict_unadjusted`` keeps the per-row 95% verdict beside it.

**Restatements.** A row that tests the same quantity on the same runs as another (a perplexity ratio made from a
loss difference) declares ``restates: <id>`` in ``eval/comparisons.yaml`` (a string, or a mapping from the
expanded column to an id). The group counts once: one family member (the restated row; a restatement only if that
row has no interval), every interval row of the group decided at the member's level, and summaries count only one
row of the group (``counted``: the member, else the first row that was run, the restated row first).

**Seeds needed** (:func:`power_table`): for each family member (and each one-seed row that names a row with an
interval to borrow its seed spread from, ``power_from``), the seeds a paired t interval would need to decide, with
80% power at the strictest Holm level alpha / m: a true difference of the row's margin (excluding 0), the observed
effect, and "no difference" when the true effect is 0 (the interval inside the margin; the sample sd taken as
known). The spread is the per-seed effect's standard deviation, se·sqrt(n) (for a Welch row, n the smaller side's
seeds: approximate). The cost of one more seed is read from the scale's committed job times
(``results/<scale>/timing.csv``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from scipy import stats

from yocou.results.audit.decision import (
    CONFIDENCE,
    NOT_COMPARABLE_KINDS,
    NOT_RUN,
    Verdict,
)

__all__ = ["ALPHA", "POWER", "holm", "restatements", "in_family", "adjust", "seeds_needed", "power_table",
           "POWER_COLUMNS", "seed_cost", "read_timing"]

ALPHA = 1 - CONFIDENCE          # the family-wise error rate the adjustment holds
POWER = 0.8                     # the power the seed calculation asks for
N_MAX = 200                     # seeds beyond this are reported as "> 200"
POWER_COLUMNS = ["id", "comparison", "status", "verdict", "verdict_unadjusted", "p_adjusted", "seeds_now", "effect",
                 "sd_per_seed", "spread_from", "margin", "alpha", "seeds_margin", "seeds_observed",
                 "seeds_no_difference", "cpu_s_per_seed", "runs"]


def holm(p: dict[str, float], alpha: float = ALPHA) -> dict[str, dict[str, Any]]:
    """Holm's step-down over the p-values ``p`` (id -> p). Returns, per id: ``rank`` (1 = smallest p; ties by id),
    ``p_adjusted``, ``rejected`` and ``level`` (the confidence level of the row's interval: 1 - alpha / (m - i + 1)
    for the i-th rejected row, 1 - alpha / (m - r) for the rest, r rejected; module docstring).

    Raises:
        ValueError: a p-value is not a number in [0, 1], or ``alpha`` not in (0, 1).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"holm: alpha must be in (0, 1), got {alpha}")
    for k, v in p.items():
        if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
            raise ValueError(f"holm: p-value of {k!r} must be a number in [0, 1], got {v!r}")
    order = sorted(p, key=lambda k: (p[k], k))
    m = len(order)
    out: dict[str, dict[str, Any]] = {}
    running, rejecting = 0.0, True
    for i, k in enumerate(order, start=1):
        running = max(running, min(1.0, (m - i + 1) * p[k]))
        rejecting = rejecting and p[k] < alpha / (m - i + 1)
        out[k] = {"rank": i, "p": p[k], "p_adjusted": running, "rejected": rejecting}
    r = sum(v["rejected"] for v in out.values())
    for v in out.values():
        v["level"] = 1 - alpha / (m - v["rank"] + 1) if v["rejected"] else 1 - alpha / (m - r)
    return out


def _declared(r: dict, key: str) -> Any:
    """A row's ``restates``/``power_from``: one id, or the id of its column in a ``{column: id}`` mapping."""
    t = r.get(key)
    return t.get(r.get("column", "")) if isinstance(t, dict) else t


def restatements(rows: list[dict]) -> dict[str, str]:
    """``{row id: the id it restates}`` from the rows' ``restates`` (a string, or ``{column: id}`` for rows
    expanded over columns; other columns restate nothing). Also checks every ``power_from`` and
    ``restates_at_base`` (the id a row restates when it reads the same runs: yocou.results.audit.verdicts.restated_at_base).

    Raises:
        ValueError: naming the file the row came from (``_source``) and the row, when a restated, ``power_from``
            or ``restates_at_base`` id does not exist or is the row itself, or a restated row restates another
            row in turn.
    """
    ids = {r["id"] for r in rows}
    out: dict[str, str] = {}
    for r in rows:
        path = r.get("_source", "eval/comparisons.yaml")
        for key in ("power_from", "restates_at_base"):
            pf = _declared(r, key)
            if pf is not None and (not isinstance(pf, str) or pf not in ids or pf == r["id"]):
                raise ValueError(f"{path}: row {r['id']}: {key} {pf!r}, which is not another row's id")
        t = _declared(r, "restates")
        if t is None:
            continue
        if not isinstance(t, str) or t not in ids or t == r["id"]:
            raise ValueError(f"{path}: row {r['id']}: restates {t!r}, which is not another row's id")
        out[r["id"]] = t
    if bad := sorted(k for k, v in out.items() if v in out):
        path = next(r.get("_source", "eval/comparisons.yaml") for r in rows if r["id"] == bad[0])
        raise ValueError(f"{path}: row {bad[0]}: restates {out[bad[0]]}, which itself restates {out[out[bad[0]]]}; "
                         "name the row it restates")
    return out


def in_family(v: Verdict) -> bool:
    """A training-side verdict with an interval across seeds (so a p-value) that is comparable with the paper (not
    "not comparable": its models past the bigram of their own budget, yocou.results.audit.regime)."""
    return (v.evidence == "training" and v.p_value is not None and math.isfinite(v.p_value)
            and v.verdict not in NOT_COMPARABLE_KINDS)


def adjust(verdicts: list[Verdict], rows: list[dict], evaluate_at: Callable[[dict, float], Verdict], scale: str,
           alpha: float = ALPHA) -> list[Verdict]:
    """The verdicts with the family-wise adjustment applied (module docstring). ``rows[i]`` is the expanded row of
    ``verdicts[i]``; ``evaluate_at(row, level)`` decides a row again at another confidence level. Rows outside
    the family are returned unchanged, but for ``restates``. Raises ValueError for a bad ``restates``."""
    if len(rows) != len(verdicts):
        raise ValueError(f"adjust: {len(rows)} rows for {len(verdicts)} verdicts")
    rest = restatements(rows)
    by_id = {v.id: v for v in verdicts}
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        groups.setdefault(rest.get(v.id, v.id), []).append(v.id)
    member = {g: next((i for i in sorted(ids, key=lambda i: i != g) if in_family(by_id[i])), None)
              for g, ids in groups.items()}
    fam = {g: by_id[m].p_value for g, m in member.items() if m is not None}
    # the one row of each group that summaries count: its family member, else its first row that was run (the
    # restated row first), else the restated row
    counted = {g: m or next((i for i in sorted(groups[g], key=lambda i: i != g)
                             if by_id[i].qualifier != NOT_RUN), g) for g, m in member.items()}
    res = holm(fam, alpha)
    m = len(res)
    text = f"Holm over {m} training-side comparison{'s' if m != 1 else ''} with an interval ({scale}), alpha {alpha:g}"
    out = []
    for v, row in zip(verdicts, rows):
        g = rest.get(v.id, v.id)
        post = "" if g == v.id or v.qualifier == NOT_RUN else (
            f"; restates {g} ({'counted here' if counted[g] == v.id else 'counted there'})")
        if g not in res or not in_family(v):
            out.append(replace(v, restates=g if g != v.id else "", counted=counted[g] == v.id,
                               qualifier=v.qualifier + post))
            continue
        h = res[g]
        a = evaluate_at(row, h["level"])
        out.append(replace(
            v, verdict=a.verdict, verdict_unadjusted=v.verdict, qualifier_unadjusted=v.qualifier,
            qualifier=f"{a.qualifier}; Holm ({m} comparison{'s' if m != 1 else ''}): adjusted p "
                      f"{h['p_adjusted']:.2g} (raw {v.p_value:.2g}){post}",
            p_adjusted=h["p_adjusted"], family_size=m, level_adjusted=h["level"], ci_low_adjusted=a.ci_low,
            ci_high_adjusted=a.ci_high, adjustment=text, restates=g if g != v.id else "",
            counted=counted[g] == v.id))
    return out


def seeds_needed(delta: float, sd: float, alpha: float, *, power: float = POWER, equivalence: bool = False,
                 n_max: int = N_MAX) -> int | None:
    """The fewest seeds n (2..n_max) with which a paired t interval at level 1 - ``alpha`` decides, with
    probability ``power``: a true per-seed mean difference ``delta`` (its interval excludes 0: the power of the
    two-sided t test, noncentral t with df n - 1, noncentrality delta·sqrt(n)/sd); or, with ``equivalence``, a
    true difference of 0 shown inside the margin ``±delta`` (P(|mean| + t·sd/sqrt(n) < delta) with the sd taken as
    known). None when n_max seeds are not enough; ``sd`` is the per-seed effect's standard deviation.

    Raises:
        ValueError: ``delta`` or ``sd`` not finite and > 0, ``alpha`` or ``power`` not in (0, 1).
    """
    if not (math.isfinite(delta) and delta > 0 and math.isfinite(sd) and sd > 0 and 0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"seeds_needed: need delta > 0, sd > 0, alpha and power in (0, 1), got {delta}, {sd}, "
                         f"{alpha}, {power}")
    for n in range(2, n_max + 1):
        df, k = n - 1, delta * math.sqrt(n) / sd
        q = float(stats.t.ppf(1 - alpha / 2, df))
        if equivalence:
            got = 2 * float(stats.norm.cdf(k - q)) - 1 if k > q else 0.0
        else:
            # scipy's noncentral t can return NaN far in a tail (the lower tail here): that tail is ~0
            got = sum(0.0 if math.isnan(x) else float(x) for x in (stats.nct.sf(q, df, k), stats.nct.cdf(-q, df, k)))
        if got >= power:
            return n
    return None


def _runs_of(row: dict, config: dict) -> list[str]:
    """The runs behind a row's sides: its roles (``a|b`` split), through the study's role -> run mapping in the
    config (``studies.<study>`` as a mapping), Table 4's retrieval runs (``<role>_niah``), or the role itself."""
    roles = [x for s in ("a", "b") for x in str(row.get("roles", {}).get(s, "")).split("|") if x]
    study = config.get("studies", {}).get(row.get("study"))
    if not roles and isinstance(study, dict):
        roles = list(study)
    if row.get("study") == "table4":
        return [f"{r}_niah" for r in roles]
    return [str(study[r]) if isinstance(study, dict) and isinstance(study.get(r), str) else r for r in roles]


def seed_cost(run: str, timing: pd.DataFrame) -> float | None:
    """CPU seconds one more seed of ``run`` costs: the mean over its seed replicas (``<run>_seed<k>``) of the CPU
    seconds of all their jobs (training, evaluation, run config), else those of the run itself; None if absent."""
    w = timing["wildcards"].astype(str)
    reps = timing[w.str.fullmatch(re.escape(run) + r"_seed\d+")]
    if not reps.empty:
        return float(reps.groupby("wildcards")["cpu_s"].sum().mean())
    own = timing[w == run]
    return float(own["cpu_s"].sum()) if not own.empty else None


def power_table(verdicts: Iterable[Verdict], rows: list[dict], *, config: dict | None = None,
                timing: pd.DataFrame | None = None, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per family member and per one-seed row that names a row with an interval in ``power_from``: columns
    :data:`POWER_COLUMNS` (``status``: decided / borderline (decided at 95% but not after the adjustment, or an
    adjusted p of 0.01 or more) / undecided / one seed; ``seeds_*`` per :func:`seeds_needed` at ``alpha / m``, NaN
    for "more than 200"; ``cpu_s_per_seed``: :func:`seed_cost` summed over the row's runs). Module docstring."""
    vs = list(verdicts)
    by_id = {v.id: v for v in vs}
    row_of = {r["id"]: r for r in rows}
    m = next((v.family_size for v in vs if v.family_size), 0)
    if not m:
        return pd.DataFrame(columns=POWER_COLUMNS)
    a = alpha / m
    out = []
    for v in vs:
        src_id = None
        if in_family(v) and v.counted:
            src = v
        else:
            pf = _declared(row_of.get(v.id, {}), "power_from")
            if (v.evidence != "training" or pf is None or in_family(v) or v.effect is None
                    or not math.isfinite(v.effect) or v.verdict in NOT_COMPARABLE_KINDS):
                continue
            if pf not in by_id or not in_family(by_id[pf]):
                if pf in by_id and (by_id[pf].qualifier == NOT_RUN or by_id[pf].verdict in NOT_COMPARABLE_KINDS):
                    continue                                  # the row it borrows from was not run or not comparable
                raise ValueError(f"{row_of[v.id].get('_source', 'eval/comparisons.yaml')}: row {v.id}: power_from "
                                 f"{pf!r} is not a row with an interval across seeds")
            src, src_id = by_id[pf], pf
        n = int(src.n_seeds or 0)
        sd = float(src.ci_se) * math.sqrt(n)
        margin = v.margin if v.margin is not None else src.margin
        decided = v.verdict != "inconclusive"
        status = "undecided" if not decided and v.verdict_unadjusted in ("", "inconclusive") else (
            "borderline" if not decided or (v.p_adjusted is not None and v.p_adjusted >= 0.01) else "decided")
        if src_id:
            status = "one seed"
        runs = _runs_of(row_of.get(v.id, {}), config or {})
        costs = [seed_cost(r, timing) for r in runs] if timing is not None else []
        out.append({
            "id": v.id, "comparison": v.comparison, "status": status, "verdict": v.verdict,
            "verdict_unadjusted": v.verdict_unadjusted or v.verdict, "p_adjusted": v.p_adjusted,
            "seeds_now": int(v.n_seeds or 1), "effect": v.effect, "sd_per_seed": sd,
            "spread_from": src_id or "measured" + (" (Welch: se x sqrt(smaller n))" if "Welch" in src.ci_method
                                                   else ""),
            "margin": margin, "alpha": a,
            **{k: _need(d, sd, a, eq) for k, d, eq in (("seeds_margin", margin, False),
                                                       ("seeds_observed", abs(v.effect or 0.0), False),
                                                       ("seeds_no_difference", margin, True))},
            "cpu_s_per_seed": sum(costs) if costs and None not in costs else None, "runs": " ".join(runs)})
    return pd.DataFrame(out, columns=POWER_COLUMNS)


def _need(delta: float | None, sd: float, alpha: float, equivalence: bool) -> float:
    if delta is None or not math.isfinite(delta) or delta <= 0 or not sd > 0:
        return math.nan
    n = seeds_needed(delta, sd, alpha, equivalence=equivalence)
    return math.nan if n is None else float(n)


def read_timing(results_dir: str | Path) -> pd.DataFrame | None:
    """``results_dir/timing.csv`` (the pipeline's job times: one row a job, ``wildcards`` and ``cpu_s`` in CPU
    seconds) if present, else None.

    Raises:
        ValueError: the file lacks those columns (naming it).
    """
    p = Path(results_dir) / "timing.csv"
    if not p.is_file():
        return None
    t = pd.read_csv(p)
    if not {"wildcards", "cpu_s"} <= set(t.columns):
        raise ValueError(f"{p}: expected columns wildcards and cpu_s")
    return t
