"""The layers every variant is built from (docs/design.md section 2), in plain torch.

RMSNorm, rotary position embeddings (RoPE), the fused linear maps, the SwiGLU FFN and its routed mixture of experts.
The module imports torch alone: ``yocou export-hf`` copies it, unchanged, with the rest of the model's code, into
every exported folder of a non-Transformer variant, so the exported model computes these layers with this code.

Shape suffixes as in :mod:`yocou.model` (B batch, N queries, K keys, S slot capacity, C chunk, H query heads, G
key/value heads, D the feature axis: d_model or the head dim, T flattened tokens, E experts).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Experts", "MoE", "RMSNorm", "SwiGLU", "apply_rope", "fused_linear", "rope_cos_sin", "rope_inv_freq"]


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


class Experts(nn.Module):
    """E SwiGLU experts as two stacked weights: ``w13 [E, 2·d_expert, D]`` (each expert's rows ``[w1; w3]``, as
    :class:`SwiGLU`'s ``w13``) and ``w2 [E, D, d_expert]``.

    :meth:`forward` computes tokens already sorted by expert, without a host sync: ``torch._grouped_mm`` over the
    expert groups where it runs (bf16 anywhere; any dtype eagerly on CPU), otherwise one batched matmul over groups
    padded to the token count (exact: an expert receives each token at most once). Source: torchtitan's
    ``GroupedExperts`` (read, not copied).
    """

    def __init__(self, n_experts: int, d_model: int, d_expert: int) -> None:
        super().__init__()
        self.d_expert = d_expert
        self.w13 = nn.Parameter(torch.empty(n_experts, 2 * d_expert, d_model))
        self.w2 = nn.Parameter(torch.empty(n_experts, d_model, d_expert))
        with torch.no_grad():  # each expert initialised as nn.Linear initialises its weight, in module order
            for e in range(n_experts):
                nn.init.kaiming_uniform_(self.w13[e], a=math.sqrt(5))
                nn.init.kaiming_uniform_(self.w2[e], a=math.sqrt(5))

    def _grouped(self, x: torch.Tensor) -> bool:
        if not hasattr(torch, "_grouped_mm"):
            return False
        aligned = all(n * x.element_size() % 16 == 0 for n in (self.w13.shape[2], self.d_expert))
        eager_cpu = x.device.type == "cpu" and not torch.compiler.is_compiling()
        return aligned and (x.dtype == torch.bfloat16 or eager_cpu)

    def forward(self, x_MD: torch.Tensor, e_M: torch.Tensor, counts_E: torch.Tensor) -> torch.Tensor:
        """Every expert on its own tokens: ``x_MD [M, D]`` sorted by expert ``e_M [M]`` (ascending), ``counts_E
        [E]`` tokens per expert -> ``[M, D]``. The weights are cast to ``x``'s dtype (an autocast dtype)."""
        w13_EFD, w2_EDF = self.w13.to(x_MD.dtype), self.w2.to(x_MD.dtype)
        F_ = self.d_expert
        if self._grouped(x_MD):
            offs_E = counts_E.cumsum(0).to(torch.int32)
            h = torch._grouped_mm(x_MD, w13_EFD.transpose(-2, -1), offs=offs_E)  # [M, 2F]
            return torch._grouped_mm(F.silu(h[:, :F_]) * h[:, F_:], w2_EDF.transpose(-2, -1), offs=offs_E)
        # Padded groups: row r of expert e's group is its r-th token (r < M, so a capacity of M is exact).
        M, D = x_MD.shape
        E = w13_EFD.shape[0]
        starts_E = counts_E.cumsum(0) - counts_E
        r_M = torch.arange(M, device=x_MD.device) - starts_E[e_M]
        buf_EMD = x_MD.new_zeros(E, M, D).index_put((e_M, r_M), x_MD)
        h_EMF = torch.bmm(buf_EMD, w13_EFD.transpose(1, 2))
        y_EMD = torch.bmm(F.silu(h_EMF[..., :F_]) * h_EMF[..., F_:], w2_EDF.transpose(1, 2))
        return y_EMD[e_M, r_M]


def _stack_per_expert_weights(moe: MoE, state_dict: dict, prefix: str, *args) -> None:  # noqa: ANN002
    """Stack ``experts.<e>.{w13,w2}.weight`` of a checkpoint with one module per expert into ``experts.{w13,w2}``
    (a ``load_state_dict`` pre-hook)."""
    for name in ("w13", "w2"):
        keys = [f"{prefix}experts.{e}.{name}.weight" for e in range(moe.experts.w13.shape[0])]
        if all(k in state_dict for k in keys):
            state_dict[f"{prefix}experts.{name}"] = torch.stack([state_dict.pop(k) for k in keys])


class MoE(nn.Module):
    """Routed SwiGLU experts with top-k routing and shared experts (paper Table 6).

    Router: softmax over E experts, top-k, weights renormalised over the chosen k
    [assume]. Load-balancing loss (Switch Transformer): ``E · Σ_e f_e · P_e`` with
    f_e the fraction of routed slots sent to e and P_e the mean router probability.
    ``[B, N, D] -> [B, N, D]``; the last loss is kept in ``self.aux_loss``.

    The routed slots are sorted by expert and computed group by group (:class:`Experts`): fixed shapes, no
    data-dependent host sync, so the layer compiles with ``fullgraph=True``. A checkpoint with one module per expert
    (``experts.<e>.w13.weight``, ``experts.<e>.w2.weight``) loads into the stacked weights.
    """

    def __init__(self, d_model: int, n_experts: int, top_k: int, d_expert: int, d_shared_expert: int = 0) -> None:
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.experts = Experts(n_experts, d_model, d_expert)
        self.shared = SwiGLU(d_model, d_shared_expert) if d_shared_expert else None
        self.aux_loss = torch.zeros(())
        self.register_load_state_dict_pre_hook(_stack_per_expert_weights)

    def reset_expert_parameters(self, std: float, std_out: float) -> None:
        """Normal(0, std) for ``w13`` and Normal(0, std_out) for ``w2``, expert by expert in the order of one module
        per expert (e0 w13, e0 w2, e1 w13, ...), so a seed gives the weights it gave that layout."""
        with torch.no_grad():
            for e in range(self.experts.w13.shape[0]):
                nn.init.normal_(self.experts.w13[e], 0.0, std)
                nn.init.normal_(self.experts.w2[e], 0.0, std_out)

    def route(self, x_TD: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Router probabilities ``[T, E]``, chosen experts ``[T, k]`` and their weights ``[T, k]``."""
        probs_TE = torch.softmax(self.router(x_TD).float(), dim=-1)
        w_Tk, idx_Tk = probs_TE.topk(self.top_k, dim=-1)
        w_Tk = w_Tk / w_Tk.sum(-1, keepdim=True)
        return probs_TE, idx_Tk, w_Tk

    def forward(self, x_BND: torch.Tensor) -> torch.Tensor:
        B, N, D = x_BND.shape
        x_TD = x_BND.reshape(-1, D)
        T, k = x_TD.shape[0], self.top_k
        probs_TE, idx_Tk, w_Tk = self.route(x_TD)
        E = probs_TE.shape[1]
        flat_e = idx_Tk.reshape(-1)  # slot t·k + j: token t's j-th expert
        counts_E = torch.zeros(E, dtype=torch.int64, device=x_TD.device).scatter_add_(
            0, flat_e, torch.ones_like(flat_e))
        order = flat_e.argsort(stable=True)  # slots sorted by expert
        dtype = torch.get_autocast_dtype(x_TD.device.type) if torch.is_autocast_enabled(x_TD.device.type) else x_TD.dtype
        y_sorted = self.experts(x_TD[order // k].to(dtype), flat_e[order], counts_E)
        y_TkD = torch.empty_like(y_sorted).index_copy_(0, order, y_sorted).view(T, k, D)
        out_TD = (y_TkD * w_Tk[..., None].to(y_TkD.dtype)).sum(1).to(x_TD.dtype)
        if self.shared is not None:
            out_TD = out_TD + self.shared(x_TD)
        self.aux_loss = E * (counts_E.float() / flat_e.numel() * probs_TE.mean(0)).sum()
        return out_TD.reshape(B, N, D)
