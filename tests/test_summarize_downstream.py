"""yocou.results.summarize.downstream: lm-eval's per-run scores → the tidy studies table2/3/5 and fig3.

Every expected number is computed here from the synthetic inputs (the averages and their standard errors written
out), never read back from the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from yocou.results.evaldefs import columns, metric_id
from yocou.results.summarize import downstream as sd
from yocou.results.tidy import read_tidy, write_tidy


def _write_lmeval(tmp: Path, run: str, cells: dict[tuple[str, str, str], tuple[float, float, int]]) -> Path:
    """``downstream/<run>/tidy.csv`` as yocou.evaluation.lmeval.run writes it; ``cells``: (task, metric, filter) ->
    (value, stderr, n_items)."""
    rows = [{"variant": run, "task": t, "metric": m, "filter": f, "value": v, "stderr": se, "n_items": n,
             "n_shots": 0, "source": "offline"} for (t, m, f), (v, se, n) in cells.items()]
    p = tmp / "downstream" / run / "tidy.csv"
    p.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(p, index=False)
    return p


def _cells_of(table: str, base: float, *, skip: tuple[str, ...] = ()) -> dict:
    """lm-eval cells (offline task names) for every measurable column of ``table`` except ``skip``: column i gets
    value ``base + 0.01 i``, stderr ``0.002 (i + 1)``, ``20 + i`` items."""
    out = {}
    i = 0
    for col, spec in columns(table).items():
        if "task" not in spec or col in skip:
            continue
        out[(f"yocou_{spec['task']}", spec["metric"], spec.get("filter", "none"))] = (base + 0.01 * i,
                                                                                       0.002 * (i + 1), 20 + i)
        i += 1
    return out


def _cfg(studies: dict, core=("yoco", "yocou"), seed: int = 3) -> dict:
    return {"seed": seed, "core_variants": list(core), "studies": studies,
            "eval": {"downstream": {"source": "offline"}}}


def test_table3_average_and_its_stderr_are_the_mean_over_the_measured_accuracy_columns(tmp_path: Path) -> None:
    cols = columns("table3")
    members = next(s["average"] for s in cols.values() if "average" in s)
    cells = _cells_of("table3", 0.3, skip=("OBQA",))  # one member of the average not measured
    p = _write_lmeval(tmp_path, "yoco", cells)
    df = sd.summarize_table("table3", [p], _cfg({"table3": ["yoco"]}))
    avg = df[df.metric == "average"]
    assert len(avg) == 1
    # by hand: the members that were measured, their values and standard errors from the cells above
    got = {c: cells[(f"yocou_{cols[c]['task']}", cols[c]["metric"], "none")] for c in members if c != "OBQA"}
    k = len(got)
    assert k == len(members) - 1
    mean = sum(v for v, _, _ in got.values()) / k
    se = math.sqrt(sum(s ** 2 for _, s, _ in got.values())) / k
    r = avg.iloc[0]
    assert r["value"] == pytest.approx(mean, rel=1e-12)
    assert r["stderr"] == pytest.approx(se, rel=1e-12)
    assert r["n"] == k and r["unit"] == "fraction" and r["role"] == "yoco" and r["run"] == "yoco"
    assert r["detail"] == ", ".join(c for c in members if c != "OBQA")
    # the perplexity columns are rows of unit ppl and not part of the average
    ppl = df[df.unit == "ppl"]
    assert set(ppl.metric) == {"heldout_prose.word_perplexity", "lambada.perplexity"}
    assert "openbookqa.acc" not in set(df.metric)
    one = df[df.metric == "piqa.acc"].iloc[0]
    assert (one["value"], one["stderr"], one["n"]) == cells[("yocou_piqa", "acc", "none")]
    assert one["task"] == "yocou_piqa" and one["study"] == "table3"


def test_roles_come_from_the_config_not_from_run_names(tmp_path: Path) -> None:
    # the runs are renamed; a decoy run is *named* like the role `yoco`: a name-based lookup would pick it
    paths = [_write_lmeval(tmp_path, "base_a", _cells_of("table2", 0.10)),
             _write_lmeval(tmp_path, "rec_b", _cells_of("table2", 0.20)),
             _write_lmeval(tmp_path, "rec_b_snap", _cells_of("table2", 0.30)),
             _write_lmeval(tmp_path, "yoco", _cells_of("table2", 0.90))]
    cfg = _cfg({"table2": {"yoco": "base_a", "equal_steps": "rec_b", "equal_flops": "rec_b_snap"}})
    df = sd.summarize_table("table2", paths, cfg)
    assert list(dict.fromkeys(df["role"])) == ["yoco", "equal_steps", "equal_flops"]
    arc = df[df.metric == "arc_challenge.acc_norm"].set_index("role")
    assert arc.loc["yoco", "run"] == "base_a" and arc.loc["yoco", "value"] == pytest.approx(0.10)
    assert arc.loc["equal_steps", "run"] == "rec_b" and arc.loc["equal_steps", "value"] == pytest.approx(0.20)
    assert arc.loc["equal_flops", "run"] == "rec_b_snap" and arc.loc["equal_flops", "value"] == pytest.approx(0.30)
    assert "yoco" not in set(df["run"])


def test_unavailable_and_unscored_columns_yield_no_row(tmp_path: Path) -> None:
    cols = columns("table2")
    unavailable = [c for c, s in cols.items() if "unavailable" in s]
    assert unavailable  # BBH
    p = _write_lmeval(tmp_path, "m", _cells_of("table2", 0.2, skip=("Humaneval",)))
    df = sd.summarize_table("table2", [p], _cfg({"table2": {"yoco": "m"}}))
    measured = [c for c, s in cols.items() if "task" in s and c != "Humaneval"]
    assert sorted(set(df.metric) - {"average"}) == sorted(metric_id(cols[c]) for c in measured)
    assert not any("bbh" in m or "humaneval" in m for m in df.metric)
    avg = df[df.metric == "average"].iloc[0]
    assert avg["n"] == len(measured) and avg["detail"] == ", ".join(measured)
    # a column whose filter lm-eval did not report is not measured either
    gsm = metric_id(cols["GSM8K"])
    cells = _cells_of("table2", 0.2)
    cells = {(t, m, "strict-match" if t == "yocou_gsm8k" else f): v for (t, m, f), v in cells.items()}
    p2 = _write_lmeval(tmp_path, "m2", cells)
    df2 = sd.summarize_table("table2", [p2], _cfg({"table2": {"yoco": "m2"}}))
    assert gsm not in set(df2.metric)


def test_no_average_row_without_a_measured_member_and_nan_stderr_propagates(tmp_path: Path) -> None:
    cols = columns("table3")
    only_ppl = {(f"yocou_{s['task']}", s["metric"], "none"): (10.0, 1.0, 5) for s in cols.values()
                if s.get("metric") in sd.PPL_METRICS}
    p = _write_lmeval(tmp_path, "a", only_ppl)
    df = sd.summarize_table("table3", [p], _cfg({"table3": ["a"]}))
    assert "average" not in set(df.metric) and len(df) == len(only_ppl)
    cells = _cells_of("table3", 0.4)
    cells[("yocou_piqa", "acc", "none")] = (0.5, float("nan"), 20)  # lm-eval gave no stderr
    p = _write_lmeval(tmp_path, "b", cells)
    df = sd.summarize_table("table3", [p], _cfg({"table3": ["b"]}))
    assert math.isnan(df[df.metric == "piqa.acc"]["stderr"].iloc[0])
    assert math.isnan(df[df.metric == "average"]["stderr"].iloc[0])


def test_seed_from_the_summary_else_the_config(tmp_path: Path) -> None:
    paths = [_write_lmeval(tmp_path, r, _cells_of("table3", 0.3)) for r in ("a", "b")]
    sm = tmp_path / "models" / "a" / "summary.json"
    sm.parent.mkdir(parents=True)
    sm.write_text(json.dumps({"steps": 10, "tokens": 100, "train_flops": 1e9, "provenance": {"seed": 7}}))
    df = sd.summarize_table("table3", paths, _cfg({"table3": ["a", "b"]}, seed=3), summaries=[sm])
    assert set(df[df.run == "a"].seed) == {7}
    assert set(df[df.run == "b"].seed) == {3}


def test_missing_run_and_unknown_study_fail_clearly(tmp_path: Path) -> None:
    p = _write_lmeval(tmp_path, "a", _cells_of("table3", 0.3))
    with pytest.raises(ValueError, match="'missing'.*role"):
        sd.summarize_table("table3", [p], _cfg({"table3": ["a", "missing"]}))
    with pytest.raises(ValueError, match="table4"):
        sd.summarize_table("table4", [p], _cfg({}))
    with pytest.raises(FileNotFoundError, match="downstream rule"):
        sd.summarize_table("table3", [tmp_path / "nope.csv"], _cfg({"table3": ["a"]}))


def test_mmlu_group_row_and_fig3_core_roles(tmp_path: Path) -> None:
    cells = _cells_of("table2", 0.2)
    cells[("yocou_mmlu_anatomy", "acc", "none")] = (0.99, 0.01, 3)  # a subtask: never the MMLU column
    p = _write_lmeval(tmp_path, "m", cells)
    df = sd.summarize_table("table2", [p], _cfg({"table2": {"yoco": "m"}}))
    mmlu = df[df.metric == "mmlu.acc"].iloc[0]
    assert mmlu["task"] == "yocou_mmlu" and mmlu["value"] == cells[("yocou_mmlu", "acc", "none")][0]

    specs = columns("fig3")
    fig = {(f"yocou_{s['task']}", s["metric"], s["filter"]): (0.05 * i, 0.01, 5) for i, s in enumerate(specs)}
    paths = [_write_lmeval(tmp_path / "f", r, fig) for r in ("yoco", "yocou", "transformer")]
    d3 = sd.summarize_fig3(paths, _cfg({}, core=("yocou", "yoco")))
    assert list(dict.fromkeys(d3.role)) == ["yocou", "yoco"]  # core_variants, in their order
    assert list(d3[d3.role == "yoco"].metric) == [metric_id(s) for s in specs]
    assert set(d3.study) == {"fig3"} and set(d3.unit) == {"fraction"}


def test_online_task_names_cover_every_column() -> None:
    for t in ("table2", "table3", "table5"):
        for spec in columns(t).values():
            if "task" in spec:
                assert sd.task_names(spec["task"], "online")
    assert sd.task_names("math_algebra", "online") == ["minerva_math_algebra"]
    assert [sd.task_names(s["task"], "online") for s in columns("fig3")]
    assert sd.task_names("mmlu", "offline") == ["yocou_mmlu"]


def test_write_and_read_back(tmp_path: Path) -> None:
    p = _write_lmeval(tmp_path, "a", _cells_of("table3", 0.3))
    df = sd.summarize_table("table3", [p], _cfg({"table3": ["a"]}))
    write_tidy(df, tmp_path / "tidy" / "table3", config={"x": 1}, inputs=[str(p)])
    back = read_tidy(tmp_path / "tidy" / "table3.csv")
    assert list(back.metric) == list(df.metric)
    assert back["value"].tolist() == pytest.approx(df["value"].tolist())
    assert back[back.metric == "average"]["detail"].iloc[0] == df[df.metric == "average"]["detail"].iloc[0]
