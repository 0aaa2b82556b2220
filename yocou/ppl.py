"""Held-out perplexity on whole held-out documents (book and code).

A document of n tokens is cut into consecutive windows of ``seq_len + 1``
tokens overlapping by one, so every token after the first is predicted exactly
once, from the tokens before it in its window (context resets at window
boundaries). Perplexity is ``exp(Σ NLL / Σ tokens)`` over all predicted tokens.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .model import LM


@torch.no_grad()
def token_nll(model: LM, ids_N: np.ndarray | torch.Tensor, seq_len: int, *, batch_size: int = 8,
              dtype: str = "fp32") -> torch.Tensor:
    """Per-token negative log-likelihood (nats) of tokens ``1 .. N-1`` of one document.

    Args:
        model: the LM (eval mode).
        ids_N: token ids ``[N]``.
        seq_len: window length in tokens.
        batch_size: windows per forward.
        dtype: ``fp32`` or ``bf16`` (autocast).

    Returns:
        ``[N - 1]`` float32 NLL; entry i is for token i + 1.

    Raises:
        ValueError: fewer than 2 tokens or ``seq_len < 1``.
    """
    ids = torch.as_tensor(np.asarray(ids_N, dtype=np.int64))
    N = ids.numel()
    if N < 2:
        raise ValueError(f"a document needs at least 2 tokens, got {N}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    dev = next(model.parameters()).device
    starts = list(range(0, N - 1, seq_len))
    out = torch.empty(N - 1)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype == "bf16")
    for b in range(0, len(starts), batch_size):
        group = starts[b:b + batch_size]
        lens = [min(seq_len, N - 1 - s) for s in group]
        L = max(lens)
        x = torch.zeros(len(group), L, dtype=torch.long)
        y = torch.full((len(group), L), -100, dtype=torch.long)
        for i, (s, n) in enumerate(zip(group, lens)):
            x[i, :n] = ids[s:s + n]
            y[i, :n] = ids[s + 1:s + 1 + n]
        with amp:
            logits = model(x.to(dev)).logits_BNV
        nll = F.cross_entropy(logits.float().transpose(1, 2), y.to(dev), reduction="none", ignore_index=-100)
        for i, (s, n) in enumerate(zip(group, lens)):
            out[s:s + n] = nll[i, :n].cpu()
    return out


def heldout_ppl(model: LM, stream: Any, seq_len: int, *, max_tokens: int | None = None, batch_size: int = 8,
                dtype: str = "fp32") -> dict[str, Any]:
    """Perplexity over every document of a held-out token stream.

    Args:
        stream: a :class:`yocou.data.tokens.TokenStream` of held-out documents.
        max_tokens: if set, each document is cut to its first ``max_tokens`` tokens
            (recorded in the result).

    Returns:
        ``{"ppl", "nll", "n_tokens", "n_docs", "docs": [{"id", "n_tokens", "nll"}]}``.
    """
    total, count, docs = 0.0, 0, []
    for i in range(stream.n_docs):
        ids = stream.document(i)
        if max_tokens is not None:
            ids = ids[:max_tokens]
        if len(ids) < 2:
            continue
        nll = token_nll(model, ids, seq_len, batch_size=batch_size, dtype=dtype)
        total += float(nll.double().sum())
        count += nll.numel()
        doc_id = stream.doc_ids[i] if i < len(stream.doc_ids) else str(i)
        docs.append({"id": doc_id, "n_tokens": int(nll.numel()), "nll": float(nll.double().mean())})
    if count == 0:
        raise ValueError(f"no held-out document with at least 2 tokens in {stream}")
    return {"ppl": math.exp(total / count), "nll": total / count, "n_tokens": count, "n_docs": len(docs),
            "seq_len": seq_len, "max_tokens_per_doc": max_tokens, "dtype": dtype, "docs": docs}
