"""The decoder: one module for every variant, driven by the plan of the config.

Shape legend: B batch, N sequence (or chunk) length, K attended keys, D d_model,
H query heads, G key/value heads, Dh head dim, V vocabulary, F SwiGLU inner size,
E experts.

Building block (docs/design.md section 2): pre-norm residual blocks
``h = x + Mix(RMSNorm(x))``, ``out = h + SwiGLU(RMSNorm(h))``, no biases, RoPE
(theta 10000) on self-attention, grouped-query attention, untied LM head,
final RMSNorm. YOCO cross-decoder (YOCO paper Sec. 2.2, official code):
``K̂ = RMSNorm(X) W_K``, ``V̂ = RMSNorm(X) W_V`` made once from the
self-decoder's output and read by every cross layer; each cross layer has its
own W_Q, W_O, norms and FFN; the residual stream entering it is the
un-normalised self-decoder output.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from yocou.model.cache import KVCache, require_cache_memory
from yocou.model.config import Application, ModelConfig, early_exit_index, expand_plan


class RMSNorm(nn.Module):
    """RMSNorm computed in fp32 (as Llama): ``x / sqrt(mean(x²) + eps) · weight``."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x_BND: torch.Tensor) -> torch.Tensor:
        dtype = x_BND.dtype
        x = x_BND.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_inv_freq(head_dim: int, theta: float, device: torch.device | str | None = None) -> torch.Tensor:
    """RoPE's inverse frequencies ``theta^(-2i/Dh)``, ``[Dh/2]`` fp32 (RoFormer eq. 15, Llama's layout)."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))


def rope_cos_sin(pos_N: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype,
                 inv_freq: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables ``[N, Dh]`` for absolute positions (half-split layout of Llama).

    ``inv_freq``: :func:`rope_inv_freq` precomputed (``[Dh/2]`` fp32); computed here when omitted.
    """
    if inv_freq is None:
        inv_freq = rope_inv_freq(head_dim, theta, pos_N.device)
    ang = pos_N.float()[:, None] * inv_freq.float()[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x_BHND: torch.Tensor, cos_ND: torch.Tensor, sin_ND: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` by position: ``x·cos + rotate_half(x)·sin``."""
    h = x_BHND.shape[-1] // 2
    rot = torch.cat([-x_BHND[..., h:], x_BHND[..., :h]], dim=-1)
    return x_BHND * cos_ND + rot * sin_ND


def fused_linear(x: torch.Tensor, weight: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """``x @ weight.T`` split along the last dim into pieces of ``sizes`` (weight rows stacked in that order).

    ``x [..., D]``, ``weight [sum(sizes), D]`` -> one ``[..., s]`` per size. Without autograd (inference, a
    decode step) one matmul, split: fewer operators. When a gradient will flow (training), one matmul per
    row block of ``weight`` instead: each output is contiguous, so the backward needs no ``cat`` of strided
    activation gradients (only the small weight slices are gathered) and elementwise ops on the pieces run
    on dense memory; same parameters, same math up to rounding. Effect at the tiny shape (fp32, one thread,
    ``benchmarks/hf_llama_peer.py``, ours / HF training step): 1.010 before this path, 1.039 after.
    """
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return [F.linear(x, w) for w in weight.split(sizes, dim=0)]
    return list(F.linear(x, weight).split(sizes, dim=-1))


CPU_FLASH_KV_SPLIT = 512
"""Key block of PyTorch's CPU flash-attention kernel (``kvSplitSize``, aten FlashAttentionKernel.cpp, torch 2.13)."""


WINDOW_BLOCKED_MIN = 4
"""A full forward (training) runs sliding-window attention in blocks (:func:`window_attend`, linear in N)
from ``N >= WINDOW_BLOCKED_MIN · window``, below that as one masked call, which is faster there (fwd+bwd in
bf16 on this CPU, W = 128: 24 vs 38 ms at N = 256, equal at N = 512, 135 vs 37 ms at N = 2048)."""


def attend(q_BHND: torch.Tensor, k_BGKD: torch.Tensor, v_BGKD: torch.Tensor, *, causal: bool = False,
           mask_NK: torch.Tensor | None = None) -> torch.Tensor:
    """Grouped-query attention through ``scaled_dot_product_attention``.

    ``causal``: the plain causal pattern with N == K. ``mask_NK``: boolean
    ``[N, K]``, True where the query may attend (see :func:`position_mask`).
    Neither: every key is visible (a decode step on a global slot).
    Returns ``[B, H, N, Dh]``.

    When every key is visible, the ``H / G`` query heads of a key head are folded
    into its query rows (``[B, G, (H/G)·N, Dh]``): exact, and on CPU in bf16 many
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
        # keys [0, N/2) (causal), queries [N/2, N) over all N keys with the causal mask. Exact; forward +
        # backward per layer at the tiny shape (B 8, N 512, bf16, 2 threads, torch 2.13): 43 -> 34 ms.
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

    Shapes: ``q [B, H, N, Dh]``, ``k, v [B, G, n_hist + N, Dh]`` -> ``[B, H, N, Dh]``.

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
    # [B, G, n_blocks, Dh, S] -> [B·n_blocks, G, S, Dh]
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


def _mask_for(qpos_N: torch.Tensor, kpos_K: torch.Tensor | None, window: int | None, full: bool
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


class SwiGLU(nn.Module):
    """``w2(silu(w1 x) * w3 x)``; ``[B, N, D] -> [B, N, D]``.

    ``w1`` (gate) and ``w3`` (up) are one fused matrix ``w13`` of shape ``[2·d_ff, D]``, rows
    ``[w1; w3]``: one matmul at inference, one per half in training (:func:`fused_linear`).
    """

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.d_ff = d_ff
        self.w13 = nn.Linear(d_model, 2 * d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x_BND: torch.Tensor) -> torch.Tensor:
        gate, up = fused_linear(x_BND, self.w13.weight, [self.d_ff, self.d_ff])
        return self.w2(F.silu(gate) * up)


class MoE(nn.Module):
    """Routed SwiGLU experts with top-k routing and shared experts (paper Table 6).

    Router: softmax over E experts, top-k, weights renormalised over the chosen k
    [assume]. Load-balancing loss (Switch Transformer): ``E · Σ_e f_e · P_e`` with
    f_e the fraction of routed slots sent to e and P_e the mean router probability.
    ``[B, N, D] -> [B, N, D]``; the last loss is kept in ``self.aux_loss``.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.top_k = cfg.top_k
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(cfg.d_model, cfg.d_expert) for _ in range(cfg.n_experts))
        self.shared = SwiGLU(cfg.d_model, cfg.d_shared_expert) if cfg.d_shared_expert else None
        self.aux_loss = torch.zeros(())

    def route(self, x_TD: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Router probabilities ``[T, E]``, chosen experts ``[T, k]`` and their weights ``[T, k]``."""
        probs_TE = torch.softmax(self.router(x_TD).float(), dim=-1)
        w_Tk, idx_Tk = probs_TE.topk(self.top_k, dim=-1)
        w_Tk = w_Tk / w_Tk.sum(-1, keepdim=True)
        return probs_TE, idx_Tk, w_Tk

    def forward(self, x_BND: torch.Tensor) -> torch.Tensor:
        B, N, D = x_BND.shape
        x_TD = x_BND.reshape(-1, D)
        probs_TE, idx_Tk, w_Tk = self.route(x_TD)
        out_TD = torch.zeros_like(x_TD)
        flat_e = idx_Tk.reshape(-1)
        flat_t = torch.arange(x_TD.shape[0], device=x_TD.device).repeat_interleave(self.top_k)
        flat_w = w_Tk.reshape(-1)
        for e, expert in enumerate(self.experts):
            sel = (flat_e == e).nonzero(as_tuple=True)[0]
            if sel.numel() == 0:
                continue
            t = flat_t[sel]
            y = expert(x_TD[t]) * flat_w[sel, None].to(x_TD.dtype)
            out_TD.index_add_(0, t, y.to(out_TD.dtype))
        if self.shared is not None:
            out_TD = out_TD + self.shared(x_TD)
        E = len(self.experts)
        frac_E = torch.bincount(flat_e, minlength=E).float() / flat_e.numel()
        self.aux_loss = E * (frac_E * probs_TE.mean(0)).sum()
        return out_TD.reshape(B, N, D)


def make_ffn(cfg: ModelConfig) -> nn.Module:
    return MoE(cfg) if cfg.n_experts else SwiGLU(cfg.d_model, cfg.d_ff)


class SelfLayer(nn.Module):
    """Self-attention block (global or sliding-window), ``[B, N, D] -> [B, N, D]``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        H, G, Dh, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_model
        self.attn_norm = RMSNorm(D, cfg.norm_eps)
        # Q, K and V projections in one matrix, rows [W_Q; W_K; W_V] (one matmul at inference: fused_linear).
        self.wqkv = nn.Linear(D, (H + 2 * G) * Dh, bias=False)
        self.qkv_sizes = [H * Dh, G * Dh, G * Dh]
        self.wo = nn.Linear(H * Dh, D, bias=False)
        self.ffn_norm = RMSNorm(D, cfg.norm_eps)
        self.ffn = make_ffn(cfg)

    def forward(self, x_BND: torch.Tensor, app: Application, pos_N: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                cache: KVCache | None, start: int) -> torch.Tensor:
        cfg = self.cfg
        B, N, _ = x_BND.shape
        h = self.attn_norm(x_BND)
        q, k, v = fused_linear(h, self.wqkv.weight, self.qkv_sizes)
        q = q.view(B, N, cfg.n_heads, cfg.head_dim).transpose(1, 2)
        k = k.view(B, N, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
        v = v.view(B, N, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
        cos, sin = rope
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is None and app.window is not None and N >= WINDOW_BLOCKED_MIN * app.window:
            o = window_attend(q, k, v, 0, app.window)  # linear in N: no N x N scores
        elif cache is None:
            causal, mask = _mask_for(pos_N, None, app.window, full=True)
            o = attend(q, k, v, causal=causal, mask_NK=mask)
        elif app.window is not None:
            k, v, n_hist = cache.window_read(app, k, v, start)
            # n_hist < 0: a decode step, the ring holds exactly the visible keys.
            o = attend(q, k, v) if n_hist < 0 else window_attend(q, k, v, n_hist, app.window)
        else:
            k, v, kpos = cache.write_and_read(app, k, v, start)
            causal, mask = _mask_for(pos_N, kpos, None, full=False)
            o = attend(q, k, v, causal=causal, mask_NK=mask)
        x_BND = x_BND + self.wo(o.transpose(1, 2).reshape(B, N, -1))
        return x_BND + self.ffn(self.ffn_norm(x_BND))


class SharedKV(nn.Module):
    """YOCO's K̂V̂ maker: ``K̂ = RMSNorm(X) W_K``, ``V̂ = RMSNorm(X) W_V``; ``[B,N,D] -> 2×[B,G,N,Dh]``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.wkv = nn.Linear(cfg.d_model, 2 * cfg.d_kv, bias=False)  # rows [W_K; W_V] (fused_linear)

    def forward(self, x_BND: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        B, N, _ = x_BND.shape
        h = self.norm(x_BND)
        k, v = fused_linear(h, self.wkv.weight, [self.cfg.d_kv, self.cfg.d_kv])
        k = k.view(B, N, self.cfg.n_kv_heads, self.cfg.head_dim).transpose(1, 2)
        v = v.view(B, N, self.cfg.n_kv_heads, self.cfg.head_dim).transpose(1, 2)
        if rope is not None:
            k = apply_rope(k, *rope)
        return k, v


class CrossLayer(nn.Module):
    """Cross-decoder block: causal attention of own queries over the shared K̂V̂."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        D = cfg.d_model
        self.attn_norm = RMSNorm(D, cfg.norm_eps)
        self.wq = nn.Linear(D, cfg.n_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, D, bias=False)
        self.ffn_norm = RMSNorm(D, cfg.norm_eps)
        self.ffn = make_ffn(cfg)

    def forward(self, x_BND: torch.Tensor, pos_N: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                k_BGKD: torch.Tensor, v_BGKD: torch.Tensor, kpos_K: torch.Tensor | None) -> torch.Tensor:
        """``kpos_K=None``: keys are positions 0..N-1 of a plain forward (causal)."""
        B, N, _ = x_BND.shape
        q = self.wq(self.attn_norm(x_BND)).view(B, N, self.cfg.n_heads, self.cfg.head_dim).transpose(1, 2)
        if rope is not None:
            q = apply_rope(q, *rope)
        causal, mask = _mask_for(pos_N, kpos_K, None, full=kpos_K is None)
        o = attend(q, k_BGKD, v_BGKD, causal=causal, mask_NK=mask)
        x_BND = x_BND + self.wo(o.transpose(1, 2).reshape(B, N, -1))
        return x_BND + self.ffn(self.ffn_norm(x_BND))


@dataclass
class ForwardOut:
    """What :meth:`LM.forward` returns.

    ``logits_BNV``: logits (``N`` = all positions, or 1 with ``last_only``; ``None``
    for a non-final prefill chunk). ``aux_loss``: summed MoE load-balancing loss
    (0 for dense). ``hidden``: with ``return_hidden``, the residual stream after the
    embedding and after each layer application, each ``[B, N, D]``.
    """

    logits_BNV: torch.Tensor | None
    aux_loss: torch.Tensor
    hidden: list[torch.Tensor] = field(default_factory=list)


def require_param_memory(cfg: ModelConfig) -> None:
    """Refuse a model whose weights alone do not fit on the default device, before allocating them.

    Called by the entry points (:func:`new_model`, training, loading, the CLIs), not by :class:`LM`'s constructor,
    so building a model reads no system state. fp32 bytes per parameter at the default dtype.

    Raises:
        yocou.utils.memory.MemoryRefusal: one line with the bytes needed and available (``YOCOU_NO_MEMORY_CHECK=1``
            skips the check).
    """
    from yocou.model.accounting import dtype_bytes, param_count
    from yocou.utils.memory import require

    device = torch.get_default_device()
    if device.type != "meta":
        n = param_count(cfg)
        require(n * dtype_bytes(torch.get_default_dtype()),
                f"the weights of {cfg.name} ({n:,} parameters, d_model {cfg.d_model})", device)


def new_model(cfg: ModelConfig) -> LM:
    """``LM(cfg)`` for an entry point: its weights checked against the memory there first
    (:func:`require_param_memory`).

    Raises:
        yocou.utils.memory.MemoryRefusal: the weights do not fit.
    """
    require_param_memory(cfg)
    return LM(cfg)


class LM(nn.Module):
    """Decoder-only LM for every variant of :mod:`yocou.model.config`.

    ``forward`` is a plain loop over :func:`~yocou.model.config.expand_plan`.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.plan = expand_plan(cfg)
        self.exit_at = early_exit_index(self.plan)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.stages = nn.ModuleList()
        self.kv_makers = nn.ModuleDict()
        for si, st in enumerate(cfg.stages):
            cls = SelfLayer if st.kind == "self" else CrossLayer
            self.stages.append(nn.ModuleList(cls(cfg) for _ in range(st.n_layers)))
            if st.kind == "cross":
                self.kv_makers[str(si)] = SharedKV(cfg)
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        # Precomputed once (as Llama does): under torch.compile a frequency computed in the forward is
        # fused into, and recomputed by, every kernel that applies RoPE (a pow per element; about 2% of a
        # compiled training step at the tiny shape, benchmarks/hf_llama_peer.py). Not in the state dict.
        self.register_buffer("rope_inv_freq", rope_inv_freq(cfg.head_dim, cfg.rope_theta), persistent=False)
        self.reset_parameters()

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001, ANN202 (nn.Module's signature)
        """``nn.Module._apply`` (``.to``, ``.cuda``, ``.bfloat16``, ``to_empty``, ...), except that RoPE's
        inverse frequencies stay fp32 and exact: they are recomputed on the new device, never cast."""
        super()._apply(fn, recurse)
        self.rope_inv_freq = rope_inv_freq(self.cfg.head_dim, self.cfg.rope_theta, self.rope_inv_freq.device)
        return self

    def reset_parameters(self) -> None:
        """Normal(0, init_std) for every matrix; output projections scaled by
        1/sqrt(2·layer applications) when ``init_scaled_out`` [assume, GPT-2 style]."""
        std = self.cfg.init_std
        n_apps = sum(1 for a in self.plan if a.kind != "kv")
        for name, p in self.named_parameters():
            if p.ndim == 1:
                nn.init.ones_(p)
            elif self.cfg.init_scaled_out and (name.endswith("wo.weight") or name.endswith("w2.weight")):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * n_apps))
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, input_ids_BN: torch.Tensor, *, cache: KVCache | None = None, last_only: bool = False,
                compute_logits: bool = True, return_hidden: bool = False) -> ForwardOut:
        """Run the model over tokens: embed, then every application of ``self.plan`` in order, then the head.

        YOCO-U is this loop over its plan (:func:`~yocou.model.config.expand_plan`); with L = 4 layers split into a
        self-decoder and a cross-decoder of 2 each, window W and T = 3 loops (the paper's Figure 1)::

            self  stage 0 loop 0 layers 0,1   slots 0,1   sliding window W
            self  stage 0 loop 1 layers 0,1   slots 2,3   the same weights, their own window caches
            self  stage 0 loop 2 layers 0,1   slots 4,5   (T loops: only these window caches grow with T)
            kv    stage 1                     slot 6      K̂V̂ made once, from the last loop's output
            cross stage 1 layers 0,1          slot 6      every cross layer reads that one global cache

        YOCO is the same with T = 1, RINS loops global self-attention layers, the Transformer has one self
        stage. The ``kv`` step writes the one global cache (``cache.write_shared``), the ``cross`` steps read it
        (``cache.read_shared``); without a cache (training) it is held in ``shared_kv`` for this call.

        Args:
            input_ids_BN: token ids ``[B, N]`` (int64).
            cache: ``None`` for a plain full forward from position 0 (training).
                With a cache, the tokens are positions ``cache.pos .. cache.pos+N-1``: a
                prefill chunk or (N = 1) a decode step; the cache is written and
                ``cache.pos`` advances by N.
            last_only: compute applications after the last cache write (YOCO's
                cross-decoder; docs/design.md section 4 "early exit") and the LM head for the
                last position only. Output ``[B, 1, V]``.
            compute_logits: ``False`` for a non-final prefill chunk: stop after the last
                cache write (nothing after it is needed).
            return_hidden: also return the residual stream after each application.

        Returns:
            :class:`ForwardOut`.

        Raises:
            ValueError: the chunk does not fit in the cache, or its batch size differs.
        """
        B, N = input_ids_BN.shape
        start = 0
        if cache is not None:
            if B != cache.batch_size:
                raise ValueError(f"input batch size {B} != cache batch_size {cache.batch_size}")
            cache.check_room(N)
            start = cache.pos
        dev = input_ids_BN.device
        pos_N = torch.arange(start, start + N, device=dev)
        x = self.embed(input_ids_BN)
        dtype = torch.get_autocast_dtype(dev.type) if torch.is_autocast_enabled(dev.type) else x.dtype
        rope_full = rope_cos_sin(pos_N, self.cfg.head_dim, self.cfg.rope_theta, dtype, self.rope_inv_freq)
        hidden = [x] if return_hidden else []
        aux = torch.zeros((), device=dev)
        shared_kv: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        cut = self.exit_at if (last_only or not compute_logits) else len(self.plan)
        for i, app in enumerate(self.plan):
            if i == cut:
                if not compute_logits:
                    break
                x, pos_N = x[:, -1:], pos_N[-1:]
                rope_full = (rope_full[0][-1:], rope_full[1][-1:])
            if app.kind == "kv":
                rope = rope_full if self.cfg.cross_rope else None
                k, v = self.kv_makers[str(app.stage)](x, rope)
                if cache is None:
                    shared_kv[app.slot] = (k, v, None)
                else:
                    cache.write_shared(app, k, v, start)
                continue
            layer = self.stages[app.stage][app.layer]
            if app.kind == "self":
                x = layer(x, app, pos_N, rope_full, cache, start)
            else:
                rope = rope_full if self.cfg.cross_rope else None
                if cache is None:
                    k, v, kpos = shared_kv[app.slot]
                else:
                    k, v, kpos = cache.read_shared(app.slot, start + N)
                x = layer(x, pos_N, rope, k, v, kpos)
            if isinstance(layer.ffn, MoE):
                aux = aux + layer.ffn.aux_loss
            if return_hidden:
                hidden.append(x)
        if cache is not None:
            cache.pos += N
        if not compute_logits:
            return ForwardOut(None, aux, hidden)
        if last_only and cut == len(self.plan):
            x = x[:, -1:]
        logits = self.lm_head(self.norm(x))
        return ForwardOut(logits, aux, hidden)

    def new_cache(self, batch_size: int, max_len: int, *, dtype: torch.dtype | None = None,
                  fill: float = 0.0) -> KVCache:
        """Allocate a :class:`KVCache` for this model on its device, its bytes checked against the memory there
        first (:func:`yocou.model.cache.require_cache_memory`).

        Raises:
            yocou.utils.memory.MemoryRefusal: the cache does not fit.
        """
        p = next(self.parameters())
        require_cache_memory(self.cfg, batch_size, max_len, dtype=dtype or p.dtype, device=p.device)
        return KVCache(self.cfg, batch_size, max_len, dtype=dtype or p.dtype, device=p.device, fill=fill)
