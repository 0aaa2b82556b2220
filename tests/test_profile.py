"""Efficiency harness: blocked sliding-window attention against a masked reference, the profiler's
output (schema, KV bytes equal to the formula), exponent fits on synthetic data, the renderers.
Correctness only: speed goals live in benchmarks/ and the profile results, not in timed tests."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from yocou.evaluation.bench.profile import (
    ProfileConfig,
    fit_exponent,
    fit_linear,
    profile_config_from_dict,
    profile_variant,
)
from yocou.model import config as C
from yocou.model.accounting import kv_cache_bytes
from yocou.model.attention import position_mask, window_attend
from yocou.utils.validation import FieldError

KW = dict(vocab_size=64, d_model=32, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=64)


@pytest.mark.parametrize("n_hist,N,W,block", [(0, 1, 4, None), (0, 23, 6, None), (3, 17, 6, None), (6, 5, 6, None),
                                             (6, 40, 6, 4), (2, 9, 16, None), (0, 33, 8, 5), (5, 12, 6, 12)])
def test_window_attend_equals_masked_reference(n_hist: int, N: int, W: int, block: int | None) -> None:
    g = torch.Generator().manual_seed(n_hist * 100 + N)
    q = torch.randn(2, 4, N, 8, generator=g)
    k = torch.randn(2, 2, n_hist + N, 8, generator=g)
    v = torch.randn(2, 2, n_hist + N, 8, generator=g)
    got = window_attend(q, k, v, n_hist, W, block)
    kpos = torch.arange(n_hist + N)
    mask = position_mask(kpos[n_hist:], kpos, W)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-5)


def test_window_attend_rejects_wrong_key_count() -> None:
    with pytest.raises(ValueError, match="n_hist"):
        window_attend(torch.zeros(1, 4, 3, 8), torch.zeros(1, 2, 5, 8), torch.zeros(1, 2, 5, 8), 1, 4)


def _cfgs() -> list[C.ModelConfig]:
    return [C.transformer(n_layers=2, **KW), C.yoco(n_layers=2, window=8, **KW),
            C.yocou(n_layers=2, window=8, n_loops=3, **KW), C.rins(n_layers=2, n_loops=2, **KW)]


@pytest.mark.parametrize("cfg", _cfgs(), ids=lambda c: c.name)
def test_profile_rows_schema_and_kv_bytes_equal_formula(cfg: C.ModelConfig) -> None:
    pc = ProfileConfig(seq_lens=(24, 40), n_decode=4, repeats=2, warmup=1, chunk_size=16, dtype="bf16")
    rows = profile_variant(cfg, pc)
    assert [r["seq_len"] for r in rows] == [24, 40]
    for r in rows:
        assert r["variant"] == cfg.name and r["prompt_len"] == r["seq_len"] - 4 and r["n_repeats"] == 2
        assert r["kv_bytes_measured"] == kv_cache_bytes(cfg, r["seq_len"], dtype="bf16") == r["kv_bytes_analytic"]
        assert r["kv_equal"] is True
        for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_s", "prefill_s", "decode_s", "prefill_cpu_s",
                  "decode_cpu_s"):
            assert r[k] > 0 and math.isfinite(r[k]), k
        assert r["ttft_s"] >= r["prefill_s"]
        assert r["peak_mem_bytes"] > 0 and r["mem_kind"] in ("cpu_rss_hwm", "cpu_rss_sampled")
        assert len(r["repeats"]) == 2 and "loadavg_1m_before" in r and r["n_threads"] >= 1
        assert r["prefill_s"] == pytest.approx(statistics.median(x["prefill_s"] for x in r["repeats"]))
    json.dumps(rows)  # JSON-able


def test_profile_models_interleaves_and_orders_rows() -> None:
    from yocou.evaluation.bench.profile import profile_models

    cfgs = {"a": C.transformer(n_layers=1, **KW), "b": C.yoco(n_layers=2, window=4, **KW)}
    rows = profile_models(cfgs, ProfileConfig(seq_lens=(12, 20), n_decode=2, repeats=1, warmup=0, chunk_size=8))
    assert [(r["variant"], r["seq_len"]) for r in rows] == [("a", 12), ("a", 20), ("b", 12), ("b", 20)]
    assert all(r["kv_equal"] for r in rows)


def test_profile_static_decode_at_the_largest_fitting_batch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """decode_path static with max_batch: a fixed-batch row and a row at the batch the memory planner allows (free
    memory mocked so that exactly 3 sequences' KV fit), cache bytes equal to the formula at that batch, the mode and
    the kernels recorded; the tidy table carries the max-batch row apart from Figure 7's fixed-batch rows."""
    from yocou.evaluation.bench import profile as P
    from yocou.model import limits
    from yocou.model.limits import decode_transient_bytes

    cfg = C.yocou(n_layers=2, window=8, n_loops=3, **KW)
    N, chunk = 24, 16
    per_row = kv_cache_bytes(cfg, N, dtype="fp32")
    free = int((3 * per_row + decode_transient_bytes(cfg, 3, chunk, dtype=torch.float32)) / 0.9) + 1
    monkeypatch.setattr(limits, "available_bytes", lambda device: (free, "mocked"))
    pc = ProfileConfig(seq_lens=(N,), n_decode=4, repeats=1, warmup=0, chunk_size=chunk, dtype="fp32",
                       decode_path="static", max_batch=8)
    rows = P.profile_models({"yoco_u": cfg}, pc)
    assert [(r["batch_rule"], r["batch_size"]) for r in rows] == [("fixed", 1), ("max", 3)]
    for r in rows:
        assert r["kv_bytes_measured"] == kv_cache_bytes(cfg, N, batch_size=r["batch_size"], dtype="fp32")
        assert r["decode_path"] == "static" and r["decode_mode"] == "eager" and "CUDA" in r["why_eager"]
        assert set(r["attention_kernels"]) >= {"decode", "prefill/window"}
    from yocou.results.summarize.efficiency import summarize_efficiency
    from yocou.utils.io import atomic_write_json

    atomic_write_json(tmp_path / "profile.json", {"rows": rows, "provenance": {}})
    tidy = summarize_efficiency(tmp_path / "profile.json", {"yoco_u": "yoco_u"})
    mb = tidy[tidy.metric == "max_batch.batch_size"]
    assert list(mb.value) == [3.0]
    fixed = tidy[tidy.metric == "decode_tokens_per_s"]
    assert list(fixed.batch_size) == [1]


def test_profile_config_validation() -> None:
    for make, field in ((lambda: profile_config_from_dict({"seq_lens": [64], "bogus": 1}), "bogus"),
                        (lambda: ProfileConfig(seq_lens=(8,), n_decode=8), "seq_lens"),
                        (lambda: ProfileConfig(seq_lens=(64,), repeats=1.5), "repeats"),
                        (lambda: ProfileConfig(seq_lens=(64, 64)), "seq_lens")):  # was two rows for one length
        with pytest.raises(FieldError) as e:
            make()
        assert e.value.field == f"ProfileConfig.{field}"
    assert profile_config_from_dict({"seq_lens": [64, 128]}).seq_lens == (64, 128)


@pytest.mark.slow
def test_profile_cli_bad_input(tmp_path: Path) -> None:
    """Run configs and --device that cannot be used fail naming them (status 2, no traceback)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).parents[1]
    env = {k: v for k, v in os.environ.items() if k != "YOCOU_TRACEBACK"}
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    good = tmp_path / "rc.json"
    good.write_text(json.dumps({"model": C.preset("yocou-smoke").to_dict()}))
    (tmp_path / "nomodel.json").write_text(json.dumps({"variant": "x"}))
    (tmp_path / "corrupt.json").write_text("{not json")
    bad_model = C.preset("yocou-smoke").to_dict() | {"n_layer": 3}
    (tmp_path / "badmodel.json").write_text(json.dumps({"model": bad_model}))
    cases = [(["--run-configs", "nomodel.json"], "nomodel.json"), (["--run-configs", "corrupt.json"], "corrupt.json"),
             (["--run-configs", "badmodel.json"], "badmodel.json"),
             (["--run-configs", "rc.json", "--device", "gpu"], "--device")]
    if not torch.cuda.is_available():
        cases.append((["--run-configs", "rc.json", "--device", "cuda"], "--device"))
    for args, needle in cases:
        res = subprocess.run([sys.executable, "-m", "yocou.evaluation.bench.profile", *args, "--seq-lens", "64", "--out",
                              "o.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and "Traceback" not in res.stderr, (args, res.stderr[-2000:])
        last = res.stderr.strip().splitlines()[-1]
        assert last.startswith("python -m yocou.evaluation.bench.profile: error: ") and needle in last, (args, last)
    assert not (tmp_path / "o.json").exists()


def test_fit_exponent_and_linear_on_synthetic_data() -> None:
    n = [1024, 2048, 4096, 8192, 16384, 32768]
    assert fit_exponent(n, [3 * x ** 1.5 for x in n]) == pytest.approx(1.5)
    assert fit_exponent(n, [x ** 2 if x >= 4096 else 1.0 for x in n], lo=4096, hi=32768) == pytest.approx(2.0)
    slope, icpt = fit_linear(n, [7 + 5 * x for x in n])
    assert slope == pytest.approx(5) and icpt == pytest.approx(7)
    with pytest.raises(ValueError, match="two distinct"):
        fit_exponent(n, n, lo=40000)
    with pytest.raises(ValueError, match="positive"):
        fit_exponent([1, 2], [0, 1])


def _synthetic_profile(path: Path) -> None:
    """Prefill seconds ∝ apps·N (YOCO family) or apps·N² (global); KV from the formula."""
    rows = []
    apps = {"transformer": 8, "yoco": 4, "rins": 16, "yocou": 12}
    for v, a in apps.items():
        cfg = C.preset(f"{v}-smoke")
        for n in (1024, 2048, 4096):
            t = a * (n if v in ("yoco", "yocou") else n * n / 1024) * 1e-5
            kv = kv_cache_bytes(cfg, n, dtype="bf16")
            rows.append({"variant": v, "seq_len": n, "prompt_len": n - 8, "n_decode": 8, "chunk_size": 512,
                         "dtype": "bf16", "batch_size": 1, "device": "cpu", "n_threads": 2, "prefill_s": t,
                         "prefill_tokens_per_s": (n - 8) / t, "ttft_s": t, "decode_s": a * 1e-3,
                         "decode_tokens_per_s": 8 / (a * 1e-3), "decode_ms_per_token": a / 8,
                         "kv_bytes_measured": kv, "kv_bytes_analytic": kv, "kv_equal": True,
                         "peak_mem_bytes": 1, "peak_mem_delta_bytes": 0, "mem_kind": "cpu_rss_sampled",
                         "n_repeats": 1, "repeats": [], "loadavg_1m_before": 0.5, "loadavg_1m_after": 0.7})
    path.write_text(json.dumps({"rows": rows, "provenance": {"device": {"cpu_model": "test", "n_cpus": 2}}}))


def test_renderers_on_synthetic_profile(tmp_path: Path) -> None:
    """profile.json -> summarize (tidy efficiency, efficiency_derived) -> Tables 8, 9, 1 and Figure 7."""
    from yocou.results.render import fig7, table1, tables8_9
    from yocou.results.summarize.efficiency import (
        summarize_efficiency,
        summarize_efficiency_derived,
    )
    from yocou.results.tidy import write_tidy

    prof = tmp_path / "profile.json"
    _synthetic_profile(prof)
    core = {v: v for v in ("transformer", "yoco", "rins", "yocou")}
    eff, der = tmp_path / "tidy/efficiency.csv", tmp_path / "tidy/efficiency_derived.csv"
    write_tidy(summarize_efficiency(prof, core), eff)
    write_tidy(summarize_efficiency_derived(eff, {"lo": 1024, "hi": 4096}), der)
    out = {"t8": "table8", "t8_ours": "table8_ours", "t9": "table9", "t9_ours": "table9_ours", "t10": "table10_ratios"}
    tables8_9.render(eff, der, {k: tmp_path / f"{v}.md" for k, v in out.items()}, scale="t")
    t8 = pd.read_csv(tmp_path / "table8.csv")
    ours = t8[(t8["ratio"] == "YOCO-U / YOCO") & t8["source"].str.startswith("ours")]
    assert float(ours["1K"].iloc[0]) == pytest.approx(4 / 12, rel=1e-3)
    paper = t8[(t8["ratio"] == "RINS / Transformer") & t8["source"].str.startswith("paper")]
    assert float(paper["8K"].iloc[0]) == pytest.approx(42905 / 85707)
    assert "CPU" in (tmp_path / "table8.md").read_text() and (tmp_path / "table10_ratios.csv").is_file()
    table1.render(der, eff, tmp_path / "table1.csv", scale="t")
    t1 = pd.read_csv(tmp_path / "table1.csv").set_index("model")
    assert t1.loc["YOCO", "fitted_prefill_exponent"] == pytest.approx(1.0)
    assert t1.loc["Transformer", "fitted_prefill_exponent"] == pytest.approx(2.0)
    assert t1.loc["Transformer", "fitted_kv_exponent"] == pytest.approx(1.0)
    fig7.render(eff, tmp_path / "fig7.png", tmp_path / "fig7_data.csv", scale="t")
    assert (tmp_path / "fig7.png").stat().st_size > 0 and (tmp_path / "fig7.pdf").is_file()


def test_gpu_rows_render_beside_the_cpu_rows(tmp_path: Path) -> None:
    """A SYNTHETIC serving.json of the prepared GPU check (made here; no GPU measured it) renders as GPU rows of
    Tables 8 and 9, named by device, batch and mode, beside the CPU rows; a file of another step is refused."""
    from yocou.evaluation.bench.gpu_session import serving_ratios
    from yocou.results.render import tables8_9
    from yocou.results.summarize.efficiency import summarize_efficiency, summarize_efficiency_derived
    from yocou.results.tidy import write_tidy

    prof = tmp_path / "profile.json"
    _synthetic_profile(prof)
    eff, der = tmp_path / "efficiency.csv", tmp_path / "efficiency_derived.csv"
    write_tidy(summarize_efficiency(prof, {v: v for v in ("transformer", "yoco", "rins", "yocou")}), eff)
    write_tidy(summarize_efficiency_derived(eff, {"lo": 1024, "hi": 4096}), der)
    tps = {"transformer": 1000.0, "yoco": 1200.0, "rins": 500.0, "yocou": 480.0}  # synthetic tokens/s
    rows = [{"variant": v, "phase": ph, "seq_len": n, "batch_size": b, "path": path, "mode": "graphs",
             "tokens_per_s": t * (b if ph == "decode" else 1) / (n / 8192)}
            for v, t in tps.items() for n in (8192, 32768)
            for ph, b, path in (("prefill", 1, "chunked"), ("decode", 1, "static"), ("decode", 64, "static"))]
    serving = tmp_path / "gpu" / "synthetic-gpu" / "serving.json"
    serving.parent.mkdir(parents=True)
    serving.write_text(json.dumps({"step": "serving", "complete": True, "rows": rows, "ratios": serving_ratios(rows)}))
    out = {k: tmp_path / f"{v}.md" for k, v in {"t8": "table8", "t8_ours": "table8_ours", "t9": "table9",
                                               "t9_ours": "table9_ours", "t10": "table10_ratios"}.items()}
    tables8_9.render(eff, der, out, scale="t", gpu=[serving])
    t9 = pd.read_csv(tmp_path / "table9.csv")
    g = t9[t9["source"].str.startswith("GPU (synthetic-gpu, 1.3B, B=64, static graphs")]
    assert float(g[g["ratio"] == "YOCO-U / YOCO"]["8K"].iloc[0]) == pytest.approx(480 / 1200)
    assert float(g[g["ratio"] == "RINS / Transformer"]["32K"].iloc[0]) == pytest.approx(0.5)
    assert t9["source"].str.startswith("ours (CPU").any() and t9["source"].str.startswith("paper").any()
    t8 = pd.read_csv(tmp_path / "table8.csv")
    assert len(t8[t8["source"].str.startswith("GPU")]) == 2  # one row per ratio, prefill at B = 1
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"step": "kernels"}))
    with pytest.raises(ValueError, match="other.json"):
        tables8_9.render(eff, der, out, scale="t", gpu=[bad])


def test_hf_peer_benchmark_writes_ratios(tmp_path: Path) -> None:
    """The peer benchmark script runs end to end at the smoke shape (its numbers are not checked)."""
    pytest.importorskip("transformers")
    import importlib.util

    spec = importlib.util.spec_from_file_location("hf_llama_peer", Path(__file__).parents[1] / "benchmarks" /
                                                  "hf_llama_peer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "peer.json"
    assert mod.main(["--preset", "transformer-smoke", "--batch", "2", "--seq-len", "32", "--rounds", "2",
                     "--steps-per-round", "1", "--warmup-steps", "1", "--prefill-len", "48", "--n-decode", "4",
                     "--peak-n", "128", "--dtype", "fp32", "--threads", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert set(res["ratios_ours_over_hf"]) >= {"train_tokens_per_s", "prefill_tokens_per_s", "decode_tokens_per_s"}
    assert all(v > 0 for v in res["ratios_ours_over_hf"].values())
    paired = res["train"]["paired_ratio_ours_over_hf"]["eager"]
    assert paired["min"] <= paired["median"] <= paired["max"]
    assert len(res["train"]["ours"]["round_mean_step_s"]) == 2
    assert 0 < res["train"]["ours"]["mfu"] and res["matmul_peak_flops"] > 0
    for block in ("decode", "decode_1thread"):
        dec = res["inference"][block]
        # the same weights, fp32: HF and ours decode the same greedy tokens from their caches
        assert dec["greedy_tokens_agree"] == 1.0, block
        for side in ("ours", "hf"):
            s = dec[side]["step_ms"]
            assert s["n"] == 2 * 4 and s["min"] <= s["p10"] <= s["median"] <= s["p90"] <= s["max"]
            assert dec[side]["aten_ops_per_step"] > 0 and len(dec[side]["round_s"]) == 2
    assert res["inference"]["decode_1thread"]["threads"] == 1
    assert "loadavg_start" in res["provenance"] and res["provenance"]["versions"]["transformers"]


@pytest.mark.slow
@pytest.mark.parametrize("args,needle", [
    (["--rounds", "0"], "--rounds"), (["--batch", "0"], "--batch"), (["--steps-per-round", "0"], "--steps-per-round"),
    (["--dtype", "fp16"], "--dtype"), (["--scale", "nope"], "nope.yaml"), (["--n-decode", "0"], "--n-decode"),
    (["--threads", "0"], "--threads"),
    (["--peak-n", "x"], "--peak-n"), (["--warmup-steps", "-1"], "--warmup-steps"), (["--preset", "nope"], "--preset"),
    (["--preset", "yocou-smoke"], "--preset"), (["--out", "."], "--out")])
def test_hf_peer_benchmark_bad_arguments(args: list[str], needle: str, tmp_path: Path) -> None:
    """Bad arguments fail at once (before any timing), naming the argument, with status 2 and no traceback;
    --rounds 0 used to time every warm-up and then fail on the median of nothing."""
    import os
    import subprocess
    import sys

    root = Path(__file__).parents[1]
    env = {k: v for k, v in os.environ.items() if k != "YOCOU_TRACEBACK"}
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    out = [] if "--out" in args else ["--out", str(tmp_path / "peer.json")]  # never the committed result
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "hf_llama_peer.py"), *out, *args], cwd=tmp_path,
                         env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert "error: " in last and needle in last, last


@pytest.mark.parametrize("sample", [False, True])
def test_peak_memory_sees_a_freed_buffer(sample: bool) -> None:
    """A 256 MiB buffer written and freed inside the block shows in the peak (kernel high-water mark, or
    the sampling thread where that is unavailable or asked for); memory freed before the block does not."""
    import time

    from yocou.evaluation.bench.profile import PeakMemory

    size = 256 << 20
    before = torch.ones(size // 2)  # twice the size: an earlier, higher peak must not count
    del before
    with PeakMemory(torch.device("cpu"), sample=sample) as mem:
        buf = torch.ones(size // 4)  # float32: size bytes, every page written
        time.sleep(0.05)  # long enough for the sampler
        del buf
    assert mem.kind == ("cpu_rss_sampled" if sample else mem.kind)
    assert mem.kind in ("cpu_rss_hwm", "cpu_rss_sampled")
    assert 0.9 * size <= mem.delta_bytes <= 1.5 * size


def test_peak_memory_reused_after_the_high_water_mark_becomes_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PeakMemory entered again picks its method afresh: one that measured with the kernel's high-water mark
    and then falls back to sampling must stop its sampling thread on exit (it used to keep the 'cpu_rss_hwm'
    kind and leave the thread running)."""
    from yocou.evaluation.bench import profile as P

    mem = P.PeakMemory(torch.device("cpu"))
    monkeypatch.setattr(P, "_reset_hwm", lambda: True)
    monkeypatch.setattr(P, "_hwm_bytes", lambda: 1)
    with mem:
        pass
    assert mem.kind == "cpu_rss_hwm"
    monkeypatch.setattr(P, "_reset_hwm", lambda: False)
    with mem:
        pass
    assert mem.kind == "cpu_rss_sampled"
    assert mem._thread is not None and not mem._thread.is_alive()
