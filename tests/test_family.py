"""Many comparisons at once (yocou.results.audit.family): Holm's step-down, the verdicts it decides on a known family,
restatements counted once, and the seeds-needed calculation. Expected values are computed here independently:
p-values by scipy's one-sample t-test, Holm's adjustment by a loop written out in the test, power by simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from yocou.results.audit import family
from yocou.results.audit.claims import load_sources
from yocou.results.audit.report import counts
from yocou.results.audit.verdicts import (
    INCONCLUSIVE,
    OPPOSITE,
    SAME,
    SAME_SIZE,
    reproduce,
)
from yocou.results.tidy import write_tidy

DECIDED = (SAME, SAME_SIZE, OPPOSITE)


@pytest.fixture(scope="module")
def src():
    return load_sources()


def _holm_by_hand(p: dict[str, float], alpha: float = 0.05) -> tuple[set[str], dict[str, float]]:
    order = sorted(p, key=lambda k: (p[k], k))
    m, rejected, adjusted, running, stop = len(order), set(), {}, 0.0, False
    for i, k in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[k]))
        adjusted[k] = running
        if not stop and p[k] < alpha / (m - i):
            rejected.add(k)
        else:
            stop = True
    return rejected, adjusted


def test_holm_on_printed_p_values():
    """p = 0.005, 0.01, 0.03, 0.04 (m = 4): 0.005 < 0.05/4 and 0.01 < 0.05/3 are rejected, 0.03 > 0.05/2 stops;
    adjusted 0.02, 0.03, 0.06, 0.06; levels 1 - 0.05/4, 1 - 0.05/3, then 1 - 0.05/(4 - 2) for the rest."""
    h = family.holm({"a": 0.03, "b": 0.005, "c": 0.04, "d": 0.01})
    assert [h[k]["rejected"] for k in "bdac"] == [True, True, False, False]
    assert [h[k]["p_adjusted"] for k in "bdac"] == pytest.approx([0.02, 0.03, 0.06, 0.06])
    assert [h[k]["level"] for k in "bdac"] == pytest.approx([1 - 0.05 / 4, 1 - 0.05 / 3, 0.975, 0.975])
    # one comparison: Holm is the row's own 95% test
    assert family.holm({"x": 0.049}) == {"x": {"rank": 1, "p": 0.049, "p_adjusted": 0.049, "rejected": True,
                                               "level": pytest.approx(0.95)}}
    for bad in ({"x": float("nan")}, {"x": 1.5}, {"x": -0.1}):
        with pytest.raises(ValueError, match="p-value of 'x'"):
            family.holm(bad)


# A known family: 12 comparisons of role t<i> against the reference r on the same 5 seeds. Two carry a true effect
# (0.10 nats), ten are noise; one of the noise rows (n0) is, by construction, "decided" by its own 95% interval.
REF = np.array([5.00, 5.08, 4.95, 5.03, 4.97])
DIFFS = {
    "e0": np.array([0.10, 0.11, 0.09, 0.105, 0.095]),
    "e1": np.array([0.12, 0.09, 0.10, 0.11, 0.10]),
    "n0": np.array([0.012, 0.018, 0.004, 0.015, 0.009]),   # mean 0.0116, sd 0.0055: raw p about 0.01
    **{f"n{k}": np.roll(np.array([0.02, -0.015, 0.01, -0.02, 0.004]), k) * (1 + 0.1 * k) for k in range(1, 10)},
}


def _family_toy(tmp, restate: dict[str, str] | None = None):
    write_tidy([dict(study="toy", run=role, role=role, seed=s, metric="loss", value=float(v), unit="nats")
                for role, vals in {"r": REF, **{k: REF + d for k, d in DIFFS.items()}}.items()
                for s, v in enumerate(vals)], tmp / "tidy" / "toy")
    rows = [dict(id=f"toy.{k}", comparison=f"{k} against r", study="toy", metric="loss", evidence="training",
                 a=k, b="r", effect="difference", paper={"value": 0.1, "text": "above"},
                 **({"restates": restate[k]} if restate and k in restate else {})) for k in DIFFS]
    p = tmp / f"comparisons{len(list(tmp.glob('comparisons*.yaml')))}.yaml"
    p.write_text(yaml.safe_dump(rows), encoding="utf-8")
    return p


def test_a_known_family_keeps_the_true_effects_and_drops_the_chance_one(src, tmp_path):
    """Two true effects and ten noise rows: alone, n0 is decided too (the premise); after Holm only e0 and e1 are,
    with the adjusted p-values of a hand-written Holm over scipy's p-values, and the adjusted intervals wider."""
    raw_p = {f"toy.{k}": float(stats.ttest_1samp(d, 0.0).pvalue) for k, d in DIFFS.items()}
    assert raw_p["toy.n0"] < 0.05 and sum(p < 0.05 for p in raw_p.values()) == 3      # the premise
    rejected, adjusted = _holm_by_hand(raw_p)
    assert rejected == {"toy.e0", "toy.e1"}                                              # the premise, by hand
    vs = {v.id: v for v in reproduce(src, tmp_path, "tiny", comparisons=_family_toy(tmp_path))}
    assert {k for k, v in vs.items() if v.verdict in DECIDED} == rejected
    assert {k for k, v in vs.items() if v.verdict_unadjusted in DECIDED} == {"toy.e0", "toy.e1", "toy.n0"}
    assert vs["toy.n0"].verdict == INCONCLUSIVE and "Holm (12 comparisons)" in vs["toy.n0"].qualifier
    for k, v in vs.items():
        assert v.family_size == 12
        assert v.p_value == pytest.approx(raw_p[k], rel=1e-6)
        assert v.p_adjusted == pytest.approx(adjusted[k], rel=1e-6)
        assert v.ci_low_adjusted < v.ci_low and v.ci_high_adjusted > v.ci_high           # wider than 95%
        # the adjusted interval is scipy's at the row's Holm level
        ci = stats.ttest_1samp(DIFFS[k.split(".")[1]], 0.0).confidence_interval(v.level_adjusted)
        assert (v.ci_low_adjusted, v.ci_high_adjusted) == (pytest.approx(ci.low), pytest.approx(ci.high))
    cnt = counts({"claims": pd.DataFrame(columns=["status", "kind", "table"]), "checks": [],
                  "verdicts": list(vs.values()), "scale": "tiny"})
    assert cnt["family"]["size"] == 12 and cnt["verdicts_training"]["decided"] == 2
    assert cnt["family"]["changed"] == [{"id": "toy.n0", "unadjusted": vs["toy.n0"].verdict_unadjusted,
                                         "adjusted": INCONCLUSIVE}]


def test_a_restatement_counts_once_and_shares_its_rows_level(src, tmp_path):
    """n1 declared a restatement of e0: the family has 11 members, the summary counts 11 training verdicts and one
    restatement, and n1 is decided at e0's level (its qualifier points to e0)."""
    vs = {v.id: v for v in reproduce(src, tmp_path, "tiny",
                                     comparisons=_family_toy(tmp_path, {"n1": "toy.e0"}))}
    assert {v.family_size for v in vs.values()} == {11}
    assert vs["toy.n1"].restates == "toy.e0" and vs["toy.n1"].level_adjusted == vs["toy.e0"].level_adjusted
    assert vs["toy.n1"].qualifier.endswith("; restates toy.e0 (counted there)")
    cnt = counts({"claims": pd.DataFrame(columns=["status", "kind", "table"]), "checks": [],
                  "verdicts": list(vs.values()), "scale": "tiny"})
    assert cnt["verdicts"]["total"] == 11 and cnt["verdicts"]["restatements"] == 1
    assert cnt["verdicts_training"]["decided"] + cnt["verdicts_training"]["undecided"] == 11
    assert cnt["family"]["restatements"] == {"toy.n1": "toy.e0"}


@pytest.mark.parametrize("restates, match", [({"n1": "toy.nope"}, "not another row's id"),
                                             ({"n1": "toy.n1"}, "not another row's id"),
                                             ({"n1": "toy.n2", "n2": "toy.e0"}, "which itself restates")])
def test_a_bad_restatement_is_refused_naming_the_row(src, tmp_path, restates, match):
    with pytest.raises(ValueError, match=rf"row toy\.n[12]: restates .*{match}"):
        reproduce(src, tmp_path, "tiny", comparisons=_family_toy(tmp_path, restates))


def _power_by_simulation(n: int, delta: float, sd: float, alpha: float, reps: int = 40_000) -> float:
    rng = np.random.default_rng(7)
    x = delta + sd * rng.standard_normal((reps, n))
    t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / np.sqrt(n))
    return float((np.abs(t) > stats.t.ppf(1 - alpha / 2, n - 1)).mean())


@pytest.mark.parametrize("delta, sd, alpha", [(0.02, 0.0124, 0.05 / 13), (0.0446, 0.0179, 0.05 / 13),
                                              (0.05, 0.03, 0.05)])
def test_seeds_needed_reach_the_power_by_simulation(delta, sd, alpha):
    """The returned n has at least 80% power in a simulation of the paired t test (within 1%), n - 1 less."""
    n = family.seeds_needed(delta, sd, alpha)
    assert n is not None and n >= 3
    assert _power_by_simulation(n, delta, sd, alpha) > 0.79
    assert _power_by_simulation(n - 1, delta, sd, alpha) < 0.81


def test_seeds_for_no_difference_by_simulation_and_the_limits():
    """'No difference' at a true 0 (sd known): P(|mean| + t sd / sqrt(n) < margin) by simulation at n and n - 1."""
    margin, sd, alpha = 0.02, 0.015, 0.05 / 13
    n = family.seeds_needed(margin, sd, alpha, equivalence=True)
    rng = np.random.default_rng(3)

    def inside(k: int) -> float:
        mean = sd / np.sqrt(k) * rng.standard_normal(100_000)
        return float((np.abs(mean) + stats.t.ppf(1 - alpha / 2, k - 1) * sd / np.sqrt(k) < margin).mean())

    assert inside(n) > 0.79 and inside(n - 1) < 0.81
    assert family.seeds_needed(1e-4, 1.0, 0.05) is None                    # more than 200 seeds
    for bad in ((0.0, 1.0, 0.05), (0.1, -1.0, 0.05), (0.1, 1.0, 1.5), (float("nan"), 1.0, 0.05)):
        with pytest.raises(ValueError, match="seeds_needed"):
            family.seeds_needed(*bad)


def test_power_table_of_the_known_family_and_the_cost_of_a_seed(src, tmp_path):
    """Every family member has a row; its sd is the per-seed effect's (computed here with numpy), the seeds match
    seeds_needed at alpha / m, and the cost sums the timing of each run's seed replicas."""
    comps = _family_toy(tmp_path)
    vs = reproduce(src, tmp_path, "tiny", comparisons=comps)
    rows = yaml.safe_load(comps.read_text(encoding="utf-8"))
    for r in rows:
        r["roles"] = {"a": r["a"], "b": r["b"]}
    timing = pd.DataFrame([{"wildcards": w, "cpu_s": c} for w, c in
                           (("r", 99.0), ("r_seed1", 10.0), ("r_seed1", 2.0), ("r_seed2", 14.0), ("e0", 50.0))])
    pt = family.power_table(vs, rows, timing=timing).set_index("id")
    assert len(pt) == 12 and np.allclose(pt["alpha"].to_numpy(dtype=float), 0.05 / 12)
    sd = float(np.std(DIFFS["n0"], ddof=1))
    assert pt.loc["toy.n0", "sd_per_seed"] == pytest.approx(sd, rel=1e-6)
    assert pt.loc["toy.n0", "seeds_margin"] == family.seeds_needed(0.02, sd, 0.05 / 12)
    assert pt.loc["toy.n0", "status"] == "borderline" and pt.loc["toy.e0", "status"] == "decided"
    # r: the mean over its replicas (12 and 14); e0: no replica, its own jobs; other runs: unknown cost
    assert pt.loc["toy.e0", "cpu_s_per_seed"] == pytest.approx(13.0 + 50.0)
    assert pd.isna(pt.loc["toy.n0", "cpu_s_per_seed"])


@pytest.mark.parametrize("edit, match", [
    (lambda r: r[0].update(power_frm="toy.e0"), r"row 0 \(toy\.e0\): unknown field 'power_frm'"),
    (lambda r: r[1].update(power_from="toy.nope"),
     r"row toy\.e1: power_from 'toy\.nope', which is not another row's id"),
    (lambda r: r[1].update(power_from="toy.e1"), r"row toy\.e1: power_from 'toy\.e1'"),
    (lambda r: r[1].update(restates={"Wiki ppl": "toy.e0"}), r"row 1 \(toy\.e1\): restates names column 'Wiki ppl'"),
    (lambda r: r[1].update(restates=["toy.e0"]), r"row 1 \(toy\.e1\): restates must be a row id"),
])
def test_a_misdeclared_row_is_refused_naming_the_file_read(src, tmp_path, edit, match):
    """A misspelled field, a power_from or restates that names no other row, a {column: id} mapping whose column the
    row does not expand to: one error naming the file that was read (not the default eval/comparisons.yaml)."""
    comps = _family_toy(tmp_path)
    rows = yaml.safe_load(comps.read_text(encoding="utf-8"))
    edit(rows)
    bad = tmp_path / "mine.yaml"
    bad.write_text(yaml.safe_dump(rows), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{bad}: .*{match}"):
        reproduce(src, tmp_path, "tiny", comparisons=bad)


def _lr_toy(tmp, best: dict[str, float]):
    """A learning-rate study of roles x and y: the shared rate 1.0 (runs <role>, <role>_seed<k>, 4 seeds) and 2.0
    (runs <role>_lr2x..., 4 seeds); x is better at 2.0 on the book but worse on code; ``best`` names each role's
    best rate (the study's best_lr rows). Rows at the best rate, restating the shared-rate row at the base."""
    rng = np.random.default_rng(3)
    base = {("x", 1.0): (5.0, 4.6), ("x", 2.0): (4.9, 4.8), ("y", 1.0): (5.1, 4.7), ("y", 2.0): (5.3, 4.9)}
    rec = []
    for (role, lr), means in base.items():
        for s in range(4):
            run = (role if lr == 1.0 else f"{role}_lr2x") + (f"_seed{s}" if s else "")
            for split, m in zip(("book", "code"), means):
                rec.append(dict(study="lr", run=run, role=role, seed=s, metric=f"loss.{split}", axis="lr",
                                axis_value=lr, value=float(m + 0.01 * rng.standard_normal()), unit="nats"))
    rec += [dict(study="lr", run=r, role=r, seed=-1, metric="best_lr", value=v, unit="lr") for r, v in best.items()]
    write_tidy(rec, tmp / "tidy" / "lr")
    common = dict(study="lr", metric="loss.{split}", a="x", b="y", effect="difference", evidence="training",
                  paper={"value": -0.1, "text": "lower"},
                  columns=[{"column": "", "split": s} for s in ("book", "code")])
    rows = [dict(id="shared.{split}", comparison="x against y at the shared rate", at=1.0, **common),
            dict(id="best.{split}", comparison="x against y at their best rates", at="best",
                 restates_at_base="shared.{split}", **common)]
    p = tmp / "comparisons_lr.yaml"
    p.write_text(yaml.safe_dump(rows), encoding="utf-8")
    return p, pd.DataFrame(rec)


def test_best_rate_rows_use_one_rate_per_model_and_restate_the_shared_rate_row_at_the_base(src, tmp_path):
    """``at: best`` takes each model's best_lr (one rate for both splits, not the split's own minimum); when both
    models' best is the shared rate the row reads the shared-rate runs and restates that row (counted once)."""
    p, df = _lr_toy(tmp_path, {"x": 2.0, "y": 1.0})
    vs = {v.id: v for v in reproduce(src, tmp_path, "tiny", comparisons=p)}
    for split in ("book", "code"):   # expected: x's runs at 2.0 against y's at 1.0, each split, computed here
        xa = df[(df.role == "x") & (df.axis_value == 2.0) & (df.metric == f"loss.{split}")]["value"].mean()
        yb = df[(df.role == "y") & (df.axis_value == 1.0) & (df.metric == f"loss.{split}")]["value"].mean()
        assert vs[f"best.{split}"].effect == pytest.approx(xa - yb)
        assert vs[f"best.{split}"].restates == "" and vs[f"best.{split}"].family_size == 4
    p, df = _lr_toy(tmp_path, {"x": 1.0, "y": 1.0})   # both best at the shared rate: the same runs
    vs = {v.id: v for v in reproduce(src, tmp_path, "tiny", comparisons=p)}
    for split in ("book", "code"):
        assert vs[f"best.{split}"].effect == pytest.approx(vs[f"shared.{split}"].effect)
        assert vs[f"best.{split}"].restates == f"shared.{split}" and not vs[f"best.{split}"].counted
        assert vs[f"best.{split}"].family_size == 2
    # a restates_at_base naming no row is refused, even when the row does not restate
    bad = yaml.safe_load(p.read_text())
    bad[1]["restates_at_base"] = "nope"
    (q := tmp_path / "comparisons_bad.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(ValueError, match=r"row best\.book: restates_at_base 'nope', which is not another row's id"):
        reproduce(src, tmp_path, "tiny", comparisons=q)


def test_a_comparison_naming_an_unknown_role_is_refused_naming_row_side_and_role(src, tmp_path):
    """A role that no tidy table read has and no config names (a misspelling) is an error naming the row, the side
    and the role, not a verdict "not run"; the same rows with the role spelt right are evaluated."""
    good = _family_toy(tmp_path)
    rows = yaml.safe_load(good.read_text(encoding="utf-8"))
    rows[3]["b"] = "rr"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(rows), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"row {rows[3]['id']}: b: unknown role 'rr'"):
        reproduce(src, tmp_path, "tiny", comparisons=bad)
    assert len(reproduce(src, tmp_path, "tiny", comparisons=good)) == len(rows)
