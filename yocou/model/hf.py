"""Conversion of our Transformer to Hugging Face transformers' ``LlamaForCausalLM`` (same shape, same weights).

Used by ``yocou export-hf`` (:mod:`yocou.export`), the parity test (``tests/test_model.py``) and the peer
benchmark (``benchmarks/hf_llama_peer.py``).
Our fused matrices are split into Llama's: ``wqkv`` rows ``[W_Q; W_K; W_V]`` become ``q_proj``, ``k_proj``,
``v_proj``; ``ffn.w13`` rows ``[W_gate; W_up]`` become ``gate_proj`` and ``up_proj``.
"""

from __future__ import annotations

from typing import Any

import torch

from yocou.model.config import ModelConfig
from yocou.model.lm import LM


def is_llama_compatible(cfg: ModelConfig) -> bool:
    """Whether ``cfg`` is the plain Transformer (one global, unlooped, dense self stage, no cross-decoder),
    the one variant that maps onto ``LlamaForCausalLM``. transformers' ``LlamaConfig`` also insists that the
    hidden size be a multiple of the head count (it holds for every preset size)."""
    return (len(cfg.stages) == 1 and cfg.stages[0].kind == "self" and cfg.stages[0].window is None
            and cfg.stages[0].n_loops == 1 and not cfg.n_experts and cfg.d_model % cfg.n_heads == 0)


def _check_transformer(cfg: ModelConfig) -> None:
    if not is_llama_compatible(cfg):
        raise ValueError(f"model {cfg.name!r}: only the Transformer preset (one global, unlooped, dense self "
                         "stage, d_model a multiple of n_heads) maps onto LlamaForCausalLM")


def llama_state_dict(model: LM) -> dict[str, torch.Tensor]:
    """Llama's state dict (detached copies) for our single-stage Transformer ``model``.

    Raises:
        ValueError: ``model`` is not a Transformer (one global self-attention stage, no loops, dense FFN).
    """
    cfg = model.cfg
    _check_transformer(cfg)
    H, G, Dh = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    sd = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.norm.weight,
          "lm_head.weight": model.lm_head.weight}
    for i, layer in enumerate(model.stages[0]):
        pre = f"model.layers.{i}."
        q, k, v = layer.wqkv.weight.split([H * Dh, G * Dh, G * Dh], dim=0)
        gate, up = layer.ffn.w13.weight.chunk(2, dim=0)
        sd |= {pre + "self_attn.q_proj.weight": q, pre + "self_attn.k_proj.weight": k,
               pre + "self_attn.v_proj.weight": v, pre + "self_attn.o_proj.weight": layer.wo.weight,
               pre + "mlp.gate_proj.weight": gate, pre + "mlp.up_proj.weight": up,
               pre + "mlp.down_proj.weight": layer.ffn.w2.weight,
               pre + "input_layernorm.weight": layer.attn_norm.weight,
               pre + "post_attention_layernorm.weight": layer.ffn_norm.weight}
    return {k: v.detach().clone().contiguous() for k, v in sd.items()}


def llama_config_kwargs(cfg: ModelConfig, max_position_embeddings: int = 1 << 17) -> dict[str, Any]:
    """``LlamaConfig`` keyword arguments (JSON-ready: the keys of a Llama ``config.json``) for our Transformer
    ``cfg``. ``max_position_embeddings`` is informative (default RoPE has no length limit).

    Raises:
        ValueError: ``cfg`` is not the Transformer preset (as :func:`llama_state_dict`).
    """
    _check_transformer(cfg)
    return dict(
        vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.stages[0].n_layers, num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim, rms_norm_eps=cfg.norm_eps, rope_theta=cfg.rope_theta,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta}, hidden_act="silu",
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        max_position_embeddings=max_position_embeddings,
    )


def to_llama(model: LM, max_position_embeddings: int = 1 << 17) -> torch.nn.Module:
    """A ``LlamaForCausalLM`` (attention through SDPA) with the shape and copied weights of ``model``."""
    import transformers

    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama_config_kwargs(model.cfg,
                                                                                     max_position_embeddings)))
    hf.config._attn_implementation = "sdpa"
    missing, unexpected = hf.load_state_dict(llama_state_dict(model), strict=False)
    if unexpected or not all("rotary" in k for k in missing):
        raise RuntimeError(f"Llama state dict mismatch: missing {missing}, unexpected {unexpected}")
    return hf
