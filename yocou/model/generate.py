"""Inference: chunked prefill with early exit, then token-by-token decode (docs/design.md section 4)."""

from __future__ import annotations

import torch

from yocou.model.cache import KVCache
from yocou.model.limits import new_cache
from yocou.model.lm import LM


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

    Args:
        prompt_BN: prompt ids ``[B, N]`` (int64), the same length for every row (no padding mask).
        max_new_tokens: how many tokens to return per row.
        eos_id: optional end-of-sequence id. A row that has produced it is finished: every later
            position of that row holds ``eos_id`` (padding), and generation stops early once every
            row has finished; the result keeps the full width.

    Returns:
        The generated ids ``[B, max_new_tokens]`` (int64), always that shape. Without ``eos_id``
        every position is generated; with it, positions after a row's first ``eos_id`` are ``eos_id``.

    Raises:
        ValueError: negative ``max_new_tokens`` or ``temperature``, ``top_k`` < 1 (one above ``vocab_size`` keeps
            the whole vocabulary, as in transformers); ``prompt_BN`` not a 2-D integer tensor, or an id
            outside ``[0, vocab_size)``.
    """
    if not isinstance(prompt_BN, torch.Tensor) or prompt_BN.ndim != 2 or prompt_BN.dtype.is_floating_point \
            or prompt_BN.dtype == torch.bool:
        got = (f"a {prompt_BN.ndim}-D {prompt_BN.dtype} tensor" if isinstance(prompt_BN, torch.Tensor)
               else type(prompt_BN).__name__)
        raise ValueError(f"prompt_BN must be a 2-D integer tensor [B, N] of token ids, got {got}")
    if prompt_BN.numel() and (int(prompt_BN.min()) < 0 or int(prompt_BN.max()) >= model.cfg.vocab_size):
        raise ValueError(f"prompt_BN holds token ids outside [0, vocab_size={model.cfg.vocab_size}): min "
                         f"{int(prompt_BN.min())}, max {int(prompt_BN.max())}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1 (or None: the whole vocabulary), got {top_k}")
    B, N = prompt_BN.shape
    out_BT = prompt_BN.new_full((B, max_new_tokens), eos_id if eos_id is not None else 0)
    if max_new_tokens == 0:
        return out_BT
    cache = new_cache(model, B, N + max_new_tokens, dtype=cache_dtype)
    logits = prefill(model, prompt_BN, cache, chunk_size=chunk_size)
    done_B = torch.zeros(B, dtype=torch.bool, device=prompt_BN.device)
    for i in range(max_new_tokens):
        tok_B = _pick(logits, temperature, top_k, generator)
        if eos_id is not None:
            tok_B = tok_B.masked_fill(done_B, eos_id)  # a finished row is padded with EOS
            done_B |= tok_B == eos_id
        out_BT[:, i] = tok_B
        if eos_id is not None and bool(done_B.all()):
            break  # the rest of out_BT already holds eos_id
        if i + 1 < max_new_tokens:
            logits = decode_step(model, tok_B, cache)
    return out_BT


def _pick(logits_BV: torch.Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None
          ) -> torch.Tensor:
    if temperature == 0:
        return logits_BV.argmax(-1)
    logits = logits_BV.float() / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]
