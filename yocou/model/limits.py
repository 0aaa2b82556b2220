"""Memory checks of the entry points: refuse a model or a KV cache that does not fit, before allocating it.

The model's own code (:mod:`yocou.model.lm`, :mod:`yocou.model.cache`) reads no system state, so that it can be copied
into an exported folder; the entry points (training, loading, the CLIs, the evaluations) build through
:func:`new_model` and :func:`new_cache`, which check first. ``YOCOU_NO_MEMORY_CHECK=1`` skips every check.
"""

from __future__ import annotations

import torch

from yocou.model.accounting import dtype_bytes, kv_cache_bytes, param_count
from yocou.model.cache import KVCache
from yocou.model.config import ModelConfig
from yocou.model.lm import LM
from yocou.utils.memory import available_bytes, require

__all__ = ["decode_transient_bytes", "max_decode_batch", "new_cache", "new_model", "require_cache_memory",
           "require_param_memory"]


def require_param_memory(cfg: ModelConfig) -> None:
    """Refuse a model whose weights alone do not fit on the default device (fp32 bytes per parameter at the
    default dtype).

    Raises:
        yocou.utils.memory.MemoryRefusal: one line with the bytes needed and available.
    """
    device = torch.get_default_device()
    if device.type != "meta":
        n = param_count(cfg)
        require(n * dtype_bytes(torch.get_default_dtype()),
                f"the weights of {cfg.name} ({n:,} parameters, d_model {cfg.d_model})", device)


def new_model(cfg: ModelConfig) -> LM:
    """``LM(cfg)``, its weights checked against the memory first (:func:`require_param_memory`).

    Raises:
        yocou.utils.memory.MemoryRefusal: the weights do not fit.
    """
    require_param_memory(cfg)
    return LM(cfg)


def require_cache_memory(cfg: ModelConfig, batch_size: int, max_len: int, *, dtype: torch.dtype = torch.float32,
                         device: torch.device | str = "cpu") -> None:
    """Refuse a cache whose bytes (:func:`yocou.model.accounting.kv_cache_bytes`) do not fit on ``device``.

    Raises:
        yocou.utils.memory.MemoryRefusal: one line with the bytes needed and available.
    """
    if torch.device(device).type != "meta":
        require(kv_cache_bytes(cfg, max_len, batch_size=batch_size, dtype=dtype),
                f"the KV cache of {cfg.name} (batch {batch_size}, max_len {max_len}, {dtype})", device)


def new_cache(model: LM, batch_size: int, max_len: int, *, dtype: torch.dtype | None = None,
              fill: float = 0.0) -> KVCache:
    """``model.new_cache(...)`` (on the model's device, in its dtype unless given), its bytes checked first
    (:func:`require_cache_memory`).

    Raises:
        yocou.utils.memory.MemoryRefusal: the cache does not fit.
        ValueError: ``batch_size`` or ``max_len`` below 1.
    """
    p = next(model.parameters())
    require_cache_memory(model.cfg, batch_size, max_len, dtype=dtype or p.dtype, device=p.device)
    return model.new_cache(batch_size, max_len, dtype=dtype, fill=fill)


def decode_transient_bytes(cfg: ModelConfig, batch_size: int, chunk_size: int, *, dtype: torch.dtype) -> int:
    """An upper estimate of the memory a prefill chunk (one row at a time) or a decode step of ``batch_size`` rows
    holds beside the weights and the cache: the widest activation of a block (``2 d_ff``, ``(H + 2G) Dh``, or
    the attention scores of one chunk over ``2 chunk`` keys in fp32, SDPA's math kernel) twice over for a
    chunk, and ``batch_size`` rows of the logits in fp32 (an estimate, not a measurement)."""
    b = dtype_bytes(dtype)
    wide = max(2 * (cfg.d_ff or 0), 2 * (cfg.d_expert or 0) * (cfg.top_k or 1), cfg.d_model,
               (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim)
    chunk = 2 * chunk_size * wide * b + 4 * cfg.n_heads * chunk_size * 2 * chunk_size
    step = batch_size * (4 * cfg.vocab_size + 4 * wide * b)
    return chunk + step


def max_decode_batch(cfg: ModelConfig, seq_len: int, *, dtype: torch.dtype, device: torch.device | str,
                     chunk_size: int, cap: int, headroom: float = 0.9) -> int:
    """The largest batch ``B <= cap`` whose KV cache of ``seq_len`` tokens per row
    (:func:`yocou.model.accounting.kv_cache_bytes`) and :func:`decode_transient_bytes` fit in ``headroom`` of the
    memory free on ``device`` now (the weights already loaded); 0 when not even one row fits, ``cap`` where the
    free memory cannot be read.
    """
    got = available_bytes(device)
    if got is None:
        return cap
    budget = int(got[0] * headroom)
    per_row = kv_cache_bytes(cfg, seq_len, batch_size=1, dtype=dtype)
    lo, hi = 0, cap
    while lo < hi:  # the largest B that fits (the transient grows with B too)
        mid = (lo + hi + 1) // 2
        if mid * per_row + decode_transient_bytes(cfg, mid, chunk_size, dtype=dtype) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo
