"""The trivial held-out baselines (yocou.evaluation.baselines) and what they share with `yocou ppl` (yocou.evaluation.heldout)."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from yocou.evaluation.baselines import (
    KneserNeyBigram,
    Unigram,
    baselines_report,
    budget_windows,
    ney_discount,
    score_split,
)
from yocou.evaluation.heldout import (
    capped_documents,
    split_score,
    token_byte_lengths,
    window_stderr,
)


class _Stream:
    """The TokenStream surface the scorers use: documents in order."""

    def __init__(self, docs: list[list[int]], vocab_size: int = 8):
        self.docs = [np.asarray(d, dtype=np.int64) for d in docs]
        self.doc_ids = [f"d{i}" for i in range(len(docs))]
        self.vocab_size = vocab_size

    @property
    def n_docs(self) -> int:
        return len(self.docs)

    def document(self, i: int) -> np.ndarray:
        return self.docs[i].copy()


TRAIN = [0, 1, 1, 2, 1, 3, 1, 2, 0, 1, 4, 1, 2]  # V = 6: token 5 never occurs
V = 6


# ------------------------------------------------------------------------------------------------- unigram
def test_unigram_matches_a_hand_computation() -> None:
    # counts over 13 tokens: 0:2, 1:6, 2:3, 3:1, 4:1, 5:0; P(w) = (c + 1) / (13 + 6)
    u = Unigram(np.array(TRAIN), V)
    assert list(u.counts) == [2, 6, 3, 1, 1, 0]
    assert u.probs.sum() == pytest.approx(1.0)
    got = u.nll([2, 1, 5, 0])  # predictions 1, 5, 0 (the first token is context)
    want = [-math.log(7 / 19), -math.log(1 / 19), -math.log(3 / 19)]
    assert got == pytest.approx(want)


# ---------------------------------------------------------------------------------------------- KN bigram
def _slow_kn(train: list[int] | list[list[int]], vocab: int):
    """The interpolated Kneser-Ney bigram written straight from the formula, with dicts and loops; ``train`` a
    token list, or a list of windows whose pairs are counted within each window."""
    windows = train if train and isinstance(train[0], list) else [train]
    pairs = Counter(p for win in windows for p in zip(win[:-1], win[1:]))
    c_v = defaultdict(int)
    follow = defaultdict(set)
    precede = defaultdict(set)
    for (v, w), c in pairs.items():
        c_v[v] += c
        follow[v].add(w)
        precede[w].add(v)
    B = len(pairs)
    cont = {w: len(precede[w]) for w in range(vocab)}
    U = sum(1 for w in range(vocab) if cont[w] > 0)
    cc = list(pairs.values())
    n1, n2 = cc.count(1), cc.count(2)
    d2 = n1 / (n1 + 2 * n2)
    pc = [x for x in cont.values() if x > 0]
    m1, m2 = pc.count(1), pc.count(2)
    d1 = m1 / (m1 + 2 * m2)

    def p_cont(w):
        return max(cont[w] - d1, 0) / B + d1 * U / B / vocab

    def p(w, v):
        if c_v[v] == 0:
            return p_cont(w)
        return max(pairs[(v, w)] - d2, 0) / c_v[v] + d2 * len(follow[v]) / c_v[v] * p_cont(w)

    return p, d1, d2


def test_kn_bigram_matches_a_slow_reference() -> None:
    kn = KneserNeyBigram(np.array(TRAIN), V)
    p, d1, d2 = _slow_kn(TRAIN, V)
    assert (kn.d1, kn.d2) == pytest.approx((d1, d2))
    for v in range(V):
        for w in range(V):
            assert kn.prob([v], [w])[0] == pytest.approx(p(w, v), rel=1e-12), (v, w)
    ids = [2, 1, 2, 5, 5, 0, 3]
    assert kn.nll(ids) == pytest.approx([-math.log(p(w, v)) for v, w in zip(ids[:-1], ids[1:])])


def test_kn_bigram_on_windows_counts_pairs_within_windows_only() -> None:
    """Fitted on windows ``[n, L]`` (the budget bigram): the pairs across a window boundary are not counted,
    as the slow reference over the same windows says; the concatenated stream would differ."""
    wins = [TRAIN[0:5], TRAIN[5:10], TRAIN[8:13]]
    kn = KneserNeyBigram(np.array(wins), V)
    p, d1, d2 = _slow_kn(wins, V)
    assert (kn.d1, kn.d2) == pytest.approx((d1, d2)) and kn.n_windows == 3
    for v in range(V):
        for w in range(V):
            assert kn.prob([v], [w])[0] == pytest.approx(p(w, v), rel=1e-12), (v, w)
    flat = KneserNeyBigram(np.array(sum(wins, [])), V)
    assert flat.n_pair_types != kn.n_pair_types or flat.pair_counts.sum() != kn.pair_counts.sum()
    assert kn.pair_counts.sum() == 3 * 4
    with pytest.raises(ValueError, match="at least 2"):
        KneserNeyBigram(np.zeros((3, 1), dtype=np.int64), V)


def test_budget_windows_are_the_training_batches(token_dir: Path) -> None:
    """The budget bigram's windows are exactly what training draws (yocou.training.train.draw_batch) for that seed."""
    import torch

    from yocou.data.tokens import TokenStream
    from yocou.training.train import TrainConfig, draw_batch

    st = TokenStream(token_dir / "train.bin")
    tc = TrainConfig(steps=3, batch_size=2, seq_len=8, seed=5)
    win = budget_windows(st, steps=3, batch_size=2, seq_len=8, seed=5)
    assert win.shape == (6, 9) and win.dtype == np.int64
    for step in range(3):
        x, y = draw_batch(st, tc, step, 0, 1, torch.device("cpu"))
        assert (win[2 * step:2 * step + 2, :-1] == x.numpy()).all() and (win[2 * step:2 * step + 2, 1:] == y.numpy()).all()
    other = budget_windows(st, steps=3, batch_size=2, seq_len=8, seed=6)
    assert not (other == win).all()


@pytest.mark.parametrize("v", [0, 1, 3, 4, 5])  # 5: never seen; 4: seen once as a context
def test_kn_bigram_sums_to_one_over_the_vocabulary(v: int) -> None:
    kn = KneserNeyBigram(np.array(TRAIN), V)
    dist = kn.distribution(v)
    assert dist.shape == (V,) and (dist > 0).all()
    assert dist.sum() == pytest.approx(1.0, abs=1e-12)
    fixed = KneserNeyBigram(np.array(TRAIN), V, discount=0.75)
    assert fixed.distribution(v).sum() == pytest.approx(1.0, abs=1e-12)


def test_ney_discount() -> None:
    assert ney_discount(np.array([1, 1, 1, 2, 5])) == pytest.approx(3 / 5)
    assert ney_discount(np.array([3, 4])) == 0.75  # undefined: the fallback


# ------------------------------------------------------------------------- same tokens and windows as ppl
def test_split_cap_and_windows() -> None:
    st = _Stream([[1, 2, 3, 4, 5], [1], [2, 3, 4], [0, 1, 2, 3]])
    docs = list(capped_documents(st, 7))  # 5 tokens of d0, d1 skipped, 2 of d2, then the cap is reached
    assert [(d, list(ids), cut) for d, ids, cut in docs] == [("d0", [1, 2, 3, 4, 5], False), ("d2", [2, 3], True)]
    assert [len(ids) for _, ids, _ in capped_documents(st, None)] == [5, 3, 4]  # d1 (1 token) predicts nothing
    # windows of 2 predictions: d0 -> [2 tokens, 2 tokens], d2 -> [1 token]
    nll = [np.array([1.0, 3.0, 2.0, 2.0]), np.array([4.0])]
    r = split_score(docs, nll, 2, np.ones(8, dtype=np.int64) * 2)
    assert r["n_tokens"] == 5 and r["n_windows"] == 3 and r["nll"] == pytest.approx(12 / 5)
    assert r["nats_per_token"] == r["nll"] and r["n_bytes"] == 10
    assert r["bits_per_byte"] == pytest.approx(12 / math.log(2) / 10)
    # windows means 2, 2, 4 with weights 2/5, 2/5, 1/5, m = 2.4:
    # SE^2 = 3/2 * ((0.4 * 0.4)^2 + (0.4 * 0.4)^2 + (0.2 * 1.6)^2)
    assert r["stderr_nats"] == pytest.approx(math.sqrt(1.5 * (2 * 0.16 ** 2 + 0.32 ** 2)))
    assert window_stderr(np.array([2.0, 4.0]), np.array([2, 2])) == pytest.approx(np.std([1, 2], ddof=1) / math.sqrt(2))


def test_baseline_scores_the_same_tokens_as_ppl(token_dir: Path) -> None:
    import torch

    from yocou.data.tokens import TokenStream
    from yocou.evaluation.ppl import heldout_ppl
    from yocou.model import config as C
    from yocou.model.lm import LM

    st = TokenStream(token_dir / "heldout_book.bin")
    torch.manual_seed(0)
    m = LM(C.transformer(n_layers=1, vocab_size=st.vocab_size, d_model=16, n_heads=1, n_kv_heads=1,
                         head_dim=16, d_ff=32)).eval()
    byte_len, method = token_byte_lengths(token_dir.parent / "tokenizer.json")
    assert method == "byte_level"
    cap = int(st.offsets[1]) + 37  # the whole first document (and its EOS slot), then 37 tokens of the second
    lm = heldout_ppl(m, st, 16, max_tokens=cap, byte_len=byte_len)
    uni = Unigram(TokenStream(token_dir / "train.bin"), st.vocab_size)
    base = score_split(uni, st, 16, max_tokens=cap, byte_len=byte_len)
    assert lm["n_tokens"] == base["n_tokens"] and lm["n_windows"] == base["n_windows"]
    assert lm["n_bytes"] == base["n_bytes"] and lm["n_docs"] == len(base["docs"]) == 2
    assert lm["docs"][1]["truncated"] and lm["max_tokens"] == cap and lm["max_tokens_per_doc"] is None
    assert lm["n_tokens"] <= cap - 1
    assert lm["nats_per_token"] == lm["nll"] and lm["stderr_nats"] > 0
    # bytes are exact for byte-level BPE: the predicted tokens of a whole document decode to its text minus
    # the first token's text
    from yocou.data.tokenizer import load_tokenizer

    tok = load_tokenizer(token_dir.parent / "tokenizer.json")
    ids = st.document(0)
    assert int(byte_len[ids[1:]].sum()) == len(tok.decode(list(ids)).encode()) - len(tok.decode([int(ids[0])]).encode())


def test_baselines_report_and_cli(token_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from yocou.cli import main

    out = tmp_path / "baselines.json"
    rc = main(["baselines", "--train", str(token_dir / "train.bin"), "--data", str(token_dir), "--seq-len", "32",
               "--max-tokens", "500", "--tokenizer", str(token_dir.parent / "tokenizer.json"), "--out", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res["splits"]) == {"heldout_book", "heldout_code"} and "provenance" in res
    for sp in res["splits"].values():
        assert sp["n_tokens"] <= 499
        for m in ("unigram", "bigram_kn"):
            r = sp[m]
            assert r["n_tokens"] == sp["n_tokens"] and r["ppl"] == pytest.approx(math.exp(r["nats_per_token"]))
            assert r["bits_per_byte"] == pytest.approx(r["nats_per_token"] * r["n_tokens"] / math.log(2)
                                                       / r["n_bytes"])
        assert sp["bigram_kn"]["nats_per_token"] < sp["unigram"]["nats_per_token"]  # pseudo-text: words repeat
    assert "bigram_kn_budget" not in res["models"] and res["budget"] is None
    out2 = tmp_path / "baselines_budget.json"
    assert main(["baselines", "--train", str(token_dir / "train.bin"), "--data", str(token_dir), "--seq-len", "32",
                 "--max-tokens", "500", "--budget-steps", "3", "--budget-batch", "2", "--budget-seq-len", "16",
                 "--out", str(out2)]) == 0
    res2 = json.loads(out2.read_text())
    assert res2["models"]["bigram_kn_budget"]["n_windows"] == 6 and res2["budget"]["steps"] == 3
    for split, sp in res2["splits"].items():
        # fitted on 6 windows of 17 tokens, far fewer than train.bin: worse than the full bigram
        assert sp["bigram_kn_budget"]["nats_per_token"] > sp["bigram_kn"]["nats_per_token"]
        assert sp["bigram_kn"]["nats_per_token"] == pytest.approx(res["splits"][split]["bigram_kn"]["nats_per_token"])
    assert main(["baselines", "--train", str(token_dir / "train.bin"), "--data", str(token_dir), "--seq-len", "32",
                 "--budget-steps", "3", "--out", str(tmp_path / "never.json")]) == 2
    assert "go together" in capsys.readouterr().err and not (tmp_path / "never.json").exists()
    direct = baselines_report(token_dir / "train.bin", token_dir, seq_len=32, max_tokens=500)
    assert direct["splits"]["heldout_code"]["unigram"]["nats_per_token"] == pytest.approx(
        res["splits"]["heldout_code"]["unigram"]["nats_per_token"])
