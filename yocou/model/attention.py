"""The attention kernels: one exact computation (softmax attention of each query over the keys its mask allows) in
the forms that are fastest where each is used.

- :func:`attend`: ``scaled_dot_product_attention`` with grouped-query heads, a causal flag or a boolean mask (and,
  on CPU, a causal call split in two below PyTorch's flash-kernel key block).
- :func:`window_attend`: sliding-window attention in blocks, linear in N (training at ``N >= 4·W`` and prefill
  chunks over a window cache).
- :func:`position_mask`, :func:`mask_for`: which key each query may see, as the cheapest exact form for
  :func:`attend`.
- :func:`full_attend`: a forward without a cache (training, scoring) picks among them.

Shape suffixes as in :mod:`yocou.model` (B batch, N queries, K keys, S slot capacity, C chunk, H query heads, G
key/value heads, D the feature axis: d_model or the head dim, T flattened tokens, E experts).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

__all__ = ["CPU_FLASH_KV_SPLIT", "WINDOW_BLOCKED_MIN", "attend", "full_attend", "mask_for", "position_mask",
           "window_attend"]


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


def mask_for(qpos_N: torch.Tensor, kpos_K: torch.Tensor | None, window: int | None, full: bool
              ) -> tuple[bool, torch.Tensor | None]:
    """(causal, mask) for :func:`attend`: the cheapest exact form of the pattern.

    ``full``: keys are exactly the queries' positions 0..N-1 (a plain forward).
    With a cache and global attention, the mask of a chunk is the same for every
    layer application of the forward, so it is built once (a small memo).
    """
    if full:
        if window is None or window >= qpos_N.shape[0]:
            return True, None
        return False, position_mask(qpos_N, qpos_N, window)
    N = qpos_N.shape[0]
    if N == 1 and window is None:
        return False, None  # a decode step over a global slot sees every cached key
    assert kpos_K is not None
    K = kpos_K.shape[0]
    assert window is None, "a cached window slot attends through window_attend, without a mask"
    if K == N:
        return True, None  # the first chunk: keys are exactly the chunk's positions 0..N-1
    # A global slot or the shared K̂V̂ returns keys 0..start+N-1 for queries start..start+N-1,
    # so start = K - N (known on the host: no device sync).
    return False, _chunk_causal_mask(K - N, N, str(qpos_N.device))


@functools.lru_cache(maxsize=2)
def _chunk_causal_mask(start: int, n: int, device: str) -> torch.Tensor:
    """``[n, start + n]``: a chunk at positions ``start..start+n-1`` over keys ``0..start+n-1``."""
    return position_mask(torch.arange(start, start + n, device=device), torch.arange(start + n, device=device), None)


def full_attend(q_BHND: torch.Tensor, k_BGND: torch.Tensor, v_BGND: torch.Tensor, window: int | None
                ) -> torch.Tensor:
    """Causal attention of a forward without a cache, keys at the queries' own positions ``0..N-1``: global, or
    a sliding window of ``window`` keys (each query sees itself and the ``window - 1`` before it). Blocked
    (:func:`window_attend`, linear in N) from ``N >= WINDOW_BLOCKED_MIN · window``, else one :func:`attend` call.

    Shapes: ``q [B, H, N, D]``, ``k, v [B, G, N, D]`` -> ``[B, H, N, D]``.
    """
    N = q_BHND.shape[2]
    if window is not None and N >= WINDOW_BLOCKED_MIN * window:
        return window_attend(q_BHND, k_BGND, v_BGND, 0, window)
    pos_N = torch.arange(N, device=q_BHND.device)
    causal, mask = mask_for(pos_N, None, window, full=True)
    return attend(q_BHND, k_BGND, v_BGND, causal=causal, mask_NK=mask)
