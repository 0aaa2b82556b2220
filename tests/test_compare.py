"""The audit's declared comparisons (eval/comparisons.yaml) and their one evaluator (yocou.results.audit.verdicts), on tidy
tables built here with known effects. The every-row run on tables written by the real summarize steps is in
tests/test_pipeline.py (the smoke run)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from yocou.results.audit.claims import cell_ref, load_sources
from yocou.results.audit.verdicts import (
    CENSORED,
    DIFFERS,
    INCONCLUSIVE,
    NOT_RUN,
    OPPOSITE,
    SAME,
    SAME_SIZE,
    load_comparisons,
    reproduce,
)
from yocou.results.evaldefs import eval_dir
from yocou.results.tidy import write_tidy

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def src():
    return load_sources()


def _write(res: Path, study: str, rows: list[dict]) -> None:
    write_tidy([{"study": study, **r} for r in rows], res / "tidy" / study)


def _by_id(src, res: Path, scale: str = "tiny") -> dict:
    return {v.id: v for v in reproduce(src, res, scale)}


def test_every_declared_row_expands_to_a_unique_verdict_and_no_table_means_not_run(src, tmp_path):
    rows = load_comparisons()
    # 97 ids of the original comparisons; + 6 held-out-loss rows (3 pairs x book, code), 6 best-rate rows (v.lr.*) and 8 Table 4
    # two-choice rows (4 pairs x S-NIAH-1, S-NIAH-2: v.T4.*.choice); 10 rows of the paper-shape study (v.PS.*: 2
    # prefill ratios, 7 decode ratios at one N, the Transformer's fall against YOCO's) and 5 of its batched decode
    # (v.PS.T9.B8.*, v.PS.T9.B4.*: 4 at batch 8, 1 at batch 4); 6 GPU rows of the prepared check (v.GPU.*: 2 prefill
    # ratios, 4 decode ratios)
    assert len(rows) == len({r["id"] for r in rows}) == 97 + 6 + 6 + 8 + 10 + 5 + 6
    assert sum(r["id"].startswith("v.PS.") and r.get("results") == "paper_shape" for r in rows) == 10
    assert sum(r["id"].startswith(("v.PS.T9.B8.", "v.PS.T9.B4.")) and r.get("results") == "paper_shape/batched"
               for r in rows) == 5
    assert sum(r["id"].startswith("v.T4.") and r["id"].endswith(".choice") for r in rows) == 8
    got = reproduce(src, tmp_path, "tiny")
    assert [v.id for v in got] == [r["id"] for r in rows]
    assert all(v.verdict == INCONCLUSIVE and v.qualifier == NOT_RUN for v in got)
    # the paper's side is computed even when ours is missing: Table 3, YOCO against Transformer, PIQA
    piqa = next(v for v in got if v.id == "v.T3.YOCO_vs_Transformer.PIQA")
    pa, pb = src.num(cell_ref(3, "YOCO", "PIQA")), src.num(cell_ref(3, "Transformer", "PIQA"))
    assert f"({pa - pb:+.3g})" in piqa.paper and cell_ref(3, "YOCO", "PIQA") in piqa.claims


def test_downstream_difference_with_seeds_and_items(src, tmp_path):
    """Three seeds of YOCO-U and YOCO on PIQA: the effect is the mean difference in points, its se the spread over
    seeds; with one seed the se is lm-eval's item stderr."""
    rows = []
    for seed in (0, 1, 2):
        for role, base in (("yoco", 0.40), ("yocou", 0.43)):
            rows.append(dict(run=role, role=role, seed=seed, metric="piqa.acc", value=base + 0.001 * seed,
                             stderr=0.02, n=150, unit="fraction"))
    _write(tmp_path, "table5", rows)
    v = _by_id(src, tmp_path)["v.T5.YOCO-U_vs_YOCO.PIQA"]
    paper = src.num(cell_ref(5, "YOCO-U", "PIQA")) - src.num(cell_ref(5, "YOCO", "PIQA"))   # +0.76 points
    assert v.n_seeds == 3 and v.evidence == "eval"
    assert "(+3)" in v.ours and v.verdict == SAME and "size differs" in v.qualifier, (v, paper)
    # one seed: lm-eval's stderr (2 points each side) -> se = hypot(2, 2) = 2.83 points; +3 is within 2 se
    _write(tmp_path, "table5", [r for r in rows if r["seed"] == 0])
    v = _by_id(src, tmp_path)["v.T5.YOCO-U_vs_YOCO.PIQA"]
    assert v.verdict == INCONCLUSIVE and "within 2 standard errors" in v.qualifier
    assert f"±{math.hypot(2, 2):.3g}" in v.spread


def test_perplexity_columns_use_the_relative_decrease_and_floors_are_inconclusive(src, tmp_path):
    rows = [dict(run=r, role=r, seed=0, metric="heldout_prose.word_perplexity", value=v, n=12, unit="ppl")
            for r, v in (("yoco", 90.0), ("transformer", 100.0))]
    rows += [dict(run=r, role=r, seed=0, metric="lambada.acc", value=0.0, stderr=0.0, n=150, unit="fraction")
             for r in ("yoco", "transformer")]
    _write(tmp_path, "table3", rows)
    got = _by_id(src, tmp_path)
    wiki = got["v.T3.YOCO_vs_Transformer.Wiki. ppl"]
    assert "(+10.00%)" in wiki.ours and wiki.evidence == "training"        # no item stderr: one seed decides nothing
    assert wiki.verdict == INCONCLUSIVE and wiki.qualifier.startswith("one seed, no interval")
    # no held-out loss or bigram in these tables: the regime is unknown, said, and the row decided without it
    lmb = got["v.T3.YOCO_vs_Transformer.LMB. acc"]
    assert lmb.qualifier.startswith("at the floor for both (no signal); regime unknown") and lmb.regime == "regime unknown"


def test_timing_log_ratio_mean_over_lengths_and_at_the_longest(src, tmp_path):
    """RINS at half the Transformer's prefill throughput at every length: log 0.5 against the paper's mean effect."""
    rows = []
    for role, k in (("transformer", 1.0), ("rins", 0.5), ("yoco", 4.0), ("yocou", 2.0)):
        for n in (1024, 2048, 4096):
            rows.append(dict(run=role, role=role, metric="prefill_tokens_per_s", axis="seq_len", axis_value=n,
                             value=1e4 * k, stderr=10.0, n=3, unit="tokens/s"))
    _write(tmp_path, "efficiency", rows)
    got = _by_id(src, tmp_path)
    v = got["v.T8.RINS_over_Transformer"]
    paper = sum(math.log(src.num(cell_ref(8, "RINS", n)) / src.num(cell_ref(8, "Transformer", n)))
                for n in (8192 * 2 ** k for k in range(6))) / 6
    assert f"({math.log(0.5):+.3g})" in v.ours and f"({paper:+.3g})" in v.paper
    assert v.verdict == SAME_SIZE and v.evidence == "timing"
    assert got["v.T8.YOCO_over_Transformer"].verdict == SAME                # size not comparable across scales
    assert "at 4K" in got["v.T8.YOCO_over_Transformer"].ours
    assert got["v.T8.YOCO-U_over_YOCO"].verdict == SAME_SIZE                 # log 0.5 vs the paper's log 0.345
    assert got["v.T9.RINS_over_Transformer"].qualifier == NOT_RUN            # no decode rows


def test_exponent_tolerance_and_kv_formula_equality(src, tmp_path):
    _write(tmp_path, "efficiency_derived", [
        dict(run=r, role=r, metric="exponent.prefill", value=v, unit="exponent")
        for r, v in (("transformer", 1.9), ("yoco", 1.3), ("rins", 1.2), ("yocou", 0.95))])
    _write(tmp_path, "kv", [dict(run="yoco", role="yoco", metric=m, axis="seq_len", axis_value=512, value=v,
                                 unit="bytes") for m, v in (("kv_bytes", 100.0), ("kv_bytes_formula", 101.0))])
    got = _by_id(src, tmp_path)
    assert got["v.T1.prefill.Transformer"].verdict == SAME_SIZE             # 1.9 within 0.25 of 2
    assert got["v.T1.prefill.YOCO"].verdict == SAME                          # linear side, 0.3 from 1
    assert got["v.T1.prefill.RINS"].verdict == OPPOSITE                      # below 1.5: not superlinear
    assert got["v.T1.prefill.YOCO-U"].verdict == SAME_SIZE
    # an equality has no direction: one that fails differs (not "opposite")
    assert got["v.kv.formula"].verdict == DIFFERS and got["v.kv.formula"].ours == "0 of 1 measured = formula"


def test_monotone_value_and_parity_rows(src, tmp_path):
    _write(tmp_path, "fig6", [dict(run=r, role=t, seed=s, metric="final_loss", axis="T", axis_value=k,
                                   value=5.0 - 0.1 * k + 0.01 * s, unit="nats")
                              for t, r, k in (("T1", "a", 1), ("T2", "b", 2), ("T3", "c", 3), ("T5", "d", 5))
                              for s in (0, 1)])
    _write(tmp_path, "fig2", [dict(run="u|y", role="yocou|yoco", seed=0, metric="reached_reference_loss", value=0,
                                   unit="flag")])
    _write(tmp_path, "fig5", [dict(run="u|y", role="yocou|yoco", seed=0, metric="reached_reference_loss", value=0,
                                   unit="flag")])
    _write(tmp_path, "runs", [dict(run="a", role="a", metric="seq_len", value=256, unit="tokens")])
    _write(tmp_path, "fig4", [dict(run=r, role=r, metric=f"{s}.cum_ppl", axis="seq_len", axis_value=n, value=v,
                                   unit="ppl")
                              for r in ("yocou", "rins") for s in ("book", "code")
                              for n, v in ((128, 50.0), (256, 40.0 if s == "book" else 60.0), (512, 10.0))])
    got = _by_id(src, tmp_path)
    assert "(improving at every step)" in got["v.fig6.loops"].ours and got["v.fig6.loops"].n_seeds == 2
    assert got["v.fig6.loops"].verdict == SAME                               # two seeds, direction only
    assert got["v.fig2.tokens_saved"].ours == "never reaches the reference"
    # never reached in a run as long as YOCO's: a saving below 0 (unreached_bound), which excludes the paper's 62%
    assert got["v.fig2.tokens_saved"].verdict == OPPOSITE and "excludes the paper's 0.62" in got["v.fig2.tokens_saved"].qualifier
    # a bound that does not exclude the paper's value (0.9 > 0.62): censored, not a decision
    text = (ROOT / "eval" / "comparisons.yaml").read_text(encoding="utf-8").replace("  unreached_bound: 0 ", "  unreached_bound: 0.9 ")
    (tmp_path / "comparisons.yaml").write_text(text, encoding="utf-8")
    wide = {v.id: v for v in reproduce(src, tmp_path, "tiny", comparisons=tmp_path / "comparisons.yaml")}
    assert wide["v.fig2.tokens_saved"].verdict == CENSORED and "not a decision" in wide["v.fig2.tokens_saved"].qualifier
    assert got["v.fig5.half_params"].qualifier == NOT_RUN                    # no rung reaches the reference loss
    # up to the training length (256, from tidy/runs): book falls, code rises -> mixed
    assert got["v.fig4.ppl_falls_with_length"].qualifier.startswith("mixed across models and splits")
    parity = got["v.fig4.yocou_vs_rins"]
    assert parity.verdict == INCONCLUSIVE and parity.qualifier.startswith("parity cannot be shown")
    # decided at the longest length within the training length (256), not at the extrapolated 512
    assert "at 256" in parity.ours and "512" not in parity.ours


@pytest.mark.parametrize("edit, message", [
    (lambda rows: rows[0].pop("study"), "row 0 (v.kv.formula): missing ['study']"),
    (lambda rows: rows[1].update(effect="ratio_of_logs"), "row 1 (v.kv.rins_over_transformer): effect must be"),
    (lambda rows: rows.append(dict(rows[1])), "duplicate ids ['v.kv.rins_over_transformer']"),
])
def test_a_malformed_comparison_row_is_a_one_line_error_naming_file_and_row(tmp_path, edit, message):
    rows = yaml.safe_load((eval_dir() / "comparisons.yaml").read_text(encoding="utf-8"))
    edit(rows)
    p = tmp_path / "comparisons.yaml"
    p.write_text(yaml.safe_dump(rows), encoding="utf-8")
    with pytest.raises(ValueError) as e:
        load_comparisons(p)
    assert str(e.value).startswith(f"{p}: ") and message in str(e.value) and "\n" not in str(e.value)


def test_a_corrupt_tidy_table_fails_naming_it(src, tmp_path):
    (tmp_path / "tidy").mkdir()
    pd.DataFrame([{"study": "table3", "run": "yoco"}]).to_csv(tmp_path / "tidy/table3.csv", index=False)
    with pytest.raises(ValueError, match=r"tidy/table3.csv: .*missing column"):
        reproduce(src, tmp_path, "tiny")
