"""The ladder's fits and decisions (yocou.results.summarize.ladder_fits) on synthetic points of known law."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from yocou.results.summarize import ladder_fits as LF

ROOT = Path(__file__).resolve().parents[1]
BUDGETS = [1.024e6, 2.048e6, 4.096e6, 8.192e6, 16.384e6]
LAWS = {"transformer": (3.0, 1.6, 0.35), "yoco": (3.0, 1.5, 0.35), "rins": (2.9, 1.6, 0.35),
        "yocou": (2.9, 1.6, 0.35)}
SEEDS = {"transformer": 1, "yoco": 3, "rins": 1, "yocou": 3}
FPT = {"transformer": 6e6, "yoco": 5.6e6, "rins": 11e6, "yocou": 10e6}


def _points(noise: float = 0.01, bigram: float = 6.0, seed: int = 0, seeds: dict | None = None,
            budgets: dict | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for v, law in LAWS.items():
        for k in range((seeds or SEEDS)[v]):
            shift = rng.normal(0, noise)  # a seed's offset, shared by its budgets (same init and data order)
            for d in (budgets or {}).get(v, BUDGETS):
                y = float(LF.power_law(d, *law)) + shift
                rows.append({"variant": v, "seed": k, "tokens": int(d), "steps": int(d / 4096), "params": 1e6,
                             "tokens_per_param": d / 1e6, "train_flops": d * FPT[v], "train_loss": y,
                             "epochs": d / 5.8e6, "book": y, "code": y + 0.5, "bigram_book": bigram,
                             "bigram_code": bigram + 0.5})
    return pd.DataFrame(rows)


def _rules() -> dict:
    return LF.read_rules(ROOT / "eval/ladder.yaml")


def test_fit_recovers_a_known_law() -> None:
    d = np.array(BUDGETS)
    e, b, beta = LF.fit_power_law(d, LF.power_law(d, 2.5, 1.2, 0.4))
    assert (e, b, beta) == pytest.approx((2.5, 1.2, 0.4), rel=1e-4)
    assert LF.fit_power_law(d[:2], [5.0, 4.9]) is None  # fewer than 3 budgets


def test_tokens_to_reach_and_crossover_by_hand() -> None:
    p = (2.0, 1.0, 0.5)  # L = 2 + (D/1e6)^-0.5: L = 2.5 at D = 4e6
    assert LF.tokens_to_reach(2.5, p) == pytest.approx(4e6)
    assert LF.tokens_to_reach(1.9, p) == math.inf
    # 2 + x^-0.5 and 1.9 + 1.2 x^-0.5 cross where 0.2 x^-0.5 = 0.1: x = 4, D = 4e6
    assert LF.crossover((1.9, 1.2, 0.5), p) == [pytest.approx(4e6, rel=1e-6)]
    assert LF.crossover(p, (1.0, 1.0, 0.5)) == []
    # two crossings, both reported: 2 + x^-0.5 and 2.05 + 0.5 x^-1 cross where x^-0.5 - 0.5 x^-1 = 0.05, i.e. with
    # u = x^-0.5: 0.5 u^2 - u + 0.05 = 0, u = 1 -+ sqrt(0.9)
    roots = sorted(1e6 * u ** -2 for u in (1 - math.sqrt(0.9), 1 + math.sqrt(0.9)))
    assert LF.crossover(p, (2.05, 0.5, 1.0)) == [pytest.approx(r, rel=1e-6) for r in roots]


def test_paired_t_and_holm_by_hand() -> None:
    x = [0.1, 0.3, 0.2]
    r = LF.paired_t(x, 0.95)
    ref = stats.ttest_1samp(x, 0.0)
    ci = ref.confidence_interval(0.95)
    assert (r["mean"], r["low"], r["high"], r["p"]) == pytest.approx((0.2, ci.low, ci.high, ref.pvalue))
    h = LF.holm([0.01, None, 0.04], 0.05)
    assert h[0] == {"p_adjusted": pytest.approx(0.02), "level": pytest.approx(0.975)}
    assert h[2] == {"p_adjusted": pytest.approx(0.04), "level": pytest.approx(0.95)}
    assert h[1] == {"p_adjusted": None, "level": None}


@pytest.mark.slow
def test_analysis_decides_past_the_bigram_and_gates_before_it() -> None:
    rules = _rules()
    res = LF.analyse(_points(noise=0.002), rules)
    et = {d["split"]: d for d in res["decisions"] if d["quantity"] == "equal_tokens"}
    # YOCO-U's law is 0.1 lower at every budget than YOCO's but with a larger B: at 16.4M tokens
    want = float(LF.power_law(BUDGETS[-1], *LAWS["yocou"]) - LF.power_law(BUDGETS[-1], *LAWS["yoco"]))
    assert et["book"]["gap"] == pytest.approx(want, abs=0.01)
    assert et["book"]["verdict"] == "same direction" and et["book"]["regime_past_bigram"]
    # the same points with a bigram below every loss: not comparable, whatever the interval says
    gated = LF.analyse(_points(noise=0.002, bigram=2.0), rules)
    for d in gated["decisions"]:
        assert d["verdict"] == LF.NOT_COMPARABLE
        assert d["verdict_unadjusted"] in ("same direction", "opposite", "no difference", "inconclusive")


@pytest.mark.slow
def test_equal_flops_stays_inside_the_measured_range_and_saving_is_censored_when_not_reached() -> None:
    res = LF.analyse(_points(noise=0.002), _rules())
    for e in res["equal_flops"]:
        assert BUDGETS[0] <= e["yoco_tokens"] <= BUDGETS[-1]
        assert e["yocou_tokens"] * FPT["yocou"] == pytest.approx(e["yoco_tokens"] * FPT["yoco"], rel=1e-6)
    # the largest C inside both measured ranges: YOCO's last budget (YOCO-U's reaches further), YOCO-U in between
    c = min(BUDGETS[-1] * FPT["yocou"], BUDGETS[-1] * FPT["yoco"])
    for e in res["equal_flops"]:
        assert e["train_flops"] == pytest.approx(c)
        assert e["yoco_tokens"] == pytest.approx(BUDGETS[-1]) and BUDGETS[3] < e["yocou_tokens"] < BUDGETS[4]
    # YOCO-U below YOCO everywhere here: it reaches YOCO's final loss before YOCO's budget
    for t in res["token_saving"]:
        assert not t["censored"] and 0 < t["saving"] < 0.62 and t["seeds_reaching"] == 3
    # a saving short of the paper's 62%: YOCO-U at 38% of the tokens is still above YOCO's final loss
    ts = {d["split"]: d for d in res["decisions"] if d["quantity"] == "token_saving"}
    assert {d["verdict"] for d in ts.values()} == {"opposite"}
    # a law well below YOCO's: at 38% of the tokens YOCO-U is already lower, the paper's direction
    far = LF.analyse(_points(noise=0.002).assign(book=lambda x: x["book"] - 0.5 * (x["variant"] == "yocou")), _rules())
    assert {d["verdict"] for d in far["decisions"] if d["quantity"] == "token_saving" and d["split"] == "book"} == \
        {"same direction"}
    # swap the laws: YOCO-U above YOCO everywhere never reaches YOCO's final loss within its budgets; the paper's
    # point (0.38 x 16.4M = 6.2M) is inside its budgets, so the claim is decided against, not censored
    pts = _points(noise=0.002)
    pts["variant"] = pts["variant"].map({"yoco": "yocou", "yocou": "yoco"}).fillna(pts["variant"])
    swapped = LF.analyse(pts, _rules())
    for t in swapped["token_saving"]:
        assert not t["censored"] and t["saving"] is None and t["seed_savings"] == [None] * 3
        assert t["saving_mean"] is None and t["delta"] > 0
    assert {d["verdict"] for d in swapped["decisions"] if d["quantity"] == "token_saving"} == {"opposite"}
    # YOCO-U measured only from 8.19M tokens: 6.2M lies outside its budgets, censored and not decided
    res_s = LF.analyse(_points(noise=0.002, budgets={"yocou": [8.192e6, 16.384e6, 32.768e6]}), _rules())
    assert len(res_s["token_saving"]) == 2 and all(t["censored"] for t in res_s["token_saving"])
    assert not [d for d in res_s["decisions"] if d["quantity"] == "token_saving"]


def _by_hand_t(x: list[float], level: float) -> tuple[float, float]:
    ci = stats.ttest_1samp(x, 0.0).confidence_interval(level)
    return ci.low, ci.high


@pytest.mark.slow
def test_equal_flops_and_token_saving_intervals_are_per_seed_t_at_the_holm_level() -> None:
    """Each seed fitted by hand on its own five budgets, the paired differences' t interval by scipy, at 95% and
    at the row's Holm level."""
    rules = _rules()
    pts = _points(noise=0.01)
    res = LF.analyse(pts, rules)
    dec = {(d["quantity"], d["split"]): d for d in res["decisions"]}

    def fit(v: str, k: int, split: str) -> tuple[float, float, float]:
        g = pts[(pts["variant"] == v) & (pts["seed"] == k)]
        return LF.fit_power_law(g["tokens"].to_numpy(), g[split].to_numpy())

    for e in res["equal_flops"]:
        s = e["split"]
        diffs = [float(LF.power_law(e["yocou_tokens"], *fit("yocou", k, s))
                       - LF.power_law(e["yoco_tokens"], *fit("yoco", k, s))) for k in range(3)]
        d = dec[("equal_flops", s)]
        assert d["gap"] == pytest.approx(np.mean(diffs)) and (d["low"], d["high"]) == pytest.approx(_by_hand_t(diffs, 0.95))
        assert (d["low_adjusted"], d["high_adjusted"]) == pytest.approx(_by_hand_t(diffs, d["level"]))
        # the decomposition adds up to the seed-mean fits' gap
        assert e["equal_tokens_at_yocou_tokens"] + e["yoco_data_term"] == pytest.approx(e["gap_mean_fits"])
        assert e["doublings"] == pytest.approx(math.log2(FPT["yocou"] / FPT["yoco"]))
    for t in res["token_saving"]:
        s = t["split"]
        y = pts[(pts["variant"] == "yoco") & (pts["tokens"] == int(BUDGETS[-1]))].sort_values("seed")[s].to_numpy()
        deltas = [float(LF.power_law(0.38 * BUDGETS[-1], *fit("yocou", k, s)) - y[k]) for k in range(3)]
        d = dec[("token_saving", s)]
        assert t["claim_tokens"] == pytest.approx(0.38 * BUDGETS[-1])
        assert d["gap"] == pytest.approx(np.mean(deltas)) and (d["low"], d["high"]) == pytest.approx(
            _by_hand_t(deltas, 0.95))
        assert (d["low_adjusted"], d["high_adjusted"]) == pytest.approx(_by_hand_t(deltas, d["level"]))


@pytest.mark.slow
def test_the_equal_flops_gate_reads_both_neighbours() -> None:
    rules = _rules()
    pts = _points(noise=0.01)
    assert all(d["regime_past_bigram"] for d in LF.analyse(pts, rules)["decisions"])
    # YOCO-U's fit is read between its 8.19M and 16.4M budgets: the 8.19M point short of its bigram gates the row
    pts.loc[(pts["variant"] == "yocou") & (pts["tokens"] == int(BUDGETS[3])), "bigram_book"] = 1.0
    gated = {(d["quantity"], d["split"]): d for d in LF.analyse(pts, rules)["decisions"]}
    assert gated[("equal_flops", "book")]["verdict"] == LF.NOT_COMPARABLE
    assert gated[("equal_flops", "code")]["regime_past_bigram"]
    assert gated[("equal_tokens", "book")]["regime_past_bigram"]  # decided at 16.4M, which is past its bigram


@pytest.mark.slow
def test_write_fits_writes_report_json_and_figure(tmp_path: Path) -> None:
    pts = tmp_path / "points.csv"
    _points().to_csv(pts, index=False)
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(_rules()))
    doc = LF.write_fits(pts, rules, tmp_path / "ladder.json", tmp_path / "fig.png", "test", dpi=40)
    assert json.loads((tmp_path / "ladder.json").read_text())["decisions"] == json.loads(json.dumps(doc["decisions"]))
    md = (tmp_path / "ladder.md").read_text()
    assert "Regime" in md and "Token saving" in md
    assert (tmp_path / "fig.png").stat().st_size > 1000 and (tmp_path / "fig.pdf").is_file()


def test_the_plays_split_is_reported_beside_book_and_code_and_never_decided() -> None:
    """Points with a plays column: its regime rows, gaps per budget and fits are there; the decisions and the paper's
    quantities stay on book and code (eval/ladder.yaml's splits); without the column nothing of plays appears."""
    pts = _points(noise=0.002)
    pts["plays"], pts["bigram_plays"] = pts["book"] - 1.0, 6.5
    res = LF.analyse(pts, _rules())
    assert set(res["regime"]["split"]) == {"book", "code", "plays"}
    plays = res["regime"][res["regime"]["split"] == "plays"]
    assert (plays["minus_bigram"] == plays["mean"] - 6.5).all() and plays["past_bigram"].all()
    assert "plays" in set(res["gaps"]["split"]) and set(res["fits"]) == {"book", "code", "plays"}
    assert {d["split"] for d in res["decisions"]} == {"book", "code"}
    assert {e["split"] for e in res["equal_flops"] + res["token_saving"] + res["crossover"]} <= {"book", "code"}
    assert "plays" not in set(LF.analyse(_points(noise=0.002), _rules())["regime"]["split"])


def test_holm_levels_follow_the_step_down_and_decisions_match_the_adjusted_p() -> None:
    """Holm stops at the first p that is not rejected: with p = 0.03 and 0.04 (two rows) neither is rejected
    (0.03 > 0.05 / 2), so both rows are read at 1 - 0.05 / 2, where an interval holds 0, not at 0.95."""
    h = LF.holm([0.03, 0.04], 0.05)
    assert [x["p_adjusted"] for x in h] == [pytest.approx(0.06), pytest.approx(0.06)]
    assert [x["level"] for x in h] == [pytest.approx(0.975), pytest.approx(0.975)]
    assert LF.holm([0.001, 0.04], 0.05)[1]["level"] == pytest.approx(0.95)  # both rejected: 0.975, then 0.95


def test_decide_names_a_direction_first_as_the_rules_list_it() -> None:
    """eval/ladder.yaml: a direction when the interval excludes 0, "no difference" when it lies inside the margin,
    else inconclusive; an interval inside the margin that excludes 0 is a direction."""
    assert LF._decide(0.005, 0.015, 0.02, paper_sign=-1) == "opposite"
    assert LF._decide(-0.015, -0.005, 0.02, paper_sign=-1) == "same direction"
    assert LF._decide(-0.01, 0.01, 0.02, paper_sign=-1) == "no difference"
    assert LF._decide(-0.03, 0.01, 0.02, paper_sign=-1) == "inconclusive"
    assert LF._decide(None, None, 0.02, paper_sign=-1) == "inconclusive (no interval)"


@pytest.mark.slow
def test_a_variant_not_bracketed_caps_the_verdicts_that_read_it(tmp_path: Path) -> None:
    """bracket.json's best.<variant>.interior false for YOCO-U: every decided YOCO-U - YOCO row becomes
    "inconclusive (rate not bracketed)" with the same gap and interval; with every variant interior nothing changes;
    a bracket file without the field is refused naming it."""
    rules = _rules()
    pts = _points(noise=0.002)
    free = LF.analyse(pts, rules)
    assert {d["verdict"] for d in free["decisions"]} <= {"same direction", "opposite"}  # decided without the cap
    capped = LF.analyse(pts, rules, bracketed={v: v != "yocou" for v in LAWS})
    for a, b in zip(free["decisions"], capped["decisions"]):
        assert b["verdict"] == LF.NOT_BRACKETED and b["not_bracketed"] == ["yocou"]
        assert (b["gap"], b["low"], b["high"]) == (a["gap"], a["low"], a["high"])
    every = LF.analyse(pts, rules, bracketed={v: True for v in LAWS})
    assert [d["verdict"] for d in every["decisions"]] == [d["verdict"] for d in free["decisions"]]
    bad = tmp_path / "bracket.json"
    bad.write_text(json.dumps({"best": {v: {"lr": 1e-3, "interior": True} for v in LAWS if v != "rins"}}))
    with pytest.raises(ValueError, match=r"bracket.json: best.rins.interior: expected true or false"):
        LF.read_bracketed(bad, list(LAWS))


def test_bad_rules_name_the_key(tmp_path: Path) -> None:
    p = tmp_path / "rules.yaml"
    p.write_text("confidence: 0.95\nregime: {bigram_margin_nats: x}\n")
    with pytest.raises(ValueError, match="regime.bigram_margin_nats"):
        LF.read_rules(p)


@pytest.mark.slow
def test_points_short_of_the_planned_budget_are_interim_not_decisions(tmp_path: Path) -> None:
    """While the ladder trains, the points stop short of its largest budget: the rules decide there only, so every
    decision is interim (the same gaps and intervals as a complete analysis of those points), and the report says
    so at its top; the complete ladder decides as before."""
    rules = _rules()
    pts = _points(noise=0.002)
    full_steps = int(pts["steps"].max())
    short = pts[pts["steps"] < full_steps]
    done = LF.analyse(short, rules)
    interim = LF.analyse(short, rules, planned_steps=full_steps)
    assert interim["decisions"] and all(d["verdict"] == LF.INTERIM for d in interim["decisions"])
    assert [(d["gap"], d["low"], d["high"]) for d in interim["decisions"]] == \
        [(d["gap"], d["low"], d["high"]) for d in done["decisions"]]
    assert [d["verdict"] for d in LF.analyse(pts, rules, planned_steps=full_steps)["decisions"]] == \
        [d["verdict"] for d in LF.analyse(pts, rules)["decisions"]]
    short.to_csv(tmp_path / "points.csv", index=False)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))  # the committed rules, fewer resamples
    LF.write_fits(tmp_path / "points.csv", tmp_path / "rules.yaml", tmp_path / "ladder.json",
                  tmp_path / "fig.png", "test", planned_steps=full_steps)
    md = (tmp_path / "ladder.md").read_text(encoding="utf-8")
    assert f"**Interim: the ladder has reached {int(short['steps'].max())} of its {full_steps} steps" in md
