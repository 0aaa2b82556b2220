"""Analytic accounting beside the model: parameters, FLOPs per token, KV bytes.

Sources: docs/design.md section 5 (KV bytes, which reproduce the paper's Table 10
exactly), paper Table 1 (complexities), nanoGPT/Chinchilla convention for
training FLOPs (6 × matmul parameters applied per token + attention).

FLOPs convention (docs/design.md section 7: FLOPs per token counted analytically for
each variant, matmuls plus attention), for a plain training forward (``cache=None``)
over sequences of N tokens:

* matmuls: 2 FLOPs per multiply-add of every weight matrix applied to the token,
  each loop application counted again: fused ``wqkv`` (self layers), ``wq`` (cross
  layers), ``wo``, the SwiGLU ``w13``/``w2`` (MoE: the router, the ``top_k`` routed
  experts and the shared expert), the K̂V̂ maker ``wkv`` once per ``kv``
  application, and the LM head at every position. Not counted: the embedding
  lookup, norms, RoPE, activations, softmax, the loss (elementwise).
* attention: per attention application ``4·H·d_h·k`` per query (``Q·Kᵀ`` and
  ``P·V``), with ``k`` the keys charged to the query. ``attention="visible"``
  (the default, logged with every training row and used for "equal FLOPs"
  budgets): the keys the query may see, i.e. the mean causal context
  ``(N+1)/2`` for global and cross attention and the window ``W`` (``min(i+1, W)``
  at position i) for sliding-window layers: what an attention kernel that skips
  masked blocks does, and what the architecture costs. ``attention="dense"``: all
  ``N`` keys for every attention application, the ``N×N`` score matrix of one
  ``scaled_dot_product_attention`` call with a causal flag or a boolean window mask
  (``yocou.model.attention.attention``), which is what ``torch.utils.flop_counter`` charges for it.
  The training forward makes such calls for global and cross attention and for
  window layers shorter than ``model.WINDOW_BLOCKED_MIN · W``; longer window layers
  run in blocks (``model.window_attend``), about ``N·(2W - 1)`` scores. The two
  conventions differ only in the attention term: dense/visible ≈ 2 for causal
  layers and ≈ N/W for window layers.
* training = 3 × forward: the backward of every matmul is two matmuls of the same
  size (input and weight gradients); for attention, the four products of the
  backward (dP, dV, dQ, dK) over the same key pairs. The recomputation of the
  scores inside a fused attention backward is not counted (model FLOPs, not
  hardware FLOPs); torch's stock counter formula for a fused SDPA backward does
  count it (5 products instead of 4, so 3.5 × the forward attention term).

``tests/test_studies.py`` checks both conventions against
``torch.utils.flop_counter.FlopCounterMode`` on a training step of every variant.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch.utils.flop_counter import register_flop_formula

from yocou.model.config import ModelConfig, expand_plan

@register_flop_formula(torch.ops.aten._grouped_mm)
def _grouped_mm_flops(a_shape: tuple[int, ...], b_shape: tuple[int, ...], *args: object, out_shape: object = None,
                      **kwargs: object) -> int:
    """``torch.utils.flop_counter``'s count for ``torch._grouped_mm`` (the MoE's expert groups, which torch 2.13's
    counter does not count): 2 FLOPs per multiply-add of the groups' matmuls. ``[M, K] x [E, K, N]`` (forward, input
    gradient): ``2·M·K·N``; ``[K, M] x [M, N]`` summed per group into ``[E, K, N]`` (weight gradient): ``2·K·M·N``;
    ``[E, M, K] x [E, K, N]``: ``2·E·M·K·N``."""
    if len(a_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[-1]
    return 2 * a_shape[0] * a_shape[1] * a_shape[2] * b_shape[-1]


DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}


def dtype_bytes(dtype: str | torch.dtype) -> int:
    """Bytes per element for a dtype name (``bf16``, ``fp32``, ...) or torch dtype.

    Raises:
        ValueError: unknown dtype name.
    """
    if isinstance(dtype, torch.dtype):
        return torch.empty((), dtype=dtype).element_size()
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


def kv_cache_bytes(cfg: ModelConfig, seq_len: int, *, batch_size: int = 1, dtype: str | torch.dtype = "bf16",
                   by_kind: bool = False) -> int | dict[str, int]:
    """Bytes of the KV cache for ``batch_size`` sequences of ``seq_len`` tokens.

    Per sequence, with ``d_kv = n_kv_heads · head_dim`` and ``b`` bytes per element,
    each global self-attention application holds ``2·b·d_kv·N``, each sliding-window
    application ``2·b·d_kv·W`` and each shared K̂V̂ slot ``2·b·d_kv·N`` (docs/design.md
    section 5). Summed over the plan this gives, e.g., YOCO-U
    ``2·b·d_kv·N + 2·b·T·L_s·W·d_kv``.

    Returns an int, or with ``by_kind`` a dict ``{"global", "window", "shared"}``.
    """
    if seq_len < 1 or batch_size < 1:
        raise ValueError(f"seq_len and batch_size must be >= 1, got {seq_len}, {batch_size}")
    row = 2 * dtype_bytes(dtype) * cfg.d_kv * batch_size
    out = {"global": 0, "window": 0, "shared": 0}
    for a in expand_plan(cfg):
        if a.kind == "kv":
            out["shared"] += row * seq_len
        elif a.kind == "self":
            if a.window is None:
                out["global"] += row * seq_len
            else:
                out["window"] += row * a.window
    return out if by_kind else sum(out.values())


def param_count(cfg: ModelConfig, *, embedding: bool = True) -> int:
    """Number of parameters, from the shapes alone (tests compare with the module).

    ``embedding=False`` leaves out the input embedding (not the LM head).
    """
    D, H, G, Dh = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    ffn = _ffn_params(cfg)
    self_layer = 2 * D + D * H * Dh * 2 + 2 * D * G * Dh + ffn
    cross_layer = 2 * D + D * H * Dh * 2 + ffn
    kv_maker = D + 2 * D * G * Dh
    total = 0
    for st in cfg.stages:
        if st.kind == "self":
            total += st.n_layers * self_layer
        else:
            total += st.n_layers * cross_layer + kv_maker
    total += D + D * cfg.vocab_size  # final norm + LM head
    if embedding:
        total += cfg.vocab_size * D
    return total


def _ffn_params(cfg: ModelConfig) -> int:
    D = cfg.d_model
    if not cfg.n_experts:
        return 3 * D * cfg.d_ff
    return D * cfg.n_experts + cfg.n_experts * 3 * D * cfg.d_expert + 3 * D * cfg.d_shared_expert


def _ffn_active(cfg: ModelConfig) -> int:
    D = cfg.d_model
    if not cfg.n_experts:
        return 3 * D * cfg.d_ff
    return D * cfg.n_experts + cfg.top_k * 3 * D * cfg.d_expert + 3 * D * cfg.d_shared_expert


def active_params_per_token(cfg: ModelConfig) -> int:
    """Matrix parameters multiplied per token in one forward, counting each loop
    application (so YOCO-U's self-decoder counts T times); embedding lookup excluded.

    Self layer: ``wqkv`` + ``wo`` + FFN; cross layer: ``wq`` + ``wo`` + FFN; ``kv``
    application: ``wkv``; plus the LM head. FFN: dense SwiGLU ``3·D·d_ff``, or MoE
    router ``D·E`` + ``top_k`` routed experts + the shared expert (``3·D·d`` each).
    """
    D, H, G, Dh = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    ffn = _ffn_active(cfg)
    n = D * cfg.vocab_size
    for a in expand_plan(cfg):
        if a.kind == "self":
            n += 2 * D * H * Dh + 2 * D * G * Dh + ffn
        elif a.kind == "cross":
            n += 2 * D * H * Dh + ffn
        else:
            n += 2 * D * G * Dh
    return n


AttentionConvention = Literal["visible", "dense"]
ATTENTION_CONVENTIONS = ("visible", "dense")


def attention_context(window: int | None, seq_len: int) -> float:
    """Mean number of keys a query may see in a causal sequence of ``seq_len``.

    Global: ``(N + 1) / 2``. Window W (W keys including itself): position i sees
    ``min(i + 1, W)`` keys, so ``(W·(W+1)/2 + (N−W)·W) / N`` when ``W < N``.
    """
    N = seq_len
    if window is None or window >= N:
        return (N + 1) / 2
    W = window
    # positions 0..W-1 see i+1 keys, the rest see W.
    return (W * (W + 1) / 2 + (N - W) * W) / N


def attention_keys_per_query(window: int | None, seq_len: int, attention: AttentionConvention = "visible") -> float:
    """Keys charged to one query of an attention application in a plain forward of ``seq_len`` tokens.

    ``visible``: :func:`attention_context`; ``dense``: ``seq_len`` (the whole score row
    that ``scaled_dot_product_attention`` computes under a causal flag or mask).

    Raises:
        ValueError: unknown convention.
    """
    if attention == "visible":
        return attention_context(window, seq_len)
    if attention == "dense":
        return float(seq_len)
    raise ValueError(f"attention must be one of {ATTENTION_CONVENTIONS}, got {attention!r}")


def attention_flops_per_token(cfg: ModelConfig, seq_len: int, attention: AttentionConvention = "visible") -> float:
    """Forward attention FLOPs per token: ``Σ_applications 4·H·d_h·k`` (``Q·Kᵀ`` and ``P·V``),
    ``k`` from :func:`attention_keys_per_query`; self and cross applications, not ``kv``."""
    hd = cfg.n_heads * cfg.head_dim
    f = 0.0
    for a in expand_plan(cfg):
        if a.kind == "self":
            f += 4 * hd * attention_keys_per_query(a.window, seq_len, attention)
        elif a.kind == "cross":
            f += 4 * hd * attention_keys_per_query(None, seq_len, attention)
    return f


def forward_flops_per_token(cfg: ModelConfig, seq_len: int, attention: AttentionConvention = "visible") -> float:
    """Forward FLOPs per token of a training sequence of ``seq_len`` tokens.

    ``2 × active matmul parameters`` (:func:`active_params_per_token`) plus
    :func:`attention_flops_per_token` under the ``attention`` convention (module
    docstring): ``visible`` charges the mean causal context, ``W`` for window
    layers; ``dense`` charges all ``seq_len`` keys.
    """
    return 2.0 * active_params_per_token(cfg) + attention_flops_per_token(cfg, seq_len, attention)


def train_flops_per_token(cfg: ModelConfig, seq_len: int, attention: AttentionConvention = "visible") -> float:
    """Training FLOPs per token: 3 × forward (backward is twice the forward; module docstring).

    The default ``visible`` convention is the one logged by ``yocou train`` and used
    for the "equal FLOPs" budgets.
    """
    return 3.0 * forward_flops_per_token(cfg, seq_len, attention)


def summary(cfg: ModelConfig, seq_len: int) -> dict[str, float | int]:
    """Parameters, active parameters and FLOPs per token, for logs and tables."""
    return {
        "params": param_count(cfg),
        "params_non_embedding": param_count(cfg, embedding=False),
        "active_params_per_token": active_params_per_token(cfg),
        "train_flops_per_token": train_flops_per_token(cfg, seq_len),
        "n_layer_applications": sum(1 for a in expand_plan(cfg) if a.kind != "kv"),
    }
