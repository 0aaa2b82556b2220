"""The serving model (yocou.evaluation.analysis.serving): decode at batch B and at a fixed memory budget, against hand counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from yocou.evaluation.analysis import serving as S
from yocou.model import config as C

ROOT = Path(__file__).resolve().parents[1]


def _machine(**kw) -> S.Machine:
    return S.Machine(**{"name": "test", "bandwidth": 1e11, "peak_flops": 1e13, "memory_bytes": 10**9,
                        "dtype": "fp32", **kw})


def test_decode_flops_by_hand_for_a_transformer_and_yoco() -> None:
    t = C.preset("transformer-tiny")
    d, hd, g, f, v, L = t.d_model, t.n_heads * t.head_dim, t.n_kv_heads * t.head_dim, t.d_ff, t.vocab_size, 6
    matmul = L * (2 * d * hd + 2 * d * g + 3 * d * f) + d * v     # wqkv + wo + SwiGLU per layer, the head
    n = 100
    assert S.decode_flops(t, n) == pytest.approx(2 * matmul + L * 4 * hd * (n + 1))
    assert S.decode_flops(t, n, batch=7) == pytest.approx(7 * S.decode_flops(t, n))
    y = C.preset("yoco-tiny")
    w = next(s.window for s in y.stages if s.window)
    far, near = S.decode_flops(y, 10 * w) - S.decode_flops(y, 10 * w - 1), S.decode_flops(y, 3) - S.decode_flops(y, 2)
    cross = sum(s.n_layers for s in y.stages if s.kind == "cross")
    assert far == pytest.approx(4 * hd * cross)                   # past the window only the cross layers grow
    assert near > far
    with pytest.raises(ValueError, match="n_ctx must be >= 0 and batch >= 1"):
        S.decode_flops(t, 10, batch=0)


def test_the_budget_batch_is_the_largest_that_fits() -> None:
    t = C.preset("transformer-tiny")
    m = _machine(memory_bytes=50 * 10**6)
    n = 4096
    kv = 2 * 4 * t.n_kv_heads * t.head_dim * n * 6              # K and V, fp32, every position, 6 layers
    weights = 4 * S.param_count(t)
    b = S.max_batch(t, n, m)
    assert b >= 1 and weights + b * kv <= m.memory_bytes < weights + (b + 1) * kv
    assert S.max_batch(t, n, _machine(memory_bytes=weights)) == 0


def test_decode_is_memory_bound_at_batch_1_and_compute_bound_at_a_large_batch() -> None:
    y = C.preset("yocou-tiny")
    m = _machine(peak_flops=1e11)
    one = S.decode_model(y, 512, 1, m)
    assert one["bound"] == "memory" and one["seconds"] == pytest.approx(one["bytes"] / m.bandwidth)
    big = S.decode_model(y, 512, 4096, m)
    assert big["bound"] == "compute" and big["seconds"] == pytest.approx(big["flops"] / m.peak_flops)
    assert big["tokens_per_s"] == pytest.approx(4096 / big["seconds"])
    # a looped stage's weights are read at each application unless asked otherwise
    assert S.decode_model(y, 512, 1, m, weights="once")["bytes"] < one["bytes"]


def test_fit_batch_recovers_the_batch_that_made_the_ratios() -> None:
    cfgs = {v: C.preset(f"{v}-tiny") for v in ("transformer", "yoco", "rins", "yocou")}
    m = _machine(peak_flops=1e12)                                  # memory-bound at batch 1, not at 64
    paper = {(a, b, n): S.decode_model(cfgs[a], n, 16, m)["tokens_per_s"]
             / S.decode_model(cfgs[b], n, 16, m)["tokens_per_s"] for a, b in S.PAIRS for n in (256, 1024, 4096)}
    fit = S.fit_batch(cfgs, m, paper, [1, 4, 16, 64])
    assert fit[2]["rms_log_error"] == pytest.approx(0, abs=1e-12)
    assert min(fit[0]["rms_log_error"], fit[3]["rms_log_error"]) > 1e-3


@pytest.mark.parametrize("field, value", [("bandwidth", 0), ("memory_bytes", float("nan")), ("peak_flops", True)])
def test_a_bad_machine_is_refused_naming_the_field(field: str, value) -> None:
    with pytest.raises(ValueError, match=f"{field} must be a finite number > 0"):
        _machine(**{field: value})


def test_the_paper_ratios_are_table_9s() -> None:
    p = S.paper_ratios()
    assert p[("yocou", "yoco", 8192)] == pytest.approx(2410 / 3356)
    assert p[("yoco", "transformer", 262144)] == pytest.approx(318 / 137)


@pytest.mark.slow
def test_the_cli_writes_tables_and_figure_and_refuses_a_bad_raw(tmp_path: Path) -> None:
    out, fig = tmp_path / "serving", tmp_path / "fig.png"
    res = subprocess.run([sys.executable, "-m", "yocou.evaluation.analysis.serving", "--out", str(out), "--figure", str(fig)],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    rows = json.loads((tmp_path / "serving.json").read_text())["rows"]
    at = [r for r in rows if r["at_budget"]]
    assert at and all(r["batch"] == r["max_batch"] for r in at)
    assert (tmp_path / "serving_fit.md").is_file() and fig.stat().st_size > 10_000
    bad = tmp_path / "raw.json"
    bad.write_text("{")
    res = subprocess.run([sys.executable, "-m", "yocou.evaluation.analysis.serving", "--raw", str(bad), "--out", str(out),
                          "--figure", str(fig)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2 and "--raw" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    # the measured panel: a fourth axes from the committed batched measurement; a bad file names its flag
    import matplotlib.image

    wide = tmp_path / "wide.png"
    res = subprocess.run([sys.executable, "-m", "yocou.evaluation.analysis.serving", "--out", str(out), "--figure", str(wide),
                          "--panel-batched", "results/paper_shape/batched/raw.json"], cwd=ROOT, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    h3, w3 = matplotlib.image.imread(fig).shape[:2]
    h4, w4 = matplotlib.image.imread(wide).shape[:2]
    assert h4 == h3 and w4 > 1.2 * w3
    res = subprocess.run([sys.executable, "-m", "yocou.evaluation.analysis.serving", "--out", str(out), "--figure", str(wide),
                          "--panel-batched", str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2 and "--panel-batched" in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_the_cpu_is_calibrated_on_its_batch_1_rows_only() -> None:
    """The calibration is the median, over the measured batch-1 decode rows, of the roofline's seconds per token
    times the measured tokens/s; a batched row (B tokens a step) does not enter it."""
    raw = json.loads((ROOT / "results/paper_shape/raw.json").read_text())
    roof, cal = S.measured_cpu(raw, 2**34)
    batched = {**raw, "rows": raw["rows"] + [{**r, "batch": 8, "tokens_per_s": 100 * r["tokens_per_s"]}
                                               for r in raw["rows"] if r.get("kind") == "decode"
                                               and r.get("status") == "measured"]}
    assert S.measured_cpu(batched, 2**34)[1].bw_fraction == pytest.approx(cal.bw_fraction)
    assert 0 < cal.bw_fraction < 1 and roof.bw_fraction == 1
