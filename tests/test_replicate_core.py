"""benchmarks/replicate_core.py: the audit's core verdicts on a replica's tidy tables beside the committed ones.

The replica here is the committed tidy tables with a known change: YOCO-U's held-out loss raised by 0.1 nats on the
book. The expected numbers are computed from the committed tables by hand (pandas), not by the script."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from yocou.results.tidy import read_tidy, write_tidy

ROOT = Path(__file__).resolve().parents[1]
TIDY = ROOT / "results/tiny/tidy"
SHIFT = 0.1


def _script():
    spec = importlib.util.spec_from_file_location("replicate_core", ROOT / "benchmarks/replicate_core.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _replica(tmp_path: Path, shift: float) -> Path:
    rep = tmp_path / "replica"
    (rep / "runs/tiny/models/yocou").mkdir(parents=True)
    metrics = rep / "runs/tiny/models/yocou/metrics.jsonl"
    metrics.write_text("{}\n")
    os.utime(metrics, (1_000_000_000, 1_000_000_000))  # trained long before the tables below were written
    shutil.copytree(TIDY, rep / "results/tiny/tidy")
    shutil.copytree(TIDY.parent / "ppl", rep / "results/tiny/ppl")
    stem = rep / "results/tiny/tidy/heldout_ppl"
    t = read_tidy(stem.with_suffix(".csv"))
    t.loc[(t["role"] == "yocou") & (t["metric"] == "loss.book"), "value"] += shift
    config = json.loads(stem.with_suffix(".json").read_text())["provenance"]["config"]
    write_tidy(t, stem, config={k: v for k, v in config.items() if k != "inputs"})  # CSV and JSON alike
    return rep


@pytest.mark.slow
@pytest.mark.skipif(not (TIDY / "heldout_ppl.csv").is_file(), reason="committed tiny results absent")
def test_replica_shift_moves_exactly_the_rows_that_read_it(tmp_path: Path) -> None:
    rep = _replica(tmp_path, SHIFT)
    for r in _core_runs():
        m = rep / f"runs/tiny/models/{r}/metrics.jsonl"
        m.parent.mkdir(parents=True, exist_ok=True)
        m.write_text("{}\n")
        os.utime(m, (1_000_000_000, 1_000_000_000))
    out = tmp_path / "rep.json"
    assert _script().main(["--replica", str(rep), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    v = {r["id"]: r for r in res["verdicts"]}

    # YOCO-U - YOCO on the book, paired by seed, by hand from the committed table
    t = pd.read_csv(TIDY / "heldout_ppl.csv").query("metric == 'loss.book' and seed >= 0")
    a = t[t.role == "yocou"].set_index("seed")["value"].sort_index()
    b = t[t.role == "yoco"].set_index("seed")["value"].sort_index()
    d = (a - b).to_numpy()
    lo, hi = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    row = v["v.heldout.yocou_vs_yoco.book"]
    assert row["reference"]["effect"] == pytest.approx(d.mean(), abs=1e-12)
    assert (row["reference"]["ci_low"], row["reference"]["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
    # the replica's effect moves by the shift, its interval (a constant added to every seed) by the same
    assert row["replica"]["effect"] == pytest.approx(d.mean() + SHIFT, abs=1e-12)
    assert (row["replica"]["ci_low"], row["replica"]["ci_high"]) == pytest.approx((lo + SHIFT, hi + SHIFT), abs=1e-12)
    assert row["agree"] == (row["reference"]["verdict"] == row["replica"]["verdict"])

    # rows that do not read YOCO-U's book loss are unchanged
    for i in ("v.heldout.yocou_vs_yoco.code", "v.heldout.yoco_vs_transformer.book", "v.fig2.loss_gap_equal_flops",
              "v.fig4.yocou_vs_yoco", "v.heldout_ppl.YOCO-U_vs_YOCO"):
        assert v[i]["replica"] == v[i]["reference"] and v[i]["agree"], i

    # per run: exactly YOCO-U's book losses (one per seed of the committed table) differ, by the shift
    diffs = {(r["run"], r["metric"]): r["diff"] for r in res["runs"]}
    moved = {k for k, x in diffs.items() if abs(x) > 1e-12}
    assert moved == {(r, "loss.book") for r in _core_runs() if re.fullmatch(r"yocou(_seed\d+)?", r)}
    assert len(moved) == len(pd.read_csv(TIDY / "heldout_ppl.csv").query("role == 'yocou' and seed >= 0").seed.unique())
    assert all(diffs[k] == pytest.approx(SHIFT, abs=1e-12) for k in moved)
    assert res["summary"]["max_abs_run_diff_nats"] == pytest.approx(SHIFT, abs=1e-12)
    assert (tmp_path / "rep.md").read_text().count("| v.") == len(res["verdicts"])


def _core_runs() -> list[str]:
    t = pd.read_csv(TIDY / "heldout_ppl.csv")
    return sorted(t.loc[t["seed"] >= 0, "run"].unique())


@pytest.mark.slow
@pytest.mark.skipif(not (TIDY / "heldout_ppl.csv").is_file(), reason="committed tiny results absent")
def test_bad_replicas_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """Exit status 2 and one line naming the file: tables older than the runs, a core run the replica did not
    train, a truncated table, a missing table; nothing is written."""
    out = tmp_path / "x.json"

    def refused(rep: Path, *needles: str) -> None:
        assert _script().main(["--replica", str(rep), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("replicate_core: error: ") and len(err.strip().splitlines()) == 1, err
        for n in needles:
            assert n in err, err
        assert not out.exists()

    rep = _replica(tmp_path, 0.0)
    n = sum(bool(re.fullmatch(r"(transformer|yoco|rins|yocou)(_seed\d+)?", r)) for r in _core_runs())
    refused(rep, "rins/metrics.jsonl", "not found", f"{n - 1} of {n}")  # only yocou was "trained"
    for r in _core_runs():
        (rep / f"runs/tiny/models/{r}").mkdir(parents=True, exist_ok=True)
        (rep / f"runs/tiny/models/{r}/metrics.jsonl").write_text("{}\n")  # now newer than the tables
    refused(rep, "older than the replica's runs", "results/tiny/tidy/")
    old = 1_000_000_000
    for r in _core_runs():
        os.utime(rep / f"runs/tiny/models/{r}/metrics.jsonl", (old, old))
    p = rep / "results/tiny/tidy/heldout_ppl.csv"
    text = p.read_text()
    p.write_text(text[: len(text) // 2])  # cut mid-row
    refused(rep, "heldout_ppl.csv")
    p.write_text(text)
    (rep / "results/tiny/tidy/fig4.csv").unlink()
    refused(rep, "fig4.csv not found")
