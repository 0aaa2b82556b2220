"""The regime of the learning-side verdicts and its gate (yocou.results.audit.regime, eval/regime.yaml): tokens per parameter,
annealed, held-out loss minus the Kneser-Ney bigram of the models' own budget; a pre-bigram row is "not comparable",
kept out of the family and of the for/against counts; the counts keep the paper's internal consistency apart from
its empirical reproduction. Expected numbers are computed here from the tables the tests write (or, for the committed
tiny audit, from its committed tidy tables)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from yocou.results.audit import family, regime
from yocou.results.audit.claims import load_sources
from yocou.results.audit.decision import (
    DECIDED,
    NOT_COMPARABLE,
    NOT_COMPARABLE_UNKNOWN,
    OPPOSITE,
    SAME,
    SAME_SIZE,
)
from yocou.results.audit.report import OUTCOMES, audit, counts, outcome, write_report
from yocou.results.audit.verdicts import reproduce
from yocou.results.tidy import read_tidy, write_tidy

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "results" / "tiny"
BIGRAM = {"book": 5.0, "code": 4.5}
TRAIN = {"steps": 10, "batch_size": 4, "seq_len": 25, "schedule": "cosine", "min_lr_ratio": 0.1}   # 1000 tokens
NOISE = {"x": np.array([0.0, 0.004, -0.004]), "y": np.array([0.002, -0.003, 0.001])}   # mean 0 each


@pytest.fixture(scope="module")
def src():
    return load_sources()


def _toy(tmp: Path, below: dict[str, float], *, steps: dict[str, int] | None = None, bigram: bool = True,
         rows: list[dict] | None = None, tokens: int = 1000) -> Path:
    """Roles x and y, 3 seeds each (runs <role>, <role>_seed1, <role>_seed2), their held-out loss on book and code
    ``below[role]`` nats below the own-budget bigram (plus a little noise, the same per seed); tidy runs (``tokens``
    and 800 parameters a run, the steps of ``steps`` or the config's), config.json (a 10-step cosine schedule of
    1000 tokens), the bigram rows unless ``bigram`` is False; and a comparisons file (``rows``, default one row:
    x against y on the book, the paper claiming x above y). Returns the comparisons file."""
    rec, runs = [], []
    for role, d in below.items():
        for s in range(3):
            run = role + (f"_seed{s}" if s else "")
            for split, b in BIGRAM.items():
                rec.append({"study": "heldout_ppl", "run": run, "role": role, "seed": s, "metric": f"loss.{split}",
                                "value": b - d + NOISE[role][s], "unit": "nats", "split": f"heldout_{split}"})
            runs += [{"study": "runs", "run": run, "role": run, "seed": s, "metric": m, "value": float(v), "unit": m}
                     for m, v in (("tokens", tokens), ("params", 800),
                                  ("steps", (steps or {}).get(role, TRAIN["steps"])))]
    if bigram:
        rec += [{"study": "heldout_ppl", "run": "bigram_kn_budget", "role": "bigram_kn_budget", "seed": -1,
                     "metric": f"loss.{split}", "value": b, "unit": "nats", "split": f"heldout_{split}"}
                for split, b in BIGRAM.items()]
    write_tidy(rec, tmp / "tidy" / "heldout_ppl")
    write_tidy(runs, tmp / "tidy" / "runs")
    (tmp / "config.json").write_text(json.dumps({"config": {"train": TRAIN, "variants": {}}}), encoding="utf-8")
    rows = rows or [{"id": "toy.book", "comparison": "x against y on the book", "study": "heldout_ppl", "metric": "loss.book",
                         "a": "x", "b": "y", "effect": "difference", "evidence": "training",
                         "paper": {"value": 1.0, "text": "x above y"}}]
    p = tmp / f"comparisons{len(list(tmp.glob('comparisons*.yaml')))}.yaml"   # a new file: evaldefs caches by path
    p.write_text(yaml.safe_dump(rows), encoding="utf-8")
    return p


def _loss(tmp: Path, role: str, split: str) -> float:
    t = pd.read_csv(tmp / "tidy" / "heldout_ppl.csv")
    return float(t[(t.role == role) & (t.metric == f"loss.{split}")]["value"].mean())


def test_a_side_0_01_below_its_bigram_is_not_comparable_and_0_1_below_is_decided(src, tmp_path):
    """Margin 0.05 (eval/regime.yaml): x 0.01 below its own-budget bigram, y 0.2 below: the worse side is not past it,
    so the row is "not comparable (pre-bigram regime)", keeps its interval and its own reading (here decided), and is
    in no family and no for/against count; x 0.1 below: past it, decided by its interval as before, a family of 1."""
    assert regime.load_rules().margin == 0.05
    comps = _toy(tmp_path, {"x": 0.01, "y": 0.2})
    (v,) = reproduce(src, tmp_path, "tiny", comparisons=comps)
    worse = max(_loss(tmp_path, r, "book") for r in ("x", "y")) - BIGRAM["book"]
    assert worse == pytest.approx(-0.01)                                                 # the premise
    assert v.verdict == NOT_COMPARABLE and v.regime == regime.PRE and v.regime_split == "book"
    assert v.loss_minus_bigram == pytest.approx(worse)
    assert v.tokens_per_param == pytest.approx(1000 / 800) and v.annealed is True
    ci = stats.ttest_rel(*(pd.read_csv(tmp_path / "tidy/heldout_ppl.csv").query(f"role == '{r}' and metric == "
                                                                                 "'loss.book'")["value"]
                           for r in ("x", "y"))).confidence_interval(0.95)
    assert (v.ci_low, v.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high)) and v.p_value is not None
    assert v.verdict_unadjusted in (SAME, SAME_SIZE) and v.family_size is None and v.p_adjusted is None
    assert v.qualifier.startswith("pre-bigram: ") and f"alone: {v.verdict_unadjusted}" in v.qualifier
    assert "x -0.010" in v.regime_detail and "past it needs every one <= -0.05" in v.regime_detail
    cnt = counts({"claims": pd.DataFrame(columns=["status", "kind", "table"]), "checks": [], "verdicts": [v],
                  "scale": "tiny"})
    assert cnt["reproduction"]["not comparable"] == 1 and cnt["reproduction"]["for"] == 0
    assert cnt["verdicts_training"]["decided"] == 0 and cnt["family"]["size"] == 0
    assert family.power_table([v], [{"id": v.id}]).empty
    # 0.1 below: past the bigram by more than the margin, decided as before
    (w,) = reproduce(src, tmp_path, "tiny", comparisons=_toy(tmp_path, {"x": 0.1, "y": 0.2}))
    assert w.regime == regime.PAST and w.loss_minus_bigram == pytest.approx(-0.1)
    assert w.verdict in DECIDED and w.verdict == w.verdict_unadjusted and w.family_size == 1
    assert w.effect == pytest.approx(_loss(tmp_path, "x", "book") - _loss(tmp_path, "y", "book"))


def test_a_row_without_a_split_needs_both_and_a_derived_row_reads_its_runs(src, tmp_path):
    """A row whose metric names no split is held to both (here past on the book, 0.01 below on code: pre-bigram);
    a derived row (runs "x|y") reads the runs it names."""
    rows = [{"id": "toy.avg", "comparison": "x against y, averaged", "study": "heldout_ppl", "metric": "avg", "a": "x", "b": "y",
                 "effect": "difference", "evidence": "training", "paper": {"value": 1.0, "text": "x above y"}}]
    comps = _toy(tmp_path, {"x": 0.1, "y": 0.2}, rows=rows)
    t = read_tidy(tmp_path / "tidy/heldout_ppl.csv")
    t.loc[(t.role == "x") & (t.metric == "loss.code"), "value"] = BIGRAM["code"] - 0.01
    extra = [{"study": "heldout_ppl", "run": r + (f"_seed{s}" if s else ""), "role": r, "seed": s, "metric": "avg",
                  "value": 1.0 + (r == "x") + NOISE[r][s], "unit": "nats"} for r in ("x", "y") for s in range(3)]
    write_tidy(pd.concat([t, pd.DataFrame(extra)]).to_dict("records"), tmp_path / "tidy" / "heldout_ppl")
    (v,) = reproduce(src, tmp_path, "tiny", comparisons=comps)
    assert v.regime_split == "book+code" and v.regime == regime.PRE and v.verdict == NOT_COMPARABLE
    assert v.loss_minus_bigram == pytest.approx(-0.01)


def test_annealed_and_mid_schedule(src, tmp_path):
    """A run stopped before the end of its schedule (its steps in tidy runs short of the config's) is not annealed,
    nor is a row declared `mid_schedule:`; runs at the end of a cosine to 0.1x are."""
    (v,) = reproduce(src, tmp_path, "tiny", comparisons=_toy(tmp_path, {"x": 0.1, "y": 0.2}, steps={"x": 6}))
    assert v.annealed is False and "x step 6 of a 10-step cosine schedule (mid-schedule)" in v.regime_detail
    rows = [{"id": "toy.mid", "comparison": "x against y mid-run", "study": "heldout_ppl", "metric": "loss.book", "a": "x",
                 "b": "y", "effect": "difference", "evidence": "training", "paper": {"value": 1.0, "text": "x above y"},
                 "mid_schedule": "x at y's final FLOPs"}]
    (v,) = reproduce(src, tmp_path, "tiny", comparisons=_toy(tmp_path, {"x": 0.1, "y": 0.2}, rows=rows))
    assert v.annealed is False and "not annealed: x at y's final FLOPs" in v.regime_detail
    assert v.regime == regime.PAST                                 # annealing is stated, the gate is the bigram's


def test_an_unknown_regime_is_said_and_follows_the_declared_rule(src, tmp_path):
    """No bigram fitted on the runs' budget (runs of another study trained on twice the tokens of the bigram's study;
    then: no bigram rows at all): the regime is unknown, said in the qualifier, and the row decided (eval/regime.yaml:
    unknown: decide); with `unknown: not_comparable` it is "not comparable (regime unknown)"."""
    _toy(tmp_path, {"x": 0.1, "y": 0.2})
    lr = [{"study": "lr", "run": f"{r}_long" + (f"_seed{s}" if s else ""), "role": r, "seed": s, "metric": "loss.book",
           "axis": "lr", "axis_value": 2.0, "value": BIGRAM["book"] - 0.3 + (r == "x") * 0.1 + NOISE[r][s],
           "unit": "nats"} for r in ("x", "y") for s in range(3)]
    write_tidy(lr, tmp_path / "tidy" / "lr")
    runs = read_tidy(tmp_path / "tidy" / "runs.csv").to_dict("records")
    runs += [{"study": "runs", "run": d["run"], "role": d["run"], "seed": d["seed"], "metric": m, "value": v,
              "unit": m} for d in lr for m, v in (("tokens", 2000.0), ("params", 800.0), ("steps", 10.0))]
    write_tidy(runs, tmp_path / "tidy" / "runs")
    rows = [{"id": "toy.long", "comparison": "x against y, longer runs", "study": "lr", "metric": "loss.book",
             "at": 2.0, "a": "x", "b": "y", "effect": "difference", "evidence": "training",
             "paper": {"value": 1.0, "text": "x above y"}}]
    comps = tmp_path / "comparisons_long.yaml"
    comps.write_text(yaml.safe_dump(rows), encoding="utf-8")
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({"config": {**cfg["config"], "lr_sensitivity": True}}))
    (v,) = reproduce(src, tmp_path, "tiny", comparisons=comps)
    assert v.regime == regime.UNKNOWN and v.loss_minus_bigram is None and v.verdict in DECIDED
    assert "regime unknown" in v.qualifier and "no bigram fitted on x_long's budget" in v.regime_detail
    assert v.tokens_per_param == pytest.approx(2000 / 800)
    rules = yaml.safe_load((ROOT / "eval/regime.yaml").read_text(encoding="utf-8"))
    (tmp_path / "strict.yaml").write_text(yaml.safe_dump({**rules, "unknown": "not_comparable"}), encoding="utf-8")
    comps = _toy(tmp_path, {"x": 0.1, "y": 0.2}, bigram=False)
    (v,) = reproduce(src, tmp_path, "tiny", comparisons=comps, regime_rules=tmp_path / "strict.yaml")
    assert v.verdict == NOT_COMPARABLE_UNKNOWN and v.verdict_unadjusted in DECIDED and v.family_size is None
    assert "no bigram_kn_budget book loss" in v.regime_detail


@pytest.mark.parametrize("edit, says", [
    (lambda r: r.pop("bigram_margin_nats"), "missing 'bigram_margin_nats'"),
    (lambda r: r.update(bigram_margin_nats=-1), "bigram_margin_nats: expected a number >= 0"),
    (lambda r: r.update(unknown="maybe"), "unknown: expected decide or not_comparable"),
    (lambda r: r.update(gated_evidence=["vibes"]), "gated_evidence: expected a list of evidence kinds"),
    (lambda r: r.update(margin=0.05), "unknown key 'margin'"),
])
def test_a_malformed_regime_file_is_one_line_naming_file_and_key(tmp_path, edit, says):
    rules = yaml.safe_load((ROOT / "eval/regime.yaml").read_text(encoding="utf-8"))
    edit(rules)
    p = tmp_path / "regime.yaml"
    p.write_text(yaml.safe_dump(rules), encoding="utf-8")
    with pytest.raises(ValueError) as e:
        regime.load_rules(p)
    assert str(e.value).startswith(f"{p}: ") and says in str(e.value) and "\n" not in str(e.value)


def test_figure_4_is_decided_within_the_training_length(src, tmp_path):
    """YOCO-U against RINS in Figure 4 (the paper: parity), 3 seeds: equal at 128 and 256 (the training length, from
    tidy runs), far apart at 512 (extrapolated). The row is decided at 256 only: parity, its effect the relative
    decrease at 256 computed here; the 512 values, drawn in the figure, play no part."""
    rng = np.random.default_rng(5)
    vals = {("yocou", 512): 30.0, ("rins", 512): 60.0}
    rows = [{"study": "fig4", "run": r + (f"_seed{s}" if s else ""), "role": r, "seed": s, "metric": f"{sp}.cum_ppl",
                 "axis": "seq_len", "axis_value": n, "value": vals.get((r, n), 100.0 - n / 100) + 0.05 * rng.standard_normal(),
                 "unit": "ppl"} for r in ("yocou", "rins") for s in range(3) for sp in ("book", "code")
            for n in (128, 256, 512)]
    write_tidy(rows, tmp_path / "tidy" / "fig4")
    write_tidy([{"study": "runs", "run": "yocou", "role": "yocou", "seed": 0, "metric": "seq_len", "value": 256, "unit": "tokens"}],
               tmp_path / "tidy" / "runs")
    v = {v.id: v for v in reproduce(src, tmp_path, "tiny")}["v.fig4.yocou_vs_rins"]
    df = pd.DataFrame(rows)
    at = df[df.axis_value == 256].groupby(["role", "metric"])["value"].mean()
    want = np.mean([(at["rins", m] - at["yocou", m]) / at["rins", m] for m in ("book.cum_ppl", "code.cum_ppl")])
    assert v.effect == pytest.approx(want) and abs(v.effect) < 0.01 and "at 256" in v.ours and "512" not in v.ours
    assert v.verdict_unadjusted == SAME_SIZE or v.verdict == SAME_SIZE                   # parity, as the paper says
    # were the training length 512, the row would read 512, where the two differ: the paper claims parity, so
    # "differs" (not "opposite")
    write_tidy([{"study": "runs", "run": "yocou", "role": "yocou", "seed": 0, "metric": "seq_len", "value": 512, "unit": "tokens"}],
               tmp_path / "tidy" / "runs")
    v = {v.id: v for v in reproduce(src, tmp_path, "tiny")}["v.fig4.yocou_vs_rins"]
    assert "at 512" in v.ours and v.verdict == "differs" and v.verdict != OPPOSITE


@pytest.mark.slow
@pytest.mark.skipif(not (TINY / "tidy" / "heldout_ppl.csv").is_file(), reason="committed tiny results absent")
def test_the_counts_keep_consistency_apart_from_reproduction(tmp_path):
    """The audit of the committed tiny results, summary.json: `consistency` counts the checks of the paper's numbers
    and the deterministic rows; `reproduction` the timing, eval and training rows (restatements once) by outcome,
    each counted once, by evidence too, and the learning-side rows by regime."""
    res = audit("tiny", TINY)
    cnt = write_report(res, tmp_path / "audit")
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text(encoding="utf-8"))
    cs, rp = summary["consistency"], summary["reproduction"]
    counted = [v for v in res["verdicts"] if v.counted]
    det = [v for v in counted if v.evidence == "deterministic"]
    assert cs["checks"] == len(res["checks"]) == summary["checks"]["total"] and cs["deterministic_rows"] == len(det)
    rep = [v for v in counted if v.evidence != "deterministic"]
    assert rp["total"] == len(rep) == sum(rp[k] for k in OUTCOMES)
    for k in OUTCOMES:
        assert rp[k] == sum(outcome(v) == k for v in rep)
        assert rp[k] == sum(d[k] for d in rp["by_evidence"].values())
    assert rp["total"] + cs["deterministic_rows"] == summary["verdicts"]["total"]
    learning = [v for v in rep if v.evidence in ("eval", "training") and outcome(v) != "not run"]
    assert rp["regime"]["learning_rows_run"] == len(learning)
    assert sum(rp["regime"][k] for k in (regime.PAST, regime.PRE, regime.UNKNOWN)) == len(learning)
    assert rp["regime"]["bigram_margin_nats"] == regime.load_rules().margin and cnt["reproduction"] == rp
    text = (tmp_path / "audit" / "report.md").read_text(encoding="utf-8")
    assert "internal consistency (the paper's arithmetic and formulas)" in text and "empirical reproduction" in text
    verd = pd.read_csv(tmp_path / "audit" / "verdicts.csv")
    assert set(regime.REGIME_FIELDS) <= set(verd.columns)


@pytest.mark.skipif(not (TINY / "audit" / "verdicts.csv").is_file(), reason="committed tiny audit absent")
def test_the_committed_tiny_audit_states_the_regime_of_every_learning_side_row():
    """Every learning-side row of the committed tiny audit that was run has its regime; the held-out rows' loss
    minus the bigram is the worse role's mean held-out loss minus the committed bigram_kn_budget (computed here);
    no not comparable row is in the family or decided; the summary's counts are those of verdicts.csv."""
    v = pd.read_csv(TINY / "audit" / "verdicts.csv", keep_default_na=False)
    learn = v[v.evidence.isin(["eval", "training"]) & (v.qualifier != "not run at this scale")]
    assert (learn.regime != "").all() and set(learn.regime) <= {regime.PAST, regime.PRE, regime.UNKNOWN}
    t = pd.read_csv(TINY / "tidy" / "heldout_ppl.csv")
    for split in ("book", "code"):
        b = float(t.query(f"role == 'bigram_kn_budget' and metric == 'loss.{split}'")["value"].iloc[0])
        for a, o in (("yocou", "yoco"), ("yoco", "transformer"), ("yocou", "rins")):
            row = v.set_index("id").loc[f"v.heldout.{a}_vs_{o}.{split}"]
            m = max(t.query(f"role == '{r}' and metric == 'loss.{split}' and seed >= 0")["value"].mean()
                    for r in (a, o))
            assert float(row.loss_minus_bigram) == pytest.approx(m - b, abs=1e-9) and row.regime_split == split
            assert (row.verdict == NOT_COMPARABLE) == (m - b > -regime.load_rules().margin)
    nc = v[v.verdict.isin([NOT_COMPARABLE, NOT_COMPARABLE_UNKNOWN])]
    assert (nc.family_size == "").all() and (nc.p_adjusted == "").all()
    s = json.loads((TINY / "audit" / "summary.json").read_text(encoding="utf-8"))
    counted = v[v.counted.astype(str) == "True"]
    rep = counted[counted.evidence != "deterministic"]
    assert s["reproduction"]["not comparable"] == int(rep.verdict.isin([NOT_COMPARABLE, NOT_COMPARABLE_UNKNOWN]).sum())
    assert s["reproduction"]["censored"] == int((rep.verdict == "censored").sum())
    assert s["family"]["size"] == len({i for i in v.loc[v.family_size != "", "id"]} & set(counted.id))
    assert not math.isnan(s["reproduction"]["regime"]["bigram_margin_nats"])
