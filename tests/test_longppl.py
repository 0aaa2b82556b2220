"""Long-context perplexity (paper Figure 4): the cached one-pass per-token NLL equals a plain full
forward for every variant, and the derived curves are the stated averages."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from yocou.evaluation.longctx.longppl import (
    derive_curves,
    long_token_nll,
    select_documents,
)
from yocou.model import config as C
from yocou.model.lm import LM

KW = dict(vocab_size=97, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, d_ff=64)


@pytest.mark.parametrize("cfg", [
    C.transformer(n_layers=2, **KW),
    C.yoco(n_layers=4, window=8, **KW),
    C.yocou(n_layers=4, window=8, n_loops=3, **KW),
    C.rins(n_layers=4, n_loops=3, **KW),
], ids=lambda c: c.name)
@pytest.mark.parametrize("chunk", [7, 64])
def test_cached_nll_equals_full_forward(cfg: C.ModelConfig, chunk: int) -> None:
    torch.manual_seed(0)
    m = LM(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, 45), generator=torch.Generator().manual_seed(1))
    got = long_token_nll(m, ids, chunk_size=chunk)
    with torch.no_grad():
        logits = m(ids).logits_BNV
    want = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    assert got.shape == (2, 44)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


def test_derive_curves_are_the_stated_averages() -> None:
    nll = np.arange(2 * 15, dtype=np.float64).reshape(2, 15) / 10  # 2 docs, lengths up to 16
    rows = derive_curves(nll, [4, 8, 16], span=4)
    assert [r["length"] for r in rows] == [4, 8, 16]
    assert rows[0]["cum_nll"] == pytest.approx(nll[:, :3].mean()) and rows[0]["span_ppl"] is None
    assert rows[1]["span_nll"] == pytest.approx(nll[:, 3:7].mean())
    assert rows[2]["cum_ppl"] == pytest.approx(math.exp(nll.mean()))
    assert rows[2]["span_nll"] == pytest.approx(nll[:, 11:15].mean())
    with pytest.raises(ValueError, match="eval.longppl.lengths"):
        derive_curves(nll, [17], span=4)


def test_select_documents(token_dir) -> None:
    docs = select_documents(token_dir, 200, n_book=3, n_code=5)
    ids, meta = docs["book"]
    assert ids.shape == (3, 200) and meta[0]["offset"] == 0 and meta[2]["offset"] > meta[1]["offset"]
    cids, cmeta = docs["code"]
    assert cids.shape[1] == 200 and 1 <= len(cmeta) <= 5
    with pytest.raises(ValueError, match="eval.longppl"):
        select_documents(token_dir, 10**7, n_book=1, n_code=0)
