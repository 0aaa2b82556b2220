"""Attention: one exact computation (softmax attention of each query over the keys it may see) behind one dispatch,
:func:`attention`, with a backend per device.

Every call site of the model (a training forward, a prefill chunk over a cache, a decode step; self, sliding-window
and cross layers) is the same pattern: the K keys are the positions that end at the last query's position (lower-right
causal alignment, ``q_offset = K - N``), and a sliding window of W lets a query see itself and the ``W - 1`` keys
before it. Backends (:data:`BACKENDS`), chosen by device or forced by name (:func:`set_attention_backend`,
:func:`attention_backend`, or ``YOCOU_ATTENTION_BACKEND``):

- ``sdpa`` (CPU): ``scaled_dot_product_attention``; window layers at ``N >= WINDOW_BLOCKED_MIN · W`` and every
  prefill chunk over a window cache in blocks (:func:`window_attend`, linear in N), shorter ones with one boolean
  mask, a causal global call split in two below the CPU flash kernel's key block (:func:`attend`). On CPU these are
  as fast as flex (``benchmarks/README.md``, "The model's kernels"). On CUDA a boolean mask or unequal query/key heads
  send SDPA to its math kernel (fp32 scores materialised): :func:`sdpa_kernel_name` says which kernel a call gets.
- ``flex`` (CUDA): ``flex_attention`` with a cached causal sliding-window ``BlockMask`` (:func:`flex_block_mask`) for
  window layers and for prefill chunks of global layers (offset by the cached history), so no mask tensor and no
  fp32 scores are materialised; a causal global call with N == K stays on SDPA's ``is_causal`` (flash), a decode step
  on unmasked SDPA. Compiled (``torch.compile``) outside a compiled region, traced into it inside one. Its backward
  exists on CUDA only (torch 2.13): on CPU it runs forward-only, which the tests use.

Sources: PyTorch's ``torch.nn.functional.scaled_dot_product_attention`` and ``torch.nn.attention.flex_attention``
docs; the backend split follows torchtitan's ``models/common/attention.py`` (read, not copied).

Shape suffixes as in :mod:`yocou.model` (B batch, N queries, K keys, S slot capacity, C chunk, H query heads, G
key/value heads, D the feature axis: d_model or the head dim, T flattened tokens, E experts).
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Iterator

import torch
import torch.nn.functional as F

__all__ = ["BACKENDS", "CPU_FLASH_KV_SPLIT", "WINDOW_BLOCKED_MIN", "attend", "attention", "attention_backend",
           "backend_for", "call_sites", "flex_block_mask", "position_mask", "sdpa_kernel_name",
           "set_attention_backend", "window_attend"]

BACKENDS = ("sdpa", "flex")
"""The attention backends :func:`attention` dispatches to (module docstring)."""

_forced_backend: str | None = None


CPU_FLASH_KV_SPLIT = 512
"""Key block of PyTorch's CPU flash-attention kernel (``kvSplitSize``, aten FlashAttentionKernel.cpp, torch 2.13)."""


WINDOW_BLOCKED_MIN = 4
"""A full forward (training) runs sliding-window attention in blocks (:func:`window_attend`, linear in N)
from ``N >= WINDOW_BLOCKED_MIN · window``, below that as one masked call, which is faster there (measured:
``benchmarks/README.md``, "The model's kernels")."""


def attend(q_BHND: torch.Tensor, k_BGKD: torch.Tensor, v_BGKD: torch.Tensor, *, causal: bool = False,
           mask_NK: torch.Tensor | None = None) -> torch.Tensor:
    """Grouped-query attention through ``scaled_dot_product_attention``.

    ``causal``: the plain causal pattern with N == K. ``mask_NK``: boolean
    ``[N, K]``, True where the query may attend (see :func:`position_mask`).
    Neither: every key is visible (a decode step on a global slot).
    Returns ``[B, H, N, D]``.

    When every key is visible, the ``H / G`` query heads of a key head are folded
    into its query rows (``[B, G, M, D]``, M = (H/G)·N): exact, and on CPU in bf16 many
    times faster for a decode step than ``enable_gqa`` with one query row.
    ``causal`` on CPU with ``CPU_FLASH_KV_SPLIT / 2 <= N <= CPU_FLASH_KV_SPLIT``
    runs as two calls that skip the keys no query of the first half sees (exact).
    """
    k_BGKD = k_BGKD.to(q_BHND.dtype)
    v_BGKD = v_BGKD.to(q_BHND.dtype)
    B, H, N, Dh = q_BHND.shape
    G = k_BGKD.shape[1]
    if H != G and mask_NK is None and not causal:
        q_BGMD = q_BHND.reshape(B, G, (H // G) * N, Dh)
        return F.scaled_dot_product_attention(q_BGMD, k_BGKD, v_BGKD).reshape(B, H, N, Dh)
    if causal and q_BHND.device.type == "cpu" and CPU_FLASH_KV_SPLIT // 2 <= N <= CPU_FLASH_KV_SPLIT:
        # PyTorch's CPU flash kernel scores keys in blocks of CPU_FLASH_KV_SPLIT and skips only whole blocks
        # past the diagonal, so up to that length a causal call costs as much as a dense one. Two calls never
        # score the quarter that no query sees (queries [0, N/2) against keys [N/2, N)): queries [0, N/2) over
        # keys [0, N/2) (causal), queries [N/2, N) over all N keys with the causal mask. Exact (measured:
        # benchmarks/README.md, "The model's kernels").
        h = N // 2
        mask = position_mask(torch.arange(h, N, device=q_BHND.device), torch.arange(N, device=q_BHND.device), None)
        return torch.cat([
            F.scaled_dot_product_attention(q_BHND[:, :, :h], k_BGKD[:, :, :h], v_BGKD[:, :, :h], is_causal=True,
                                           enable_gqa=H != G),
            F.scaled_dot_product_attention(q_BHND[:, :, h:], k_BGKD, v_BGKD, attn_mask=mask, enable_gqa=H != G),
        ], dim=2)
    return F.scaled_dot_product_attention(q_BHND, k_BGKD, v_BGKD, attn_mask=mask_NK, is_causal=causal,
                                          enable_gqa=H != G)


@functools.lru_cache(maxsize=8)
def _window_block_mask(n_blocks: int, block: int, window: int, n_pad: int, device: str) -> torch.Tensor:
    """``[n_blocks, 1, block, block + window - 1]`` boolean mask of :func:`window_attend`.

    Query ``i`` of a block sees local keys ``i .. i + window - 1``; the first ``n_pad``
    keys of the whole (padded) key sequence are padding and never seen.
    """
    S = block + window - 1
    i = torch.arange(block, device=device)[:, None]
    s = torch.arange(S, device=device)[None, :]
    base_QS = (s >= i) & (s <= i + window - 1)
    if n_pad == 0:
        return base_QS[None, None].expand(n_blocks, 1, block, S)
    key_idx_JS = torch.arange(n_blocks, device=device)[:, None] * block + s
    return (base_QS[None] & (key_idx_JS >= n_pad)[:, None, :])[:, None]


def window_attend(q_BHND: torch.Tensor, k_BGSD: torch.Tensor, v_BGSD: torch.Tensor, n_hist: int, window: int,
                  block: int | None = None) -> torch.Tensor:
    """Sliding-window attention in blocks: cost ``N·(block + W)``, linear in N, no ``N×N`` scores.

    Keys are in position order and contiguous: ``S = n_hist + N`` keys whose last
    ``N`` are the queries' own positions, so query ``i`` sits at key index
    ``n_hist + i`` and sees key indices ``n_hist + i - W + 1 .. n_hist + i`` (W keys
    including itself, docs/design.md sections 1 and 3). Queries go in blocks of ``block``
    (default ``min(W, N)``); each block attends over a span of ``block + W - 1`` keys
    with one fixed band mask (the left padding of a short history masked out).

    Shapes: ``q [B, H, N, D]``, ``k, v [B, G, n_hist + N, D]`` -> ``[B, H, N, D]``; inside, Q queries per block, J
    blocks, X = B·J block rows, S = Q + W - 1 keys per block.

    Raises:
        ValueError: the keys are not ``n_hist + N`` long.
    """
    B, H, N, Dh = q_BHND.shape
    G, S_all = k_BGSD.shape[1], k_BGSD.shape[2]
    if S_all != n_hist + N:
        raise ValueError(f"window_attend: {S_all} keys given, expected n_hist + N = {n_hist} + {N}")
    W = window
    Q = min(W, N) if block is None else block
    n_blocks = -(-N // Q)
    # Key sequence k' whose index 0 is the first key query 0 may see (position n_hist - W + 1).
    n_pad = max(0, W - 1 - n_hist)
    lo = max(0, n_hist - W + 1)
    n_tail = n_blocks * Q - N
    k = k_BGSD[:, :, lo:].to(q_BHND.dtype)
    v = v_BGSD[:, :, lo:].to(q_BHND.dtype)
    if n_pad or n_tail:
        k = F.pad(k, (0, 0, n_pad, n_tail))
        v = F.pad(v, (0, 0, n_pad, n_tail))
    S = Q + W - 1
    # [B, G, J, D, S] -> [X, G, S, D]
    k_XGSD = k.unfold(2, S, Q).permute(0, 2, 1, 4, 3).reshape(B * n_blocks, G, S, Dh)
    v_XGSD = v.unfold(2, S, Q).permute(0, 2, 1, 4, 3).reshape(B * n_blocks, G, S, Dh)
    q = F.pad(q_BHND, (0, 0, 0, n_tail)) if n_tail else q_BHND
    q_XHQD = q.reshape(B, H, n_blocks, Q, Dh).transpose(1, 2).reshape(B * n_blocks, H, Q, Dh)
    mask = _window_block_mask(n_blocks, Q, W, n_pad, str(q_BHND.device))
    if B > 1:
        mask = mask.repeat(B, 1, 1, 1)
    o = F.scaled_dot_product_attention(q_XHQD, k_XGSD, v_XGSD, attn_mask=mask, enable_gqa=H != G)
    o = o.reshape(B, n_blocks, H, Q, Dh).transpose(1, 2).reshape(B, H, n_blocks * Q, Dh)
    return o[:, :, :N] if n_tail else o


def position_mask(qpos_N: torch.Tensor, kpos_K: torch.Tensor, window: int | None) -> torch.Tensor:
    """``[N, K]`` boolean: query at position i sees key at j iff ``j <= i`` and,
    with a sliding window W, ``i - j < W`` (W keys including itself)."""
    diff = qpos_N[:, None] - kpos_K[None, :]
    mask = diff >= 0
    if window is not None:
        mask &= diff < window
    return mask


@functools.lru_cache(maxsize=2)
def _chunk_causal_mask(start: int, n: int, device: str) -> torch.Tensor:
    """``[n, start + n]``: a chunk at positions ``start..start+n-1`` over keys ``0..start+n-1``."""
    return position_mask(torch.arange(start, start + n, device=device), torch.arange(start + n, device=device), None)


def _check_backend(name: str, where: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"{where}: unknown attention backend {name!r}; expected one of {', '.join(BACKENDS)}")
    return name


def set_attention_backend(name: str | None) -> None:
    """Force every :func:`attention` call to the backend ``name`` (one of :data:`BACKENDS`); ``None``: by device
    (:func:`backend_for`).

    Raises:
        ValueError: an unknown backend name.
    """
    global _forced_backend
    _forced_backend = None if name is None else _check_backend(name, "set_attention_backend")


@contextlib.contextmanager
def attention_backend(name: str | None) -> Iterator[None]:
    """:func:`set_attention_backend` for the ``with`` block, restored after it.

    Raises:
        ValueError: an unknown backend name.
    """
    before = _forced_backend
    set_attention_backend(name)
    try:
        yield
    finally:
        set_attention_backend(before)


def backend_for(device: torch.device | str) -> str:
    """The backend :func:`attention` uses on ``device``: the forced one (:func:`set_attention_backend`, else the
    environment variable ``YOCOU_ATTENTION_BACKEND``), else ``flex`` on CUDA and ``sdpa`` elsewhere.

    Raises:
        ValueError: ``YOCOU_ATTENTION_BACKEND`` names no backend.
    """
    if _forced_backend is not None:
        return _forced_backend
    env = os.environ.get("YOCOU_ATTENTION_BACKEND")
    if env:
        return _check_backend(env, "YOCOU_ATTENTION_BACKEND")
    return "flex" if torch.device(device).type == "cuda" else "sdpa"


@functools.lru_cache(maxsize=32)
def flex_block_mask(n_queries: int, n_keys: int, window: int | None, device: str):
    """The ``BlockMask`` of :func:`attention`'s pattern for ``flex_attention``: query i (at key position
    ``i + n_keys - n_queries``) sees key j iff ``j <= i + offset`` and, with a window W, ``i + offset - j < W``.

    Cached by shape, window and device: a training run builds one per window, a chunked prefill one per chunk offset.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    offset = n_keys - n_queries

    def causal_window(b, h, q_idx, kv_idx):
        diff = q_idx + offset - kv_idx
        return (diff >= 0) & (diff < window) if window is not None else diff >= 0

    return create_block_mask(causal_window, None, None, n_queries, n_keys, device=device)


@functools.cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def _flex(q_BHND: torch.Tensor, k_BGKD: torch.Tensor, v_BGKD: torch.Tensor, window: int | None) -> torch.Tensor:
    from torch.nn.attention.flex_attention import flex_attention

    N, K = q_BHND.shape[2], k_BGKD.shape[2]
    if q_BHND.device.type == "cpu" and torch.is_grad_enabled() and any(
            t.requires_grad for t in (q_BHND, k_BGKD, v_BGKD)):
        raise ValueError("attention backend 'flex' has no backward on CPU (torch 2.13): train on CPU with 'sdpa' "
                         "(unset YOCOU_ATTENTION_BACKEND), or run flex under torch.no_grad()")
    block_mask = flex_block_mask(N, K, window, str(q_BHND.device))
    gqa = q_BHND.shape[1] != k_BGKD.shape[1]
    if torch.compiler.is_compiling():  # traced into the caller's graph
        return flex_attention(q_BHND, k_BGKD, v_BGKD, block_mask=block_mask, enable_gqa=gqa)
    if q_BHND.device.type == "cpu":  # eager: the unfused reference kernel (forward only on CPU)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            return flex_attention(q_BHND, k_BGKD, v_BGKD, block_mask=block_mask, enable_gqa=gqa)
    return _compiled_flex()(q_BHND, k_BGKD, v_BGKD, block_mask=block_mask, enable_gqa=gqa)


def _all_visible(N: int, K: int, window: int | None) -> bool:
    """A decode step (one query at the last key position) that sees every key given."""
    return N == 1 and (window is None or K <= window)


def attention(q_BHND: torch.Tensor, k_BGKD: torch.Tensor, v_BGKD: torch.Tensor, *, window: int | None = None,
              backend: str | None = None, key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Causal (optionally sliding-window) grouped-query attention, the one entry of every call site.

    The K keys are consecutive positions ending at the last query's position: query i is at key position
    ``q_offset + i`` with ``q_offset = K - N`` (a training forward: K = N; a prefill chunk over ``K - N`` cached
    keys; a decode step: N = 1). Query i sees key j iff ``j <= q_offset + i`` and, with ``window`` W,
    ``q_offset + i - j < W`` (W keys including itself; docs/design.md sections 1 and 3). A decode step over a
    window ring passes exactly its ``min(pos + 1, W)`` keys, in any order: all of them are visible.

    Args:
        q_BHND: queries ``[B, H, N, D]``.
        k_BGKD, v_BGKD: keys and values ``[B, G, K, D]``, ``H % G == 0``, ``K >= N``; cast to the queries' dtype.
        window: the sliding window W in tokens, ``None`` for global (and cross) attention.
        backend: one of :data:`BACKENDS`; ``None``: :func:`backend_for` the queries' device.
        key_mask: a static-shape decode step (:class:`yocou.model.cache.StaticKVCache`, N = 1): boolean
            ``[B, 1, 1, K]``, True where the row's query may attend, in place of the alignment and ``window``
            (the cache's whole slot is passed; every backend runs it as one masked SDPA call).

    Returns:
        ``[B, H, N, D]`` in the queries' dtype.

    Raises:
        ValueError: fewer keys than queries, an unknown backend, or ``key_mask`` with ``N != 1`` or a ``window``.
    """
    N, K = q_BHND.shape[2], k_BGKD.shape[2]
    if key_mask is not None:
        if N != 1 or window is not None:
            raise ValueError(f"attention: key_mask is for a decode step without a window (the mask is the window); "
                             f"got N={N}, window={window}")
        B, H, _, Dh = q_BHND.shape
        G = k_BGKD.shape[1]  # fold the H/G query heads of a key head into its query rows, as attend() does
        q_BGMD = q_BHND.reshape(B, G, H // G, Dh)
        o = F.scaled_dot_product_attention(q_BGMD, k_BGKD.to(q_BHND.dtype), v_BGKD.to(q_BHND.dtype),
                                           attn_mask=key_mask)
        return o.reshape(B, H, 1, Dh)
    if K < N:
        raise ValueError(f"attention: {K} keys for {N} queries; the keys must end at the last query (K >= N)")
    backend = _check_backend(backend, "attention") if backend is not None else backend_for(q_BHND.device)
    k_BGKD = k_BGKD.to(q_BHND.dtype)
    v_BGKD = v_BGKD.to(q_BHND.dtype)
    if _all_visible(N, K, window):
        return attend(q_BHND, k_BGKD, v_BGKD)
    if window is not None and window >= K:
        window = None  # the window covers every key: plain causal attention
    if window is None and K == N:
        return attend(q_BHND, k_BGKD, v_BGKD, causal=True)
    if backend == "flex":
        return _flex(q_BHND, k_BGKD, v_BGKD, window)
    if window is not None:
        if K > N or N >= WINDOW_BLOCKED_MIN * window:
            return window_attend(q_BHND, k_BGKD, v_BGKD, K - N, window)
        pos_N = torch.arange(N, device=q_BHND.device)
        return attend(q_BHND, k_BGKD, v_BGKD, mask_NK=position_mask(pos_N, pos_N, window))
    return attend(q_BHND, k_BGKD, v_BGKD, mask_NK=_chunk_causal_mask(K - N, N, str(q_BHND.device)))


def sdpa_kernel_name(q_BHND: torch.Tensor, k_BGKD: torch.Tensor, v_BGKD: torch.Tensor, *,
                     attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> str:
    """The kernel ``scaled_dot_product_attention`` takes for these inputs on their device, by PyTorch's own checks
    (``torch.backends.cuda.can_use_flash_attention`` / ``can_use_efficient_attention`` / ``can_use_cudnn_attention``,
    in the order SDPA tries them): ``flash``, ``efficient``, ``cudnn`` or ``math`` on CUDA; ``cpu`` (the fused CPU
    kernel, which takes masks and grouped heads) elsewhere.
    """
    if q_BHND.device.type != "cuda":
        return "cpu"
    from torch.backends.cuda import (
        SDPAParams,
        can_use_cudnn_attention,
        can_use_efficient_attention,
        can_use_flash_attention,
    )

    gqa = q_BHND.shape[1] != k_BGKD.shape[1]
    params = SDPAParams(q_BHND, k_BGKD, v_BGKD, attn_mask, 0.0, is_causal, gqa)
    for name, can in (("cudnn", can_use_cudnn_attention), ("flash", can_use_flash_attention),
                      ("efficient", can_use_efficient_attention)):
        if (name != "cudnn" or torch.backends.cuda.cudnn_sdp_enabled()) and can(params, False):
            return name
    return "math"


def call_sites(n_heads: int, n_kv_heads: int, head_dim: int, seq_len: int, window: int | None, *,
               device: torch.device | str, dtype: torch.dtype, backend: str | None = None,
               chunk: int = 4096, static_decode: bool = False) -> dict[str, str]:
    """The kernel each attention call site of a model gets on ``device``: ``{call site: kernel}``.

    Call sites: ``train/global`` (a causal global or cross layer over ``seq_len``), ``train/window`` (a sliding-window
    layer, when ``window`` is given), ``prefill/global`` (a chunk of ``chunk`` queries after ``chunk`` cached keys),
    ``prefill/window``, ``decode`` (one query over every key; ``static_decode``: the whole slot under a key mask,
    :class:`yocou.model.cache.StaticKVCache`). Kernels: ``flex`` (fused ``flex_attention``; ``flex
    (unfused)`` on CPU), ``blocked+<sdpa kernel>`` (:func:`window_attend`) or an SDPA kernel
    (:func:`sdpa_kernel_name`). Built on the meta device where possible; on CUDA small probe tensors of the real
    shapes are made (``[1, H, N, D]``).
    """
    device = torch.device(device)
    backend = backend or backend_for(device)

    def t(h: int, n: int) -> torch.Tensor:
        return torch.empty(1, h, n, head_dim, device=device, dtype=dtype)

    def sdpa(n: int, k: int, mask: bool, causal: bool) -> str:
        m = torch.empty(n, k, dtype=torch.bool, device=device) if mask else None
        return sdpa_kernel_name(t(n_heads, n), t(n_kv_heads, k), t(n_kv_heads, k), attn_mask=m, is_causal=causal)

    flex = "flex" if device.type == "cuda" else "flex (unfused)"
    sites = {"train/global": sdpa(seq_len, seq_len, False, True)}
    c = min(chunk, seq_len)
    if backend == "flex":
        sites["prefill/global"] = flex
    else:
        sites["prefill/global"] = sdpa(c, 2 * c, True, False)
    if window is not None and window < seq_len:
        if backend == "flex":
            sites["train/window"] = sites["prefill/window"] = flex
        else:
            q = min(window, seq_len)
            blocked = "blocked+" + sdpa(q, q + window - 1, True, False)
            sites["train/window"] = blocked if seq_len >= WINDOW_BLOCKED_MIN * window else sdpa(
                seq_len, seq_len, True, False)
            sites["prefill/window"] = blocked
    sites["decode"] = sdpa(n_heads // n_kv_heads, seq_len, static_decode, False)  # the folded query heads
    return sites
