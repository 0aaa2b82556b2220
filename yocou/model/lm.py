"""The decoder: one module for every variant, driven by the plan of the config.

Shape suffixes as in :mod:`yocou.model` (B batch, N queries, K keys, S slot capacity, C chunk, H query heads, G
key/value heads, D the feature axis: d_model or the head dim, T flattened tokens, E experts).

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

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .attention import attention
from .cache import KVCache
from .layers import (
    MoE,
    RMSNorm,
    SwiGLU,
    apply_rope,
    fused_linear,
    rope_cos_sin,
    rope_inv_freq,
)
from .plan import Application, early_exit_index, expand_plan

try:  # the type of ``cfg`` (an exported folder, which has no yocou package, reads a config by attribute)
    from yocou.model.config import ModelConfig
except ImportError:
    ModelConfig = Any


def make_ffn(cfg: ModelConfig) -> nn.Module:
    """The FFN of a block: a routed MoE (Table 6) when ``cfg.n_experts``, else a dense SwiGLU of ``d_ff``."""
    if cfg.n_experts:
        return MoE(cfg.d_model, cfg.n_experts, cfg.top_k, cfg.d_expert, cfg.d_shared_expert)
    return SwiGLU(cfg.d_model, cfg.d_ff)


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

    def forward(self, x_BND: torch.Tensor, app: Application, rope: tuple[torch.Tensor, torch.Tensor],
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
        # The keys end at the last query (attention's alignment): the chunk's own (training, scoring), a window
        # cache's history and the chunk (a decode step: exactly the ring's visible keys), or a global slot's 0..pos.
        # A static cache (a fixed-shape decode step) returns its whole slot and the row's key mask instead.
        mask, window = None, app.window
        if cache is not None:
            read = cache.window_read if app.window is not None else cache.write_and_read
            k, v, mask = read(app, k, v, start)
            window = app.window if mask is None else None
        o = attention(q, k, v, window=window, key_mask=mask)
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

    def forward(self, x_BND: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                k_BGKD: torch.Tensor, v_BGKD: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Causal attention over the shared K̂V̂ ``k_BGKD, v_BGKD`` ``[B, G, K, D]``: positions ``0..K-1``, ending at
        the last query's position (a plain forward: the queries' own; an early exit: one query over all K), or the
        keys ``key_mask`` ``[B, 1, 1, K]`` marks (a static-shape decode step)."""
        B, N, _ = x_BND.shape
        q = self.wq(self.attn_norm(x_BND)).view(B, N, self.cfg.n_heads, self.cfg.head_dim).transpose(1, 2)
        if rope is not None:
            q = apply_rope(q, *rope)
        o = attention(q, k_BGKD, v_BGKD, key_mask=key_mask)
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
        # fused into, and recomputed by, every kernel that applies RoPE (a pow per element; benchmarks/README.md,
        # "The model's kernels"). Not in the state dict.
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
        std_out = std / math.sqrt(2 * n_apps) if self.cfg.init_scaled_out else std
        for name, p in self.named_parameters():
            if p.ndim == 1:
                nn.init.ones_(p)
            elif ".experts." in name:
                if name.endswith(".w13"):
                    self.get_submodule(name.rsplit(".experts.", 1)[0]).reset_expert_parameters(std, std_out)
            elif name.endswith(("wo.weight", "w2.weight")):
                nn.init.normal_(p, 0.0, std_out)
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
        pos_N = cache.positions(N, dev) if cache is not None else torch.arange(N, device=dev)
        x = self.embed(input_ids_BN)
        dtype = torch.get_autocast_dtype(dev.type) if torch.is_autocast_enabled(dev.type) else x.dtype
        rope_full = rope_cos_sin(pos_N, self.cfg.head_dim, self.cfg.rope_theta, dtype, self.rope_inv_freq)
        hidden = [x] if return_hidden else []
        aux = torch.zeros((), device=dev)
        shared_kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        cut = self.exit_at if (last_only or not compute_logits) else len(self.plan)
        for i, app in enumerate(self.plan):
            if i == cut:
                if not compute_logits:
                    break
                x = x[:, -1:]
                rope_full = (rope_full[0][..., -1:, :], rope_full[1][..., -1:, :])
            if app.kind == "kv":
                rope = rope_full if self.cfg.cross_rope else None
                k, v = self.kv_makers[str(app.stage)](x, rope)
                if cache is None:
                    shared_kv[app.slot] = (k, v)
                else:
                    cache.write_shared(app, k, v, start)
                continue
            layer = self.stages[app.stage][app.layer]
            if app.kind == "self":
                x = layer(x, app, rope_full, cache, start)
            else:
                rope = rope_full if self.cfg.cross_rope else None
                if cache is None:
                    (k, v), mask = shared_kv[app.slot], None
                else:
                    k, v, mask = cache.read_shared(app.slot, start + N)
                x = layer(x, rope, k, v, mask)
            if isinstance(layer.ffn, MoE):
                aux = aux + layer.ffn.aux_loss
            if return_hidden:
                hidden.append(x)
        if cache is not None:
            cache.advance(N)
        if not compute_logits:
            return ForwardOut(None, aux, hidden)
        if last_only and cut == len(self.plan):
            x = x[:, -1:]
        logits = self.lm_head(self.norm(x))
        return ForwardOut(logits, aux, hidden)

    def new_cache(self, batch_size: int, max_len: int, *, dtype: torch.dtype | None = None,
                  fill: float = 0.0) -> KVCache:
        """A :class:`KVCache` for this model, on its device, in its dtype unless ``dtype`` is given. Allocates without
        checking the memory there: entry points call :func:`yocou.model.limits.new_cache`, which does.

        Raises:
            ValueError: ``batch_size`` or ``max_len`` below 1.
        """
        p = next(self.parameters())
        return KVCache(self.cfg, batch_size, max_len, dtype=dtype or p.dtype, device=p.device, fill=fill)
