"""The paper-shape efficiency study at smoke shapes (no timing is asserted): the pairs share one set of weights and
compute what separately built models compute; the study's rows have the formula's KV bytes, the bytes and FLOPs
the hardware functions give, memory refusals with their bytes, and resume; the summary's ratios and fractions
recomputed by hand from the raw rows; bad result files refused with one line; the target renders from a committed
measurement without planning it."""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import workflow_copy

from yocou.evaluation.bench import paper_shape as PS
from yocou.evaluation.bench.hardware import decode_read_bytes, prefill_flops
from yocou.model.accounting import kv_cache_bytes
from yocou.model.lm import LM
from yocou.results.summarize.paper_shape import read_raw, summarize_paper_shape
from yocou.utils.validation import FieldError

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "workflows/config/smoke.yaml"


@pytest.fixture(scope="module")
def cfgs():
    return PS.paper_shape_configs(SMOKE)


def _study(**kw) -> PS.PaperShapeConfig:
    base = {"decode_lens": (24, 40), "prefill_lens": (20, 32), "n_decode": 4, "repeats_decode": 2,
            "repeats_prefill": 2, "repeats_check": 2, "chunk_size": 16, "headroom_bytes": 0, "triad_elems": 4096,
            "matmul_n": 32, "limit_repeats": 2}
    return PS.study_config_from_dict({**base, **kw})


@pytest.fixture(scope="module")
def result(cfgs, tmp_path_factory):
    out = tmp_path_factory.mktemp("ps") / "raw.json"
    PS.run_study(cfgs, _study(), out, log=lambda s: None)
    return out


@pytest.mark.parametrize(("base", "looped"), PS.PAIRS)
def test_a_pair_shares_every_tensor_and_computes_what_separate_models_compute(cfgs, base: str, looped: str) -> None:
    a, b = PS.build_pair(cfgs[base], cfgs[looped], seed=3)
    ptrs = {p.data_ptr() for p in a.parameters()}
    assert all(p.data_ptr() in ptrs for p in b.parameters())
    assert sum(p.numel() for p in b.parameters()) == sum(p.numel() for p in a.parameters())
    # the looped model built on its own from the base's state dict (renamed by hand for RINS) gives the same logits
    ref = LM(cfgs[looped]).eval()
    sd = a.state_dict()
    if looped == "rins":  # stage 0 takes the Transformer's first layers, stage 1 the rest
        n0 = cfgs[looped].stages[0].n_layers
        ren = {}
        for k, v in sd.items():
            if k.startswith("stages.0."):
                i = int(k.split(".")[2])
                rest = ".".join(k.split(".")[3:])
                ren[f"stages.0.{i}.{rest}" if i < n0 else f"stages.1.{i - n0}.{rest}"] = v
            else:
                ren[k] = v
        sd = ren
    ref.load_state_dict(sd, strict=True)
    x = torch.randint(0, cfgs[base].vocab_size, (1, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(b(x).logits_BNV, ref(x).logits_BNV, rtol=0, atol=0)


@pytest.mark.slow
def test_the_study_rows_carry_the_formulas_bytes_and_flops(cfgs, result: Path) -> None:
    d = read_raw(result)
    rows = d["rows"]
    assert {(r["kind"], r["seq_len"]) for r in rows} == {("decode", 24), ("decode", 40), ("prefill", 20),
                                                         ("prefill", 32), ("decode_check", 32)}
    assert len(rows) == 4 * 2 + 4 * 2 + 4 * 2  # every variant: two decode, two prefill, a filled and a prefilled
    for r in rows:
        cfg = cfgs[r["variant"]]
        assert r["status"] == "measured" and len(r["seconds"]) == 2
        if r["kind"] in ("decode", "decode_check"):
            assert r["kv_bytes_measured"] == r["kv_bytes_formula"] == kv_cache_bytes(cfg, r["seq_len"],
                                                                                     dtype=torch.float32)
        if r["kind"] == "decode":
            n0 = r["seq_len"] - 4
            want = statistics.mean(decode_read_bytes(cfg, n0 + i, weights="per_application")["total"]
                                   for i in range(4))
            assert r["read_bytes_per_application"] == pytest.approx(want)
            assert r["tokens"] == 4
        if r["kind"] == "prefill":
            assert r["prompt_len"] == r["seq_len"] - 4
            assert r["flop"] == prefill_flops(cfg, r["prompt_len"])["total"]
    assert [lim["where"] for lim in d["limits"]] == ["start", "after transformer+rins", "after yoco+yocou"]
    assert d["provenance"]["git"]["commit"]


def test_a_cache_that_does_not_fit_is_a_row_with_its_bytes(cfgs, tmp_path: Path) -> None:
    out = tmp_path / "raw.json"
    huge = 1 << 62
    PS.run_study(cfgs, _study(decode_lens=(24,), prefill_lens=(20,), headroom_bytes=huge), out, log=lambda s: None)
    d = read_raw(out)
    nf = [r for r in d["rows"] if r["kind"] == "decode"]
    assert len(nf) == 4 and all(r["status"] == "not_fitted" for r in nf)
    for r in nf:
        assert r["needs_bytes"] == kv_cache_bytes(cfgs[r["variant"]], 24, dtype=torch.float32) + huge
    with pytest.raises(ValueError, match="no measured decode row"):
        summarize_paper_shape(out)


def test_an_interrupted_study_resumes_with_the_phases_it_finished(cfgs, tmp_path: Path) -> None:
    out = tmp_path / "raw.json"
    sc = _study(decode_lens=(24,), prefill_lens=(20,))

    class Stop(Exception):
        pass

    def stop_at_second_pair(msg: str) -> None:
        if msg.startswith("built yoco"):
            raise Stop

    with pytest.raises(Stop):
        PS.run_study(cfgs, sc, out, log=stop_at_second_pair)
    partial = json.loads((tmp_path / "raw.json.partial.json").read_text())
    assert not out.exists() and "transformer+rins:decode:24" in partial["done"]
    first = [r for r in partial["rows"] if r["variant"] in ("transformer", "rins")]
    logs: list[str] = []
    PS.run_study(cfgs, sc, out, log=logs.append)
    d = read_raw(out)
    assert any(s.startswith("resuming") for s in logs) and not any(s.startswith("built transformer") for s in logs)
    assert [r for r in d["rows"] if r["variant"] in ("transformer", "rins")] == first  # kept, not remeasured
    assert not (tmp_path / "raw.json.partial.json").exists()


def test_the_summary_recomputes_from_the_raw_rows(result: Path) -> None:
    d = json.loads(result.read_text())
    df = summarize_paper_shape(result)
    bw = statistics.median(lim["triad"]["bytes_per_s"] for lim in d["limits"])
    pk = statistics.median(lim["matmul"]["flop_per_s"] for lim in d["limits"])
    raw = {(r["variant"], r["kind"], r["seq_len"]): r for r in d["rows"] if r["kind"] != "decode_check"}

    def one(metric: str, role: str, n: int) -> float:
        v = df[(df["metric"] == metric) & (df["role"] == role) & (df["axis_value"] == n)]["value"]
        assert len(v) == 1, (metric, role, n)
        return float(v.iloc[0])

    for (v, kind, n), r in raw.items():
        tps = r["tokens"] / statistics.median(r["seconds"])
        assert one(f"{kind}_tokens_per_s", v, n) == pytest.approx(tps)
        if kind == "decode":
            assert one("decode_bandwidth_fraction", v, n) == pytest.approx(r["read_bytes_per_application"] * tps / bw)
        else:
            assert one("prefill_peak_fraction", v, n) == pytest.approx(r["flop"] * tps / r["tokens"] / pk)
    for kind, n in (("decode", 40), ("prefill", 32)):
        ra, rb = raw["yocou", kind, n], raw["yoco", kind, n]
        want = (ra["tokens"] / statistics.median(ra["seconds"])) / (rb["tokens"] / statistics.median(rb["seconds"]))
        assert one(f"{kind}_ratio", "yocou|yoco", n) == pytest.approx(want)
    # the paper's ratio from its printed Table 9 cells (2410 and 3356 tokens/s at 8K)
    p = df[(df["metric"] == "paper.decode_ratio") & (df["role"] == "yocou|yoco") & (df["axis_value"] == 8192)]
    assert float(p["value"].iloc[0]) == pytest.approx(2410 / 3356)
    chk = df[df["metric"] == "check_kv_bytes_equal"]
    assert len(chk) == 4 and (chk["value"] == 1).all()


def _write(tmp: Path, d) -> Path:
    p = tmp / "bad.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d["rows"].append(dict(d["rows"][0])), "a second row"),
    (lambda d: d["rows"][0].update(status="fine"), "status must be"),
    (lambda d: d["rows"][0].update(seconds=[-1.0, 2.0]), "positive finite"),
    (lambda d: d["rows"][0].update(seconds=[float("nan")]), "positive finite"),
    (lambda d: d["rows"][0].update(variant="gpt"), "expected a variant"),
    (lambda d: d["rows"][0].update(seq_len=0), "seq_len"),
    (lambda d: d.update(limits=[]), "no limit measurements"),
    (lambda d: d["limits"][0]["triad"].update(bytes_per_s=0), r"limits\[0\]"),
    (lambda d: d.pop("rows"), "'rows' and 'limits'"),
])
def test_bad_result_files_are_refused_naming_the_file(result: Path, tmp_path: Path, edit, match: str) -> None:
    d = json.loads(result.read_text())
    edit(d)
    p = _write(tmp_path, d)
    with pytest.raises(ValueError, match=match) as e:
        read_raw(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_a_cache_of_other_bytes_than_the_formula_is_refused(result: Path, tmp_path: Path) -> None:
    d = json.loads(result.read_text())
    next(r for r in d["rows"] if r["kind"] == "decode")["kv_bytes_measured"] += 2
    with pytest.raises(ValueError, match="formula"):
        summarize_paper_shape(_write(tmp_path, d))


def test_the_renderer_draws_and_writes_the_tables(result: Path, tmp_path: Path) -> None:
    from yocou.results.render.paper_shape import render
    from yocou.results.tidy import write_tidy

    tidy = write_tidy(summarize_paper_shape(result), tmp_path / "tidy" / "efficiency_paper_shape")["csv"]
    render(tidy, None, tmp_path / "fig.png", tmp_path / "ratios.csv", tmp_path / "rows.csv")
    assert (tmp_path / "fig.png").stat().st_size > 10_000 and (tmp_path / "fig.pdf").is_file()
    md = (tmp_path / "rows.md").read_text()
    assert "Check at N = 32, YOCO-U" in md and "GB/s triad" in md
    ratios = (tmp_path / "ratios.csv").read_text().splitlines()
    assert ratios[0].startswith("kind,ratio,seq_len,ours,ours_spread,paper,paper_mean")


def test_bad_study_configs_name_the_field() -> None:
    for extra, field in (({"repeat": 3}, "repeat"), ({"decode_lens": [4], "n_decode": 8}, "decode_lens"),
                         ({"headroom_bytes": -1}, "headroom_bytes"), ({"dtype": "fp8"}, "dtype"),
                         ({"decode_batches": [2, 2]}, "decode_batches")):
        with pytest.raises(FieldError) as e:
            PS.study_config_from_dict({"decode_lens": [16], "prefill_lens": [16], **extra})
        assert e.value.field == f"PaperShapeConfig.{field}"


@pytest.mark.slow
def test_the_target_renders_from_a_committed_measurement_without_planning_it(tmp_path: Path) -> None:
    wf = workflow_copy(tmp_path)
    (wf / "results/paper_shape").mkdir(parents=True)
    for f in ("raw.json", "measure_benchmark.tsv"):
        shutil.copy(ROOT / "results/paper_shape" / f, wf / "results/paper_shape" / f)
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "efficiency_paper_shape"],
                         cwd=wf, capture_output=True, text=True, timeout=600, check=False)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-2000:]
    assert "paper_shape_summarize" in out and "paper_shape_render" in out
    assert "rule paper_shape_measure" not in out
    (wf / "results/paper_shape/raw.json").unlink()  # without the measurement it is planned
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "efficiency_paper_shape"],
                         cwd=wf, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0 and "rule paper_shape_measure" in res.stdout + res.stderr


@pytest.mark.slow
def test_a_fresh_clones_checkout_order_does_not_plan_the_committed_measurements(tmp_path: Path) -> None:
    """Configs checked out after the committed raw.json files (newer mtimes) must not make reproduce_all measure
    the paper-shape study or its batched decode again; without a measurement, it is planned."""
    wf = workflow_copy(tmp_path)
    for f in ("raw.json", "measure_benchmark.tsv", "batched/raw.json", "batched/measure_benchmark.tsv"):
        (wf / "results/paper_shape" / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "results/paper_shape" / f, wf / "results/paper_shape" / f)
    later = (wf / "results/paper_shape/raw.json").stat().st_mtime + 3600
    for f in ("workflows/config/paper.yaml", "workflows/studies/paper_shape.yaml",
              "workflows/studies/paper_shape_batched.yaml"):
        os.utime(wf / f, (later, later))

    def planned() -> str:
        res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "mode=compute",
                              "--", "results/paper_shape/raw.json", "results/paper_shape/batched/raw.json"],
                             cwd=wf, capture_output=True, text=True, timeout=600, check=False)
        assert res.returncode == 0, (res.stdout + res.stderr)[-2000:]
        return res.stdout + res.stderr

    out = planned()
    assert "rule paper_shape_measure:" not in out and "rule paper_shape_batched_measure:" not in out
    (wf / "results/paper_shape/batched/raw.json").unlink()
    out = planned()
    assert "rule paper_shape_batched_measure:" in out and "rule paper_shape_measure:" not in out


def test_a_bf16_study_has_bf16_caches_and_bytes(cfgs, tmp_path: Path) -> None:
    out = tmp_path / "raw.json"
    PS.run_study(cfgs, _study(decode_lens=(24,), prefill_lens=(20,), dtype="bf16"), out, log=lambda s: None)
    d = read_raw(out)
    for r in d["rows"]:
        if r["kind"] == "decode":
            cfg = cfgs[r["variant"]]
            assert r["kv_bytes_measured"] == kv_cache_bytes(cfg, 24, dtype=torch.bfloat16)
            assert r["weight_bytes_once"] == decode_read_bytes(cfg, 20, dtype="bf16")["weights"]
            assert r["weight_bytes_once"] * 2 == decode_read_bytes(cfg, 20, dtype="fp32")["weights"]
    assert d["limits"][0]["matmul"]["dtype"] == "bfloat16"
    df = summarize_paper_shape(out)
    assert set(df["dtype"]) == {"bf16"} and "bf16" in df["device_label"].iloc[0]


def test_the_audit_judges_the_committed_measurement_as_measured_at_the_paper_shape(tmp_path: Path) -> None:
    """The v.PS rows read results/paper_shape/tidy beside any scale's results folder; beside one without it they
    are "not run"."""
    from yocou.results.audit.claims import load_sources
    from yocou.results.audit.verdicts import INCONCLUSIVE, NOT_RUN, reproduce
    from yocou.results.tidy import write_tidy

    src = load_sources()
    res = tmp_path / "results"
    write_tidy(summarize_paper_shape(ROOT / "results/paper_shape/raw.json"),
               res / "paper_shape/tidy/efficiency_paper_shape")
    (res / "smoke/tidy").mkdir(parents=True)
    every = {v.id: v for v in reproduce(src, res / "smoke", "smoke") if v.id.startswith("v.PS.")}
    batched = {k: v for k, v in every.items() if k.startswith(("v.PS.T9.B8.", "v.PS.T9.B4."))}
    got = {k: v for k, v in every.items() if k not in batched}
    assert len(got) == 10 and len(batched) == 5
    assert all(v.qualifier == NOT_RUN for v in batched.values())   # results/paper_shape/batched/tidy is not there
    for v in got.values():
        assert v.qualifier != NOT_RUN and "CPU, 1.3B shape, fp32" in v.message, v
    # not capped at smoke: the measurement is at the paper's shape whatever the scale
    assert sum(v.verdict != INCONCLUSIVE for v in got.values()) >= 5
    raw = json.loads((ROOT / "results/paper_shape/raw.json").read_text())["rows"]

    def decode_rate(variant: str) -> float:  # from the raw rows by hand: tokens over the median seconds
        r = next(r for r in raw if r["variant"] == variant and r["kind"] == "decode" and r["seq_len"] == 8192)
        return r["tokens"] / statistics.median(r["seconds"])

    yu = got["v.PS.T9.YOCO-U_over_YOCO.8192"]
    assert yu.effect == pytest.approx(math.log(decode_rate("yocou") / decode_rate("yoco")))
    empty = tmp_path / "elsewhere" / "tiny"
    (empty / "tidy").mkdir(parents=True)
    assert all(v.qualifier == NOT_RUN for v in reproduce(src, empty, "tiny") if v.id.startswith("v.PS."))


def test_the_audit_reads_the_batched_decode_at_its_stated_batch(tmp_path: Path) -> None:
    """The v.PS.T9.B* rows read results/paper_shape/batched/tidy: within a block the log of the tokens/s ratio at
    that batch, across blocks the log of the ratio of tokens/s per GB/s of the triad measured beside each row,
    both recomputed here from the committed raw rows by hand."""
    from yocou.results.audit.claims import load_sources
    from yocou.results.audit.verdicts import NOT_RUN, reproduce
    from yocou.results.summarize.paper_shape import summarize_batched
    from yocou.results.tidy import write_tidy

    raw_path = ROOT / "results/paper_shape/batched/raw.json"
    res = tmp_path / "results"
    write_tidy(summarize_batched(raw_path), res / "paper_shape/batched/tidy/efficiency_paper_shape_batched")
    (res / "tiny/tidy").mkdir(parents=True)
    got = {v.id: v for v in reproduce(load_sources(), res / "tiny", "tiny") if v.id.startswith("v.PS.T9.B")}
    assert len(got) == 5 and all(v.qualifier != NOT_RUN and "batch" in v.message for v in got.values()), got
    rows = json.loads(raw_path.read_text())["rows"]

    def rate(variant: str, n: int, b: int, per_triad: bool = False) -> float:
        r = next(r for r in rows if r["variant"] == variant and r["kind"] == "decode" and r["seq_len"] == n
                 and r["batch"] == b)
        tps = r["tokens"] / statistics.median(r["seconds"])
        return tps / (statistics.mean(r["triad_beside_bytes_per_s"]) / 1e9) if per_triad else tps

    assert got["v.PS.T9.B8.YOCO-U_over_YOCO.32768"].effect == pytest.approx(
        math.log(rate("yocou", 32768, 8) / rate("yoco", 32768, 8)))
    assert got["v.PS.T9.B4.YOCO_over_Transformer.32768"].effect == pytest.approx(
        math.log(rate("yoco", 32768, 4, True) / rate("transformer", 32768, 4, True)))


@pytest.mark.slow
def test_batched_decode_rows_carry_b_caches_and_the_bandwidth_beside(cfgs, tmp_path: Path) -> None:
    """Decode at B > 1: each row's cache holds B sequences (B times the formula's bytes, measured), reads
    the weights once per step and B sequences' keys and values, counts B tokens a step, and has the triad bandwidth
    measured before and after its block; B = 1 keeps its old phase name (a resumed study does not redo it)."""
    out = tmp_path / "raw.json"
    sc = _study(decode_lens=(24,), prefill_lens=(20,), decode_batches=[1, 3], triad_beside=True)
    PS.run_study(cfgs, sc, out, log=lambda s: None)
    rows = [r for r in read_raw(out)["rows"] if r["kind"] == "decode"]
    assert sorted({r["batch"] for r in rows}) == [1, 3] and len(rows) == 8
    for r in rows:
        cfg, b = cfgs[r["variant"]], r["batch"]
        assert r["kv_bytes_measured"] == r["kv_bytes_formula"] == b * kv_cache_bytes(cfg, 24, dtype=torch.float32)
        want = statistics.mean(decode_read_bytes(cfg, 20 + i, weights="per_application", batch_size=b)["total"]
                               for i in range(4))
        assert r["read_bytes_per_application"] == pytest.approx(want)
        assert r["tokens"] == 4 * b and r["tokens_per_s"] == pytest.approx(4 * b / r["median_s"])
        assert len(r["triad_beside_bytes_per_s"]) == 2 and min(r["triad_beside_bytes_per_s"]) > 0
    assert PS._decode_phase_name("yoco", "yocou", 24, 1) == "yoco+yocou:decode:24"
    # the serving table reads them: one row per (variant, N, B), ratios measured within a block
    from yocou.evaluation.analysis.serving import measured_batched, measured_cpu

    raw = json.loads(out.read_text())
    mrows, ratios = measured_batched(raw, measured_cpu(raw, 2**30)[1])
    assert len(mrows) == 8 and len(ratios) == 3 * 2          # the serving pairs at B 1 and 3
    tps = {(r["variant"], r["batch"]): r["tokens_per_s"] for r in mrows}
    for r in ratios:
        a, b = r["ratio"].split(" / ")
        assert r["measured"] == pytest.approx(tps[(a, r["batch"])] / tps[(b, r["batch"])])
        assert r["same_block"] == (r["ratio"] != "yoco / transformer")
    assert all(0 < r["of_bandwidth_beside"] for r in mrows)
    # the tidy study the audit reads: each row's rate by hand, and its fraction of the bandwidth beside it
    from yocou.results.summarize.paper_shape import summarize_batched

    df = summarize_batched(out).set_index(["role", "metric", "axis_value"])["value"]
    for r in rows:
        key = (r["variant"], f"decode_tokens_per_s_b{r['batch']}", 24.0)
        assert df[key] == pytest.approx(r["tokens"] / statistics.median(r["seconds"]))
        bw = statistics.mean(r["triad_beside_bytes_per_s"])
        assert df[(r["variant"], f"decode_bandwidth_fraction_b{r['batch']}", 24.0)] == pytest.approx(
            r["read_bytes_per_application"] * df[key] / r["batch"] / bw)
    bare = json.loads(out.read_text())
    bare["rows"] = [{k: v for k, v in r.items() if k != "triad_beside_bytes_per_s"} for r in bare["rows"]]
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    with pytest.raises(ValueError, match=r"bare.json: rows\[\d+\] .*triad_beside_bytes_per_s"):
        summarize_batched(tmp_path / "bare.json")
    with pytest.raises(FieldError) as e:
        _study(decode_batches=[0])
    assert e.value.field == "PaperShapeConfig.decode_batches[0]"
