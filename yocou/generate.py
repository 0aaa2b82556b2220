"""Inference: chunked prefill with early exit, then token-by-token decode (SPEC.md section 4)."""

from __future__ import annotations

import torch

from .cache import KVCache
from .model import LM


@torch.no_grad()
def prefill(model: LM, prompt_BN: torch.Tensor, cache: KVCache, *, chunk_size: int = 512) -> torch.Tensor:
    """Feed a prompt into ``cache`` in chunks; return the last position's logits ``[B, V]``.

    Non-final chunks stop after the last cache write; the final chunk runs the
    rest of the plan (YOCO's cross-decoder) for its last position only, so the
    YOCO family's prefill is linear in N (paper Table 1).

    Raises:
        ValueError: empty prompt, ``chunk_size < 1`` or a prompt longer than the cache.
    """
    N = prompt_BN.shape[1]
    if N < 1:
        raise ValueError("prefill needs a prompt of at least one token")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    cache.check_room(N)
    out = None
    for s in range(0, N, chunk_size):
        final = s + chunk_size >= N
        out = model(prompt_BN[:, s:s + chunk_size], cache=cache, last_only=True, compute_logits=final)
    assert out is not None and out.logits_BNV is not None
    return out.logits_BNV[:, -1]


@torch.no_grad()
def decode_step(model: LM, token_B: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """One decode step at position ``cache.pos``: ``[B]`` token ids -> ``[B, V]`` logits."""
    return model(token_B[:, None], cache=cache).logits_BNV[:, -1]


@torch.no_grad()
def generate(model: LM, prompt_BN: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, generator: torch.Generator | None = None, chunk_size: int = 512,
             eos_id: int | None = None, cache_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Greedy (``temperature == 0``) or sampled generation with the KV cache.

    Returns the generated ids ``[B, max_new_tokens]`` (positions after an ``eos_id``
    keep being generated; callers cut at EOS).

    Raises:
        ValueError: negative ``max_new_tokens`` or ``temperature``.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    B, N = prompt_BN.shape
    cache = model.new_cache(B, N + max_new_tokens, dtype=cache_dtype)
    logits = prefill(model, prompt_BN, cache, chunk_size=chunk_size)
    out = []
    done = torch.zeros(B, dtype=torch.bool, device=prompt_BN.device)
    for i in range(max_new_tokens):
        tok = _pick(logits, temperature, top_k, generator)
        out.append(tok)
        if eos_id is not None:
            done |= tok == eos_id
            if bool(done.all()):
                break
        if i + 1 < max_new_tokens:
            logits = decode_step(model, tok, cache)
    if not out:
        return prompt_BN.new_zeros((B, 0))
    return torch.stack(out, dim=1)


def _pick(logits_BV: torch.Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None
          ) -> torch.Tensor:
    if temperature == 0:
        return logits_BV.argmax(-1)
    logits = logits_BV.float() / temperature
    if top_k is not None:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]
