"""What a held-out score is taken over, shared by the LM (:mod:`yocou.evaluation.ppl`) and the trivial baselines
(:mod:`yocou.evaluation.baselines`), so both score exactly the same tokens in the same windows (numpy only).

* **The split cap** (:func:`capped_documents`): ``max_tokens`` caps the tokens *read from a split*: documents in
  their stored order, whole, until the cap; the document that crosses it is cut to the tokens left (a cut piece
  shorter than 2 tokens is dropped, it predicts nothing). ``None`` takes every document whole. A document of n
  tokens predicts its tokens 1 .. n-1, so a split scores ``Σ (n_d - 1)`` tokens, at most ``max_tokens - 1``.
* **Windows** (:func:`window_starts`): a document's predicted tokens are cut into windows of ``seq_len``
  predictions; window k feeds tokens ``[k·seq_len, k·seq_len + n)`` and predicts ``[k·seq_len + 1, k·seq_len + n]``.
  Context resets at a window start, but even the first prediction of a window has one token of context (the
  window's first input token, which is the previous token of the document).
* **Bytes** (:func:`token_byte_lengths`): each token's byte length under its tokenizer, so bits/byte =
  ``Σ NLL / ln 2 / Σ bytes(predicted token)``.
* **Standard error** (:func:`window_stderr`): of the token-weighted mean NLL, windows as clusters.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

__all__ = ["capped_documents", "window_starts", "window_sums", "window_stderr", "token_byte_lengths",
           "split_score", "BYTES_METHOD"]


def capped_documents(stream: Any, max_tokens: int | None) -> Iterator[tuple[str, np.ndarray, bool]]:
    """``(doc_id, ids, truncated)`` for the documents a split is scored on (module docstring: the split cap).

    Args:
        stream: a :class:`yocou.data.tokens.TokenStream` (``n_docs``, ``document(i)``, ``doc_ids``).
        max_tokens: tokens read from the split at most (>= 2), or ``None`` for all.

    Documents with fewer than 2 tokens are skipped (they predict nothing) and do not use the cap.
    """
    if max_tokens is not None and max_tokens < 2:
        raise ValueError(f"max_tokens must be >= 2 or None, got {max_tokens}")
    left = max_tokens
    for i in range(stream.n_docs):
        if left is not None and left < 2:
            return
        ids = stream.document(i)
        if len(ids) < 2:
            continue
        cut = left is not None and len(ids) > left
        if cut:
            ids = ids[:left]
        if left is not None:
            left -= len(ids)
        doc_id = stream.doc_ids[i] if i < len(stream.doc_ids) else str(i)
        yield doc_id, ids, bool(cut)


def window_starts(n_tokens: int, seq_len: int) -> list[int]:
    """Start offsets of the windows of a document of ``n_tokens`` tokens: ``0, seq_len, 2·seq_len, ...`` below
    ``n_tokens - 1``; window s predicts tokens ``s + 1 .. min(s + seq_len, n_tokens - 1)``."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    return list(range(0, max(n_tokens - 1, 0), seq_len))


def window_sums(nll: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Per window of one document: the summed NLL and the number of predictions, from its ``[n - 1]`` per-token
    NLL (entry i is token i + 1; :func:`window_starts` of ``n``)."""
    nll = np.asarray(nll, dtype=np.float64)
    if nll.size == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    starts = np.arange(0, nll.size, seq_len)
    sums = np.add.reduceat(nll, starts)
    counts = np.diff(np.append(starts, nll.size))
    return sums, counts


def window_stderr(sums: np.ndarray, counts: np.ndarray) -> float:
    """Standard error of the token-weighted mean NLL ``m = Σ s_k / Σ n_k`` over K windows (sums ``s_k``, tokens
    ``n_k``), windows as independent clusters (the ratio estimator's standard error)::

        SE = sqrt( K / (K - 1) · Σ_k (n_k / N)² (m_k - m)² ),   m_k = s_k / n_k,  N = Σ n_k

    With equal ``n_k`` this is ``std(m_k, ddof=1) / sqrt(K)``. Windows of one document are not independent
    (neighbouring text is alike), so it understates the spread a new sample of documents would show. NaN for
    K < 2.
    """
    s, n = np.asarray(sums, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    K = s.size
    if K < 2:
        return float("nan")
    N = n.sum()
    m = s.sum() / N
    return float(math.sqrt(K / (K - 1) * np.sum((n / N) ** 2 * (s / n - m) ** 2)))


#: How :func:`token_byte_lengths` counts bytes, by tokenizer kind (recorded in the results).
BYTES_METHOD = {
    "byte_level": "each token's byte string from the tokenizer's vocabulary (ByteLevel symbols mapped back "
                  "to bytes): exact",
    "tiktoken": "each token's bytes (tiktoken decode_single_token_bytes): exact",
    "decode": "each token decoded alone, UTF-8 length: exact unless a token holds part of a multi-byte "
              "character (not a byte-level tokenizer)",
}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte → printable character table (the ByteLevel pre-tokenizer's alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def token_byte_lengths(tokenizer: str | os.PathLike | Any) -> tuple[np.ndarray, str]:
    """``(lengths[vocab_size], method)``: the UTF-8 byte length of the text of every token id, and the method
    used (a key of :data:`BYTES_METHOD`).

    ``tokenizer`` is a spec for :func:`yocou.data.tokenizer.load_tokenizer` (the run's ``tokenizer.json``) or a
    loaded adapter. For a byte-level BPE (ours, GPT-2) a token's vocabulary string is a sequence of ByteLevel
    symbols, one per byte, so its byte length is exact even where a token holds part of a character; added
    (special) tokens count their content's UTF-8 length.
    """
    from yocou.data.tokenizer import TokenizerAdapter, load_tokenizer

    tok = tokenizer if isinstance(tokenizer, TokenizerAdapter) else load_tokenizer(tokenizer)
    V, be = tok.vocab_size, tok.backend
    out = np.zeros(V, dtype=np.int64)
    if be is not None and hasattr(be, "decode_single_token_bytes"):  # tiktoken
        for i in range(V):
            try:
                out[i] = len(be.decode_single_token_bytes(i))
            except KeyError:  # an unused id
                out[i] = 0
        return out, "tiktoken"
    if be is not None and hasattr(be, "id_to_token"):  # Hugging Face tokenizers
        dec = json.loads(be.to_str()).get("decoder") or {}
        if dec.get("type") == "ByteLevel":
            sym = {c: b for b, c in _bytes_to_unicode().items()}
            added = {t.content for t in be.get_added_tokens_decoder().values()} \
                if hasattr(be, "get_added_tokens_decoder") else set()
            for i in range(V):
                t = be.id_to_token(i)
                if t is None:
                    continue
                if t in added or any(c not in sym for c in t):
                    out[i] = len(t.encode("utf-8"))
                else:
                    out[i] = len(t)  # one ByteLevel symbol per byte
            return out, "byte_level"
    for i in range(V):
        out[i] = len(tok.decode([i]).encode("utf-8"))
    return out, "decode"


def split_score(docs: Sequence[tuple[str, np.ndarray, bool]], nlls: Iterable[np.ndarray], seq_len: int,
                byte_len: np.ndarray | None) -> dict[str, Any]:
    """The per-split numbers from its documents (:func:`capped_documents`) and their per-token NLL (entry i of
    document d's array = token i + 1 of d): ``nll`` = ``nats_per_token`` (Σ NLL / Σ tokens), ``ppl`` =
    exp(nll), ``n_tokens``, ``n_windows``, ``stderr_nats`` (:func:`window_stderr`), and with ``byte_len``:
    ``n_bytes`` (Σ bytes of the predicted tokens) and ``bits_per_byte`` = Σ NLL / ln 2 / n_bytes; ``docs``:
    ``{"id", "n_tokens", "nll", "truncated"}`` per document.
    """
    total, count, n_bytes, ws, wc, out_docs = 0.0, 0, 0, [], [], []
    for (doc_id, ids, cut), nll in zip(docs, nlls):
        nll = np.asarray(nll, dtype=np.float64)
        if nll.size != len(ids) - 1:
            raise ValueError(f"document {doc_id}: {nll.size} NLL values for {len(ids)} tokens")
        total += float(nll.sum())
        count += nll.size
        s, c = window_sums(nll, seq_len)
        ws.append(s)
        wc.append(c)
        if byte_len is not None:
            n_bytes += int(byte_len[np.asarray(ids[1:], dtype=np.int64)].sum())
        out_docs.append({"id": doc_id, "n_tokens": int(nll.size), "nll": float(nll.mean()), "truncated": cut})
    if count == 0:
        raise ValueError("no held-out document with at least 2 tokens")
    sums, counts = np.concatenate(ws), np.concatenate(wc)
    res: dict[str, Any] = {"ppl": math.exp(total / count), "nll": total / count, "nats_per_token": total / count,
                           "n_tokens": count, "n_windows": int(sums.size),
                           "stderr_nats": None}
    se = window_stderr(sums, counts)
    res["stderr_nats"] = None if math.isnan(se) else se  # one window: unknown
    if byte_len is not None:
        res["n_bytes"] = n_bytes
        res["bits_per_byte"] = total / math.log(2) / n_bytes if n_bytes else None
    res["docs"] = out_docs
    return res
