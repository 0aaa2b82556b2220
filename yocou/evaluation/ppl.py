"""Held-out perplexity on whole held-out documents (book and code).

Which tokens are scored (the per-split cap, the windows, bytes and the standard error) is
:mod:`yocou.evaluation.heldout`, shared with the trivial baselines (:mod:`yocou.evaluation.baselines`).

A document of n tokens is cut into consecutive windows of ``seq_len + 1``
tokens overlapping by one, so every token after the first is predicted exactly
once, from the tokens before it in its window (context resets at window
boundaries). Perplexity is ``exp(Σ NLL / Σ tokens)`` over all predicted tokens; bits/byte is
``Σ NLL / ln 2 / Σ bytes`` of the predicted tokens.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from yocou.evaluation.heldout import capped_documents, split_score
from yocou.model.lm import LM


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
                dtype: str = "fp32", byte_len: np.ndarray | None = None,
                bytes_method: str | None = None) -> dict[str, Any]:
    """Perplexity, nats/token, bits/byte and the standard error over a held-out token stream.

    Args:
        stream: a :class:`yocou.data.tokens.TokenStream` of held-out documents.
        max_tokens: cap on the tokens read from the split: documents in their stored order until the cap, the
            last one cut (:func:`yocou.evaluation.heldout.capped_documents`); ``None``: every document whole.
        byte_len: ``[vocab]`` byte length of each token (:func:`yocou.evaluation.heldout.token_byte_lengths`); without it
            there is no ``n_bytes`` / ``bits_per_byte``.
        bytes_method: how ``byte_len`` was made (recorded).

    Returns:
        ``{"ppl", "nll", "nats_per_token" (= nll), "n_tokens", "n_windows", "stderr_nats", "n_bytes",
        "bits_per_byte", "n_docs", "seq_len", "max_tokens", "max_tokens_per_doc" (None: no per-document cap),
        "dtype", "bytes_method", "docs": [{"id", "n_tokens", "nll", "truncated"}]}``
        (:func:`yocou.evaluation.heldout.split_score`).
    """
    docs = list(capped_documents(stream, max_tokens))
    if not docs:
        raise ValueError(f"no held-out document with at least 2 tokens in {stream}")
    nlls = (token_nll(model, ids, seq_len, batch_size=batch_size, dtype=dtype).double().numpy()
            for _, ids, _ in docs)
    res = split_score(docs, nlls, seq_len, byte_len)
    docs_out = res.pop("docs")
    return {**res, "n_docs": len(docs_out), "seq_len": seq_len, "max_tokens": max_tokens,
            "max_tokens_per_doc": None, "dtype": dtype, "bytes_method": bytes_method, "docs": docs_out}
