"""The layers every variant is built from (docs/design.md section 2), in plain torch.

RMSNorm, rotary position embeddings (RoPE), the fused linear maps, the SwiGLU FFN and its routed mixture of experts.
The module imports torch alone: ``yocou export-hf`` copies it, unchanged, with the rest of the model's code, into
every exported folder of a non-Transformer variant, so the exported model computes these layers with this code.

Shape suffixes as in :mod:`yocou.model` (B batch, N queries, K keys, S slot capacity, C chunk, H query heads, G
key/value heads, D the feature axis: d_model or the head dim, T flattened tokens, E experts).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MoE", "RMSNorm", "SwiGLU", "apply_rope", "fused_linear", "rope_cos_sin", "rope_inv_freq"]


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


def rope_cos_sin(pos: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype,
                 inv_freq: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables ``[..., Dh]`` for absolute positions ``pos [...]`` (``[N]``, or ``[B, N]`` where rows differ;
    the half-split layout of Llama).

    ``inv_freq``: :func:`rope_inv_freq` precomputed (``[Dh/2]`` fp32); computed here when omitted.
    """
    if inv_freq is None:
        inv_freq = rope_inv_freq(head_dim, theta, pos.device)
    ang = pos.float()[..., None] * inv_freq.float()
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
    on dense memory; same parameters, same math up to rounding (measured: ``benchmarks/README.md``, "The model's
    kernels").
    """
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return [F.linear(x, w) for w in weight.split(sizes, dim=0)]
    return list(F.linear(x, weight).split(sizes, dim=-1))


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

    def __init__(self, d_model: int, n_experts: int, top_k: int, d_expert: int, d_shared_expert: int = 0) -> None:
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d_model, d_expert) for _ in range(n_experts))
        self.shared = SwiGLU(d_model, d_shared_expert) if d_shared_expert else None
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
