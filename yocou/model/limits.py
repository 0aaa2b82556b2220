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
from yocou.utils.memory import available_bytes, format_bytes, require

__all__ = ["decode_transient_bytes", "eval_row_bytes", "max_decode_batch", "new_cache", "new_model", "plan_eval_batch",
           "require_cache_memory", "require_param_memory"]


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


_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


def _widest(cfg: ModelConfig) -> int:
    """The widest activation of a block, in elements per token."""
    return max(2 * (cfg.d_ff or 0), 2 * (cfg.d_expert or 0) * (cfg.top_k or 1), cfg.d_model,
               (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim)


def eval_row_bytes(cfg: ModelConfig, seq_len: int, *, dtype: torch.dtype | str,
                   chunk_size: int | None = None) -> int:
    """An upper estimate of the bytes one row of an evaluation batch holds beside the weights (an estimate, not a
    measurement).

    * ``chunk_size=None``, one full no-grad forward of ``seq_len`` tokens (``ppl``, ``angular``, ``downstream``):
      the logits in fp32 twice (they and their log-softmax), the widest activation of a block twice over, and one
      layer's attention scores in fp32 (``n_heads x seq_len^2``, SDPA's math kernel; the fused kernels need less);
    * ``chunk_size`` given, a cached prefill in chunks (``niah``, ``longppl``): the row's KV cache of ``seq_len``
      tokens (:func:`yocou.model.accounting.kv_cache_bytes`), one chunk's transient (:func:`decode_transient_bytes`)
      and the logits of the chunk in fp32 twice.
    """
    dtype = _DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype
    if chunk_size is None:
        return 8 * seq_len * cfg.vocab_size + 2 * seq_len * _widest(cfg) * dtype_bytes(dtype) \
            + 4 * cfg.n_heads * seq_len * seq_len
    return kv_cache_bytes(cfg, seq_len, batch_size=1, dtype=dtype) \
        + decode_transient_bytes(cfg, 1, chunk_size, dtype=dtype) + 8 * chunk_size * cfg.vocab_size


def plan_eval_batch(model: LM, cap: int, *, seq_len: int, dtype: torch.dtype | str, chunk_size: int | None = None,
                    headroom: float = 0.9, log=print) -> int:
    """The batch an evaluation uses: the largest ``B <= cap`` whose rows (:func:`eval_row_bytes`) fit in
    ``headroom`` of the memory free on the model's device now (the weights already loaded), at least 1 (a row that
    does not fit is refused by the cache's own check or fails in the allocator); ``cap`` where the free memory
    cannot be read or ``YOCOU_NO_MEMORY_CHECK`` is set. Logs one line when it lowers the batch.

    Raises:
        ValueError: ``cap`` or ``seq_len`` below 1.
    """
    import os

    if cap < 1 or seq_len < 1:
        raise ValueError(f"plan_eval_batch: the batch cap and seq_len must be >= 1, got {cap} and {seq_len}")
    device = next(model.parameters()).device
    got = None if os.environ.get("YOCOU_NO_MEMORY_CHECK", "") not in ("", "0") else available_bytes(device)
    if got is None:
        return cap
    per_row = eval_row_bytes(model.cfg, seq_len, dtype=dtype, chunk_size=chunk_size)
    fits = max(1, min(cap, int(got[0] * headroom) // per_row))
    if fits < cap:
        log(f"batch {fits} (not {cap}): {fits} rows of {seq_len} tokens at about {format_bytes(per_row)} each fit in "
            f"{headroom:.0%} of {format_bytes(got[0])} ({got[1]})")
    return fits


def decode_transient_bytes(cfg: ModelConfig, batch_size: int, chunk_size: int, *, dtype: torch.dtype) -> int:
    """An upper estimate of the memory a prefill chunk (one row at a time) or a decode step of ``batch_size`` rows
    holds beside the weights and the cache: the widest activation of a block (``2 d_ff``, ``(H + 2G) Dh``, or
    the attention scores of one chunk over ``2 chunk`` keys in fp32, SDPA's math kernel) twice over for a
    chunk, and ``batch_size`` rows of the logits in fp32 (an estimate, not a measurement)."""
    b = dtype_bytes(dtype)
    wide = _widest(cfg)
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
