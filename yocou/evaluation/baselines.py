"""Trivial reference models for the held-out loss tables: an add-one unigram and an interpolated Kneser–Ney
bigram, fitted on ``train.bin`` and scored on exactly the held-out tokens and windows ``yocou ppl`` scores
(:mod:`yocou.evaluation.heldout`: the same per-split cap, the same windows of ``seq_len``). numpy only.

Training data: the whole ``train.bin`` token stream as the LM trains on it, the EOS separators between
documents included (they are tokens, and pairs across a separator are bigrams of the stream).

Context: the LM's windows reset context at a window start, but no prediction is made without context: window
k feeds tokens ``[k·seq_len, k·seq_len + n)`` and predicts the next ones, so even its first prediction sees one
token, the previous token of the document (a document's own first token is never predicted). The bigram
therefore conditions every prediction on the previous token, which is exactly what the LM sees then (never
more); the unigram uses no context. So the two baselines score the same predictions as the LM for any
``seq_len``; the windows only matter for the standard error.

Unigram (add-one / Laplace), with ``c(w)`` the count of token ``w`` in the N training tokens and V the
vocabulary size (the stream's ``vocab_size``)::

    P(w) = (c(w) + 1) / (N + V)

Interpolated Kneser–Ney bigram (Chen & Goodman 1998, sec. 3.5; the lowest order interpolated with the uniform
distribution so that unseen tokens keep mass). With ``c(v, w)`` the count of the pair (v then w) among the
N - 1 adjacent pairs of the stream, ``c(v) = Σ_w c(v, w)``, ``N1+(v •) = |{w : c(v, w) > 0}|``,
``N1+(• w) = |{v : c(v, w) > 0}|``, ``B = N1+(• •)`` the number of distinct pairs and ``U = |{w : N1+(• w) > 0}|``::

    P_cont(w) = max(N1+(• w) - D1, 0) / B  +  (D1 · U / B) · 1 / V
    P(w | v)  = max(c(v, w) - D2, 0) / c(v)  +  (D2 · N1+(v •) / c(v)) · P_cont(w)      if c(v) > 0
    P(w | v)  = P_cont(w)                                                               if c(v) = 0

The bigram is fitted twice: on the whole ``train.bin`` (``bigram_kn``) and, when the training budget is given,
on exactly the windows the LM was trained on (``bigram_kn_budget``: ``steps × batch_size`` windows of
``seq_len + 1`` tokens drawn by the training sampler of the base seed, :func:`budget_windows`; pairs within a
window only), so an LM that sees a fraction of the stream is compared with a bigram that saw the same tokens.
The needle mix (:mod:`yocou.data.needles`) that replaces a fraction of the training sequences is not replayed:
the budget bigram sees the stream's text in their place.

Discounts by Ney's estimate, per order: ``D = n1 / (n1 + 2 n2)`` with n1, n2 the number of pair types seen
exactly once and twice (D2: the counts ``c(v, w)``; D1: the continuation counts ``N1+(• w)``); 0.75 where
``n1 + 2 n2 = 0`` or the estimate is 0. Since every D lies in (0, 1] and counts are integers, each level sums to
one over the vocabulary: ``Σ_w max(c(v, w) - D, 0) = c(v) - D · N1+(v •)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from yocou.evaluation.heldout import (
    BYTES_METHOD,
    capped_documents,
    split_score,
    token_byte_lengths,
)

__all__ = ["Unigram", "KneserNeyBigram", "ney_discount", "budget_windows", "score_split", "baselines_report",
           "MODELS"]

#: The baselines, in table order (``bigram_kn_budget`` only when the training budget is given).
MODELS = ("unigram", "bigram_kn", "bigram_kn_budget")

#: Discount where Ney's estimate is undefined or zero.
FALLBACK_DISCOUNT = 0.75


def ney_discount(counts: np.ndarray) -> float:
    """Ney's absolute discount ``D = n1 / (n1 + 2 n2)`` from the (positive) counts of the types of one order,
    n1 / n2 = how many are exactly 1 / 2; :data:`FALLBACK_DISCOUNT` where that is 0 or undefined."""
    c = np.asarray(counts)
    n1, n2 = int(np.sum(c == 1)), int(np.sum(c == 2))
    if n1 + 2 * n2 == 0 or n1 == 0:
        return FALLBACK_DISCOUNT
    return n1 / (n1 + 2 * n2)


def _tokens(tokens: Any) -> np.ndarray:
    return np.asarray(getattr(tokens, "tokens", tokens), dtype=np.int64)


class Unigram:
    """Add-one unigram ``P(w) = (c(w) + 1) / (N + V)`` (module docstring).

    Args:
        tokens: training token ids (or a :class:`~yocou.data.tokens.TokenStream`).
        vocab_size: V.
    """

    def __init__(self, tokens: Any, vocab_size: int):
        t = _tokens(tokens)
        if t.size and (t.min() < 0 or t.max() >= vocab_size):
            raise ValueError(f"Unigram: token ids outside [0, {vocab_size})")
        self.vocab_size = int(vocab_size)
        self.n = int(t.size)
        self.counts = np.bincount(t, minlength=vocab_size).astype(np.int64)
        self.probs = (self.counts + 1.0) / (self.n + self.vocab_size)

    def nll(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """``-ln P(ids[i])`` for i = 1 .. len - 1 (the predictions of one document; the first token is context)."""
        ids = np.asarray(ids, dtype=np.int64)
        return -np.log(self.probs[ids[1:]])

    def describe(self) -> dict[str, Any]:
        return {"formula": "P(w) = (c(w) + 1) / (N + V)", "smoothing": "add-one", "n_train_tokens": self.n,
                "vocab_size": self.vocab_size, "context": "none"}


class KneserNeyBigram:
    """Interpolated Kneser–Ney bigram with Ney's discounts (module docstring for the formulas).

    Pair counts are kept sparse (sorted pair codes ``v · V + w``), so a 100k vocabulary costs memory in the
    number of distinct pairs, not V².

    Args:
        tokens: training token ids ``[N]`` (or a :class:`~yocou.data.tokens.TokenStream`), at least 2; or
            windows ``[n_windows, L]`` (L >= 2), whose pairs are counted within each window only.
        vocab_size: V.
        discount: fixed D for both orders instead of Ney's estimates.
    """

    def __init__(self, tokens: Any, vocab_size: int, discount: float | None = None):
        t = _tokens(tokens)
        V = self.vocab_size = int(vocab_size)
        if t.ndim not in (1, 2) or t.shape[-1] < 2:
            raise ValueError(f"KneserNeyBigram: need at least 2 training tokens (per window), got shape {t.shape}")
        if t.min() < 0 or t.max() >= V:
            raise ValueError(f"KneserNeyBigram: token ids outside [0, {V})")
        self.codes, self.pair_counts = np.unique((t[..., :-1] * V + t[..., 1:]).ravel(), return_counts=True)
        prev, nxt = self.codes // V, self.codes % V
        self.ctx_count = np.bincount(prev, weights=self.pair_counts, minlength=V)   # c(v)
        self.ctx_types = np.bincount(prev, minlength=V).astype(np.float64)         # N1+(v •)
        self.cont_types = np.bincount(nxt, minlength=V).astype(np.float64)         # N1+(• w)
        self.n_pair_types = B = int(self.codes.size)                               # N1+(• •)
        self.n_cont_words = U = int(np.sum(self.cont_types > 0))
        if discount is not None and not 0 < discount <= 1:
            raise ValueError(f"KneserNeyBigram: discount must lie in (0, 1], got {discount}")
        self.d2 = float(discount) if discount is not None else ney_discount(self.pair_counts)
        self.d1 = float(discount) if discount is not None else ney_discount(self.cont_types[self.cont_types > 0])
        self.p_cont = np.maximum(self.cont_types - self.d1, 0.0) / B + self.d1 * U / B / V
        self.n_train = int(t.size)
        self.n_windows = int(t.shape[0]) if t.ndim == 2 else None

    def _pair_count(self, v: np.ndarray, w: np.ndarray) -> np.ndarray:
        q = v * self.vocab_size + w
        i = np.searchsorted(self.codes, q)
        i_ok = np.minimum(i, self.codes.size - 1)
        hit = self.codes[i_ok] == q
        return np.where(hit, self.pair_counts[i_ok], 0).astype(np.float64)

    def prob(self, v: Sequence[int] | np.ndarray, w: Sequence[int] | np.ndarray) -> np.ndarray:
        """``P(w | v)`` elementwise for arrays of contexts v and tokens w."""
        v, w = np.asarray(v, dtype=np.int64), np.asarray(w, dtype=np.int64)
        cv = self.ctx_count[v]
        seen = cv > 0
        safe = np.where(seen, cv, 1.0)
        high = np.maximum(self._pair_count(v, w) - self.d2, 0.0) / safe
        lam = self.d2 * self.ctx_types[v] / safe
        return np.where(seen, high + lam * self.p_cont[w], self.p_cont[w])

    def distribution(self, v: int) -> np.ndarray:
        """``P(· | v)`` over the whole vocabulary (``[V]``)."""
        return self.prob(np.full(self.vocab_size, int(v)), np.arange(self.vocab_size))

    def nll(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """``-ln P(ids[i] | ids[i-1])`` for i = 1 .. len - 1 (one document's predictions)."""
        ids = np.asarray(ids, dtype=np.int64)
        return -np.log(self.prob(ids[:-1], ids[1:]))

    def describe(self) -> dict[str, Any]:
        return {"formula": "interpolated Kneser-Ney bigram, lowest order interpolated with uniform 1/V",
                "discount": self.d2, "discount_lower": self.d1,
                "discount_rule": "Ney: D = n1 / (n1 + 2 n2) per order (0.75 if undefined)",
                "n_train_tokens": self.n_train, "n_pair_types": self.n_pair_types, "vocab_size": self.vocab_size,
                "context": "the previous token, for every prediction (what the LM sees at a window's first "
                           "prediction too)",
                **({"n_windows": self.n_windows, "fitted_on": "the training windows of the budget (pairs within "
                    "a window)"} if self.n_windows is not None else {"fitted_on": "the whole train.bin stream"})}


def budget_windows(stream: Any, *, steps: int, batch_size: int, seq_len: int, seed: int) -> np.ndarray:
    """The token windows a run of ``steps`` steps trains on: ``[steps · batch_size, seq_len + 1]`` (int64),
    each row a training window ``x`` followed by the last target token, drawn exactly as
    :func:`yocou.training.train.draw_batch` draws them for ``seed`` (its generator seeded by (seed, step)).

    Raises:
        ValueError: a non-positive ``steps``, ``batch_size`` or ``seq_len``, or a stream too short (from
            :meth:`~yocou.data.tokens.TokenStream.sample_batch`), or windows that cannot fit in memory
            (:class:`yocou.utils.memory.MemoryRefusal`, a ValueError).
    """
    import torch

    from yocou.training.train import batch_generator

    if steps <= 0:
        raise ValueError(f"budget_windows: steps must be positive, got {steps}")
    from yocou.utils import memory
    # the windows (int64), their concatenation, and the pairs the bigram counts from them: about 3 copies
    memory.require(3 * 8 * steps * batch_size * (seq_len + 1),
                   f"the budget bigram's training windows ({steps} steps x batch {batch_size} x seq_len {seq_len})")
    rows = []
    for step in range(steps):
        x, y = stream.sample_batch(batch_size, seq_len, batch_generator(seed, step))
        rows.append(torch.cat([x, y[:, -1:]], dim=1).numpy())
    return np.concatenate(rows)


def score_split(model: Unigram | KneserNeyBigram, stream: Any, seq_len: int, *, max_tokens: int | None = None,
                byte_len: np.ndarray | None = None) -> dict[str, Any]:
    """A baseline on one held-out split, on the documents and windows ``yocou ppl`` uses
    (:func:`yocou.evaluation.heldout.capped_documents`, :func:`yocou.evaluation.heldout.split_score`): ``nats_per_token`` (= ``nll``),
    ``ppl``, ``n_tokens``, ``n_windows``, ``stderr_nats``, ``n_bytes``, ``bits_per_byte`` and ``docs``."""
    docs = list(capped_documents(stream, max_tokens))
    return split_score(docs, (model.nll(ids) for _, ids, _ in docs), seq_len, byte_len)


def baselines_report(train: str | Path, data: str | Path, *, splits: Sequence[str] = ("heldout_book", "heldout_code"),
                     seq_len: int, max_tokens: int | None = None, tokenizer: str | None = None,
                     budget: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Fit the baselines on ``train`` (a ``train.bin``) and score them on ``<data>/<split>.bin``.

    ``budget``: ``{"steps", "batch_size", "seq_len", "seed"}`` of the training runs; with it, also the bigram
    fitted on exactly the windows such a run trains on (``bigram_kn_budget``, :func:`budget_windows`).

    Returns:
        ``{"train", "vocab_size", "models": {name: description}, "bytes_method", "splits": {split: {"n_tokens",
        "n_docs", "seq_len", "max_tokens", "docs", "unigram": {...}, "bigram_kn": {...}}}}``; per model
        ``nats_per_token``, ``bits_per_byte``, ``n_tokens``, ``ppl``, ``n_bytes``, ``stderr_nats``,
        ``n_windows`` (:func:`score_split`).
    """
    from yocou.data.tokens import TokenStream, check_stream_tokenizer

    tr = TokenStream(train)
    V = tr.vocab_size
    models = {"unigram": Unigram(tr, V), "bigram_kn": KneserNeyBigram(tr, V)}
    if budget is not None:
        win = budget_windows(tr, **{k: int(budget[k]) for k in ("steps", "batch_size", "seq_len", "seed")})
        models["bigram_kn_budget"] = KneserNeyBigram(win, V)
    byte_len, method = token_byte_lengths(tokenizer) if tokenizer else (None, None)
    if byte_len is not None and len(byte_len) < V:
        raise ValueError(f"{tokenizer}: {len(byte_len)} token ids, but {train} has a vocabulary of {V}")
    out: dict[str, Any] = {"train": str(train), "vocab_size": V, "tokenizer": tokenizer,
                           "models": {k: m.describe() for k, m in models.items()},
                           "budget": dict(budget) if budget is not None else None,
                           "bytes_method": f"{method}: {BYTES_METHOD[method]}" if method else None, "splits": {}}
    for split in splits:
        st = TokenStream(Path(data) / f"{split}.bin")
        if st.vocab_size != V:
            raise ValueError(f"{split}.bin: vocabulary {st.vocab_size}, train.bin's is {V}")
        if tokenizer:
            check_stream_tokenizer(st, tokenizer)
        res = {k: score_split(m, st, seq_len, max_tokens=max_tokens, byte_len=byte_len) for k, m in models.items()}
        docs = res["unigram"]["docs"]
        for r in res.values():
            r.pop("docs")
        out["splits"][split] = {"n_tokens": res["unigram"]["n_tokens"], "n_docs": len(docs), "seq_len": seq_len,
                                "max_tokens": max_tokens, "docs": [{k: d[k] for k in ("id", "n_tokens", "truncated")}
                                                                   for d in docs], **res}
    return out
