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
from yocou.utils.memory import require

__all__ = ["new_cache", "new_model", "require_cache_memory", "require_param_memory"]


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
