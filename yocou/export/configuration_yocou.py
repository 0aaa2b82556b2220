"""Configuration of a yocou model exported for Hugging Face transformers (``trust_remote_code``).

This file is copied, unchanged, into every folder that ``yocou export-hf`` writes for a model that is not a
plain Transformer (those are exported as native ``LlamaForCausalLM``). It imports only transformers, so the
folder loads without the yocou package: ``AutoConfig.from_pretrained(folder, trust_remote_code=True)``.

The architecture is data: ``stages`` is a list of stage mappings, applied in order (names as in yocou's
``yocou.model.config.Stage``)::

    {"kind": "self" | "cross", "n_layers": int, "n_loops": int, "window": int | None, "kv_per_loop": bool}

``kind="self"``: ``n_layers`` self-attention blocks with their own K/V, global (``window=None``) or
sliding-window (each query sees the ``window`` keys ending at its own position). ``kind="cross"``: YOCO
cross-decoder blocks attending (causally, globally) over one shared K̂V̂ made from the stage's input.
``n_loops``: the stage's blocks are applied that many times in a row with the same weights (YOCO-U, RINS,
Loop). ``kv_per_loop`` (cross stages): K̂V̂ is remade from the hidden state entering every loop ("Upper
Loop w/o shared KV") instead of once. Examples: YOCO-U is ``[self(L/2, n_loops=T, window=W), cross(L/2)]``.
"""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

_STAGE_KEYS = ("kind", "n_layers", "n_loops", "window", "kv_per_loop")


def _check_stages(stages: Any) -> list[dict[str, Any]]:
    """Stages as plain dicts with every key, defaults filled in.

    Raises:
        ValueError: not a non-empty list of mappings, an unknown key, a bad kind, count or window, or a first
            stage that is not ``self``; the message names ``stages[i].<key>``.
    """
    if not isinstance(stages, (list, tuple)) or not stages:
        raise ValueError(f"YocouConfig.stages must be a non-empty list of stage mappings, got {stages!r}")
    out = []
    for i, s in enumerate(stages):
        if not isinstance(s, dict):
            raise ValueError(f"YocouConfig.stages[{i}] must be a mapping, got {type(s).__name__}")
        unknown = sorted(set(s) - set(_STAGE_KEYS))
        if unknown:
            raise ValueError(f"YocouConfig.stages[{i}]: unknown key(s) {unknown}; allowed: {list(_STAGE_KEYS)}")
        st = {"kind": s.get("kind"), "n_layers": s.get("n_layers"), "n_loops": s.get("n_loops", 1),
              "window": s.get("window"), "kv_per_loop": bool(s.get("kv_per_loop", False))}
        if st["kind"] not in ("self", "cross"):
            raise ValueError(f"YocouConfig.stages[{i}].kind must be 'self' or 'cross', got {st['kind']!r}")
        for key in ("n_layers", "n_loops"):
            if not isinstance(st[key], int) or st[key] < 1:
                raise ValueError(f"YocouConfig.stages[{i}].{key} must be an integer >= 1, got {st[key]!r}")
        if st["window"] is not None and (st["kind"] == "cross" or not isinstance(st["window"], int)
                                         or st["window"] < 1):
            raise ValueError(f"YocouConfig.stages[{i}].window must be None, or an integer >= 1 on a 'self' "
                             f"stage, got {st['window']!r}")
        out.append(st)
    if out[0]["kind"] != "self":
        raise ValueError("YocouConfig.stages[0].kind must be 'self' (a cross stage needs an input)")
    return out


class YocouConfig(PretrainedConfig):
    """Hyperparameters of an exported yocou model (field names of transformers; yocou's in brackets).

    Args:
        vocab_size: V.
        hidden_size: D (``d_model``).
        intermediate_size: SwiGLU inner size of a dense FFN (``d_ff``).
        num_attention_heads: query heads H (``n_heads``).
        num_key_value_heads: key/value heads G (``n_kv_heads``); divides H.
        head_dim: Dh, even (RoPE).
        stages: the architecture (module docstring).
        rope_theta: RoPE base.
        cross_rope: whether the cross-decoder's queries and K̂ get RoPE.
        rms_norm_eps: RMSNorm epsilon (``norm_eps``).
        initializer_range: std of the normal init (``init_std``); only used for weights missing on load.
        num_experts: routed experts E of an MoE FFN (``n_experts``); 0: dense SwiGLU.
        num_experts_per_tok: experts per token k (``top_k``).
        expert_intermediate_size: inner size of a routed expert (``d_expert``).
        shared_expert_intermediate_size: inner size of the shared expert, 0 for none (``d_shared_expert``).
        max_position_embeddings: the training sequence length (the default context length of lm-eval's
            ``hf`` model); RoPE itself has no limit.
        kwargs: passed to ``PretrainedConfig`` (token ids, ``dtype``, ...).

    Raises:
        ValueError: bad ``stages`` (naming the stage and key), or H not a multiple of G, or an odd ``head_dim``.
    """

    model_type = "yocou"

    def __init__(self, vocab_size: int = 512, hidden_size: int = 64, intermediate_size: int = 192,
                 num_attention_heads: int = 2, num_key_value_heads: int = 1, head_dim: int = 32,
                 stages: list[dict[str, Any]] | None = None, rope_theta: float = 10000.0, cross_rope: bool = False,
                 rms_norm_eps: float = 1e-6, initializer_range: float = 0.02, num_experts: int = 0,
                 num_experts_per_tok: int = 0, expert_intermediate_size: int = 0,
                 shared_expert_intermediate_size: int = 0, max_position_embeddings: int = 2048,
                 **kwargs: Any) -> None:
        if stages is None:
            stages = [{"kind": "self", "n_layers": 2}]
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.stages = _check_stages(stages)
        self.num_hidden_layers = sum(s["n_layers"] for s in self.stages)  # distinct layers (weights)
        self.rope_theta = float(rope_theta)
        self.cross_rope = bool(cross_rope)
        self.rms_norm_eps = rms_norm_eps
        self.initializer_range = initializer_range
        self.num_experts = num_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.expert_intermediate_size = expert_intermediate_size
        self.shared_expert_intermediate_size = shared_expert_intermediate_size
        self.max_position_embeddings = max_position_embeddings
        if num_attention_heads % num_key_value_heads:
            raise ValueError(f"YocouConfig.num_attention_heads ({num_attention_heads}) must be a multiple of "
                             f"num_key_value_heads ({num_key_value_heads})")
        if head_dim % 2:
            raise ValueError(f"YocouConfig.head_dim must be even (RoPE), got {head_dim}")
        kwargs.setdefault("tie_word_embeddings", False)
        kwargs.setdefault("use_cache", True)  # YocouCache (modeling_yocou.py)
        super().__init__(**kwargs)
