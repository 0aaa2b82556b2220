"""Training-side verdicts decided by the 95% interval of the effect across seeds
(yocou.results.audit.verdicts.t_interval / decide_interval), their counts in the audit summary and the seed-spread table.
Expected intervals are computed here independently: scipy's paired, Welch and one-sample t-test confidence intervals,
and the delta method written out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from yocou.results.audit.claims import load_sources
from yocou.results.audit.verdicts import (
    CENSORED,
    DIFFERS,
    INCONCLUSIVE,
    NO_DIFFERENCE,
    OPPOSITE,
    SAME,
    SAME_SIZE,
    VERDICTS,
    decide,
    decide_interval,
    reproduce,
)
from yocou.results.tidy import write_tidy


@pytest.fixture(scope="module")
def src():
    return load_sources()


def _toy(tmp: Path, sides: dict[str, list[float]], *, rows: list[dict], unit: str = "nats",
         metric: str = "loss", first_seed: dict[str, int] | None = None) -> Path:
    """A tidy table ``toy`` (one row per role and seed: seeds 0, 1, ... or from ``first_seed[role]``) and a
    comparisons file with ``rows``."""
    first_seed = first_seed or {}
    write_tidy([dict(study="toy", run=role, role=role, seed=first_seed.get(role, 0) + s, metric=metric,
                     value=float(v), unit=unit)
                for role, vals in sides.items() for s, v in enumerate(vals)], tmp / "tidy" / "toy")
    base = dict(comparison="toy comparison", study="toy", metric=metric, evidence="training")
    p = tmp / f"comparisons{len(list(tmp.glob('comparisons*.yaml')))}.yaml"   # a new file: evaldefs caches by path
    p.write_text(yaml.safe_dump([{**base, **r} for r in rows]), encoding="utf-8")
    return p


def _one(src, tmp: Path, comps: Path, scale: str = "tiny"):
    (v,) = reproduce(src, tmp, scale, comparisons=comps)
    return v


DIFF = dict(id="toy.diff", a="x", b="y", effect="difference", paper={"value": 1.0, "text": "x above y"})


def test_a_known_difference_is_decided_and_its_interval_is_paired_by_seed(src, tmp_path):
    """3 seeds per side (the same seeds), means 10 sd apart: the interval excludes 0 and equals scipy's paired
    interval (ttest_rel); on different seeds, or 3 against 4, it is Welch's."""
    rng = np.random.default_rng(1)
    x, y = 5.0 + 0.1 * rng.standard_normal(3), 4.0 + 0.1 * rng.standard_normal(3)
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[DIFF]))
    ci = stats.ttest_rel(x, y).confidence_interval(0.95)
    assert v.effect == pytest.approx(x.mean() - y.mean())
    assert (v.ci_low, v.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert v.verdict == SAME_SIZE and "excludes 0" in v.qualifier and v.n_seeds == 3      # ~1 against the paper's 1
    assert v.ci_method.startswith("t, paired by seed, 95%, df 2") and "seeds 3/3" in v.ci_method
    assert f"{ci.low:+.3g}" in v.ours and f"{ci.high:+.3g}" in v.spread
    # the other way round: opposite
    v = _one(src, tmp_path, _toy(tmp_path, {"x": y, "y": x}, rows=[DIFF]))
    assert v.verdict == OPPOSITE and v.ci_high < 0
    # the same values on disjoint seeds: nothing to pair, Welch's interval
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[DIFF], first_seed={"y": 10}))
    ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
    assert (v.ci_low, v.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert v.ci_method.startswith("t, Welch, 95%")
    # unequal seeds (3 against 4): Welch's interval
    y4 = np.append(y, 4.05)
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y4}, rows=[DIFF]))
    ci = stats.ttest_ind(x, y4, equal_var=False).confidence_interval(0.95)
    assert (v.ci_low, v.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high)) and "seeds 3/4" in v.ci_method


def test_pairing_by_seed_removes_the_shared_seed_variance(src, tmp_path):
    """Per-seed losses that move together (the data order of seed k is shared by both runs): x = y + 0.05 with
    a little noise, y spread by 0.1 across seeds. Paired, the 0.05 difference is decided; the same numbers on
    disjoint seeds (Welch) are not."""
    y = np.array([5.0, 5.1, 4.9])
    x = y + np.array([0.05, 0.052, 0.048])
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[DIFF]))
    assert v.verdict in (SAME, SAME_SIZE) and v.ci_low > 0
    assert (v.ci_low, v.ci_high) == tuple(pytest.approx(c) for c in stats.ttest_rel(x, y).confidence_interval(0.95))
    w = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[DIFF], first_seed={"y": 3}))
    assert w.verdict == INCONCLUSIVE and w.ci_low < 0 < w.ci_high


def test_pure_noise_is_inconclusive(src, tmp_path):
    """Both sides drawn from one distribution (fixed seed): scipy's interval includes 0, so no verdict."""
    rng = np.random.default_rng(0)
    x, y = 5.0 + 0.1 * rng.standard_normal(3), 5.0 + 0.1 * rng.standard_normal(3)
    for ci, first in ((stats.ttest_rel(x, y).confidence_interval(0.95), {}),                   # same seeds: paired
                      (stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95), {"y": 3})):  # Welch
        assert ci.low < 0 < ci.high and ci.high - ci.low > 2 * 0.02      # the premise: straddles 0 and the margin
        v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[DIFF], first_seed=first))
        assert v.verdict == INCONCLUSIVE and "straddles 0 and the margin ±0.02" in v.qualifier
        assert (v.ci_low, v.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_an_interval_inside_the_margin_is_no_difference_and_parity_agrees(src, tmp_path):
    x, y = np.array([5.000, 5.002, 4.999]), np.array([5.001, 4.998, 5.000])
    ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
    assert -0.02 < ci.low < 0 < ci.high < 0.02                       # the premise
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[DIFF]))
    assert v.verdict == NO_DIFFERENCE and "inside the margin ±0.02" in v.qualifier and v.margin == 0.02
    # a row's own margin (per unit) narrower than the interval: inconclusive
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[{**DIFF, "margin": {"nats": 0.001}}]))
    assert v.verdict == INCONCLUSIVE and "±0.001" in v.qualifier
    # the paper claims parity: inside the margin is the paper-agreeing verdict
    par = {**DIFF, "paper": {"expect": "parity", "text": "comparable"}}
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[par]))
    assert v.verdict == SAME_SIZE and "as the paper's parity" in v.qualifier
    # outside the margin: the parity fails, and "differs" (the paper claims no direction, so not "opposite")
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x + 1, "y": y}, rows=[par]))
    assert v.verdict == DIFFERS and "the paper claims parity" in v.qualifier
    assert decide_interval(None, 1.0, (0.9, 1.1), margin=0.02) == (
        DIFFERS, "95% interval [+0.9, +1.1] beyond the margin ±0.02; the paper claims parity")
    # the same interval where the paper claims a direction: opposite
    assert decide_interval(-1.0, 1.0, (0.9, 1.1), margin=0.02)[0] == OPPOSITE


def test_a_relative_effect_is_propagated_by_the_delta_method(src, tmp_path):
    """Relative perplexity decrease (b - a) / b: se^2 = (se_a / b)^2 + (a se_b / b^2)^2, Welch-Satterthwaite df."""
    a, b = np.array([90.0, 91.0, 89.5]), np.array([100.0, 99.0, 101.5, 100.5])
    row = dict(id="toy.rel", a="x", b="y", effect="relative_decrease", paper={"value": 0.1, "text": "10% lower"})
    v = _one(src, tmp_path, _toy(tmp_path, {"x": a, "y": b}, rows=[row], unit="ppl", metric="ppl"))
    ma, mb = a.mean(), b.mean()
    ca = a.std(ddof=1) / math.sqrt(3) / mb
    cb = ma * b.std(ddof=1) / math.sqrt(4) / mb ** 2
    se, dof = math.hypot(ca, cb), (ca ** 2 + cb ** 2) ** 2 / (ca ** 4 / 2 + cb ** 4 / 3)
    est = (mb - ma) / mb
    q = stats.t.ppf(0.975, dof)
    assert v.effect == pytest.approx(est)
    assert (v.ci_low, v.ci_high) == (pytest.approx(est - q * se), pytest.approx(est + q * se))
    assert v.verdict == SAME_SIZE and v.margin == 0.02                 # relative effects: the relative margin
    assert "%" in v.ours and "95% CI" in v.ours


def test_a_single_sided_value_uses_the_one_sample_interval(src, tmp_path):
    """Figure 2's loss gap at equal FLOPs (one derived row per seed): scipy's one-sample t interval."""
    g = np.array([0.05, 0.07, 0.06, 0.08])
    write_tidy([dict(study="fig2", run="u|y", role="yocou|yoco", seed=s, metric="loss_gap_at_equal_flops",
                     value=float(x), unit="nats") for s, x in enumerate(g)], tmp_path / "tidy" / "fig2")
    v = {v.id: v for v in reproduce(src, tmp_path, "tiny")}["v.fig2.loss_gap_equal_flops"]
    ci = stats.ttest_1samp(g, 0.0).confidence_interval(0.95)
    assert (v.ci_low, v.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert v.ci_method.startswith("t, 95%") and v.verdict in (SAME, SAME_SIZE) and v.evidence == "training"


def test_one_seed_stays_inconclusive_and_smoke_is_capped(src, tmp_path):
    v = _one(src, tmp_path, _toy(tmp_path, {"x": [5.0], "y": [4.0]}, rows=[DIFF]))
    assert v.verdict == INCONCLUSIVE and v.qualifier.startswith("one seed, no interval") and v.ci_low is None
    x, y = [5.0, 5.1, 4.9], [4.0, 4.1, 3.9]
    v = _one(src, tmp_path, _toy(tmp_path, {"x": x, "y": y}, rows=[DIFF]), scale="smoke")
    assert v.verdict == INCONCLUSIVE and v.qualifier.startswith("smoke scale") and v.ci_low is not None
    # decide() without an interval for several seeds does not decide a training effect
    assert decide(1.0, 1.0, evidence="training", n_seeds=3)[0] == INCONCLUSIVE
    assert decide(1.0, 1.0, evidence="training", n_seeds=3, ci=(0.5, 1.5), margin=0.1)[0] == SAME_SIZE
    assert decide_interval(1.0, 0.05, (0.01, 0.09), margin=0.1)[0] == SAME           # excludes 0: direction wins
    assert NO_DIFFERENCE in VERDICTS


def test_the_audit_summary_counts_training_verdicts_and_writes_the_seed_spread(src, tmp_path):
    """Held-out book perplexity, YOCO-U against YOCO with 3 seeds (decided) and YOCO against the Transformer with one
    (undecided); the summary lists the decided one with its interval; seed_spread.csv has mean, std, n per role."""
    from yocou.results.audit.report import audit, write_report

    vals = {"yocou": [90.0, 91.0, 89.0], "yoco": [100.0, 101.0, 99.5], "transformer": [120.0]}
    write_tidy([dict(study="heldout_ppl", run=f"{r}_seed{s}" if s else r, role=r, seed=7 + s, metric="book.ppl",
                     value=x, unit="ppl") for r, xs in vals.items() for s, x in enumerate(xs)],
               tmp_path / "res" / "tidy" / "heldout_ppl")
    res = audit("tiny", tmp_path / "res")
    cnt = write_report(res, tmp_path / "audit")
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text(encoding="utf-8"))
    t = summary["verdicts_training"]
    train = [v for v in res["verdicts"] if v.evidence == "training" and v.counted]   # restatements count once
    assert t == cnt["verdicts_training"] and t["decided"] + t["undecided"] == len(train)
    assert t["decided"] == t["by_interval"] == 1 and sum(t["by_verdict"].values()) == len(train)
    (d,) = t["decided_list"]
    assert d["id"] == "v.heldout_ppl.YOCO-U_vs_YOCO" and d["ci_low"] > 0 and d["effect"] == pytest.approx(
        (np.mean(vals["yoco"]) - np.mean(vals["yocou"])) / np.mean(vals["yoco"]))
    other = next(v for v in train if v.id == "v.heldout_ppl.YOCO_vs_Transformer")
    # it restates a row this table cannot give (loss.book), so it is the row of its group that counts
    assert other.verdict == INCONCLUSIVE and other.qualifier.startswith("one seed") and other.qualifier.endswith(
        "; restates v.heldout.yoco_vs_transformer.book (counted here)")
    spread = pd.read_csv(tmp_path / "audit" / "seed_spread.csv")
    for r, xs in vals.items():
        row = spread[(spread["study"] == "heldout_ppl") & (spread["role"] == r)].iloc[0]
        assert row["mean"] == pytest.approx(np.mean(xs)) and row["n_seeds"] == len(xs)
        assert (math.isnan(row["std"]) if len(xs) == 1 else row["std"] == pytest.approx(np.std(xs, ddof=1)))
    md = (tmp_path / "audit" / "seed_spread.md").read_text(encoding="utf-8")
    assert "| heldout_ppl | yocou | book.ppl |" in md and "commit" in md
    assert "training-side verdicts" in (tmp_path / "audit" / "report.md").read_text(encoding="utf-8")
    verd = pd.read_csv(tmp_path / "audit" / "verdicts.csv")
    assert {"effect", "ci_low", "ci_high", "ci_method", "margin", "verdict_unadjusted", "p_value", "p_adjusted",
            "level_adjusted", "ci_low_adjusted", "ci_high_adjusted", "family_size", "restates"} <= set(verd.columns)


def test_a_monotone_series_interval_across_roles(src, tmp_path):
    """Figure 6: relative decrease of the final loss from T=1 to T=5, each T its own runs (3 seeds, the same): the
    delta method of (l1 - l5) / l1, paired by seed (df 2)."""
    rng = np.random.default_rng(3)
    vals = {k: 5.0 - 0.1 * k + 0.01 * rng.standard_normal(3) for k in (1, 2, 3, 5)}
    write_tidy([dict(study="fig6", run=f"T{k}", role=f"T{k}", seed=s, metric="final_loss", axis="T", axis_value=k,
                     value=float(x), unit="nats") for k, xs in vals.items() for s, x in enumerate(xs)],
               tmp_path / "tidy" / "fig6")
    v = {v.id: v for v in reproduce(src, tmp_path, "tiny")}["v.fig6.loops"]
    a, b = vals[5], vals[1]
    ma, mb = a.mean(), b.mean()
    # the same seeds for T = 1 and T = 5: paired, the linearised effect per seed -a_s / mb + ma b_s / mb^2
    z = -a / mb + ma * b / mb ** 2
    se, dof, est = z.std(ddof=1) / math.sqrt(3), 2, (mb - ma) / mb
    q = stats.t.ppf(0.975, dof)
    assert v.effect == pytest.approx(est)
    assert (v.ci_low, v.ci_high) == (pytest.approx(est - q * se), pytest.approx(est + q * se))
    assert v.verdict == SAME and "excludes 0" in v.qualifier                    # size not comparable across scales


def _heldout(tmp: Path, losses: dict[str, list[float]]) -> None:
    """A tidy heldout_ppl table: loss.book / loss.code per core role and seed (code = book - 1)."""
    write_tidy([dict(study="heldout_ppl", run=f"{role}_s{s}", role=role, seed=s, metric=f"loss.{split}",
                     value=float(v) - (split == "code"), unit="nats")
                for role, vals in losses.items() for s, v in enumerate(vals) for split in ("book", "code")],
               tmp / "tidy" / "heldout_ppl")


def test_declared_heldout_loss_rows_decide_the_core_pairs_with_seeds(src, tmp_path):
    """The declared v.heldout.* rows on three seeds: YOCO-U 0.18 nats above YOCO (the pilot's result) is 'opposite'
    to the paper's lower Wiki. ppl (log-ratio of its Table 5 cells, negative); YOCO-U within 0.005 of RINS is the
    paper's parity; with one seed nothing is decided."""
    noise = [0.0, 0.003, -0.003]   # the seed spread of the pilot was 0.01-0.02; parity inside +-0.02 needs less
    _heldout(tmp_path, {"yoco": [5.10 + e for e in noise], "yocou": [5.28 - e for e in noise],
                        "transformer": [5.20 + e for e in noise], "rins": [5.283 + e / 2 for e in noise]})
    got = {v.id: v for v in reproduce(src, tmp_path, "tiny") if v.id.startswith("v.heldout.")}
    assert len(got) == 6
    p = got["v.heldout.yocou_vs_yoco.book"]
    w = math.log(src.num("T5:YOCO-U|Wiki. ppl") / src.num("T5:YOCO|Wiki. ppl"))
    assert w < 0 and p.verdict == OPPOSITE and p.effect == pytest.approx(0.18) and p.ci_low > 0
    assert got["v.heldout.yoco_vs_transformer.code"].verdict in (SAME, SAME_SIZE)   # YOCO 0.1 lower, as the paper's
    assert got["v.heldout.yocou_vs_rins.book"].verdict == SAME_SIZE                # parity inside the 0.02 margin
    _heldout(tmp_path, {"yoco": [5.1], "yocou": [5.3], "transformer": [5.2], "rins": [5.3]})
    assert all(v.verdict == INCONCLUSIVE for v in reproduce(src, tmp_path, "tiny") if v.id.startswith("v.heldout."))


def test_best_rate_rows_take_each_sides_own_best_axis_value(src, tmp_path):
    """`at: best` (the v.lr.* rows): each side at the learning rate its study's best_lr row names (here also its
    lowest mean loss), named in the output."""
    rows = [dict(study="lr", run=f"{role}{lr}", role=role, seed=0, metric="loss.book", axis="lr", axis_value=lr,
                 value=v, unit="nats") for role, lv in {"yoco": {1e-3: 5.3, 2e-3: 5.1, 4e-3: 5.2},
                                                         "yocou": {1e-3: 5.25, 2e-3: 5.3, 4e-3: 5.4}}.items()
            for lr, v in lv.items()]
    rows += [dict(study="lr", run=role, role=role, seed=-1, metric="best_lr", value=lr, unit="lr")
             for role, lr in {"yoco": 2e-3, "yocou": 1e-3}.items()]
    write_tidy(rows, tmp_path / "tidy" / "lr")
    got = {v.id: v for v in reproduce(src, tmp_path, "tiny") if v.id.startswith("v.lr.yocou_vs_yoco")}
    v = got["v.lr.yocou_vs_yoco.best_rate.book"]
    assert v.ours.startswith("5.25 vs 5.1 at lr 0.001 vs 0.002") and v.verdict == INCONCLUSIVE  # one seed a rate
    assert "one seed" in v.qualifier


def test_a_never_reached_reference_inside_the_measured_range_is_decided_and_the_summary_stays_json(src, tmp_path):
    """Figure 2's token saving where YOCO-U's curve never falls to YOCO's final loss in any of 3 seeds, in a run as
    long as YOCO's: the saving is below 0 (``unreached_bound``), which excludes the paper's 62%, so the row is
    "opposite" by that bound (no interval, no p), its effect -inf in the verdict, and summary.json is still strict
    JSON (the effect null); an infinite effect used to fail the tiny audit with "Out of range float values are not
    JSON compliant"."""
    from yocou.results.audit.report import audit, write_report

    write_tidy([dict(study="fig2", run=f"yocou_seed{s}|yoco_seed{s}" if s else "yocou|yoco", role="yocou|yoco",
                     seed=s, metric="reached_reference_loss", value=0.0, unit="flag") for s in range(3)],
               tmp_path / "res" / "tidy" / "fig2")
    res = audit("tiny", tmp_path / "res")
    v = next(v for v in res["verdicts"] if v.id == "v.fig2.tokens_saved")
    assert v.verdict == OPPOSITE and v.effect == -math.inf and v.n_seeds == 3 and v.p_value is None
    assert "excludes the paper's 0.62" in v.qualifier and v.family_size is None
    write_report(res, tmp_path / "audit")
    text = (tmp_path / "audit" / "summary.json").read_text(encoding="utf-8")
    summary = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert summary["reproduction"]["by_evidence"]["training"]["against"] == 1
    assert summary["reproduction"]["censored"] == 0
    verd = pd.read_csv(tmp_path / "audit" / "verdicts.csv").set_index("id")
    assert verd.loc["v.fig2.tokens_saved", "verdict"] == OPPOSITE and verd.loc["v.fig2.tokens_saved", "effect"] == -math.inf


@pytest.mark.parametrize("k, n, chance", [(64, 80, 0.5), (45, 80, 0.5), (3, 40, 0.1), (0, 20, 0.5), (20, 20, 0.5)])
def test_above_chance_is_the_wilson_interval_and_the_exact_binomial_tail(k, n, chance):
    from math import comb, sqrt

    from yocou.results.audit.decision import above_chance

    a = above_chance(k, n, chance)
    z, p = 1.959963984540054, k / n
    mid, half = p + z * z / (2 * n), z * sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (a["lo"], a["hi"]) == pytest.approx(((mid - half) / (1 + z * z / n), (mid + half) / (1 + z * z / n)),
                                               abs=1e-9)
    tail = sum(comb(n, i) * chance ** i * (1 - chance) ** (n - i) for i in range(k, n + 1))
    assert a["p_value"] == pytest.approx(min(1.0, tail), rel=1e-9)
    assert a["above"] == (a["lo"] > chance and tail < 0.025)


def test_above_chance_decides_a_known_retriever_and_not_a_coin():
    from yocou.results.audit.decision import above_chance

    rng = np.random.default_rng(0)
    assert above_chance(int((rng.random(200) < 0.75).sum()), 200, 0.5)["above"]
    coins = [above_chance(int((rng.random(80) < 0.5).sum()), 80, 0.5)["above"] for _ in range(200)]
    assert sum(coins) <= 12  # a 2.5% one-sided test: about 5 of 200 by chance
    with pytest.raises(ValueError, match="chance must be in"):
        above_chance(1, 2, 1.0)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        above_chance(3, 2, 0.5)
