"""The training-side summaries (yocou.results.summarize.training): raw run files → tidy rows, every number checked against
a value computed by hand here (not by the code under test)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from yocou.results.readers import ResultFileError
from yocou.results.summarize import training as T
from yocou.results.tidy import NO_SEED, one, read_tidy, select, write_tidy


# ------------------------------------------------------------------------------------------------ fixtures
def _run(root: Path, name: str, *, metrics: list[tuple[int, int, float, float]] | None = None,
         seed: int | None = 0, loops: list[int] | None = (1, 1), **summary) -> Path:
    """A run folder: summary.json (``summary`` over defaults), run_config.json with stages of ``loops``, and
    metrics.jsonl rows ``(step, tokens, train_flops, loss)``."""
    d = root / "models" / name
    d.mkdir(parents=True, exist_ok=True)
    sm = {"name": name, "steps": 10, "tokens": 640, "train_flops": 6.4e8, "params": 1000,
          "active_params_per_token": 900, **summary}
    if seed is not None and "provenance" not in sm:
        sm["provenance"] = {"seed": seed}
    (d / "summary.json").write_text(json.dumps(sm))
    if loops is not None:
        (d / "run_config.json").write_text(json.dumps({"variant": name, "train": {"seed": seed},
                                                       "model": {"stages": [{"n_loops": t} for t in loops]}}))
    if metrics is not None:
        (d / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "tokens": t, "train_flops": f, "loss": x})
                                                 + "\n" for s, t, f, x in metrics))
    return d


def _ppl(root: Path, name: str, book: tuple[float, float], code: tuple[float, float],
         book_docs: tuple[str, ...] = ("milton/paradise_lost",), code_docs: tuple[str, ...] = ("stdlib/a.py",)) -> Path:
    """results/<scale>/ppl/<name>.json: per split ``(nll, ppl)``."""
    def split(nll_ppl, ids, n_tokens):
        return {"nll": nll_ppl[0], "ppl": nll_ppl[1], "n_tokens": n_tokens, "seq_len": 64, "max_tokens_per_doc": 1024,
                "docs": [{"id": i, "n_tokens": n_tokens // len(ids), "nll": nll_ppl[0]} for i in ids]}

    p = root / "ppl" / f"{name}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"splits": {"heldout_book": split(book, book_docs, 100),
                                        "heldout_code": split(code, code_docs, 60)}}))
    return p


def _values(df, **eq) -> list[float]:
    return [float(v) for v in select(df, **eq)["value"]]


# ---------------------------------------------------------------------------------------------------- runs
def test_runs_budget_and_final_loss_per_run_and_snapshot(tmp_path: Path) -> None:
    _run(tmp_path, "yocou_moe", metrics=[(5, 320, 3.2e8, 3.0), (10, 640, 6.4e8, 2.5)], seed=7)
    _run(tmp_path, "yocou_moe_eqflops", steps=7, tokens=448, train_flops=4.48e8, seed=7,
         equal_flops={"of": "yocou_moe", "step": 7})
    _run(tmp_path, "untrained_log", seed=None, loops=None)  # no metrics, no equal_flops: no loss row, no seed
    df = T.summarize_runs([tmp_path / "models" / r for r in ("yocou_moe", "yocou_moe_eqflops", "untrained_log")])
    assert set(df["study"]) == {"runs"} and (df["role"] == df["run"]).all()
    r = select(df, run="yocou_moe")
    assert dict(zip(r["metric"], r["value"])) == {"params": 1000, "tokens": 640, "train_flops": 6.4e8, "steps": 10,
                                                  "activated_params": 900, "final_train_loss": 2.5}
    assert set(r["seed"]) == {7}
    assert dict(zip(r["metric"], r["unit"]))["final_train_loss"] == "nats"
    # the snapshot at step 7: the last logged row at or before it is step 5 of its base run
    e = one(df, run="yocou_moe_eqflops", metric="final_train_loss")
    assert e["value"] == 3.0 and "step 5 of yocou_moe" in e["detail"]
    assert one(df, run="yocou_moe_eqflops", metric="steps")["value"] == 7
    assert one(df, run="untrained_log", metric="final_train_loss") is None
    assert set(select(df, run="untrained_log")["seed"]) == {NO_SEED}


def test_run_seed_and_loops_come_from_the_run_files(tmp_path: Path) -> None:
    d = _run(tmp_path, "r", seed=None, loops=[3, 1])
    (d / "run_config.json").write_text(json.dumps({"train": {"seed": 11}, "model": {"stages": [{"n_loops": 3},
                                                                                              {"n_loops": 1}]}}))
    assert T.run_seed(d) == 11 and T.run_loops(d) == 3
    # without run_config.json: the provenance of summary.json
    d2 = _run(tmp_path, "s", seed=4, loops=None, provenance={"seed": 4, "config": {"model": {"stages": [
        {"n_loops": 1}, {"n_loops": 5}]}}})
    assert T.run_seed(d2) == 4 and T.run_loops(d2) == 5
    d3 = _run(tmp_path, "u", seed=None, loops=None)
    assert T.run_seed(d3) == NO_SEED
    with pytest.raises(ValueError, match="n_loops"):
        T.run_loops(d3)


# -------------------------------------------------------------------------------------------------- Figure 2
def _fig2_runs(tmp_path: Path, new_loss: list[float]) -> dict[str, Path]:
    tokens = [100, 200, 300, 400]
    ref = _run(tmp_path, "yoco", metrics=[(s + 1, t, 10.0 * t, x) for s, (t, x) in
                                          enumerate(zip(tokens, [4.0, 3.0, 2.5, 2.0]))])
    new = _run(tmp_path, "yocou", metrics=[(s + 1, t, 20.0 * t, x) for s, (t, x) in enumerate(zip(tokens, new_loss))])
    return {"yoco": ref, "yocou": new}


def test_fig2_numbers_by_hand(tmp_path: Path) -> None:
    df = T.summarize_fig2(_fig2_runs(tmp_path, [3.5, 2.5, 2.0, 1.5]), alpha=1.0)
    d = select(df, role="yocou|yoco", seed=0)
    got = dict(zip(d["metric"], d["value"]))
    # one seed: the numbers on the seed-mean curves are the same (no held-out rows: from the training loss)
    m = select(df, role="yocou|yoco", seed=NO_SEED)
    assert dict(zip(m["metric"].str.removesuffix(".seed_mean_curve"), m["value"])) == pytest.approx(got)
    assert "training loss" in one(d, metric="loss_gap_at_equal_flops")["detail"]
    # YOCO's final loss 2.0 at 400 tokens and 4000 FLOPs; YOCO-U falls to 2.0 at its third row (300 tokens):
    # saving 1 - 300/400; at 4000 FLOPs YOCO-U is at 200 tokens, loss 2.5: gap 2.0 - 2.5
    assert got == pytest.approx({"reference_final_loss": 2.0, "reference_tokens": 400, "reference_train_flops": 4000,
                                 "reached_reference_loss": 1, "tokens_to_reach": 300, "token_saving": 0.25,
                                 "loss_gap_at_equal_flops": -0.5})
    assert set(d["run"]) == {"yocou|yoco"}
    assert "reference's final FLOPs" in one(d, metric="loss_gap_at_equal_flops")["detail"]
    # curves: 4 logged rows x 2 axes x (raw, smoothed) per run
    assert len(select(df, run="yoco", seed=0)) == 16
    assert _values(df, run="yoco", metric="train_loss", axis="train_flops") == [4.0, 3.0, 2.5, 2.0]
    assert list(select(df, run="yoco", metric="train_loss", axis="tokens")["axis_value"]) == [100, 200, 300, 400]
    assert list(select(df, run="yocou", metric="train_loss", axis="train_flops")["axis_value"]) == [2e3, 4e3, 6e3, 8e3]


def test_fig2_smoothing_and_a_curve_that_never_reaches(tmp_path: Path) -> None:
    df = T.summarize_fig2(_fig2_runs(tmp_path, [4.5, 4.0, 3.5, 3.0]), alpha=0.5)
    # adjusted EMA, alpha 0.5: y1 = x1, y2 = (x2 + 0.5 x1) / 1.5, y3 = (x3 + 0.5 x2 + 0.25 x1) / 1.75, ...
    y = [4.0, (3.0 + 2.0) / 1.5, (2.5 + 1.5 + 1.0) / 1.75, (2.0 + 1.25 + 0.75 + 0.5) / 1.875]
    assert _values(df, run="yoco", metric="train_loss_smoothed", axis="tokens") == pytest.approx(y)
    d = select(df, role="yocou|yoco", seed=0)
    assert one(d, metric="reference_final_loss")["value"] == pytest.approx(y[-1])
    assert one(d, metric="reached_reference_loss")["value"] == 0
    assert one(d, metric="tokens_to_reach") is None and one(d, metric="token_saving") is None
    # YOCO-U at 4000 FLOPs (its second row): smoothed (4.0 + 0.5 * 4.5) / 1.5
    assert one(d, metric="loss_gap_at_equal_flops")["value"] == pytest.approx(y[-1] - (4.0 + 2.25) / 1.5)


def test_fig2_without_both_roles_has_curves_only(tmp_path: Path) -> None:
    runs = _fig2_runs(tmp_path, [3.5, 2.5, 2.0, 1.5])
    df = T.summarize_fig2({"yoco": runs["yoco"]})
    assert set(df["metric"]) == {"train_loss", "train_loss_smoothed", "train_loss.seed_mean"}


# ------------------------------------------------------------------------------------------------- Figure 5
def test_fig5_loss_against_params_and_parameter_saving(tmp_path: Path) -> None:
    fams = {"yoco": ["yoco_s", "yoco_m", "yoco"], "yocou": ["yocou_s", "yocou"]}
    for r, p, loss in (("yoco_s", 1e6, 4.0), ("yoco_m", 4e6, 3.0), ("yoco", 16e6, 2.0), ("yocou_s", 2e6, 2.5),
                       ("yocou", 4e6, 1.5)):
        _run(tmp_path, r, params=int(p), active_params_per_token=p / 2)
        _ppl(tmp_path, r, (loss + 0.5, math.exp(loss + 0.5)), (loss - 0.5, math.exp(loss - 0.5)))
    df = T.summarize_fig5(fams, run_root=tmp_path / "models", ppl_root=tmp_path / "ppl")
    fl = select(df, metric="final_loss", axis="params")
    assert dict(zip(fl["run"], fl["value"])) == pytest.approx({"yoco_s": 4.0, "yoco_m": 3.0, "yoco": 2.0,
                                                               "yocou_s": 2.5, "yocou": 1.5})
    assert dict(zip(fl["run"], fl["role"])) == {"yoco_s": "yoco", "yoco_m": "yoco", "yoco": "yoco",
                                                "yocou_s": "yocou", "yocou": "yocou"}
    assert one(df, run="yocou_s", metric="final_loss", axis="activated_params")["axis_value"] == 1e6
    assert one(df, run="yoco", metric="book.loss")["value"] == 2.5
    # loss 2.5 lies halfway between YOCO's 4M (3.0) and 16M (2.0) in log P: 8M; saving 1 - 2M / 8M
    run_s = T.fig5_derived_run("yocou_s", fams["yoco"])
    assert run_s == "yocou_s|yoco_s|yoco_m|yoco"
    assert one(df, run=run_s, metric="yoco_params_at_loss")["value"] == pytest.approx(8e6)
    assert one(df, run=run_s, metric="param_saving")["value"] == pytest.approx(0.75)
    assert one(df, run=run_s, metric="reached_reference_loss")["value"] == 1
    assert one(df, run=run_s, metric="param_saving")["role"] == "yocou|yoco"
    # loss 1.5 is below YOCO's whole ladder: no saving
    run_l = T.fig5_derived_run("yocou", fams["yoco"])
    assert one(df, run=run_l, metric="reached_reference_loss")["value"] == 0
    assert one(df, run=run_l, metric="param_saving") is None
    assert "code (1 document: stdlib/a.py)" in one(df, run="yoco", metric="final_loss", axis="params")["detail"]


def test_params_at_loss_interpolates_in_log_params() -> None:
    import pandas as pd

    ladder = pd.DataFrame({"params": [1e6, 4e6, 16e6], "loss": [4.0, 3.0, 2.0]})
    assert T.params_at_loss(ladder, 2.5) == pytest.approx(8e6)
    assert T.params_at_loss(ladder, 4.0) == pytest.approx(1e6)
    assert T.params_at_loss(ladder, 1.5) is None and T.params_at_loss(ladder, 4.5) is None


# ------------------------------------------------------------------------------------------------- Figure 6
def test_fig6_axis_is_the_runs_loop_count_not_the_role(tmp_path: Path) -> None:
    roles = {"T1": "yoco", "T2": "yocou_t2", "T9": "yocou"}  # T9: the role's name says nothing; the run has T = 3
    for (role, r), loops, loss in zip(roles.items(), ([1, 1], [2, 1], [3, 1]), (3.0, 2.75, 2.5)):
        _run(tmp_path, r, loops=loops, metrics=[(1, 64, 1e6, 5.0), (2, 128, 2e6, loss + 1)])
        _ppl(tmp_path, r, (loss + 0.25, 1.0), (loss - 0.25, 1.0))
    df = T.summarize_fig6(roles, run_root=tmp_path / "models", ppl_root=tmp_path / "ppl", alpha=1.0)
    fl = select(df, metric="final_loss")
    assert dict(zip(fl["role"], fl["axis_value"])) == {"T1": 1, "T2": 2, "T9": 3}
    assert set(fl["axis"]) == {"T"} and dict(zip(fl["role"], fl["value"])) == {"T1": 3.0, "T2": 2.75, "T9": 2.5}
    assert one(df, run="yocou", metric="book.loss")["value"] == 2.75
    ch = select(df, metric="final_loss_change")
    assert list(ch["role"]) == ["T2|T1", "T9|T2"] and _values(df, metric="final_loss_change") == [-0.25, -0.25]
    assert _values(df, run="yocou", metric="train_loss", axis="tokens") == [5.0, 3.5]


# ------------------------------------------------------------------------------------- held-out perplexity
def test_heldout_ppl_rows_and_ratios_to_the_transformer(tmp_path: Path) -> None:
    runs = {}
    for r, b, c in (("transformer", 40.0, 20.0), ("yoco", 30.0, 25.0)):
        runs[r] = _run(tmp_path, r)
        _ppl(tmp_path, r, (math.log(b), b), (math.log(c), c), code_docs=("stdlib/a.py", "stdlib/b.py"))
    df = T.summarize_heldout_ppl(runs, ppl_root=tmp_path / "ppl")
    y = select(df, role="yoco")
    assert dict(zip(y["metric"], y["value"])) == pytest.approx({"book.ppl": 30.0, "code.ppl": 25.0,
                                                               "loss.book": math.log(30), "loss.code": math.log(25)})
    assert dict(zip(y["metric"], y["n"])) == {"book.ppl": 100, "loss.book": 100, "code.ppl": 60, "loss.code": 60}
    assert dict(zip(y["metric"], y["unit"])) == {"book.ppl": "ppl", "code.ppl": "ppl", "loss.book": "nats",
                                                 "loss.code": "nats"}
    assert one(df, role="yoco|transformer", metric="book.ppl_ratio")["value"] == pytest.approx(0.75)
    assert one(df, role="yoco|transformer", metric="code.ppl_ratio")["value"] == pytest.approx(1.25)
    assert one(df, role="transformer|transformer", metric="book.ppl_ratio")["value"] == 1.0
    assert one(df, role="yoco", metric="code.ppl")["n_docs"] == 2


def _ppl_new(root: Path, name: str, nll: float, se: float, n_tokens: int = 100, n_bytes: int = 400) -> None:
    """A ppl JSON with today's fields (nats_per_token, bits_per_byte, n_bytes, stderr_nats) in both splits."""
    s = {"nll": nll, "nats_per_token": nll, "ppl": math.exp(nll), "n_tokens": n_tokens, "seq_len": 64,
         "max_tokens": 1000, "max_tokens_per_doc": None, "stderr_nats": se, "n_bytes": n_bytes,
         "bits_per_byte": nll * n_tokens / math.log(2) / n_bytes, "docs": [{"id": "d", "n_tokens": n_tokens,
                                                                           "nll": nll}]}
    p = root / "ppl" / f"{name}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    code = {**s, "nll": nll + 1, "nats_per_token": nll + 1, "ppl": math.exp(nll + 1),
            "bits_per_byte": (nll + 1) * n_tokens / math.log(2) / n_bytes}
    p.write_text(json.dumps({"splits": {"heldout_book": s, "heldout_code": code}}))


def test_heldout_ppl_replicas_bytes_and_baselines(tmp_path: Path) -> None:
    for r, seed, nll in (("transformer", 0, 4.0), ("transformer_seed1", 1, 4.2), ("yocou", 0, 3.0),
                         ("yocou_seed1", 1, 3.5)):
        _run(tmp_path, r, seed=seed)
        _ppl_new(tmp_path, r, nll, se=0.02)
    bl = {"models": {"unigram": {}, "bigram_kn": {"discount": 0.7, "discount_lower": 0.6},
                     "bigram_kn_budget": {"discount": 0.8, "n_windows": 40}},
          "budget": {"steps": 10, "batch_size": 4, "seq_len": 64, "seed": 0},
          "splits": {f"heldout_{m}": {"n_tokens": 100, "n_docs": 1, "seq_len": 64, "max_tokens": 1000,
                                      **{k: {"nats_per_token": v, "ppl": math.exp(v), "n_tokens": 100,
                                             "n_bytes": 400, "stderr_nats": 0.1,
                                             "bits_per_byte": v * 100 / math.log(2) / 400}
                                         for k, v in (("unigram", 6.0), ("bigram_kn", 5.0),
                                                      ("bigram_kn_budget", 5.5))}}
                     for m in ("book", "code")}}
    (tmp_path / "ppl" / "baselines.json").write_text(json.dumps(bl))
    cfg = {"core_variants": ["transformer", "yocou"], "studies": {},
           "replicas": {"transformer": ["transformer", "transformer_seed1"], "yocou": ["yocou", "yocou_seed1"]}}
    df = T.summarize_study("heldout_ppl", cfg, run_root=tmp_path / "models", ppl_root=tmp_path / "ppl",
                           baselines=tmp_path / "ppl" / "baselines.json")
    lb = select(df, role="yocou", metric="loss.book")
    assert list(lb["run"]) == ["yocou", "yocou_seed1"] and list(lb["seed"]) == [0, 1]
    assert list(lb["value"]) == [3.0, 3.5] and list(lb["stderr"]) == [0.02, 0.02] and set(lb["unit"]) == {"nats"}
    assert one(df, run="yocou_seed1", metric="loss.code")["value"] == 4.5
    # bits/byte: 3.5 nats/token * 100 tokens / ln 2 / 400 bytes; its stderr scaled alike
    b = one(df, run="yocou_seed1", metric="bpb.book")
    assert b["value"] == pytest.approx(3.5 * 100 / math.log(2) / 400) and b["unit"] == "bits/byte"
    assert b["stderr"] == pytest.approx(0.02 * 100 / math.log(2) / 400)
    # ratios pair replica k with the Transformer's replica k: exp(3.5) / exp(4.2)
    assert one(df, run="yocou_seed1|transformer_seed1", metric="book.ppl_ratio")["value"] == pytest.approx(
        math.exp(-0.7))
    for role, v in (("unigram", 6.0), ("bigram_kn", 5.0), ("bigram_kn_budget", 5.5)):
        r = one(df, role=role, metric="loss.code")
        assert r["value"] == v and r["seed"] == NO_SEED and r["run"] == role and r["stderr"] == 0.1
        assert one(df, role=role, metric="bpb.book")["value"] == pytest.approx(v * 100 / math.log(2) / 400)
        assert one(df, role=role, metric="book.ppl")["value"] == pytest.approx(math.exp(v))
    assert "D = 0.700" in one(df, role="bigram_kn", metric="loss.book")["detail"]
    assert "40 windows of 64 + 1 tokens" in one(df, role="bigram_kn_budget", metric="loss.book")["detail"]

    # the rendered table: per role the mean loss and bits/byte over seeds with their std, then the baselines
    from yocou.results.render.heldout_ppl import table

    runs = T.summarize_runs({r: tmp_path / "models" / r for r in ("transformer", "yocou")})
    t = table(df, runs).set_index("variant")
    assert t.loc["yocou", "seeds"] == 2
    assert t.loc["yocou", "heldout_book loss (nats)"] == pytest.approx(3.25)
    assert t.loc["yocou", "heldout_book loss sd"] == pytest.approx(math.sqrt(0.125))  # std(3.0, 3.5), ddof 1
    assert t.loc["yocou", "heldout_code bits/byte"] == pytest.approx(4.25 * 100 / math.log(2) / 400)
    assert t.loc["yocou", "heldout_book ppl"] == pytest.approx(math.exp(3.25))
    assert t.loc["unigram", "heldout_book loss (nats)"] == 6.0 and t.loc["bigram_kn", "heldout_code loss (nats)"] == 5.0
    assert list(t.index) == ["transformer", "yocou", "unigram", "bigram_kn", "bigram_kn_budget"]
    # the rendered notes name each split's documents once, not once per seed replica
    from yocou.results.render.heldout_ppl import render

    write_tidy(df, tmp_path / "tidy" / "heldout_ppl")
    write_tidy(runs, tmp_path / "tidy" / "runs")
    render(tmp_path / "tidy" / "heldout_ppl.json", tmp_path / "tidy" / "runs.json", out=tmp_path / "hp", scale="t")
    md = (tmp_path / "hp.md").read_text(encoding="utf-8")
    assert md.count("document(s)") == 2 and md.count("seq_len 64") == 2, md
    # a baselines.json without the budget bigram (fitted without --budget-*) still reads; without bigram_kn not
    for sp in bl["splits"].values():
        del sp["bigram_kn_budget"]
    (tmp_path / "ppl" / "baselines.json").write_text(json.dumps(bl))
    df2 = T.summarize_study("heldout_ppl", cfg, run_root=tmp_path / "models", ppl_root=tmp_path / "ppl",
                            baselines=tmp_path / "ppl" / "baselines.json")
    assert "bigram_kn_budget" not in set(df2["role"]) and "bigram_kn" in set(df2["role"])
    for sp in bl["splits"].values():
        del sp["bigram_kn"]
    (tmp_path / "ppl" / "baselines.json").write_text(json.dumps(bl))
    with pytest.raises(ResultFileError, match="bigram_kn"):
        T.summarize_study("heldout_ppl", cfg, run_root=tmp_path / "models", ppl_root=tmp_path / "ppl",
                          baselines=tmp_path / "ppl" / "baselines.json")


def test_paper_wiki_ppl_ratio_is_the_printed_values_over_the_transformers() -> None:
    from yocou.results.reported import load_table

    t3 = load_table(3)
    wiki = t3[t3["column"] == "Wiki. ppl"].set_index("model")["value"]
    p = T.paper_wiki_ppl()
    assert p["YOCO"]["ppl"] == float(wiki["YOCO"])
    assert p["YOCO"]["ratio"] == pytest.approx(float(wiki["YOCO"]) / float(wiki["Transformer"]))


# ------------------------------------------------------------------------------------------------- Figure 4
def test_fig4_rows_per_split_and_length(tmp_path: Path) -> None:
    d = _run(tmp_path, "yocou", seed=3)
    curves = [{"length": 4, "cum_ppl": 50.0, "span_ppl": None, "n_docs": 2, "extrapolated": False},
              {"length": 8, "cum_ppl": 40.0, "span_ppl": 35.0, "n_docs": 2, "extrapolated": False},
              {"length": 16, "cum_ppl": 45.0, "span_ppl": 60.0, "n_docs": 2, "extrapolated": True}]
    res = {"train_seq_len": 8, "span": 4, "lengths": [4, 8, 16],
           "splits": {"book": {"n_docs": 2, "docs": [{"id": "milton/pl", "offset": 0}, {"id": "milton/pl",
                                                                                         "offset": 99}],
                               "curves": curves},
                      "code": {"n_docs": 1, "docs": [{"id": "stdlib/a.py", "offset": 0}],
                               "curves": [{**c, "n_docs": 1} for c in curves]}}}
    (tmp_path / "longppl").mkdir()
    (tmp_path / "longppl" / "yocou.json").write_text(json.dumps(res))
    df = T.summarize_fig4({"yocou": d}, longppl_root=tmp_path / "longppl")
    assert _values(df, metric="book.cum_ppl") == [50.0, 40.0, 45.0]
    assert list(select(df, metric="book.span_ppl")["axis_value"]) == [8, 16]  # no full span at 4 tokens
    assert set(df["axis"]) == {"seq_len"} and set(df["seed"]) == {3} and set(df["unit"]) == {"ppl"}
    assert list(select(df, metric="book.cum_ppl")["extrapolated"]) == [False, False, True]
    assert set(select(df, split="book")["n"]) == {2} and set(select(df, split="code")["n"]) == {1}
    assert one(df, metric="book.cum_ppl", axis_value=8)["detail"] == "milton/pl"

    # with a seed replica under the same role (role -> [base, replica]): both runs' rows, each with its seed;
    # the figure's table keeps every run, its line is the mean over the seeds
    d1 = _run(tmp_path, "yocou_seed1", seed=4)
    (tmp_path / "longppl" / "yocou_seed1.json").write_text(json.dumps(
        {**res, "splits": {k: {**v, "curves": [{**c, "cum_ppl": c["cum_ppl"] + 10} for c in v["curves"]]}
                           for k, v in res["splits"].items()}}))
    df2 = T.summarize_fig4({"yocou": [d, d1]}, longppl_root=tmp_path / "longppl")
    assert set(df2["seed"]) == {3, 4} and set(df2["role"]) == {"yocou"}
    assert _values(df2, run="yocou_seed1", metric="book.cum_ppl") == [60.0, 50.0, 55.0]
    from yocou.results.render import fig4

    write_tidy(df2, tmp_path / "tidy" / "fig4")
    t = fig4.render(tmp_path / "tidy" / "fig4.json", fig=tmp_path / "f4", data=tmp_path / "f4_data", scale="t")
    assert len(t) == 2 * 2 * 3 and set(t["seed"]) == {3, 4}      # 2 runs x 2 splits x 3 lengths
    md = (tmp_path / "f4_data.md").read_text(encoding="utf-8")
    assert "YOCO-U 2" in md and "45.00→50.00" in md              # book at the training length 8 -> 16: means
    assert (tmp_path / "f4.png").stat().st_size > 0


# ------------------------------------------------------------------------------------------------- Figure 8
def test_fig8_rows_and_stage_means(tmp_path: Path) -> None:
    d = _run(tmp_path, "yocou", seed=1)
    apps = [{"index": i + 1, "kind": k, "stage": s, "loop": t, "layer": l, "window": w}
            for i, (k, s, t, l, w) in enumerate((("self", 0, 0, 0, 4), ("self", 0, 0, 1, 4), ("self", 0, 1, 0, 4),
                                                 ("self", 0, 1, 1, 4), ("cross", 1, 0, 0, None)))]
    split = {"n_tokens": 10, "n_windows": 2, "n_docs": 1, "docs": ["milton/pl"]}
    res = {"seq_len": 8, "device": "cpu", "applications": apps,
           "splits": {"book": {**split, "distance": [0.6, 0.4, 0.3, 0.1, 0.5]},
                      "code": {**split, "docs": ["stdlib/a.py"], "distance": [0.4, 0.2, 0.1, 0.1, 0.3]}},
           "all": {"n_tokens": 20, "distance": [0.5, 0.3, 0.2, 0.1, 0.4]}}
    (tmp_path / "angular").mkdir()
    (tmp_path / "angular" / "yocou.json").write_text(json.dumps(res))
    df = T.summarize_fig8({"yocou": d}, angular_root=tmp_path / "angular")
    assert _values(df, metric="angular_distance") == [0.5, 0.3, 0.2, 0.1, 0.4]
    assert _values(df, metric="code.angular_distance") == [0.4, 0.2, 0.1, 0.1, 0.3]
    assert list(select(df, metric="angular_distance")["axis_value"]) == [1, 2, 3, 4, 5]
    assert one(df, metric="angular_distance", axis_value=3)["detail"] == "self stage 0 loop 2 layer 1"
    assert set(select(df, metric="angular_distance")["n"]) == {20}
    m = select(df, metric="stage_mean_angular_distance")
    # stage 0 loop 1: (0.5 + 0.3) / 2; loop 2: (0.2 + 0.1) / 2; stage 1 (the cross-decoder, once): 0.4
    assert list(zip(m["axis_value"], m["axis2_value"])) == [(0, 1), (0, 2), (1, 1)]
    assert list(m["value"]) == pytest.approx([0.4, 0.15, 0.4])
    assert list(m["stage_loops"]) == [2, 2, 1]


# -------------------------------------------------------------------------------------- dispatch + round trip
def test_summarize_study_resolves_roles_from_the_config_and_round_trips(tmp_path: Path) -> None:
    runs = _fig2_runs(tmp_path, [3.5, 2.5, 2.0, 1.5])
    cfg = {"core_variants": ["yoco", "yocou"], "studies": {}}
    df = T.summarize_study("fig2", cfg, run_root=tmp_path / "models")
    assert set(df["role"]) == {"yoco", "yocou", "yocou|yoco"}
    paths = write_tidy(df, tmp_path / "tidy" / "fig2", config=cfg, inputs=[str(p) for p in runs.values()])
    for p in paths.values():
        back = read_tidy(p)
        assert len(back) == len(df)
        assert one(back, metric="token_saving")["value"] == pytest.approx(one(df, metric="token_saving")["value"])
    r = T.summarize_study("runs", {"runs": ["yoco", "yocou"]}, run_root=tmp_path / "models")
    assert set(r["run"]) == {"yoco", "yocou"}
    # a CSV cut mid-row (here: inside the last row's optional trailing columns, where every required field is
    # present) is refused, naming the file, instead of being read as a shorter table
    csv = paths["csv"] if isinstance(paths, dict) and "csv" in paths else next(p for p in paths.values()
                                                                              if str(p).endswith(".csv"))
    text = csv.read_text()
    csv.write_text(text[:-3])
    with pytest.raises(ResultFileError, match="does not end with a newline: truncated"):
        read_tidy(csv)
    with pytest.raises(ValueError, match="unknown"):
        T.summarize_study("table3", cfg, run_root=tmp_path)
    with pytest.raises(ValueError, match="ppl_root"):
        T.summarize_study("heldout_ppl", cfg, run_root=tmp_path / "models")


# ------------------------------------------------------------------------------- held-out curves and seeds
def _heldout_run(root: Path, name: str, seed: int, book: list[float], code: list[float], loops=(1, 1)) -> Path:
    """A run whose metrics.jsonl logs steps 1..4 (training loss 5 - step) and held-out loss at steps 2 and 4."""
    d = _run(root, name, seed=seed, loops=list(loops))
    rows = []
    for s in (1, 2, 3, 4):
        r = {"step": s, "tokens": 100 * s, "train_flops": 1000.0 * s, "loss": 5.0 - s}
        if s % 2 == 0:
            r["heldout_loss"] = {"book": book[s // 2 - 1], "code": code[s // 2 - 1]}
        rows.append(json.dumps(r))
    (d / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    return d


def test_fig2_heldout_curves_two_seeds_means_by_hand(tmp_path: Path) -> None:
    """Two seeds per core run: per-seed held-out rows at the eval steps only, the seed means (and min/max band)
    computed by hand, Figure 2's numbers per seed pair and on the mean curves."""
    _heldout_run(tmp_path, "yoco", 0, [4.0, 3.0], [5.0, 4.0])
    _heldout_run(tmp_path, "yoco_seed1", 1, [4.2, 3.2], [5.2, 4.2])
    _heldout_run(tmp_path, "yocou", 0, [3.8, 2.6], [4.8, 3.6])
    _heldout_run(tmp_path, "yocou_seed1", 1, [4.0, 3.0], [5.0, 4.0])
    config = {"core_variants": ["yoco", "yocou"], "variants": ["yoco", "yoco_seed1", "yocou", "yocou_seed1"]}
    df = T.summarize_study("fig2", config, run_root=tmp_path / "models")
    b = select(df, run="yoco_seed1", metric="heldout_loss.book", axis="tokens")
    assert list(b["axis_value"]) == [200, 400] and list(b["step"]) == [2, 4] and set(b["seed"]) == {1}
    assert set(select(df, run="yoco_seed1")["role"]) == {"yoco"}
    m = select(df, role="yoco", metric="heldout_loss.book.seed_mean", axis="tokens")
    assert list(m["value"]) == pytest.approx([4.1, 3.1]) and list(m["n"]) == [2, 2]
    assert list(m["seed_min"]) == [4.0, 3.0] and list(m["seed_max"]) == pytest.approx([4.2, 3.2])
    assert list(m["stderr"]) == pytest.approx([math.sqrt(0.02) / math.sqrt(2)] * 2)  # std (ddof 1) / sqrt(2)
    assert set(m["seed"]) == {NO_SEED} and set(m["run"]) == {"yoco"}
    mm = select(df, role="yoco", metric="heldout_loss.seed_mean", axis="train_flops")
    assert list(mm["value"]) == pytest.approx([(4.1 + 5.1) / 2, (3.1 + 4.1) / 2])
    assert list(select(df, role="yocou", metric="train_loss.seed_mean", axis="tokens")["value"]) == [4, 3, 2, 1]
    # numbers, seed 0 pair: YOCO's final held-out loss (3.0 + 4.0) / 2 = 3.5; YOCO-U: 4.3 at 200, 3.1 at 400 tokens:
    # reaches 3.5 at 200 + 200 * (4.3 - 3.5) / (4.3 - 3.1) tokens; gap at 4000 FLOPs: 3.5 - 3.1
    d0 = select(df, role="yocou|yoco", seed=0)
    t0 = 200 + 200 * 0.8 / 1.2
    assert one(d0, metric="tokens_to_reach")["value"] == pytest.approx(t0)
    assert one(d0, metric="loss_gap_at_equal_flops")["value"] == pytest.approx(0.4)
    assert "held-out" in one(d0, metric="loss_gap_at_equal_flops")["detail"]
    # seed 1 pair: YOCO 3.7 final; YOCO-U ends at 3.5: gap 0.2
    assert one(select(df, role="yocou|yoco", seed=1), metric="loss_gap_at_equal_flops")["value"] == pytest.approx(0.2)
    # mean curves: YOCO (4.6, 3.6), YOCO-U (4.4, 3.3): gap 0.3; reaches 3.6 at 200 + 200 * 0.8 / 1.1
    mc = select(df, role="yocou|yoco", seed=NO_SEED)
    assert one(mc, metric="loss_gap_at_equal_flops.seed_mean_curve")["value"] == pytest.approx(0.3)
    assert one(mc, metric="tokens_to_reach.seed_mean_curve")["value"] == pytest.approx(200 + 200 * 0.8 / 1.1)


def test_fig6_two_seeds_means_by_hand(tmp_path: Path) -> None:
    """Figure 6 with two seeds per T: final held-out loss per seed from the ppl JSON's nats_per_token, the seed
    means, and the per-seed change between consecutive T."""
    for name, seed, loops, book, code in (("t1", 0, (1, 1), 3.0, 4.0), ("t1_seed1", 1, (1, 1), 3.2, 4.4),
                                          ("t2", 0, (2, 1), 2.8, 3.6), ("t2_seed1", 1, (2, 1), 3.0, 4.0)):
        _heldout_run(tmp_path, name, seed, [book + 1, book], [code + 1, code], loops)
        p = _ppl(tmp_path, name, (99.0, 1.0), (99.0, 1.0))
        j = json.loads(p.read_text())
        j["splits"]["heldout_book"]["nats_per_token"], j["splits"]["heldout_code"]["nats_per_token"] = book, code
        p.write_text(json.dumps(j))
    config = {"studies": {"fig6": {"T1": "t1", "T2": "t2"}}, "variants": {"t1": {}, "t1_seed1": {}, "t2": {},
                                                                         "t2_seed1": {}}}
    df = T.summarize_study("fig6", config, run_root=tmp_path / "models", ppl_root=tmp_path / "ppl")
    assert _values(df, run="t1_seed1", metric="final_loss") == [pytest.approx(3.8)]
    m = select(df, metric="final_loss.seed_mean").sort_values("axis_value")
    assert list(m["axis_value"]) == [1, 2] and list(m["value"]) == pytest.approx([3.65, 3.35])
    assert list(m["n"]) == [2, 2] and list(m["run"]) == ["t1", "t2"]
    ch = select(df, metric="final_loss_change")
    assert dict(zip(ch["seed"], ch["value"])) == pytest.approx({0: 3.2 - 3.5, 1: 3.5 - 3.8})
    h = select(df, role="T2", metric="heldout_loss.code.seed_mean", axis="tokens")
    assert list(h["value"]) == pytest.approx([4.8, 3.8])
