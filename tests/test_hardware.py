"""The hardware-limit helpers: a filled cache is a real cache's bytes and decodes without reading an unwritten
position; the bandwidth and matmul-peak arithmetic on known buffers with a fake clock (no timing in a test); the
bytes a decode step must read, by hand from the stages."""

from __future__ import annotations

import itertools

import pytest
import torch

import yocou.model.config as C
from yocou.evaluation.bench.hardware import (
    decode_read_bytes,
    fill_cache,
    matmul_peak,
    triad_bandwidth,
)
from yocou.model.accounting import kv_cache_bytes, param_count
from yocou.model.generate import decode_step, prefill
from yocou.model.lm import LM


def _clock(step: float):
    t = itertools.count()
    return lambda: next(t) * step


@pytest.mark.parametrize("variant", ["transformer", "yoco", "rins", "yocou"])
def test_a_filled_cache_has_the_real_caches_bytes_and_reads_only_filled_positions(variant: str) -> None:
    torch.manual_seed(0)
    cfg = C.preset(f"{variant}-smoke")
    model = LM(cfg).eval()
    n, max_len = 40, 48  # past the smoke window (16): the rings are full
    real = model.new_cache(1, max_len)
    with torch.no_grad():
        prefill(model, torch.randint(0, cfg.vocab_size, (1, n)), real)
    filled = fill_cache(model.new_cache(1, max_len, fill=float("nan")), n, generator=torch.Generator().manual_seed(1))
    assert filled.nbytes() == real.nbytes() == kv_cache_bytes(cfg, max_len, dtype=torch.float32)
    assert filled.pos == real.pos == n
    for s in filled.slots.values():
        if s.window is None:  # positions a prefill would not have written keep their NaN fill
            assert torch.isfinite(s.k_BGSD[:, :, :n]).all() and torch.isnan(s.k_BGSD[:, :, n:]).all()
        else:
            assert torch.isfinite(s.k_BGSD).all()
    with torch.no_grad():
        logits = decode_step(model, torch.tensor([3]), filled)
    assert torch.isfinite(logits).all()  # no unwritten (NaN) position was read
    with pytest.raises(ValueError, match="n_ctx must be in 0..47"):
        fill_cache(model.new_cache(1, max_len), max_len)


def test_triad_bandwidth_arithmetic_on_a_known_buffer() -> None:
    r = triad_bandwidth(1000, repeats=3, clock=_clock(0.25))
    assert r["bytes_per_pass"] == 3 * 1000 * 4 and r["seconds"] == [0.25, 0.25, 0.25]
    assert r["bytes_per_s"] == 12000 / 0.25
    with pytest.raises(ValueError):
        triad_bandwidth(0)


def test_matmul_peak_arithmetic() -> None:
    r = matmul_peak(64, repeats=2, clock=_clock(0.5))
    assert r["flop_per_pass"] == 2 * 64 ** 3 and r["flop_per_s"] == 2 * 64 ** 3 / 0.5 and r["dtype"] == "float32"


@pytest.mark.parametrize("variant", ["transformer", "yoco", "rins", "yocou"])
def test_decode_read_bytes_by_hand_from_the_stages(variant: str) -> None:
    cfg = C.preset(f"{variant}-smoke")
    n = 100
    row = 2 * 4 * cfg.d_kv
    kv = 0
    for st in cfg.stages:
        per = (n + 1) if st.kind == "cross" or st.window is None else min(st.window, n) + 1
        kv += st.n_loops * st.n_layers * row * per
    weights = (param_count(cfg) - cfg.vocab_size * cfg.d_model + cfg.d_model) * 4
    assert decode_read_bytes(cfg, n) == {"weights": weights, "kv": kv, "total": weights + kv}
