"""The crossover study's gap, interval and verdict (yocou.results.summarize.crossover), against hand computations."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from yocou.results.summarize.crossover import (
    crossover_verdict,
    gap_by_tokens,
    summarize_crossover,
    t_interval,
)


def test_paired_interval_matches_the_formula():
    a, b = [5.10, 5.20, 5.15], [5.00, 5.05, 5.08]
    d = np.array(a) - np.array(b)
    h = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    m, lo, hi, how = t_interval(a, b, paired=True)
    assert m == pytest.approx(d.mean()) and lo == pytest.approx(d.mean() - h) and hi == pytest.approx(d.mean() + h)
    assert "paired" in how


def test_welch_interval_matches_scipy():
    a, b = [1.0, 1.3, 0.9, 1.2], [0.5, 0.7, 0.2]
    r = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    m, lo, hi, _ = t_interval(a, b)
    assert (lo, hi) == (pytest.approx(r.low), pytest.approx(r.high)) and m == pytest.approx(np.mean(a) - np.mean(b))


def test_one_value_gives_no_interval():
    m, lo, hi, _ = t_interval([1.0], [0.5])
    assert m == 0.5 and lo == -math.inf and hi == math.inf


def _run(tmp_path, name, seed, losses):
    d = tmp_path / name
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"seed": seed, "steps": 30, "tokens": 3000, "train_flops": 1.0}))
    rows = [{"step": 10 * (i + 1), "tokens": 1000 * (i + 1), "loss": 9.0,
             "heldout_loss": {"book": v, "code": v - 1}} for i, v in enumerate(losses)]
    rows.insert(1, {"step": 15, "tokens": 1500, "loss": 8.0})  # a row without an evaluation
    (d / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return d


def test_gap_reverses_when_yocou_ends_below(tmp_path):
    # YOCO-U starts 0.2 worse and ends 0.1 better, with seed noise of +-0.01 in the gap
    yoco = [_run(tmp_path, f"yoco_s{s}", s, [6.0, 5.5, 5.0]) for s in range(3)]
    noise = [0.0, 0.01, -0.01]
    yocou = [_run(tmp_path, f"yocou_s{s}", s, [6.2 + noise[s], 5.5 + noise[s], 4.9 + noise[s]]) for s in range(3)]
    df = summarize_crossover({"yoco": yoco, "yocou": yocou})
    assert set(df["metric"]) == {"heldout_loss.book", "heldout_loss.code"} and len(df) == 2 * 3 * 3 * 2
    g = gap_by_tokens(df, "heldout_loss.book")
    assert list(g["tokens"]) == [1000.0, 2000.0, 3000.0]
    assert g["gap"].tolist() == pytest.approx([0.2, 0.0, -0.1])
    v = crossover_verdict(g)
    assert v["status"] == "reversed" and v["at_tokens"] == 3000.0


def test_gap_persists_and_undecided(tmp_path):
    yoco = [_run(tmp_path, f"a{s}", s, [6.0, 5.0]) for s in range(2)]
    worse = [_run(tmp_path, f"b{s}", s, [6.3 + 0.01 * s, 5.3 - 0.01 * s]) for s in range(2)]
    g = gap_by_tokens(summarize_crossover({"yoco": yoco, "yocou": worse}), "heldout_loss.book")
    assert crossover_verdict(g)["status"] == "persists"
    noisy = [_run(tmp_path, f"c{s}", s, [6.0 + (0.3 if s else -0.3), 5.0 + (0.3 if s else -0.3)]) for s in range(2)]
    g = gap_by_tokens(summarize_crossover({"yoco": yoco, "yocou": noisy}), "heldout_loss.book")
    assert crossover_verdict(g)["status"] == "undecided"


def test_no_spread_gives_the_exact_effect():
    assert t_interval([5.0, 5.0], [4.0, 4.0], paired=True)[:3] == (1.0, 1.0, 1.0)


def test_render_draws_and_writes_the_gap_table(tmp_path):
    from yocou.results.render.crossover import render
    from yocou.results.tidy import write_tidy

    yoco = [_run(tmp_path, f"y{s}", s, [6.0, 5.5]) for s in range(2)]
    new = [_run(tmp_path, f"u{s}", s, [6.3 + 0.01 * s, 5.4 - 0.01 * s]) for s in range(2)]
    write_tidy(summarize_crossover({"yoco": yoco, "yocou": new}), tmp_path / "tidy" / "crossover")
    v = render(tmp_path / "tidy" / "crossover.csv", out=tmp_path / "c.png", data=tmp_path / "c.csv", scale="t")
    assert (tmp_path / "c.png").stat().st_size > 1000 and (tmp_path / "c.pdf").is_file()
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    # both splits (code is book - 1 on both sides: the same gaps); no ppl results, so no final rows
    assert [r["gap"] for r in rows if r["split"] == "book"] == pytest.approx([0.305, -0.105])
    assert [r["gap"] for r in rows if r["split"] == "code"] == pytest.approx([0.305, -0.105])
    assert v["book"]["last"]["gap"] == pytest.approx(-0.105) and v["book"]["final"] is None


def _ppl(tmp_path, name, book, code, n=131071):
    p = tmp_path / f"{name}.ppl.json"
    p.write_text(json.dumps({"splits": {
        f"heldout_{k}": {"ppl": math.exp(v), "nll": v, "n_tokens": n, "seq_len": 256, "stderr_nats": 0.005,
                         "bits_per_byte": v / math.log(2) / 2.4, "docs": [{"id": "d"}]}
        for k, v in (("book", book), ("code", code))}}))
    return p


def test_final_models_on_the_whole_held_out_set_give_the_last_word(tmp_path):
    """The final rows (rule ppl) at the run's final token count; their gap is paired by seed and computed here by
    hand; the figure and table carry it beside the checkpoint verdict."""
    from yocou.results.render.crossover import render
    from yocou.results.summarize.crossover import final_gap
    from yocou.results.tidy import write_tidy

    yoco = [_run(tmp_path, f"y{s}", s, [6.0, 5.5]) for s in range(3)]
    new = [_run(tmp_path, f"u{s}", s, [6.2, 5.6]) for s in range(3)]
    fy, fu = [5.00, 5.02, 4.98], [5.05, 5.09, 5.04]
    ppl = {f"y{s}": _ppl(tmp_path, f"y{s}", fy[s], fy[s] - 2) for s in range(3)}
    ppl |= {f"u{s}": _ppl(tmp_path, f"u{s}", fu[s], fu[s] - 2) for s in range(3)}
    df = summarize_crossover({"yoco": yoco, "yocou": new}, ppl)
    full = df[df["metric"] == "heldout_full.book"]
    assert len(full) == 6 and set(full["axis_value"]) == {3000.0} and set(full["n"]) == {131071.0}
    assert set(df[df["metric"] == "heldout_full_bpb.code"]["unit"]) == {"bits/byte"}
    d = np.array(fu) - np.array(fy)
    h = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    f = final_gap(df, "book")
    assert (f["gap"], f["low"], f["high"]) == (pytest.approx(d.mean()), pytest.approx(d.mean() - h),
                                               pytest.approx(d.mean() + h))
    assert f["tokens"] == 3000.0 and f["n_tokens"] == 131071 and "paired" in f["method"]
    write_tidy(df, tmp_path / "tidy" / "crossover")
    v = render(tmp_path / "tidy" / "crossover.csv", out=tmp_path / "c.png", data=tmp_path / "c.csv", scale="t",
               budget_tokens=1500)
    assert v["code"]["final"]["gap"] == pytest.approx(d.mean())
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    fin = [r for r in rows if r["checkpoint"] == "final, whole held-out set"]
    assert [r["split"] for r in fin] == ["book", "code"] and fin[0]["gap"] == pytest.approx(d.mean())
    md = (tmp_path / "c.md").read_text()
    assert "final models on the whole held-out set (131,071 tokens)" in md and "core runs' budget (1.5e+03" in md


def test_a_gap_decided_at_the_budget_and_gone_at_the_end_is_closed(tmp_path):
    """Reference = the checkpoint nearest the core budget (2000 tokens here: +0.2, seed noise +-0.01, so its
    interval lies above 0); end = the final whole-held-out-set gap, which contains 0: closed, from the first
    checkpoint whose interval (and every later one's) reaches 0. Without the reference (the first checkpoint,
    gap ~0) the same data are undecided."""
    from yocou.results.summarize.crossover import final_gap

    yoco = [_run(tmp_path, f"y{s}", s, [6.0, 5.5, 5.0]) for s in range(3)]
    e = [0.0, 0.01, -0.01]
    new = [_run(tmp_path, f"u{s}", s, [6.0 + 3 * e[s], 5.7 + e[s], 5.0 + 3 * e[s]]) for s in range(3)]
    ppl = {f"y{s}": _ppl(tmp_path, f"y{s}", 4.9, 3.0) for s in range(3)}
    ppl |= {f"u{s}": _ppl(tmp_path, f"u{s}", 4.9 + 2 * e[s], 3.0) for s in range(3)}
    df = summarize_crossover({"yoco": yoco, "yocou": new}, ppl)
    g, fin = gap_by_tokens(df, "heldout_loss.book"), final_gap(df, "book")
    assert fin["low"] < 0 < fin["high"]
    v = crossover_verdict(g, ref_tokens=2100, final=fin)
    assert v["status"] == "closed" and v["reference"]["tokens"] == 2000.0 and v["at_tokens"] == 3000.0
    assert v["end"] == "final models, whole held-out set"
    assert crossover_verdict(g, final=fin)["status"] == "undecided"
