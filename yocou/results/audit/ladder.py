"""The annealed token ladder's decisions as audit verdicts.

The ladder (``workflows/studies/ladder.yaml``, :mod:`yocou.results.summarize.ladder`) answers the paper's Figure 2 at a
fixed model size: annealed models at five token budgets, every variant at its bracketed learning rate. Its fits
write ``results/<scale>/ladder/ladder.json``: the equal-tokens and equal-FLOPs gaps (YOCO-U minus YOCO, nats/token,
per held-out split), each decided under the rules of ``eval/ladder.yaml`` (a Student t interval over paired seeds,
Holm over the two splits, the bigram gate), and the token saving (the paper's 62%): YOCO-U at 38% of YOCO's largest
budget against YOCO there, decided the same way where that point lies inside YOCO-U's measured budgets, censored
only where it does not.

:func:`verdicts` turns each into a :class:`~yocou.results.audit.decision.Verdict` row, so the audit's tables and counts
carry them beside the short-budget rows, with their regime (tokens per parameter, annealed, held-out loss minus the
bigram of their own budget). It re-decides nothing: the verdict is the one ``ladder.json`` states; a decision the
ladder marks interim (its largest budget not yet reached) is "inconclusive", qualified so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from yocou.results.audit.decision import (
    CENSORED,
    INCONCLUSIVE,
    NO_DIFFERENCE,
    NOT_COMPARABLE,
    OPPOSITE,
    SAME,
    Verdict,
)
from yocou.results.audit.regime import PAST, PRE

__all__ = ["ID_PREFIX", "LADDER_FILE", "verdicts"]

#: Where a results folder keeps the ladder's fits (relative to ``results/<scale>``).
LADDER_FILE = "ladder/ladder.json"
#: The ids of the ladder's rows start so.
ID_PREFIX = "v.ladder."
_INTERIM = "interim"
_VERDICT = {"same direction": SAME, "opposite": OPPOSITE, "no difference": NO_DIFFERENCE,
            "inconclusive": INCONCLUSIVE, "inconclusive (no interval)": INCONCLUSIVE,
            "inconclusive (rate not bracketed)": INCONCLUSIVE, NOT_COMPARABLE: NOT_COMPARABLE}
_CLAIMS = {"equal_tokens": ("fig2.tokens_saved_pct",), "equal_flops": ("fig2.loss_gap_equal_flops",),
           "token_saving": ("fig2.tokens_saved_pct", "fig2.tokens_yocou_B", "fig2.tokens_yoco_B")}


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Point(_Model):
    variant: str
    split: Literal["book", "code", "plays"]  # plays: reported, never decided (eval/ladder.yaml)
    tokens: int
    mean: float
    bigram: float
    minus_bigram: float
    past_bigram: bool
    tokens_per_param: float
    n: int


class _Decision(_Model):
    quantity: Literal["equal_tokens", "equal_flops", "token_saving"]
    split: Literal["book", "code"]
    a: str
    b: str
    tokens: int
    gap: float
    low: float | None
    high: float | None
    p: float | None = None
    p_adjusted: float | None = None
    level: float | None = None
    low_adjusted: float | None = None
    high_adjusted: float | None = None
    n_seeds: int | None = None
    verdict: str
    verdict_unadjusted: str
    regime_past_bigram: bool
    gate_points: list[tuple[str, int]]      # (variant, tokens): the measured points the ladder's gate read
    not_bracketed: list[str] = []


class _EqualFlops(_Model):
    split: Literal["book", "code"]
    yocou_tokens: float
    yoco_tokens: float
    train_flops: float
    paper: float


class _Saving(_Model):
    split: Literal["book", "code"]
    yoco_final_loss: float
    yoco_tokens: int
    yocou_tokens_needed: float | None
    saving: float | None
    censored: bool
    claim_tokens: float
    seed_savings: list[float | None]
    saving_bound: float
    saving_mean: float | None = None
    saving_low: float | None = None
    saving_high: float | None = None
    paper: float


class _Ladder(_Model):
    regime: list[_Point]
    decisions: list[_Decision]
    equal_flops: list[_EqualFlops]
    token_saving: list[_Saving]
    planned_steps: int | None       # None: fitted without a plan (every point is final)
    steps_reached: int


def _read(path: Path) -> _Ladder:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not the ladder's JSON ({e})") from None
    try:
        return _Ladder.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ValueError(f"{path}: {where}: {err['msg']} (expected yocou.results.summarize.ladder fits output)") from None


def _point(lad: _Ladder, variant: str, split: str, tokens: float) -> _Point | None:
    """The seed-mean point of ``variant`` on ``split`` at the measured budget nearest ``tokens`` (at or below)."""
    pts = [p for p in lad.regime if p.variant == variant and p.split == split and p.tokens <= tokens * 1.0001]
    return max(pts, key=lambda p: p.tokens) if pts else None


def _exact(lad: _Ladder, variant: str, split: str, tokens: int) -> _Point | None:
    """The seed-mean point of ``variant`` on ``split`` measured at exactly ``tokens``."""
    return next((p for p in lad.regime if p.variant == variant and p.split == split and p.tokens == tokens), None)


def _regime(points: list[_Point | None], split: str, margin: float | None) -> dict:
    have = [p for p in points if p is not None]
    if len(have) < len(points):
        return {"regime": "", "regime_split": split}
    worst = max(p.minus_bigram for p in have)
    past = all(p.past_bigram for p in have)
    return {"tokens_per_param": min(p.tokens_per_param for p in have), "annealed": True,
            "loss_minus_bigram": worst, "regime_split": split, "regime": PAST if past else PRE,
            "regime_detail": "; ".join(f"{p.variant} at {p.tokens / 1e6:.3g}M tokens ({p.tokens_per_param:.1f} "
                                       f"tokens/param): {p.mean:.3f} against the own-budget bigram {p.bigram:.3f} "
                                       f"({p.minus_bigram:+.3f} nats)" for p in have)
                             + ("" if margin is None else f"; past = at least {margin:g} nats below")}


def verdicts(results_dir: str | Path, margin_nats: float | None = None) -> list[Verdict]:
    """The ladder's verdict rows from ``results_dir/ladder/ladder.json``; none when the file is absent.

    Returns:
        Per held-out split (book, code): ``v.ladder.equal_tokens.<split>`` and ``v.ladder.equal_flops.<split>``
        (effect: YOCO-U minus YOCO in nats/token, negative = the paper's direction; interval and Holm-adjusted
        interval as the ladder decided them) and ``v.ladder.token_saving.<split>`` (the fraction of YOCO's tokens
        saved; censored when YOCO-U's fit never reaches YOCO's final loss within YOCO-U's measured budgets, else
        inconclusive: a point estimate without an interval).

    Raises:
        ValueError: the file is not valid JSON or lacks a field the audit reads (naming the file and the field).
    """
    path = Path(results_dir) / LADDER_FILE
    if not path.is_file():
        return []
    lad = _read(path)
    interim = lad.planned_steps is not None and lad.steps_reached < lad.planned_steps
    files = (LADDER_FILE, "ladder/ladder.md")
    flops = {f.split: f for f in lad.equal_flops}
    saves = {t.split: t for t in lad.token_saving}
    out: list[Verdict] = []
    for d in lad.decisions:
        pts = [_exact(lad, v, d.split, t) for v, t in d.gate_points]
        ci_method = f"paired t over {d.n_seeds} seeds, 95%"
        if d.quantity == "equal_tokens":
            what = f"at {d.tokens / 1e6:.3g}M tokens each (the ladder's largest budget reached)"
            paper = "YOCO-U lower (62% fewer tokens to YOCO's loss)"
        elif d.quantity == "equal_flops":
            f = flops[d.split]
            tpp = {v: next(p.tokens_per_param / p.tokens for p in lad.regime if p.variant == v) for v in ("yocou", "yoco")}
            what = (f"at {f.train_flops:.3g} training FLOPs: YOCO-U at {f.yocou_tokens / 1e6:.3g}M tokens, "
                    f"{f.yocou_tokens * tpp['yocou']:.1f} tokens/param, YOCO at {f.yoco_tokens / 1e6:.3g}M, "
                    f"{f.yoco_tokens * tpp['yoco']:.1f} tokens/param; from per-seed fits of L(D), inside the "
                    "measured range")
            paper, ci_method = f"{f.paper:+g} nats (YOCO-U lower)", f"per-seed fits, paired t over {d.n_seeds} seeds, 95%"
        else:
            t = saves[d.split]
            what = (f"YOCO-U at {t.claim_tokens / 1e6:.3g}M tokens ({1 - t.paper:.0%} of YOCO's, per-seed fits "
                    f"inside its measured budgets) against YOCO at {t.yoco_tokens / 1e6:.3g}M (measured)")
            paper = f"YOCO-U reaches YOCO's loss with {t.paper:.0%} fewer tokens (<= 0 here)"
            ci_method = f"per-seed fits, paired t over {d.n_seeds} seeds, 95%"
        if interim:
            verdict, qual = INCONCLUSIVE, (f"{_INTERIM}: the ladder reached {lad.steps_reached} of its "
                                           f"{lad.planned_steps} steps; alone: {d.verdict_unadjusted}")
        else:
            verdict = _VERDICT.get(d.verdict)
            if verdict is None:
                raise ValueError(f"{path}: decisions: verdict {d.verdict!r} is not one the ladder writes")
            qual = f"annealed ladder, decided at its largest budget; alone: {d.verdict_unadjusted}"
            if d.not_bracketed:
                qual += f"; capped: the best rate of {', '.join(d.not_bracketed)} is not bracketed (eval/ladder.yaml)"
        if d.quantity == "token_saving":
            t = saves[d.split]
            qual += "; each seed's own saving " + ", ".join("n/a" if x is None else f"{x:.1%}" for x in t.seed_savings)
            if t.saving_mean is None:
                qual += f" (n/a: not reached within the measured budgets, i.e. below {t.saving_bound:.0%})"
        ci = "" if d.low is None else f"95% CI [{d.low:+.3f}, {d.high:+.3f}] ({ci_method})"
        out.append(Verdict(
            f"{ID_PREFIX}{d.quantity}.{d.split}", _CLAIMS[d.quantity],
            f"held-out {d.split} loss, YOCO-U minus YOCO, {what}", paper,
            f"{d.gap:+.3f} nats" + (f" ({ci})" if ci else ""), ci or "-",
            d.n_seeds or min((p.n for p in pts if p is not None), default=None), "training", verdict, qual,
            "annealed token ladder (eval/ladder.yaml)", files, d.gap, d.low, d.high, ci_method if ci else "",
            p_value=d.p, p_adjusted=d.p_adjusted, level_adjusted=d.level,
            ci_low_adjusted=d.low_adjusted, ci_high_adjusted=d.high_adjusted,
            verdict_unadjusted=_VERDICT.get(d.verdict_unadjusted, d.verdict_unadjusted),
            adjustment="Holm over the two held-out splits (eval/ladder.yaml)",
            **_regime(pts, d.split, margin_nats)))
    decided = {d.split for d in lad.decisions if d.quantity == "token_saving"}
    for s in lad.token_saving:
        if s.split in decided:
            continue
        # the paper's point lies outside YOCO-U's measured budgets: censored, no decision (eval/ladder.yaml)
        pts = [_point(lad, "yocou", s.split, math.inf), _point(lad, "yoco", s.split, s.yoco_tokens)]
        own = ", ".join("n/a" if x is None else f"{x:.1%}" for x in s.seed_savings)
        out.append(Verdict(
            f"{ID_PREFIX}token_saving.{s.split}", _CLAIMS["token_saving"],
            f"tokens YOCO-U needs to reach YOCO's final held-out {s.split} loss (at {s.yoco_tokens / 1e6:.3g}M "
            f"tokens), as a saving", f"{s.paper:.0%} fewer tokens", f"per-seed savings {own}", "-", None, "training",
            CENSORED, f"censored: {s.claim_tokens / 1e6:.3g}M tokens lies outside YOCO-U's measured budgets: not a "
            "decision", "annealed token ladder (eval/ladder.yaml)", files, s.saving,
            **_regime(pts, s.split, margin_nats)))
    return out
