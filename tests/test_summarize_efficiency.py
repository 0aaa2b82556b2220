"""Summarize steps of the efficiency and NIAH area: profile / KV measurement / NIAH results → tidy
rows, then the renderers read only those tidy files.

Expected values are computed here by hand (power laws with known exponents, ratios of chosen numbers, the KV
formula of docs/design.md section 5 written out, binomial standard errors), never taken from the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yocou.model import config as C
from yocou.results.summarize.efficiency import (
    summarize_efficiency,
    summarize_efficiency_derived,
    summarize_kv,
    summarize_table10,
)
from yocou.results.summarize.niah import summarize_table4
from yocou.results.tidy import one, write_tidy

CORE = {"transformer": "transformer", "yoco": "yoco", "rins": "rins", "yocou": "yocou"}
LENS = (1024, 2048, 4096, 8192)
# per role: prefill seconds c * N^p, decode seconds d * N^q, KV bytes a + b * N (chosen exponents)
LAWS = {"transformer": (1e-9, 2.0, 1e-4, 0.5, 0, 4096), "yoco": (3e-6, 1.0, 2e-4, 0.25, 8192, 1024),
        "rins": (2e-9, 2.0, 3e-4, 0.5, 0, 8192), "yocou": (9e-6, 1.0, 5e-4, 0.25, 24576, 1024)}
N_DECODE = 8


def _profile(path: Path, *, n_cpus: int = 2, loads: dict[int, tuple[float, float]] | None = None) -> None:
    """A profile JSON whose seconds follow :data:`LAWS`; three repeats at 0.9, 1.0 and 1.2 times the median."""
    rows = []
    for v, (c, p, d, q, a, b) in LAWS.items():
        for n in LENS:
            pre, dec = c * n ** p, d * n ** q
            l0, l1 = (loads or {}).get(n, (0.5, 0.7))
            rows.append({"variant": v, "seq_len": n, "prompt_len": n - N_DECODE, "n_decode": N_DECODE,
                         "dtype": "bf16", "device": "cpu", "n_threads": 2, "prefill_s": pre,
                         "prefill_cpu_s": 2 * pre, "prefill_tokens_per_s": (n - N_DECODE) / pre, "ttft_s": pre,
                         "decode_s": dec, "decode_tokens_per_s": N_DECODE / dec,
                         "kv_bytes_measured": a + b * n, "kv_bytes_analytic": a + b * n, "kv_equal": True,
                         "peak_mem_bytes": 10 * n, "mem_kind": "cpu_rss_sampled", "n_repeats": 3,
                         "repeats": [{"prefill_s": f * pre, "decode_s": f * dec, "ttft_s": f * pre,
                                      "prefill_cpu_s": 2 * f * pre, "decode_cpu_s": f * dec} for f in (0.9, 1.0, 1.2)],
                         "loadavg_1m_before": l0, "loadavg_1m_after": l1})
    path.write_text(json.dumps({"rows": rows, "provenance": {"device": {"cpu_model": "testcpu", "n_cpus": n_cpus}}}))


def test_efficiency_rows_carry_throughput_spread_and_load(tmp_path: Path) -> None:
    loads = {2048: (0.5, 3.5)}
    _profile(tmp_path / "p.json", loads=loads)
    df = summarize_efficiency(tmp_path / "p.json", CORE)
    assert set(df["study"]) == {"efficiency"} and set(df["seed"]) == {-1}
    r = one(df, role="yoco", metric="prefill_tokens_per_s", axis="seq_len", axis_value=4096)
    c = LAWS["yoco"][0]
    med = (4096 - N_DECODE) / (c * 4096)
    assert r["value"] == pytest.approx(med) and r["n"] == 3 and r["unit"] == "tokens/s"
    # tokens/s per repeat: med / 0.9, med / 1.0, med / 1.2 -> half the range
    assert r["stderr"] == pytest.approx((med / 0.9 - med / 1.2) / 2)
    kv = one(df, role="yocou", metric="kv_mib", axis_value=8192)
    assert kv["value"] == pytest.approx((24576 + 1024 * 8192) / 2 ** 20) and kv["unit"] == "MiB"
    s = one(df, role="rins", metric="decode_s", axis_value=1024)
    d = LAWS["rins"][2] * 1024 ** 0.5
    assert s["value"] == pytest.approx(d) and s["stderr"] == pytest.approx((1.2 - 0.9) * d / 2)
    # loaded where a load average exceeds the 2 CPUs, on every metric of that (role, N)
    assert set(df[df["loaded"]]["axis_value"]) == {2048.0}
    assert df["device_label"].iloc[0] == "CPU (testcpu, 2 threads, bf16)" and set(df["device_kind"]) == {"CPU"}
    assert list(dict.fromkeys(df["role"])) == list(CORE)


def test_derived_exponents_and_ratios(tmp_path: Path) -> None:
    _profile(tmp_path / "p.json")
    write_tidy(summarize_efficiency(tmp_path / "p.json", CORE), tmp_path / "efficiency")
    der = summarize_efficiency_derived(tmp_path / "efficiency.csv", {"lo": 2048, "hi": 8192})
    for role, (c, p, d, q, a, b) in LAWS.items():
        assert one(der, role=role, metric="exponent.prefill")["value"] == pytest.approx(p)
        assert one(der, role=role, metric="exponent.decode")["value"] == pytest.approx(q)
        assert one(der, role=role, metric="exponent.prefill_cpu")["value"] == pytest.approx(p)
        assert one(der, role=role, metric="kv_bytes_per_token")["value"] == pytest.approx(b)
        assert one(der, role=role, metric="kv_fixed_bytes")["value"] == pytest.approx(a, abs=1e-6)
        # log-log slope of a + b N over N = 2048, 4096, 8192, written out
        x = np.log([2048, 4096, 8192])
        y = np.log([a + b * n for n in (2048, 4096, 8192)])
        slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
        e = one(der, role=role, metric="exponent.kv")
        assert e["value"] == pytest.approx(slope) and e["n"] == 3
        assert (e["fit_lo"], e["fit_hi"]) == (2048, 8192) and "2048" in e["detail"]
    # YOCO-U / YOCO prefill tokens/s: (c_yoco N) / (c_yocou N) = 3e-6 / 9e-6 at every N
    r = one(der, role="yocou|yoco", metric="prefill_ratio", axis="seq_len", axis_value=1024)
    assert r["value"] == pytest.approx(1 / 3) and r["run"] == "yocou|yoco"
    # RINS / Transformer decode tokens/s: 1e-4 / 3e-4
    assert one(der, role="rins|transformer", metric="decode_ratio", axis_value=8192)["value"] == pytest.approx(1 / 3)
    # KV bytes YOCO / Transformer at 1024: (8192 + 1024^2) / (4096 * 1024); mean over the 4 lengths
    kv = [(8192 + 1024 * n) / (4096 * n) for n in LENS]
    assert one(der, role="yoco|transformer", metric="kv_ratio", axis_value=1024)["value"] == pytest.approx(kv[0])
    m = one(der, role="yoco|transformer", metric="kv_ratio", axis="")
    assert m["value"] == pytest.approx(sum(kv) / 4) and m["n"] == 4
    # the paper's Table 8 at 8K: RINS 42905 tokens/s, Transformer 85707 tokens/s
    p = one(der, role="rins|transformer", metric="paper.prefill_ratio", axis="seq_len", axis_value=8192)
    assert p["value"] == pytest.approx(42905 / 85707) and p["run"] == "paper"


def test_exponent_spread_is_the_same_fit_on_each_repeat(tmp_path: Path) -> None:
    """Table 1's stderr: the third repeat of the Transformer grows as N^(p + 0.1), the other two as N^p, so the
    fitted exponents over repeats are p, p, p + 0.1 and half their range is 0.05."""
    _profile(tmp_path / "p.json")
    prof = json.loads((tmp_path / "p.json").read_text())
    for r in prof["rows"]:
        if r["variant"] == "transformer":
            r["repeats"][2]["prefill_s"] *= (r["seq_len"] / 1024) ** 0.1
    (tmp_path / "p.json").write_text(json.dumps(prof))
    write_tidy(summarize_efficiency(tmp_path / "p.json", CORE), tmp_path / "efficiency")
    der = summarize_efficiency_derived(tmp_path / "efficiency.csv", {"lo": 1024, "hi": 8192})
    e = one(der, role="transformer", metric="exponent.prefill")
    assert e["stderr"] == pytest.approx(0.05) and "3 repeats" in e["detail"]
    assert one(der, role="yoco", metric="exponent.prefill")["stderr"] == pytest.approx(0.0, abs=1e-12)


def test_fit_range_falls_back_like_table1(tmp_path: Path) -> None:
    """lo above every N: the fit runs from the second-largest N to the largest (two points: exact slope)."""
    _profile(tmp_path / "p.json")
    der = summarize_efficiency_derived(summarize_efficiency(tmp_path / "p.json", CORE), {"lo": 65536, "hi": 10 ** 6})
    e = one(der, role="transformer", metric="exponent.prefill")
    assert (e["fit_lo"], e["fit_hi"]) == (4096, 8192) and e["value"] == pytest.approx(2.0)


def _run_config(path: Path, preset: str, seed: int = 7) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"variant": path.parent.name, "model": C.preset(preset).to_dict(),
                                "train": {"seed": seed}}))
    return path


def test_kv_measured_against_the_formula_written_out(tmp_path: Path) -> None:
    rcs = {v: _run_config(tmp_path / v / "run_config.json", f"{v}-smoke") for v in CORE}
    b, d_kv, w, t, n_self = 2, 32, 16, 3, 2  # bf16; smoke: 1 KV head x 32; window 16; YOCO-U T=3 over 2 layers
    formula = {"transformer": lambda n: 2 * b * d_kv * n * 4,                      # 4 global layers
               "yoco": lambda n: 2 * b * d_kv * n + 2 * b * d_kv * w * n_self,     # shared KV + windows
               "yocou": lambda n: 2 * b * d_kv * n + 2 * b * t * n_self * w * d_kv,
               "rins": lambda n: 2 * b * d_kv * n * (2 * 3 + 2)}                  # A^3 B: 8 applications
    rows = [{"variant": v, "seq_len": n, "dtype": "bf16", "measured_bytes": formula[v](n) + (64 if v == "rins" else 0),
             "analytic_bytes": 1, "equal": False} for v in CORE for n in (64, 128)]
    (tmp_path / "kv.json").write_text(json.dumps({"rows": rows}))
    df = summarize_kv(tmp_path / "kv.json", CORE, rcs)
    for v in CORE:
        for n in (64, 128):
            f = one(df, role=v, metric="kv_bytes_formula", axis_value=n)
            assert f["value"] == formula[v](n) and f["unit"] == "bytes" and f["seed"] == -1
            m = one(df, role=v, metric="kv_bytes", axis_value=n)
            assert m["value"] == formula[v](n) + (64 if v == "rins" else 0)
            assert bool(m["equal"]) == (v != "rins")


def test_table10_is_the_formula_at_the_papers_config() -> None:
    df = summarize_table10(CORE, {v: v for v in CORE})
    mib, b, d_kv, w, t, L = 2 ** 20, 2, 4 * 128, 512, 3, 20  # bf16, 4 KV heads x 128, W = 512, T = 3, L = 20
    formula = {"transformer": lambda n: 2 * b * d_kv * n * L, "rins": lambda n: 2 * b * d_kv * n * 40,
               "yoco": lambda n: 2 * b * d_kv * n + 2 * b * d_kv * w * L // 2,
               "yocou": lambda n: 2 * b * d_kv * n + 2 * b * d_kv * w * t * L // 2}
    assert sorted(set(df["axis_value"])) == [8192 * 2 ** k for k in range(6)]
    for v, f in formula.items():
        for n in (8192, 262144):
            assert one(df, role=v, metric="kv_mib_formula", axis_value=n)["value"] == pytest.approx(f(n) / mib)
    assert one(df, role="yocou", axis_value=8192)["value"] == 46  # the paper's Table 10: 46 MB at 8K


def _niah(path: Path, records: list[dict], train_len: int = 128, book: str = "paradise_lost") -> Path:
    from yocou.evaluation.longctx.niah import summarise

    path.write_text(json.dumps({"train_seq_len": train_len, "book": book, "records": records,
                                "cells": summarise(records)}))
    return path


def _records(correct: dict[tuple[str, int, float], list[int]]) -> list[dict]:
    out = []
    for (task, n, d), cs in correct.items():
        for i, c in enumerate(cs):
            out.append({"task": task, "length": n, "depth": d, "sample": i, "correct": c,
                        "logp_value": -1.0 - i, "logp_distractor": -4.0 - 2 * i})
    return out


def test_table4_accuracy_stderr_and_aggregates(tmp_path: Path) -> None:
    recs = _records({("s_niah_1", 64, 0.0): [1, 1, 0, 1], ("s_niah_1", 64, 100.0): [0, 0, 0, 1],
                     ("s_niah_1", 256, 0.0): [1, 1, 1, 1], ("s_niah_1", 256, 100.0): [1, 0, 1, 0],
                     ("s_niah_2", 64, 0.0): [0, 0, 0, 0], ("s_niah_2", 64, 100.0): [1, 0, 0, 0],
                     ("s_niah_2", 256, 0.0): [0, 1, 0, 0], ("s_niah_2", 256, 100.0): [0, 0, 0, 0]})
    niah = {v: _niah(tmp_path / f"{v}.json", recs) for v in CORE}
    rcs = {v: _run_config(tmp_path / v / "run_config.json", f"{v}-smoke", seed=11) for v in CORE}
    df = summarize_table4(niah, CORE, rcs)
    cell = one(df, role="yoco", metric="s_niah_1.acc", axis="seq_len", axis_value=64, axis2="depth", axis2_value=0.0)
    assert cell["value"] == 0.75 and cell["n"] == 4 and cell["stderr"] == pytest.approx(math.sqrt(0.75 * 0.25 / 4))
    assert cell["seed"] == 11 and cell["unit"] == "fraction" and not cell["extrapolated"]
    top = one(df, role="yoco", metric="s_niah_1.acc", axis="seq_len", axis_value=256, axis2="depth",
              axis2_value=1.0)
    assert top["value"] == 0.5 and bool(top["extrapolated"])  # 256 > the training length 128
    over_depth = one(df, role="yoco", metric="s_niah_1.acc", axis="seq_len", axis_value=64, axis2="")
    assert over_depth["value"] == 4 / 8 and over_depth["stderr"] == pytest.approx(math.sqrt(0.25 / 8))
    everything = one(df, role="yoco", metric="s_niah_1.acc", axis="", axis2="")
    assert everything["value"] == (3 + 1 + 4 + 2) / 16 and everything["n"] == 16
    assert one(df, role="yoco", metric="s_niah_2.acc", axis="", axis2="")["value"] == 2 / 16
    assert one(df, role="yoco", metric="all_tasks.acc", axis="")["value"] == (10 + 2) / 32
    # log p(value) of samples 0..3 is -1, -2, -3, -4: mean -2.5, stderr std(ddof=1)/2
    lp = one(df, role="rins", metric="s_niah_2.logp_value", axis_value=64, axis2="depth", axis2_value=0.0)
    assert lp["value"] == -2.5 and lp["stderr"] == pytest.approx(np.std([-1, -2, -3, -4], ddof=1) / 2)
    # gain per sample: (-1 - i) - (-4 - 2 i) = 3 + i -> mean 4.5
    assert one(df, role="rins", metric="s_niah_2.gain", axis_value=64, axis2="depth", axis2_value=0.0)["value"] == 4.5
    assert set(df[df["metric"].str.startswith("s_niah_2.")]["haystack"]) == {"paradise_lost"}
    assert one(df, role="yocou", metric="train_seq_len")["value"] == 128
    # the paper's YOCO-U row: 1.00 and 0.95 -> mean 0.975
    assert one(df, run="paper", role="yocou", metric="paper.all_tasks.acc")["value"] == pytest.approx(0.975)


def test_renderers_read_only_tidy_files(tmp_path: Path, monkeypatch) -> None:
    """summarize -> tidy files -> render: the tables come out with the numbers of the tidy rows."""
    from yocou.results.render import table4, table10, tables8_9

    _profile(tmp_path / "p.json")
    write_tidy(summarize_efficiency(tmp_path / "p.json", CORE), tmp_path / "tidy/efficiency")
    write_tidy(summarize_efficiency_derived(tmp_path / "tidy/efficiency.csv", {"lo": 1024, "hi": 8192}),
               tmp_path / "tidy/efficiency_derived")
    out = {k: tmp_path / f"{name}.md" for k, name in (("t8", "table8"), ("t8_ours", "table8_ours"), ("t9", "table9"),
                                                      ("t9_ours", "table9_ours"), ("t10", "table10_ratios"))}
    tables8_9.render(tmp_path / "tidy/efficiency.csv", tmp_path / "tidy/efficiency_derived.csv", out, scale="t")
    t8 = pd.read_csv(tmp_path / "table8.csv")
    row = t8[(t8["ratio"] == "YOCO-U / YOCO") & (t8["source"] == "ours (CPU, t)")].iloc[0]
    assert row["1K"] == pytest.approx(1 / 3) and row["mean"] == pytest.approx(1 / 3)
    paper = t8[(t8["ratio"] == "RINS / Transformer") & t8["source"].str.startswith("paper")].iloc[0]
    assert paper["8K"] == pytest.approx(42905 / 85707)
    assert "CPU" in (tmp_path / "table8.md").read_text()
    ours = pd.read_csv(tmp_path / "table9_ours.csv").set_index("model")
    assert ours.loc["YOCO", "2K"] == pytest.approx(N_DECODE / (2e-4 * 2048 ** 0.25))

    rcs = {v: _run_config(tmp_path / v / "run_config.json", f"{v}-smoke") for v in CORE}
    cfgs = {v: C.preset(f"{v}-smoke") for v in CORE}
    from yocou.model.accounting import kv_cache_bytes
    (tmp_path / "kv.json").write_text(json.dumps({"rows": [
        {"variant": v, "seq_len": 64, "dtype": "bf16", "measured_bytes": kv_cache_bytes(cfgs[v], 64),
         "analytic_bytes": kv_cache_bytes(cfgs[v], 64), "equal": True} for v in CORE]}))
    write_tidy(summarize_kv(tmp_path / "kv.json", CORE, rcs), tmp_path / "tidy/kv")
    write_tidy(summarize_table10(CORE, {v: v for v in CORE}), tmp_path / "tidy/table10")
    table10.render(tmp_path / "tidy/table10.csv", tmp_path / "tidy/kv.csv", tmp_path / "table10.csv", scale="t")
    cells = pd.read_csv(tmp_path / "table10_cells.csv")
    assert len(cells) == 24 and cells["match"].all()
    models = list(dict.fromkeys(pd.read_csv(tmp_path / "table10.csv")["model"]))
    assert models == ["Transformer", "RINS", "YOCO", "YOCO-U"]  # the paper's row order
    meas = pd.read_csv(tmp_path / "table10_measured.csv")
    assert meas["equal"].all() and len(meas) == 4

    recs = _records({("s_niah_1", 64, 0.0): [1, 0], ("s_niah_1", 64, 50.0): [1, 1],
                     ("s_niah_2", 64, 0.0): [0, 0], ("s_niah_2", 64, 50.0): [0, 1]})
    niah = {v: _niah(tmp_path / f"{v}.json", recs) for v in CORE}
    write_tidy(summarize_table4(niah, CORE, rcs), tmp_path / "tidy/table4")
    figs: list = []
    monkeypatch.setattr(table4, "save_figure", lambda fig, *a, **k: figs.append(fig))
    table4.render(tmp_path / "tidy/table4.csv", tmp_path / "table4.csv", tmp_path / "niah_heatmap.png", scale="t",
                  seed=0)
    t4 = pd.read_csv(tmp_path / "table4.csv").set_index("model")
    assert t4.loc["YOCO-U", "S-NIAH-1 acc"] == 0.75 and t4.loc["YOCO-U", "S-NIAH-1 acc (paper)"] == 1.0
    assert t4.loc["YOCO", "mean acc"] == 0.5 and t4.loc["YOCO", "mean acc (paper)"] == pytest.approx(0.93)
    c = pd.read_csv(tmp_path / "table4_cells.csv")
    assert sorted(set(c["depth"])) == [0.0, 50.0] and len(c) == 4 * 2 * 2
    md = (tmp_path / "table4.md").read_text()
    assert "paradise_lost" in md and "Training length 128" in md and len(figs) == 1


def test_a_renderer_without_its_tidy_file_names_it(tmp_path: Path) -> None:
    from yocou.results.render import table10

    with pytest.raises(FileNotFoundError, match="table10.csv.*summarize"):
        table10.render(tmp_path / "table10.csv", tmp_path / "kv.csv", tmp_path / "out.csv")
