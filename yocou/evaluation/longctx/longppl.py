"""Perplexity against input length (paper Figure 4; docs/design.md section 7).

Each evaluated document is fed once, up to the longest length, through the KV cache in chunks
(``LM.forward(chunk, cache=cache)`` with logits at every position), so the NLL of the token at
position t conditions on all t tokens before it, and the YOCO family's cost stays linear in the
window-attention part. The per-token NLL is stored once per document; both curves are derived
from it (:func:`derive_curves`):

* ``cum``: perplexity of tokens 1..L-1 of an input of L tokens (cumulative average);
* ``span``: perplexity of the final ``span`` tokens of an input of L tokens, i.e. tokens
  ``L-span .. L-1`` given the ``L-span`` tokens before them (the span has a fixed size and sits at the
  end of inputs of growing length; its text differs with L and is averaged over documents).

Documents (held out of training whole, DATA.md "Hold-outs"): book = excerpts of the longest length
from Milton's *Paradise Lost* (``heldout_book.bin``, one document) at evenly spaced offsets; code =
the first tokens of the held-out stdlib modules (``heldout_code.bin``) that are at least that long,
in stream order. Lengths beyond the model's training length are extrapolation and flagged so.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from yocou.model.limits import plan_eval_batch
from yocou.results.evaldefs import protocol
from yocou.utils.entry import DEVICE_HELP, DTYPE_HELP, int_at_least, resolve_device

# the held-out token streams scored, by the name the results use (eval/protocols.yaml, longppl.splits)
SPLITS = dict(protocol("longppl")["splits"])
if sorted(SPLITS) != ["book", "code"]:
    raise ValueError(f"eval/protocols.yaml: longppl.splits must name the book and code streams, got {SPLITS}")


@torch.no_grad()
def long_token_nll(model: torch.nn.Module, ids_BN: torch.Tensor | np.ndarray, *, chunk_size: int = 512,
                   dtype: str = "fp32") -> torch.Tensor:
    """Per-token NLL (nats) of whole sequences in one cached pass.

    Args:
        model: a :class:`yocou.model.lm.LM` (eval mode).
        ids_BN: token ids ``[B, N]`` (or ``[N]``), N >= 2.
        chunk_size: tokens per forward through the cache.
        dtype: ``fp32`` or ``bf16`` (autocast).

    Returns:
        ``[B, N - 1]`` float32 on CPU; entry ``[b, i]`` is the NLL of token ``i + 1`` given tokens
        ``0..i``. Equal to the NLL of a plain full forward (tests/test_longppl.py).

    Raises:
        ValueError: fewer than 2 tokens, ``chunk_size < 1`` or an unknown dtype.
    """
    ids = torch.as_tensor(np.asarray(ids_BN, dtype=np.int64))
    if ids.ndim == 1:
        ids = ids[None]
    B, N = ids.shape
    if N < 2:
        raise ValueError(f"long_token_nll needs at least 2 tokens, got {N}")
    if chunk_size < 1:
        raise ValueError(f"eval.longppl.chunk_size must be >= 1, got {chunk_size}")
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"eval.longppl.dtype must be 'fp32' or 'bf16', got {dtype!r}")
    from yocou.model.limits import new_cache

    dev = next(model.parameters()).device
    ids = ids.to(dev)
    cache = new_cache(model, B, N)
    out = torch.empty(B, N - 1)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype == "bf16")
    for s in range(0, N, chunk_size):
        x = ids[:, s:s + chunk_size]
        with amp:
            logits = model(x, cache=cache).logits_BNV
        n_pred = min(x.shape[1], N - 1 - s)  # the document's last token predicts nothing
        if n_pred <= 0:
            break
        y = ids[:, s + 1:s + 1 + n_pred]
        nll = F.cross_entropy(logits[:, :n_pred].float().transpose(1, 2), y, reduction="none")
        out[:, s:s + n_pred] = nll.cpu()
    return out


def derive_curves(nll_DT: np.ndarray, lengths: Sequence[int], span: int) -> list[dict[str, Any]]:
    """Cumulative and final-span perplexity at each input length, from stored per-token NLL.

    Args:
        nll_DT: ``[n_docs, T]`` per-token NLL (nats) from :func:`long_token_nll` (T = longest length - 1).
        lengths: input lengths L in tokens (each <= T + 1).
        span: final-span size in tokens.

    Returns:
        One dict per L: ``length``, ``cum_nll``, ``cum_ppl`` (tokens 1..L-1), ``span_nll``, ``span_ppl``
        (tokens L-span..L-1; ``None`` when ``L - 1 < span``), ``n_docs``.

    Raises:
        ValueError: a length longer than the stored NLL or below 2.
    """
    nll = np.asarray(nll_DT, dtype=np.float64)
    D, T = nll.shape
    rows = []
    for L in lengths:
        if not 2 <= L <= T + 1:
            raise ValueError(f"eval.longppl.lengths: {L} outside 2..{T + 1} (the stored NLL's length + 1)")
        cum = float(nll[:, :L - 1].mean())
        sp = float(nll[:, L - 1 - span:L - 1].mean()) if L - 1 >= span else None
        rows.append({"length": int(L), "cum_nll": cum, "cum_ppl": math.exp(cum), "span_nll": sp,
                     "span_ppl": math.exp(sp) if sp is not None else None, "n_docs": D})
    return rows


def select_documents(tokens_dir: str | Path, length: int, n_book: int, n_code: int
                     ) -> dict[str, tuple[np.ndarray, list[dict[str, Any]]]]:
    """Token windows of ``length`` tokens: ``{"book": (ids [n, length], meta), "code": (...)}``.

    Book: ``n_book`` excerpts of the first held-out book at evenly spaced offsets. Code: the first
    ``length`` tokens of the first ``n_code`` held-out code documents with at least ``length`` tokens.

    Raises:
        ValueError: a split has no document long enough (naming the split and ``eval.longppl``).
    """
    from yocou.data import TokenStream

    out: dict[str, tuple[np.ndarray, list[dict[str, Any]]]] = {}
    tokens_dir = Path(tokens_dir)
    if n_book > 0:
        st = TokenStream(tokens_dir / f"{SPLITS['book']}.bin")
        doc = st.document(0)
        if len(doc) < length:
            raise ValueError(f"eval.longppl: held-out book has {len(doc)} tokens, fewer than the longest "
                             f"length {length}")
        starts = [int(k * (len(doc) - length) / max(1, n_book - 1)) for k in range(n_book)]
        name = st.doc_ids[0] if st.doc_ids else "book"
        out["book"] = (np.stack([doc[s:s + length] for s in starts]).astype(np.int64),
                       [{"id": name, "offset": s} for s in starts])
    if n_code > 0:
        st = TokenStream(tokens_dir / f"{SPLITS['code']}.bin")
        rows, meta = [], []
        for i in range(st.n_docs):
            d = st.document(i)
            if len(d) >= length:
                rows.append(d[:length])
                meta.append({"id": st.doc_ids[i] if i < len(st.doc_ids) else str(i), "offset": 0,
                             "doc_tokens": len(d)})
            if len(rows) == n_code:
                break
        if not rows:
            raise ValueError(f"eval.longppl: no held-out code document has {length} tokens; lower the "
                             "longest length or set code_docs: 0")
        out["code"] = (np.stack(rows).astype(np.int64), meta)
    return out


def _main(argv: list[str] | None = None) -> int:
    from yocou.training.train import load_model, read_checkpoint
    from yocou.utils.guard import inside, reads, writes
    from yocou.utils.io import atomic_path, atomic_write_json, provenance


    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.longctx.longppl", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, type=reads())
    ap.add_argument("--tokens-dir", required=True, type=reads(paths=inside(*(f"{s}{x}" for s in ("heldout_book", "heldout_code") for x in (".bin", ".offsets.npy")))), help="folder with heldout_book.bin and heldout_code.bin")
    ap.add_argument("--lengths", nargs="+", type=int_at_least(2), required=True, help="input lengths, each >= 2")
    ap.add_argument("--span", type=int, default=256)
    ap.add_argument("--book-docs", type=int, default=4)
    ap.add_argument("--code-docs", type=int, default=4)
    ap.add_argument("--chunk-size", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8, help="documents per pass")
    ap.add_argument("--dtype", default=None, choices=["fp32", "bf16"], help=DTYPE_HELP)
    ap.add_argument("--device", default=None, help=DEVICE_HELP)
    ap.add_argument("--out", required=True, type=writes(paths=lambda v, a: [v, str(Path(v).with_suffix(".npz"))]), help="result JSON; the per-token NLL goes to <stem>.npz")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    if a.span < 1:
        raise ValueError(f"eval.longppl.span must be >= 1, got {a.span}")
    if len(set(a.lengths)) != len(a.lengths):
        raise ValueError(f"--lengths {a.lengths}: each length once (a length given twice would give two rows of "
                         "the same curve point)")
    if a.book_docs < 0 or a.code_docs < 0 or a.book_docs + a.code_docs == 0:
        raise ValueError(f"--book-docs {a.book_docs} and --code-docs {a.code_docs}: expected counts >= 0 with at "
                         "least one document to score")
    a.device, a.dtype = resolve_device(a.device, a.dtype)
    torch.manual_seed(0)
    model = load_model(a.model, a.device, a.dtype)
    ck = read_checkpoint(a.model)
    train_len = ck.get("train_config", {}).get("seq_len")
    Lmax = max(a.lengths)
    docs = select_documents(a.tokens_dir, Lmax, a.book_docs, a.code_docs)
    a.batch_used = plan_eval_batch(model, a.batch, seq_len=Lmax, dtype=a.dtype, chunk_size=a.chunk_size)
    res: dict[str, Any] = {"model": a.model, "variant": Path(a.model).parent.name, "train_seq_len": train_len,
                           "lengths": sorted(a.lengths), "span": a.span, "splits": {}}
    arrays = {}
    t_all = time.perf_counter()
    for split, (ids, meta) in docs.items():
        t0 = time.perf_counter()
        nll = torch.cat([long_token_nll(model, ids[b:b + a.batch_used], chunk_size=a.chunk_size, dtype=a.dtype)
                         for b in range(0, len(ids), a.batch_used)])
        wall = time.perf_counter() - t0
        arrays[split] = nll.numpy().astype(np.float32)
        curves = derive_curves(arrays[split], sorted(a.lengths), a.span)
        for r in curves:
            r["extrapolated"] = bool(train_len is not None and r["length"] > train_len)
        res["splits"][split] = {"docs": meta, "n_docs": len(meta), "tokens_per_doc": Lmax, "wall_s": wall,
                                "curves": curves}
        print(f"{split}: {len(meta)} docs x {Lmax} tokens in {wall:.1f} s; "
              + ", ".join(f"L={r['length']}: cum {r['cum_ppl']:.2f}" for r in curves), flush=True)
    res["wall_s"] = time.perf_counter() - t_all
    npz = Path(a.out).with_suffix(".npz")
    with atomic_path(npz) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **{f"nll_{k}": v for k, v in arrays.items()})
    res["nll_file"] = npz.name
    res["provenance"] = provenance(vars(a), None, a.device)
    atomic_write_json(a.out, res)
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(_main))
