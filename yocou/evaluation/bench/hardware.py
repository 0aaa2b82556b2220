"""The hardware's limits, measured beside the timings they bound, and what a decode step must read.

A decode step of a large model is bound by memory traffic: every weight and every cached key and value it attends
to crosses the memory bus at least once. A prefill is bound by matrix multiplies. To say how close an
implementation runs to the machine, each timing is put beside a limit measured in the same run:

* :func:`triad_bandwidth`: the STREAM triad ``a = b + s * c`` over three fp32 buffers far larger than the caches;
  bytes per pass = ``3 * n * 4`` (two reads, one write; STREAM's convention, which does not count the
  write-allocate read), bandwidth = bytes per pass / median seconds.
* :func:`matmul_peak`: an ``n x n`` by ``n x n`` matrix multiply; FLOPs per pass = ``2 n^3``.
* :func:`decode_read_bytes`: the bytes one decode step must read at least: the weights once (the LM head
  included, the embedding table only for the rows looked up) plus, per layer application, the keys and values
  it attends to (a global self-attention layer and each cross-decoder layer read ``N + 1`` positions, a sliding
  window ``min(W, N) + 1``). ``weights="once"`` counts a looped stage's weights once (a lower bound);
  ``weights="per_application"`` counts them at every loop, which is what crosses the bus when the weights are far
  larger than the last-level cache (at the 1.3B shape: gigabytes against tens of megabytes).
* :func:`prefill_flops`: the useful FLOPs of a prefill with YOCO's early exit: every application up to the last
  cache write over all prompt tokens, the rest (YOCO's cross-decoder) and the LM head for the last token only;
  ``2 x`` matrix parameters per token plus ``4 H d_h`` per visible key (the "visible" convention of
  :mod:`yocou.model.accounting`: a query at position ``p`` sees ``p + 1`` keys, ``min(p + 1, W)`` in a window).
* :func:`fill_cache`: a cache filled to ``N`` tokens without a prefill (random keys and values; the work of a
  decode step does not depend on what the cache holds), so decode can be timed at lengths whose prefill would
  take hours on a CPU.

Timings are taken with ``clock`` (``time.perf_counter`` by default); tests pass a fake clock.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from yocou.model.accounting import dtype_bytes, param_count
from yocou.model.cache import KVCache
from yocou.model.config import ModelConfig, early_exit_index, expand_plan

__all__ = ["application_params", "decode_read_bytes", "fill_cache", "matmul_peak", "prefill_flops", "triad_bandwidth"]


def _seconds(fn: Callable[[], Any], repeats: int, clock: Callable[[], float]) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        out.append(clock() - t0)
    return out


def _synced(fn: Callable[[], Any], device: torch.device) -> Callable[[], Any]:
    """``fn`` followed by a wait for the device (CUDA runs kernels asynchronously: a clock read after the launch
    alone would time the launch)."""
    if device.type != "cuda":
        return fn

    def run() -> None:
        fn()
        torch.cuda.synchronize(device)

    return run


def triad_bandwidth(n_elems: int = 1 << 27, repeats: int = 5, *, warmup: int = 1,
                    clock: Callable[[], float] = time.perf_counter, device: str | torch.device = "cpu"
                    ) -> dict[str, Any]:
    """Memory bandwidth by the STREAM triad over three fp32 buffers of ``n_elems`` each on ``device`` (default
    2**27: 512 MiB each, far above any cache).

    Returns ``{"n_elems", "bytes_per_pass", "seconds" (each repeat), "median_s", "bytes_per_s", "device"}``.

    Raises:
        ValueError: ``n_elems`` or ``repeats`` below 1.
    """
    if n_elems < 1 or repeats < 1:
        raise ValueError(f"triad_bandwidth: n_elems and repeats must be >= 1, got {n_elems}, {repeats}")
    dev = torch.device(device)
    g = torch.Generator().manual_seed(0)
    b, c = torch.rand(n_elems, generator=g).to(dev), torch.rand(n_elems, generator=g).to(dev)
    a = torch.empty(n_elems, device=dev)

    @functools.partial(_synced, device=dev)
    def triad() -> None:
        torch.add(b, c, alpha=2.0, out=a)

    for _ in range(warmup):
        triad()
    secs = _seconds(triad, repeats, clock)
    i = n_elems // 2
    if not torch.isclose(a[i], b[i] + 2.0 * c[i]):
        raise AssertionError("triad_bandwidth: the kernel did not compute a = b + 2c")
    nbytes = 3 * n_elems * 4
    med = statistics.median(secs)
    return {"n_elems": n_elems, "bytes_per_pass": nbytes, "seconds": secs, "median_s": med,
            "bytes_per_s": nbytes / med if med > 0 else float("inf"), "device": str(dev)}


def matmul_peak(n: int = 2048, repeats: int = 5, *, dtype: torch.dtype = torch.float32, warmup: int = 1,
                clock: Callable[[], float] = time.perf_counter, device: str | torch.device = "cpu"
                ) -> dict[str, Any]:
    """Achievable matmul FLOP/s: ``n x n @ n x n`` in ``dtype`` on ``device``, ``2 n^3`` FLOPs a pass.

    Returns ``{"n", "dtype", "flop_per_pass", "seconds", "median_s", "flop_per_s", "device"}``.

    Raises:
        ValueError: ``n`` or ``repeats`` below 1.
    """
    if n < 1 or repeats < 1:
        raise ValueError(f"matmul_peak: n and repeats must be >= 1, got {n}, {repeats}")
    dev = torch.device(device)
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(n, n, generator=g).to(device=dev, dtype=dtype) for _ in range(2))
    out = torch.empty(n, n, dtype=dtype, device=dev)

    @functools.partial(_synced, device=dev)
    def mm() -> None:
        torch.matmul(x, y, out=out)

    for _ in range(warmup):
        mm()
    secs = _seconds(mm, repeats, clock)
    flop = 2 * n ** 3
    med = statistics.median(secs)
    return {"n": n, "dtype": str(dtype).removeprefix("torch."), "flop_per_pass": flop, "seconds": secs,
            "median_s": med, "flop_per_s": flop / med if med > 0 else float("inf"), "device": str(dev)}


def application_params(cfg: ModelConfig) -> dict[str, int]:
    """Parameters one application of each kind uses, from the shapes (:func:`yocou.model.accounting.param_count`'s
    terms): ``self`` (norms, ``wqkv``, ``wo``, FFN), ``cross`` (norms, ``wq``, ``wo``, FFN), ``kv`` (norm, ``wkv``),
    ``head`` (final norm and LM head). ``*_matrix``: the same without the norms (what a matmul multiplies).
    Dense FFNs only.

    Raises:
        ValueError: a mixture-of-experts config (its active parameters depend on the routing).
    """
    if cfg.n_experts:
        raise ValueError(f"application_params: {cfg.name} is a mixture of experts; only dense FFNs are counted")
    D, H, G, Dh = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    ffn = 3 * D * cfg.d_ff
    m = {"self_matrix": 2 * D * H * Dh + 2 * D * G * Dh + ffn, "cross_matrix": 2 * D * H * Dh + ffn,
         "kv_matrix": 2 * D * G * Dh, "head_matrix": D * cfg.vocab_size}
    return {**m, "self": m["self_matrix"] + 2 * D, "cross": m["cross_matrix"] + 2 * D, "kv": m["kv_matrix"] + D,
            "head": m["head_matrix"] + D}


def decode_read_bytes(cfg: ModelConfig, n_ctx: int, *, dtype: str | torch.dtype = "fp32", batch_size: int = 1,
                      weights: str = "once") -> dict[str, int]:
    """The bytes one decode step of ``batch_size`` tokens must read at least, with ``n_ctx`` tokens cached.

    Returns ``{"weights", "kv", "total"}``: the weights (the embedding table only for ``batch_size`` rows), once
    (``weights="once"``) or at every application of a looped stage (``weights="per_application"``), and
    the keys and values each application attends to: ``2 * b * d_kv * batch_size`` per position, ``n_ctx + 1``
    positions for a global self-attention layer and each cross-decoder layer (the cached ones and the new token's),
    ``min(W, n_ctx) + 1`` for a sliding window ``W`` (the ring's entries and the new token's).

    Raises:
        ValueError: ``n_ctx`` below 0, ``batch_size`` below 1 or ``weights`` not ``once``/``per_application``.
    """
    if n_ctx < 0 or batch_size < 1:
        raise ValueError(f"decode_read_bytes: n_ctx must be >= 0 and batch_size >= 1, got {n_ctx}, {batch_size}")
    if weights not in ("once", "per_application"):
        raise ValueError(f"decode_read_bytes: weights must be 'once' or 'per_application', got {weights!r}")
    b = dtype_bytes(dtype)
    plan = expand_plan(cfg)
    if weights == "once":
        w = param_count(cfg, embedding=False)
    else:
        p = application_params(cfg)
        w = p["head"] + sum(p[a.kind] for a in plan)
    row = 2 * b * cfg.d_kv * batch_size
    kv = 0
    for a in plan:
        if a.kind == "cross" or (a.kind == "self" and a.window is None):
            kv += row * (n_ctx + 1)
        elif a.kind == "self":
            kv += row * (min(a.window, n_ctx) + 1)
    wb = (w + batch_size * cfg.d_model) * b
    return {"weights": wb, "kv": kv, "total": wb + kv}


def _visible_keys(window: int | None, n: int) -> int:
    """Keys seen by the queries at positions ``0..n-1`` of a causal sequence: ``sum_p min(p + 1, W)``."""
    if window is None or window >= n:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


def prefill_flops(cfg: ModelConfig, n_prompt: int, *, batch_size: int = 1) -> dict[str, int]:
    """Useful FLOPs of a prefill of ``n_prompt`` tokens with YOCO's early exit (:func:`yocou.model.generate.prefill`).

    Applications before :func:`yocou.model.config.early_exit_index` run over every prompt token, the rest and the LM
    head over the last token only. Matmuls: ``2 x`` matrix parameters (:func:`application_params`) per token;
    attention: ``4 * n_heads * head_dim`` per visible key (``Q K^T`` and ``P V``). Returns
    ``{"matmul", "attention", "total"}`` for the whole batch.

    Raises:
        ValueError: ``n_prompt`` or ``batch_size`` below 1, or a mixture-of-experts config.
    """
    if n_prompt < 1 or batch_size < 1:
        raise ValueError(f"prefill_flops: n_prompt and batch_size must be >= 1, got {n_prompt}, {batch_size}")
    p = application_params(cfg)
    plan = expand_plan(cfg)
    cut = early_exit_index(plan)
    per_key = 4 * cfg.n_heads * cfg.head_dim
    mm = 2 * p["head_matrix"]
    att = 0
    for i, a in enumerate(plan):
        tokens = n_prompt if i < cut else 1
        mm += 2 * p[f"{a.kind}_matrix"] * tokens
        if a.kind == "kv":
            continue
        window = a.window if a.kind == "self" else None
        keys = _visible_keys(window, n_prompt) if i < cut else min(n_prompt, window or n_prompt)
        att += per_key * keys
    return {"matmul": batch_size * mm, "attention": batch_size * att, "total": batch_size * (mm + att)}


@torch.no_grad()
def fill_cache(cache: KVCache, n_ctx: int, *, generator: torch.Generator | None = None) -> KVCache:
    """Fill ``cache`` as if ``n_ctx`` tokens had been prefilled: random normal keys and values in every position
    a prefill would have written (the first ``n_ctx`` of a global or shared slot, the whole ring of a window slot
    once ``n_ctx >= W``), and ``cache.pos = n_ctx``. Positions a prefill would not have written keep their fill
    value (a NaN fill shows any read of them in the logits).

    Raises:
        ValueError: ``n_ctx`` outside ``0 .. cache.max_len - 1`` (a decode step needs room for its token).
    """
    if not 0 <= n_ctx < cache.max_len:
        raise ValueError(f"fill_cache: n_ctx must be in 0..{cache.max_len - 1} (max_len - 1), got {n_ctx}")
    for slot in cache.slots.values():
        n = n_ctx if slot.window is None else min(n_ctx, slot.window)
        for t in (slot.k_BGSD, slot.v_BGSD):
            t[:, :, :n].normal_(generator=generator)
    cache.pos = n_ctx
    return cache
