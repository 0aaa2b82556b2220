"""How a reproduced comparison is decided: the verdict kinds, :class:`Verdict`, :func:`decide` (never
stronger than the evidence) and, for training-side evidence with seeds, the 95% interval (:func:`t_interval`) and
its rule (:func:`decide_interval`). Used by :mod:`yocou.results.audit.verdicts`, which evaluates the declared rows.

Training-side evidence (``training``, and ``eval`` rows without an item stderr, which fall back to it) with at least
two seeds on every side is decided by the effect's 95% confidence interval across seeds: a Student-t interval.
**Paired by seed** when every side was measured on the same seeds: replica k of every run of a study trains with
seed ``seed + k``, so the two sides of a pair see the same batches in the same order
(:func:`yocou.training.train.batch_generator`) and the same needle placements; the effect is formed per seed and its
interval is the one-sample t interval of those per-seed effects (df = n - 1; scipy's ``ttest_rel`` for a
difference), which removes the data-order variance the two sides share (at tiny the per-seed losses of YOCO and
YOCO-U correlate 0.7-0.96 across seeds). Otherwise (different seeds on the two sides) Welch's interval
(se = hypot(se_a, se_b) with the Welch-Satterthwaite degrees of freedom; one side: df = n - 1), each side's se the
standard deviation of its per-seed values over sqrt(n seeds). A non-linear effect
(``relative_decrease``, ``log_ratio``, ``ratio_minus_1``, ``monotone``) is propagated by the delta method (the
gradient of the effect at the seed means); an effect averaged over axis values or metrics of the same runs is
linearised per seed first, so the correlation between them is kept. "Same direction" (and size) / "opposite" only
when the interval excludes 0; "no difference" only when it lies inside the row's ``margin`` (:data:`MARGINS`); else
inconclusive. One seed: inconclusive ("one seed, no interval").

"Opposite" only where the paper claims a direction; a parity or equality claim that fails "differs". Two more kinds
are not decisions: "censored" (the outcome lies outside what the runs measured, e.g. a token saving of -inf, no
interval) and "not comparable" (a learning-side row whose models are not past the bigram of their own budget:
:mod:`yocou.results.audit.regime`, eval/regime.yaml). :data:`FOR`, :data:`AGAINST` and :data:`DIFFERS` are the decided
kinds (:data:`DECIDED`); :data:`NOT_DECIDED` the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

__all__ = [
    "AGAINST",
    "CENSORED",
    "CONFIDENCE",
    "DECIDED",
    "DIFFERS",
    "EFFECTS",
    "EVIDENCE",
    "FOR",
    "INCONCLUSIVE",
    "LEARNING",
    "MARGINS",
    "NOT_COMPARABLE",
    "NOT_COMPARABLE_KINDS",
    "NOT_COMPARABLE_UNKNOWN",
    "NOT_DECIDED",
    "NOT_RUN",
    "NO_DIFFERENCE",
    "OPPOSITE",
    "SAME",
    "SAME_SIZE",
    "VERDICTS",
    "Verdict",
    "above_chance",
    "decide",
    "decide_interval",
    "level_text",
    "t_interval",
    "t_p_value",
]

SAME_SIZE, SAME, OPPOSITE, INCONCLUSIVE = "same direction and size", "same direction", "opposite", "inconclusive"
# the 95% interval across seeds lies inside the margin: the effect the paper claims is absent at this scale
NO_DIFFERENCE = "no difference"
# the paper claims no direction (parity, `paper: {expect: parity}`, or an equality) and ours is wholly outside the
# margin (or not equal): "opposite" is kept for claims with a direction
DIFFERS = "differs"
# a learning-side row whose models are not past the Kneser-Ney bigram of their own budget by the declared margin
# (eval/regime.yaml, yocou.results.audit.regime): it keeps its effect, interval and own reading, but speaks neither for nor
# against the paper and is left out of the family-wise adjustment; the second kind where the regime is unknown and
# eval/regime.yaml says `unknown: not_comparable`
NOT_COMPARABLE = "not comparable (pre-bigram regime)"
NOT_COMPARABLE_UNKNOWN = "not comparable (regime unknown)"
# the outcome lies outside what the runs measured (e.g. YOCO-U never reaches YOCO's final loss within its run: a
# token saving of -inf, no interval): not a decision
CENSORED = "censored"
FOR = (SAME_SIZE, SAME)                          # the paper's claim, reproduced (parity inside the margin included)
AGAINST = (OPPOSITE, NO_DIFFERENCE)              # its direction reversed, or its effect absent
DECIDED = (*FOR, *AGAINST, DIFFERS)
NOT_COMPARABLE_KINDS = (NOT_COMPARABLE, NOT_COMPARABLE_UNKNOWN)
NOT_DECIDED = (INCONCLUSIVE, *NOT_COMPARABLE_KINDS, CENSORED)
VERDICTS = (SAME_SIZE, SAME, NO_DIFFERENCE, OPPOSITE, DIFFERS, INCONCLUSIVE, NOT_COMPARABLE, NOT_COMPARABLE_UNKNOWN,
            CENSORED)
CONFIDENCE = 0.95
# "no difference" margins, by the metric's tidy unit (a row's `margin` overrides, per unit like `scale`): in the
# metric's unit before `scale` for difference/value effects; `relative` for relative effects (relative_decrease,
# log_ratio, ratio_minus_1, monotone), whatever the unit. A unit without one never gets "no difference".
MARGINS = {"relative": 0.02, "nats": 0.02, "fraction": 0.02}
_RELATIVE = ("relative_decrease", "log_ratio", "ratio_minus_1", "monotone")
NOT_RUN = "not run at this scale"
EVIDENCE = ("deterministic", "timing", "eval", "training")
LEARNING = ("eval", "training")                  # evidence that depends on what the models learned
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
    # the family-wise adjustment (yocou.results.audit.family): the two-sided p of "no effect" from the interval's t, the
    # family it belongs to, its Holm-adjusted p and the interval at the level Holm gives it; verdict and qualifier
    # above are then the adjusted ones and the per-row ones move to *_unadjusted
    p_value: float | None = None
    ci_se: float | None = None       # the interval's standard error and Student-t degrees of freedom
    ci_df: float | None = None
    family_size: int | None = None
    p_adjusted: float | None = None
    level_adjusted: float | None = None
    ci_low_adjusted: float | None = None
    ci_high_adjusted: float | None = None
    verdict_unadjusted: str = ""
    qualifier_unadjusted: str = ""
    adjustment: str = ""             # e.g. "Holm over 13 training-side comparisons (tiny)"
    restates: str = ""               # the id of the row this one restates (same quantity, same runs): counted once
    counted: bool = True             # False for the rows of a restatement group other than the one that counts
    # the regime of a learning-side row (yocou.results.audit.regime, eval/regime.yaml); empty for the others
    tokens_per_param: float | None = None   # training tokens / total parameters, the smallest over the runs read
    annealed: bool | None = None            # every run read at the end of a decayed schedule (None: unknown)
    loss_minus_bigram: float | None = None  # the worse run's held-out loss minus its own-budget bigram (nats)
    regime_split: str = ""                  # the held-out split(s) that difference is on
    regime: str = ""                        # past the bigram | pre-bigram | regime unknown
    regime_detail: str = ""

    def as_row(self) -> dict:
        return {**self.__dict__, "claims": " ".join(self.claims), "files": " ".join(self.files)}


def decide(paper: float, ours: float | None, *, evidence: str, se: float | None = None, size_comparable: bool = True,
           n_seeds: int | None = 1, scale: str = "", floor: bool = False,
           tolerance: tuple[float, float, float] | None = None, ci: tuple[float, float] | None = None,
           margin: float | None = None, percent: bool = False, level: float = CONFIDENCE) -> tuple[str, str]:
    """The verdict and its qualifier for one effect (signed: positive = the paper's claimed direction when
    ``paper > 0``). ``se``: standard error of ``ours``; ``n_seeds``: training seeds behind it (None: does not
    depend on training); ``floor``: both sides at a floor or ceiling; ``tolerance = (ours_raw, paper_raw, tol)``:
    the same size means within ``tol`` of the paper's raw value (an exponent) instead of within a factor of 2. At
    ``smoke`` every non-deterministic verdict is capped at inconclusive. ``training`` evidence with ``n_seeds >= 2``
    and ``ci`` (the interval across seeds at ``level``, 95% unless a family-wise adjustment widened it) is decided by
    :func:`decide_interval` against ``margin`` (``percent``: print them in percent); the other
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
                               size_comparable=size_comparable, tolerance=tolerance, percent=percent,
                               level=level)
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
                    tolerance: tuple[float, float, float] | None = None, percent: bool = False,
                    level: float = CONFIDENCE) -> tuple[str, str]:
    """The verdict of a training-side effect from its interval ``ci = (low, high)`` across seeds at ``level``
    (95%, or the level a family-wise adjustment gives it: :mod:`yocou.results.audit.family`; the qualifier names it).

    ``paper`` is the paper's signed effect, or None where the paper claims parity (``paper: {expect: parity}``).
    With a direction: the interval excludes 0 -> same direction (and size, by :func:`decide`'s size rule: within a
    factor of 2, or ``tolerance``) or opposite; else the interval inside ``±margin`` -> "no difference" (the
    paper's effect is absent at this scale); else inconclusive, saying what the interval straddles. Parity: the
    interval inside ``±margin`` -> "same direction and size" (the paper-agreeing verdict: no difference, as the
    paper says); wholly outside it -> "differs" (the paper claims no direction, so not "opposite"); else
    inconclusive. At ``smoke`` a decided verdict is capped at inconclusive. ``percent``: the qualifier prints interval and margin in percent (relative effects).
    """
    lo, hi = ci
    inside = margin is not None and -margin <= lo and hi <= margin
    lv = level_text(level)
    iv = f"{lv} interval [{lo * 100:+.3g}%, {hi * 100:+.3g}%]" if percent else f"{lv} interval [{lo:+.3g}, {hi:+.3g}]"
    mtxt = "no margin stated" if margin is None else f"±{margin * 100:g}%" if percent else f"±{margin:g}"
    if floor:
        return INCONCLUSIVE, "at the floor for both (no signal)"
    if paper is None:
        if inside:
            verdict, why = SAME_SIZE, f"no difference: {iv} inside the margin {mtxt}, as the paper's parity"
        elif margin is not None and (lo > margin or hi < -margin):
            verdict, why = DIFFERS, f"{iv} beyond the margin {mtxt}; the paper claims parity"
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


def level_text(level: float) -> str:
    """A confidence level as printed: ``0.95`` -> ``"95%"``, ``0.99615`` -> ``"99.62%"``."""
    return f"{level:.0%}" if round(level * 100, 6) == round(level * 100) else f"{level * 100:.4g}%"


def t_interval(est: float, terms: list[tuple[str, Any, pd.Series, float]], level: float = CONFIDENCE) -> dict | None:
    """The Student-t interval of an effect ``est`` from its linearisation ``terms``: ``(group, key, per-seed values,
    weight)``, the effect's gradient in that value times its weight. Terms of one group (the same runs: a role) are
    combined per seed first (z_s = sum of weight * value), so their correlation counts; the groups are independent.
    A group whose terms were not all measured on the same seeds counts each term as independent. se =
    sqrt(sum of the groups' sd(z) / sqrt(n) squared); df by Welch-Satterthwaite (one group: n - 1). None when a term
    has fewer than 2 seeds.

    Paired by seed (module docstring) when every term has the same seeds and no gap: the per-seed effect
    z_s = sum over all terms of weight * value_s, se = sd(z) / sqrt(n), df = n - 1.

    Returns ``{"lo", "hi", "se", "df", "seeds": {group: n}, "method", "paired"}``.
    """
    if not terms or any(len(t[2]) < 2 for t in terms):
        return None
    seed_sets = {tuple(sorted(t[2].index)) for t in terms}
    groups = list(dict.fromkeys(t[0] for t in terms))
    if len(groups) > 1 and len(seed_sets) == 1 and not any(t[2].isna().any() for t in terms):
        idx = list(next(iter(seed_sets)))
        z = sum(t[3] * t[2].reindex(idx).to_numpy(dtype=float) for t in terms)
        n = len(idx)
        se, dof = float(np.std(z, ddof=1)) / math.sqrt(n), n - 1
        q = float(stats.t.ppf(0.5 + level / 2, dof))
        return {"lo": float(est - q * se), "hi": float(est + q * se), "se": se, "df": float(dof),
                "seeds": {g: n for g in groups}, "paired": True,
                "method": f"t, paired by seed, {level_text(level)}, df {dof}, seeds {'/'.join(str(n) for _ in groups)}"}
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
    return {"lo": float(est - q * se), "hi": float(est + q * se), "se": se, "df": dof, "seeds": ns, "paired": False,
            "method": f"{kind}, {level_text(level)}, df {dof:.3g}, seeds {'/'.join(str(n) for n in ns.values())}"}


def t_p_value(effect: float, se: float, df: float) -> float:
    """The two-sided p-value of "no effect" for an ``effect`` with standard error ``se`` and Student-t ``df``
    degrees of freedom (the test the interval of :func:`t_interval` inverts: it excludes 0 at level L exactly when
    p < 1 - L). ``se == 0``: 0 for a non-zero effect, 1 for zero.

    Raises:
        ValueError: ``effect`` or ``se`` not finite, ``se < 0`` or ``df <= 0``.
    """
    if not (math.isfinite(effect) and math.isfinite(se) and se >= 0 and df > 0):
        raise ValueError(f"t_p_value: need a finite effect, se >= 0 and df > 0, got {effect}, {se}, {df}")
    if se == 0:
        return 0.0 if effect != 0 else 1.0
    return float(2 * stats.t.sf(abs(effect) / se, df))


def above_chance(k: int, n: int, chance: float, level: float = CONFIDENCE) -> dict[str, float | bool]:
    """Is an accuracy of ``k`` correct of ``n`` items above the ``chance`` level? (Table 4's multiple choice.)

    Returns ``{acc, lo, hi, p_value, above}``: the accuracy, its Wilson score interval at ``level`` (two-sided),
    the exact one-sided binomial test's p-value against ``chance`` (scipy's ``binomtest``, alternative
    ``greater``) and ``above``: both say so, the interval's lower end is above ``chance`` and
    ``p_value < (1 - level) / 2``.

    Raises:
        ValueError: ``n < 1``, ``k`` outside ``0..n`` or ``chance`` outside (0, 1).
    """
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"above_chance: need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0.0 < chance < 1.0:
        raise ValueError(f"above_chance: chance must be in (0, 1), got {chance}")
    t = stats.binomtest(int(k), int(n), chance, alternative="greater")
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return {"acc": k / n, "lo": float(ci.low), "hi": float(ci.high), "p_value": float(t.pvalue),
            "above": bool(ci.low > chance and t.pvalue < (1 - level) / 2)}
