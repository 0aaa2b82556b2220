"""A yocou language model for Hugging Face transformers (``trust_remote_code``), self-contained.

Copied, unchanged, into every folder that ``yocou export-hf`` writes for a variant other than the plain
Transformer (YOCO, YOCO-U, RINS, Loop, Upper Loop with or without shared KV, their MoE forms). It imports
only torch, transformers, the ``configuration_yocou.py`` beside it and ``yocou_layers.py``, which is yocou's own
``yocou/model/layers.py`` copied unchanged, so the folder loads without the yocou package::

    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)

The layers (RMSNorm, RoPE, SwiGLU, MoE) are yocou's code. The rest of yocou's forward pass (``yocou.model.lm.LM``)
is written here a second time, because transformers' ``generate`` needs what yocou's model does not have:
padding masks with per-row positions, and a cache that grows, reorders its rows for beam search and crops for
assisted decoding (docs/design.md section 10). Tests hold the two to exactly equal logits. It reads yocou's weights
under the same names, behind a ``model.`` prefix (``model.stages.0.1.wqkv.weight``, ``lm_head.weight``).

Shape legend: B batch, N sequence length, D hidden size, H query heads, G key/value heads, Dh head dim,
V vocabulary, T tokens (B·N), E experts, k experts per token.

Architecture (yocou's docs/design.md section 2 and the YOCO paper, Sec. 2.2): pre-norm residual blocks
``h = x + Attn(RMSNorm(x))``, ``out = h + FFN(RMSNorm(h))``, no biases, RoPE (half-split layout, as Llama)
on self-attention, grouped-query attention, SwiGLU (or routed MoE) FFN, final RMSNorm, untied LM head.
The stages of the config run in order; a stage's blocks run ``n_loops`` times in a row with shared weights.
A cross stage first makes ``K̂ = RMSNorm(X) W_K``, ``V̂ = RMSNorm(X) W_V`` from its input X (once, or at
every loop with ``kv_per_loop``); each cross block attends with its own queries over that K̂V̂.

KV cache (:class:`YocouCache`, with ``use_cache=True``, the default of ``generate``): every application of a
self-attention layer (each loop of a looped stage its own) keeps its keys and values, a sliding-window one only
the last ``window - 1`` (the ring a next token can still see), and each cross stage keeps its K̂V̂, made once per
token (at every loop with ``kv_per_loop``). Each is a :class:`KVBuffer` written in place (grown by doubling, a
window compacted when full), so a decode step costs the same at every length but for the attention itself; a
decode step without padding attends with no mask. A call with the cache runs only the tokens it has not seen. YOCO's
early exit: on a cached call that keeps only the last position's logits (``logits_to_keep=1``, as ``generate``
asks), a model whose last stage is its only cross stage, with K̂V̂ made once, runs that stage on the last token
only (the global K̂V̂ is still made for every token), as ``yocou.model.generate``'s prefill does. Without
``use_cache`` every call is the full forward over all the tokens it is given.

Padding: with ``attention_mask`` (1 = token, 0 = padding) padded keys are never attended and positions
count real tokens only (``cumsum(mask) - 1``), so left or right padding gives each real token the logits
it has unpadded. Padding must sit at the ends of a row (left or right), not between tokens.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_yocou import YocouConfig

try:  # in an exported folder: yocou's own layers (yocou/model/layers.py), copied beside this file unchanged
    from .yocou_layers import MoE, RMSNorm, SwiGLU, apply_rope
    from .yocou_layers import rope_cos_sin as _rope_cos_sin
except ImportError:  # imported from the yocou package itself (transformers ignores imports inside try blocks)
    from yocou.model.layers import MoE, RMSNorm, SwiGLU, apply_rope
    from yocou.model.layers import rope_cos_sin as _rope_cos_sin

__all__ = ["KVBuffer", "YocouCache", "YocouConfig", "YocouForCausalLM", "YocouModel", "YocouPreTrainedModel"]


def rope_cos_sin(pos_BN: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables ``[B, 1, N, Dh]`` for per-row positions ``pos_BN`` (yocou's tables, a head axis added)."""
    cos, sin = _rope_cos_sin(pos_BN, head_dim, theta, dtype)
    return cos[:, None], sin[:, None]


def attend(q_BHND: torch.Tensor, k_BGND: torch.Tensor, v_BGND: torch.Tensor, allowed_BNN: torch.Tensor | None
           ) -> torch.Tensor:
    """Softmax attention where ``allowed_BNN[b, i, j]`` (bool) says query i may see key j; ``-> [B, H, N, Dh]``.

    Query head h reads key/value head ``h // (H / G)`` (grouped-query attention). ``allowed_BNN`` None: every
    key is visible (a decode step without padding); the ``H / G`` query heads of a key head then become query
    rows of one call (``[B, G, (H/G)·N, Dh]``), which is exact and avoids copying the keys per query head.
    """
    B, H, N, Dh = q_BHND.shape
    G = k_BGND.shape[1]
    if allowed_BNN is None:
        q_BGMD = q_BHND.reshape(B, G, (H // G) * N, Dh)
        return F.scaled_dot_product_attention(q_BGMD, k_BGND, v_BGND).reshape(B, H, N, Dh)
    rep = H // G
    k = k_BGND.repeat_interleave(rep, dim=1)
    v = v_BGND.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q_BHND, k, v, attn_mask=allowed_BNN[:, None])


def visibility(n: int, key_ok_BN: torch.Tensor, window: int | None) -> torch.Tensor:
    """``[B, N, N]`` bool: query i sees key j iff ``j <= i``, key j is a real token and, with a sliding
    window W, ``i - j < W`` (W keys including its own). A padded query sees itself only (its output is unused;
    this keeps its softmax finite)."""
    i = torch.arange(n, device=key_ok_BN.device)
    diff = i[:, None] - i[None, :]
    ok_NN = diff >= 0
    if window is not None:
        ok_NN = ok_NN & (diff < window)
    return (ok_NN[None] & key_ok_BN[:, None, :]) | torch.eye(n, dtype=torch.bool, device=key_ok_BN.device)[None]


def make_ffn(config: YocouConfig) -> nn.Module:
    """The FFN of a block: MoE when ``num_experts > 0``, else a dense SwiGLU of ``intermediate_size``."""
    if config.num_experts:
        return MoE(config.hidden_size, config.num_experts, config.num_experts_per_tok,
                   config.expert_intermediate_size, config.shared_expert_intermediate_size)
    return SwiGLU(config.hidden_size, config.intermediate_size)


class SelfLayer(nn.Module):
    """Self-attention block (global or sliding-window) with RoPE; ``[B, N, D] -> [B, N, D]``.

    ``wqkv`` holds W_Q, W_K, W_V stacked as rows ``[W_Q; W_K; W_V]`` (yocou's fused layout).
    """

    def __init__(self, config: YocouConfig, window: int | None) -> None:
        super().__init__()
        H, G, Dh, D = (config.num_attention_heads, config.num_key_value_heads, config.head_dim,
                       config.hidden_size)
        self.window = window
        self.n_heads, self.n_kv_heads, self.head_dim = H, G, Dh
        self.attn_norm = RMSNorm(D, config.rms_norm_eps)
        self.wqkv = nn.Linear(D, (H + 2 * G) * Dh, bias=False)
        self.wo = nn.Linear(H * Dh, D, bias=False)
        self.ffn_norm = RMSNorm(D, config.rms_norm_eps)
        self.ffn = make_ffn(config)

    def qkv(self, x_BND: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries ``[B, H, N, Dh]``, keys and values ``[B, G, N, Dh]`` of ``x``, RoPE on queries and keys."""
        B, N, _ = x_BND.shape
        H, G, Dh = self.n_heads, self.n_kv_heads, self.head_dim
        q, k, v = self.wqkv(self.attn_norm(x_BND)).split([H * Dh, G * Dh, G * Dh], dim=-1)
        q = apply_rope(q.view(B, N, H, Dh).transpose(1, 2), *rope)
        k = apply_rope(k.view(B, N, G, Dh).transpose(1, 2), *rope)
        return q, k, v.view(B, N, G, Dh).transpose(1, 2)

    def out(self, x_BND: torch.Tensor, o_BHND: torch.Tensor) -> torch.Tensor:
        """The block's output from its input and the attention output: residual, FFN, residual."""
        B, N, _ = x_BND.shape
        x_BND = x_BND + self.wo(o_BHND.transpose(1, 2).reshape(B, N, -1))
        return x_BND + self.ffn(self.ffn_norm(x_BND))

    def forward(self, x_BND: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], key_ok_BN: torch.Tensor
                ) -> torch.Tensor:
        q, k, v = self.qkv(x_BND, rope)
        return self.out(x_BND, attend(q, k, v, visibility(x_BND.shape[1], key_ok_BN, self.window)))

    def forward_cached(self, x_BND: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], buf: "KVBuffer",
                       cache: "YocouCache", past: int) -> torch.Tensor:
        """The new tokens (sequence indices ``past ..``) over this application's cached keys and their own;
        their keys and values join ``buf`` (a sliding-window layer then keeps the last ``window - 1``)."""
        N = x_BND.shape[1]
        q, k, v = self.qkv(x_BND, rope)
        if buf.first is None:
            buf.first = past
        held = None if self.window is None else self.window - 1 + cache.crop_slack
        k, v = buf.append(k, v, keep=None if held is None else held + N)
        if N == 1 and cache.all_ok:  # every cached key is real: the window's keys (the last W), no mask
            allowed = None
            if self.window is not None:
                k, v = k[:, :, -self.window:], v[:, :, -self.window:]
        else:
            dev = x_BND.device
            first = buf.first
            allowed = visibility_cached(torch.arange(past, past + N, device=dev),
                                        torch.arange(first, past + N, device=dev),
                                        cache.key_ok()[:, first:past + N], self.window)
        o = attend(q, k, v, allowed)
        if held is not None and not cache.record_past:
            buf.keep_last(held)  # the ring: what a next token can see, and crop_slack more for crop()
        return self.out(x_BND, o)


class SharedKV(nn.Module):
    """YOCO's K̂V̂ maker: ``K̂ = RMSNorm(X) W_K``, ``V̂ = RMSNorm(X) W_V``; ``[B, N, D] -> 2 × [B, G, N, Dh]``.

    ``wkv`` holds W_K and W_V stacked as rows ``[W_K; W_V]``. K̂ gets RoPE only when ``rope`` is given
    (``cross_rope``).
    """

    def __init__(self, config: YocouConfig) -> None:
        super().__init__()
        self.n_kv_heads, self.head_dim = config.num_key_value_heads, config.head_dim
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.wkv = nn.Linear(config.hidden_size, 2 * self.n_kv_heads * self.head_dim, bias=False)

    def forward(self, x_BND: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        B, N, _ = x_BND.shape
        k, v = self.wkv(self.norm(x_BND)).chunk(2, dim=-1)
        k = k.view(B, N, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, N, self.n_kv_heads, self.head_dim).transpose(1, 2)
        return (apply_rope(k, *rope) if rope is not None else k), v


class CrossLayer(nn.Module):
    """Cross-decoder block: its own queries attend causally over the shared K̂V̂; ``[B, N, D] -> [B, N, D]``."""

    def __init__(self, config: YocouConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim = config.num_attention_heads, config.head_dim
        D = config.hidden_size
        self.attn_norm = RMSNorm(D, config.rms_norm_eps)
        self.wq = nn.Linear(D, self.n_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(self.n_heads * self.head_dim, D, bias=False)
        self.ffn_norm = RMSNorm(D, config.rms_norm_eps)
        self.ffn = make_ffn(config)

    def forward(self, x_BND: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                kv: tuple[torch.Tensor, torch.Tensor], key_ok_BN: torch.Tensor) -> torch.Tensor:
        B, N, _ = x_BND.shape
        q = self.wq(self.attn_norm(x_BND)).view(B, N, self.n_heads, self.head_dim).transpose(1, 2)
        if rope is not None:
            q = apply_rope(q, *rope)
        o = attend(q, kv[0], kv[1], visibility(N, key_ok_BN, None))
        x_BND = x_BND + self.wo(o.transpose(1, 2).reshape(B, N, -1))
        return x_BND + self.ffn(self.ffn_norm(x_BND))

    def forward_cached(self, x_BND: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                       kv: tuple[torch.Tensor, torch.Tensor], q_idx_N: torch.Tensor,
                       key_ok_BK: torch.Tensor | None) -> torch.Tensor:
        """Queries at sequence indices ``q_idx_N`` over the K̂V̂ of every token so far (indices ``0 ..``);
        ``key_ok_BK`` None: every key is a real token."""
        B, N, _ = x_BND.shape
        q = self.wq(self.attn_norm(x_BND)).view(B, N, self.n_heads, self.head_dim).transpose(1, 2)
        if rope is not None:
            q = apply_rope(q, *rope)
        if N == 1 and key_ok_BK is None:  # the last token over every token: no mask
            allowed = None
        else:
            if key_ok_BK is None:
                key_ok_BK = torch.ones(B, kv[0].shape[2], dtype=torch.bool, device=x_BND.device)
            allowed = visibility_cached(q_idx_N, torch.arange(kv[0].shape[2], device=x_BND.device), key_ok_BK, None)
        o = attend(q, kv[0], kv[1], allowed)
        x_BND = x_BND + self.wo(o.transpose(1, 2).reshape(B, N, -1))
        return x_BND + self.ffn(self.ffn_norm(x_BND))


class KVBuffer:
    """Keys and values of one attention application: buffers ``[B, G, capacity, Dh]`` whose slots
    ``start .. stop - 1`` hold the sequence indices ``first ..`` in order. Appending writes in place; when
    the buffer is full it first moves the kept slots to the front (a sliding window keeps few), else doubles
    its capacity, so a decode step copies O(1) keys amortised, not the whole cache."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.start = self.stop = 0
        self.first: int | None = None

    @property
    def length(self) -> int:
        """Tokens held."""
        return self.stop - self.start

    @property
    def capacity(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k_BGND: torch.Tensor, v_BGND: torch.Tensor, keep: int | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``N`` new keys and values; returns views ``[B, G, length, Dh]`` of all held. ``keep``: the
        most slots that will be kept after this call (a window), which sizes the buffer."""
        B, G, N, Dh = k_BGND.shape
        if self.k is None:
            cap = max(2 * (keep or 0), N, 16)
            self.k = k_BGND.new_empty(B, G, cap, Dh)
            self.v = v_BGND.new_empty(B, G, cap, Dh)
        if self.stop + N > self.capacity:
            n = self.length
            cap = self.capacity if n + N <= self.capacity // 2 else max(2 * self.capacity, 2 * (n + N))
            k_new, v_new = self.k.new_empty(B, G, cap, Dh), self.v.new_empty(B, G, cap, Dh)
            k_new[:, :, :n] = self.k[:, :, self.start:self.stop]
            v_new[:, :, :n] = self.v[:, :, self.start:self.stop]
            self.k, self.v, self.start, self.stop = k_new, v_new, 0, n
        self.k[:, :, self.stop:self.stop + N] = k_BGND
        self.v[:, :, self.stop:self.stop + N] = v_BGND
        self.stop += N
        return self.k[:, :, self.start:self.stop], self.v[:, :, self.start:self.stop]

    def keep_last(self, n: int) -> None:
        """Forget all but the last ``n`` tokens."""
        drop = max(self.length - n, 0)
        self.start += drop
        self.first = (self.first or 0) + drop

    def views(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K, V)`` ``[B, G, length, Dh]`` of the held tokens."""
        return self.k[:, :, self.start:self.stop], self.v[:, :, self.start:self.stop]


class YocouCache:
    """What :class:`YocouModel` keeps between calls (module docstring): ``seq_len`` tokens seen per row, which
    of them are real tokens (1 in ``attention_mask``; ``all_ok`` while no padding has been seen), and a
    :class:`KVBuffer` per application ``(stage, loop, layer)`` of a self layer (post-RoPE; a sliding-window
    layer keeps the last ``window - 1``) and per cross stage (and loop, with ``kv_per_loop``): the K̂V̂ of every
    token. Batch rows are padded alike (one ``seq_len``)."""

    #: transformers' generation utilities read these (a Python cache, not a static one; softmax attention only)
    is_compileable = False
    is_croppable = True
    #: tokens a sliding-window layer keeps beyond its ``window - 1``, so that :meth:`crop` can take back that many
    #: (an assistant's rejected drafts); set 0 for the smallest cache. Attention reads only the window.
    crop_slack = 256

    def __init__(self) -> None:
        self.seq_len = 0
        self.all_ok = True
        self.record_past = False  # sliding-window layers keep every token until crop() (assisted decoding)
        self._windows: dict[tuple[int, int], int | None] = {}  # (stage, layer) -> a self layer's window
        self._ok: torch.Tensor | None = None  # [B, capacity] bool, the first seq_len slots used
        self._n_real: torch.Tensor | None = None  # [B] real tokens seen per row
        self.self_kv: dict[tuple[int, int, int], KVBuffer] = {}
        self.cross_kv: dict[tuple[int, int], KVBuffer] = {}

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Tokens seen per row (transformers' ``Cache`` name)."""
        return self.seq_len

    def key_ok(self) -> torch.Tensor:
        """``[B, seq_len]`` bool: which tokens seen (this call's new ones included) are real."""
        return self._ok[:, :self.seq_len]

    def add_tokens(self, ok_BN: torch.Tensor) -> torch.Tensor:
        """Record ``N`` new tokens (``ok_BN`` real or padding) and return their positions ``[B, N]`` (real tokens
        counted from 0; padding repeats its neighbour's)."""
        B, N = ok_BN.shape
        if self._ok is None:
            self._ok = ok_BN.new_ones(B, max(2 * N, 64))
            self._n_real = torch.zeros(B, dtype=torch.long, device=ok_BN.device)
        if self.seq_len + N > self._ok.shape[1]:
            grown = ok_BN.new_ones(B, 2 * (self.seq_len + N))
            grown[:, :self.seq_len] = self._ok[:, :self.seq_len]
            self._ok = grown
        self._ok[:, self.seq_len:self.seq_len + N] = ok_BN
        self.all_ok = self.all_ok and bool(ok_BN.all())
        pos_BN = (self._n_real[:, None] + ok_BN.long().cumsum(-1) - 1).clamp(min=0)
        self._n_real = self._n_real + ok_BN.long().sum(-1)
        self.seq_len += N
        return pos_BN

    @property
    def is_linear(self) -> list[bool]:
        """No layer keeps a recurrent state (transformers slices a continued generation's inputs by
        :meth:`get_seq_length` when none does)."""
        return [False]

    def _buffers(self) -> list[KVBuffer]:
        return [*self.self_kv.values(), *self.cross_kv.values()]

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        """Keep the rows ``beam_idx`` ``[B]`` (beam search): every buffer's rows and the token bookkeeping."""
        for b in self._buffers():
            if b.k is not None:
                b.k, b.v = b.k.index_select(0, beam_idx.to(b.k.device)), b.v.index_select(0, beam_idx.to(b.v.device))
        if self._ok is not None:
            self._ok = self._ok.index_select(0, beam_idx.to(self._ok.device))
            self._n_real = self._n_real.index_select(0, beam_idx.to(self._n_real.device))

    def activate_past_recording(self) -> None:
        """Keep every token in the sliding-window layers until :meth:`crop`, so that tokens can be taken back
        (transformers calls it before assisted and prompt-lookup decoding)."""
        self.record_past = True

    def crop(self, tokens_to_remove: int) -> None:
        """Forget the last ``-tokens_to_remove`` tokens (transformers' convention: 0 or negative), then trim the
        sliding-window layers to the last ``window - 1`` tokens.

        Raises:
            ValueError: a positive argument, more tokens than seen, or a sliding-window layer that no longer holds
                the tokens the window needs after the removal (crop without :meth:`activate_past_recording`).
        """
        if tokens_to_remove > 0:
            raise ValueError(f"crop({tokens_to_remove}): pass 0 or a negative number of tokens to remove")
        n = -tokens_to_remove
        if n > self.seq_len:
            raise ValueError(f"crop({tokens_to_remove}): the cache has seen only {self.seq_len} tokens")
        new_len = self.seq_len - n
        for (si, _t, li), b in self.self_kv.items():
            w = self._windows.get((si, li))
            if w is not None and n and (b.first or 0) > max(0, new_len - (w - 1)):
                raise ValueError(f"crop({tokens_to_remove}): a sliding-window layer no longer holds the tokens its "
                                 f"window needs (it keeps crop_slack = {self.crop_slack} beyond the window); call "
                                 "activate_past_recording() before generating what is cropped")
        for b in self._buffers():
            b.stop -= n
        self.seq_len = new_len
        if self._ok is not None:
            self._n_real = self._ok[:, :new_len].long().sum(-1)
            self.all_ok = bool(self._ok[:, :new_len].all())
        for (si, _t, li), b in self.self_kv.items():
            w = self._windows.get((si, li))
            if w is not None:
                b.keep_last(w - 1 + self.crop_slack)

    def nbytes(self) -> int:
        """Bytes of the cached keys and values (the held tokens, not the buffers' spare room)."""
        return sum(t.numel() * t.element_size() for b in [*self.self_kv.values(), *self.cross_kv.values()]
                   for t in b.views())


def visibility_cached(q_idx_N: torch.Tensor, k_idx_K: torch.Tensor, key_ok_BK: torch.Tensor,
                      window: int | None) -> torch.Tensor:
    """:func:`visibility` for queries at sequence indices ``q_idx_N`` over cached keys at ``k_idx_K``:
    ``[B, N, K]`` bool, key j seen by query i iff ``j <= i``, j is a real token and (window W) ``i - j < W``;
    a query always sees itself."""
    diff = q_idx_N[:, None] - k_idx_K[None, :]
    ok_NK = diff >= 0
    if window is not None:
        ok_NK = ok_NK & (diff < window)
    return (ok_NK[None] & key_ok_BK[:, None, :]) | (diff == 0)[None]


class YocouPreTrainedModel(PreTrainedModel):
    """Weights init and config class shared by the yocou models."""

    config_class = YocouConfig
    base_model_prefix = "model"
    _no_split_modules = ["SelfLayer", "CrossLayer"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Normal(0, ``initializer_range``) matrices, unit norms (only weights missing from a checkpoint)."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.normal_(0.0, self.config.initializer_range)
        elif isinstance(module, RMSNorm):
            module.weight.fill_(1.0)


class YocouModel(YocouPreTrainedModel):
    """Embedding, the stages, the final RMSNorm: token ids ``[B, N]`` -> hidden states ``[B, N, D]``."""

    def __init__(self, config: YocouConfig) -> None:
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.stages = nn.ModuleList()
        self.kv_makers = nn.ModuleDict()
        for si, st in enumerate(config.stages):
            if st["kind"] == "self":
                self.stages.append(nn.ModuleList(SelfLayer(config, st["window"]) for _ in range(st["n_layers"])))
            else:
                self.stages.append(nn.ModuleList(CrossLayer(config) for _ in range(st["n_layers"])))
                self.kv_makers[str(si)] = SharedKV(config)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Final-norm hidden states ``[B, N, D]`` of ``input_ids`` ``[B, N]``.

        ``attention_mask`` ``[B, N]`` (1 token, 0 padding; default all ones); ``position_ids`` ``[B, N]``
        (default: ``cumsum(attention_mask) - 1``, i.e. 0..N-1 without padding).
        """
        B, N = input_ids.shape
        if attention_mask is None:
            key_ok_BN = torch.ones(B, N, dtype=torch.bool, device=input_ids.device)
        else:
            key_ok_BN = attention_mask.to(input_ids.device).bool()
        if position_ids is None:
            position_ids = (key_ok_BN.long().cumsum(-1) - 1).clamp(min=0)
        x = self.embed(input_ids)
        cfg = self.config
        rope = rope_cos_sin(position_ids.to(input_ids.device), cfg.head_dim, cfg.rope_theta, x.dtype)
        cross_rope = rope if cfg.cross_rope else None
        for si, st in enumerate(cfg.stages):
            kv = None
            for t in range(st["n_loops"]):
                if st["kind"] == "cross" and (t == 0 or st["kv_per_loop"]):
                    kv = self.kv_makers[str(si)](x, cross_rope)
                for layer in self.stages[si]:
                    x = layer(x, rope, key_ok_BN) if st["kind"] == "self" else layer(x, cross_rope, kv, key_ok_BN)
        return self.norm(x)

    def early_exit_stage(self) -> int | None:
        """The stage from which only the last token's output is needed (YOCO's early exit), or None: the last
        stage, when it is the only cross stage and makes its K̂V̂ once."""
        st = self.config.stages
        cross = [i for i, s in enumerate(st) if s["kind"] == "cross"]
        if cross == [len(st) - 1] and not st[-1]["kv_per_loop"]:
            return cross[0]
        return None

    def forward_cached(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, cache: YocouCache,
                       last_only: bool = False) -> torch.Tensor:
        """Final-norm hidden states ``[B, N, D]`` of the ``N`` new tokens ``input_ids`` (those after the
        ``cache.seq_len`` already seen), updating ``cache``. ``attention_mask`` ``[B, seq_len + N]`` covers
        the seen tokens and the new ones (default all ones); positions count real tokens. ``last_only``: the
        last token's ``[B, 1, D]`` only, with the early exit where the model allows it."""
        B, N = input_ids.shape
        dev, past = input_ids.device, cache.seq_len
        if attention_mask is None:
            ok_new = torch.ones(B, N, dtype=torch.bool, device=dev)
        else:
            m = attention_mask.to(dev).bool()
            if m.shape[1] != past + N:
                raise ValueError(f"attention_mask covers {m.shape[1]} tokens; the cache has {past} and {N} are new")
            ok_new = m[:, past:]
        pos_BN = cache.add_tokens(ok_new)
        x = self.embed(input_ids)
        cfg = self.config
        rope = rope_cos_sin(pos_BN, cfg.head_dim, cfg.rope_theta, x.dtype)
        q_idx = torch.arange(past, past + N, device=dev)
        key_ok = None if cache.all_ok else cache.key_ok()
        exit_at = self.early_exit_stage() if last_only else None
        for si, st in enumerate(cfg.stages):
            kv = None
            for t in range(st["n_loops"]):
                if st["kind"] == "cross" and (t == 0 or st["kv_per_loop"]):
                    buf = cache.cross_kv.setdefault((si, t if st["kv_per_loop"] else 0), KVBuffer())
                    kv = buf.append(*self.kv_makers[str(si)](x, rope if cfg.cross_rope else None))
                    if si == exit_at and t == 0:  # K̂V̂ made for every token; the stage runs on the last one
                        x, q_idx = x[:, -1:], q_idx[-1:]
                        rope = (rope[0][:, :, -1:], rope[1][:, :, -1:])
                for li, layer in enumerate(self.stages[si]):
                    if st["kind"] == "self":
                        cache._windows[(si, li)] = layer.window
                        x = layer.forward_cached(x, rope, cache.self_kv.setdefault((si, t, li), KVBuffer()), cache,
                                                 past)
                    else:
                        x = layer.forward_cached(x, rope if cfg.cross_rope else None, kv, q_idx, key_ok)
        x = self.norm(x)
        return x[:, -1:] if last_only else x


#: config.json key -> the export record's ``model_config`` key: what the exported weights were trained as.
_RECORD_KEYS = {"vocab_size": "vocab_size", "hidden_size": "d_model", "intermediate_size": "d_ff",
                "num_attention_heads": "n_heads", "num_key_value_heads": "n_kv_heads", "head_dim": "head_dim",
                "stages": "stages", "rope_theta": "rope_theta", "cross_rope": "cross_rope", "rms_norm_eps": "norm_eps",
                "num_experts": "n_experts", "num_experts_per_tok": "top_k"}


def check_export_record(folder: Any, config: YocouConfig) -> None:
    """Refuse a folder whose ``config.json`` no longer describes the model its ``yocou_export.json`` records (an
    edited ``n_loops`` loads the same weights as another model without any error); no record: nothing to check.

    Raises:
        ValueError: naming the first field that differs, both values and what to do.
    """
    import json
    import os

    path = os.path.join(str(folder), "yocou_export.json")
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as fh:
        recorded = (json.load(fh) or {}).get("model_config") or {}
    for ours, theirs in _RECORD_KEYS.items():
        if theirs not in recorded:
            continue
        want, got = recorded[theirs], getattr(config, ours, None)
        if ours == "stages":
            got = [{k: st.get(k) for k in ("kind", "n_layers", "n_loops", "window", "kv_per_loop")} for st in got]
            want = [{k: st.get(k) for k in ("kind", "n_layers", "n_loops", "window", "kv_per_loop")} for st in want]
        if got != want:
            raise ValueError(f"{folder}: config.json says {ours} = {got!r}, but yocou_export.json records {want!r} "
                             "for the exported weights: the folder was edited; export the run again")


class YocouForCausalLM(YocouPreTrainedModel, GenerationMixin):
    """:class:`YocouModel` with the (untied) LM head: ``[B, N]`` ids -> ``[B, N, V]`` logits.

    ``generate`` decodes with a :class:`YocouCache` (``use_cache=True``, the default) or reruns the whole prefix
    at each step (``use_cache=False``).
    """

    def __init__(self, config: YocouConfig) -> None:
        super().__init__(config)
        self.model = YocouModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: Any, *args: Any, **kwargs: Any) -> "YocouForCausalLM":
        """transformers' loader, then :func:`check_export_record` on a local folder."""
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        check_export_record(pretrained_model_name_or_path, model.config)
        return model

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                logits_to_keep: int = 0, use_cache: bool | None = None, cache: object = None,
                past_key_values: object = None, return_dict: bool | None = None,
                **kwargs: object) -> CausalLMOutputWithPast:
        """Logits ``[B, N, V]`` (the last ``logits_to_keep`` positions when > 0) and, with ``labels``
        ``[B, N]``, the mean next-token cross-entropy (labels shifted inside; -100 ignored).

        With ``use_cache=True`` or a :class:`YocouCache` (``cache`` or ``past_key_values``; a fresh one when
        none), ``input_ids`` are the tokens after those the cache has seen, ``attention_mask`` covers all of
        them, positions count real tokens (``position_ids`` is not read), and the cache is returned in
        ``cache``. Otherwise ``input_ids`` is the whole sequence from position 0 and no cache is returned.

        Args:
            input_ids: token ids ``[B, N]``.
            attention_mask, position_ids: as :meth:`YocouModel.forward`.

        Raises:
            ValueError: a cache that is not a :class:`YocouCache` (a transformers ``DynamicCache``, say), or an
                ``attention_mask`` whose length is not the cached plus the new tokens.
        """
        cache = cache if cache is not None else past_key_values
        if cache is not None and not isinstance(cache, YocouCache):
            raise ValueError(f"YocouForCausalLM keeps its own cache (YocouCache), got {type(cache).__name__}: pass "
                             "the cache it returned, or none")
        if cache is not None or use_cache:
            cache = cache if cache is not None else YocouCache()
            h = self.model.forward_cached(input_ids, attention_mask, cache,
                                          last_only=logits_to_keep == 1 and labels is None)
        else:
            h = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids)
        if logits_to_keep:
            h = h[:, -logits_to_keep:]
        logits = self.lm_head(h)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                   labels[:, 1:].reshape(-1).to(logits.device), ignore_index=-100)
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache)

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        """No transformers ``DynamicCache``: the model keeps a :class:`YocouCache`."""
        return False

    def _prepare_cache_for_generation(self, generation_config: Any, model_kwargs: dict, *args: Any,
                                      **kwargs: Any) -> None:
        """A fresh :class:`YocouCache` in ``model_kwargs["cache"]`` when ``generate`` decodes with a cache and was
        given none (beam search reorders it, assisted decoding crops it); a given cache is checked and kept."""
        super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        given = model_kwargs.get("cache")
        if given is not None and not isinstance(given, YocouCache):
            raise ValueError(f"YocouForCausalLM keeps its own cache (YocouCache), got {type(given).__name__}")
        if given is None and generation_config.use_cache is not False:
            model_kwargs["cache"] = YocouCache()

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, cache: YocouCache | None = None,
                                      attention_mask: torch.Tensor | None = None, use_cache: bool | None = None,
                                      **kwargs: object) -> dict:
        """The tokens the cache has not seen (all of them without a cache), the whole attention mask, the cache
        and ``use_cache``; other keyword arguments pass through (``position_ids`` and ``cache_position`` are
        dropped: positions come from the attention mask)."""
        cache = cache if cache is not None else kwargs.pop("past_key_values", None)
        if cache is not None:
            input_ids = input_ids[:, cache.seq_len:]
        for k in ("position_ids", "cache_position", "past_key_values"):
            kwargs.pop(k, None)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "cache": cache, "use_cache": use_cache,
                **kwargs}
