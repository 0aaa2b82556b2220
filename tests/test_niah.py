"""S-NIAH generators and scoring (paper Table 4): needle depth and prompt length, determinism,
a cheating stub that scores 1.0 and a shuffled one that scores 0, and the cached scoring path
against a plain full forward."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from yocou.data import TokenizerAdapter, load_tokenizer
from yocou.evaluation.longctx import niah
from yocou.model import config as C
from yocou.model.generate import generate
from yocou.model.lm import LM


def byte_tok() -> TokenizerAdapter:
    """UTF-8 bytes as tokens (ids 0..255), EOS 256: every text round-trips exactly."""
    return TokenizerAdapter("bytes", lambda s: list(s.encode("utf-8")),
                            lambda ids: bytes(i for i in ids if i < 256).decode("utf-8", errors="replace"),
                            257, 256)


VERSE = ("Of Mans First Disobedience, and the Fruit \nOf that Forbidden Tree, whose mortal tast \n"
         "Brought Death into the World, and all our woe. \nSing Heav'nly Muse, that on the secret top \n")


def book_ids(tok: TokenizerAdapter, n_lines: int = 400) -> np.ndarray:
    rng = random.Random(0)
    lines = VERSE.splitlines(keepends=True)
    return np.array(tok.encode("".join(rng.choice(lines) for _ in range(n_lines))), dtype=np.int64)


@pytest.mark.parametrize("task", niah.TASKS)
@pytest.mark.parametrize("length", [700, 1500, 3000])
def test_needle_at_requested_depth_and_exact_length(task: str, length: int) -> None:
    tok = byte_tok()
    book = book_ids(tok)
    bset = niah.boundary_token_ids(tok)
    for depth in niah.depths_percent(5):
        s = niah.make_sample(tok, task, length, depth, 1, seed=3, book_ids=book, book_name="verse",
                             boundary_ids=bset)
        ids = s["input_ids"]
        assert len(ids) == length
        assert len(tok.encode(tok.decode(ids))) == length  # round trip of the byte tokenizer is exact
        fmt = niah.NEEDLE if task == "s_niah_1" else niah.NEEDLE_BOOK
        needle = tok.encode(fmt.format(key=s["key"], value=s["value"]))
        assert ids[s["needle_start"]:s["needle_start"] + len(needle)] == needle
        pos = (s["needle_start"] - s["haystack_start"]) / s["haystack_len"]
        assert pos == pytest.approx(s["depth_actual"])
        # the nearest sentence/line boundary: within one line (~45 bytes) of the requested depth
        assert abs(pos - depth / 100) * s["haystack_len"] <= 45, (depth, pos)
        text = tok.decode(ids)
        assert text.count(s["value"]) == 1 and s["distractor"] not in text
        assert len(s["value"]) == 7 and s["value"].isdigit()
        assert text.endswith("mentioned in the provided text is")


def test_bpe_prompt_length_within_tolerance(token_dir) -> None:
    """In a trained BPE the prompt has exactly the requested ids; re-encoding its text stays within 2%."""
    tok = load_tokenizer(token_dir.parent / "tokenizer.json")
    book = book_ids(tok)
    for task in niah.TASKS:
        for depth in (0.0, 50.0, 100.0):
            s = niah.make_sample(tok, task, 900, depth, 0, seed=0, book_ids=book, book_name="synthetic")
            assert len(s["input_ids"]) == 900
            assert abs(len(tok.encode(tok.decode(s["input_ids"]))) - 900) <= 18


def test_seeded_and_deterministic() -> None:
    tok = byte_tok()
    book = book_ids(tok)
    a = niah.make_sample(tok, "s_niah_2", 800, 25.0, 0, seed=0, book_ids=book)
    b = niah.make_sample(tok, "s_niah_2", 800, 25.0, 0, seed=0, book_ids=book)
    c = niah.make_sample(tok, "s_niah_2", 800, 25.0, 1, seed=0, book_ids=book)
    assert a == b
    assert (a["value"], a["haystack_offset"]) != (c["value"], c["haystack_offset"])
    ps = niah.make_prompts(tok, tasks=niah.TASKS, lengths=[600, 800], n_depths=3, n_samples=2, seed=0,
                           book_ids=book)
    assert len(ps) == 2 * 2 * 3 * 2
    assert niah.depths_percent(5) == [0.0, 25.0, 50.0, 75.0, 100.0]



def test_train_key_words_change_only_the_key() -> None:
    """With the training needles' word lists (the ``--train-keys`` diagnostic) each prompt's key is built from those
    lists (none of the eval's words), and the value, distractors and haystack are the eval prompt's."""
    from yocou.data import needles

    tok = byte_tok()
    book = book_ids(tok)
    lists = (needles.TRAIN_KEY_ADJECTIVES, needles.TRAIN_KEY_NOUNS)
    kw = dict(tasks=niah.TASKS, lengths=[600, 800], n_depths=3, n_samples=2, seed=4, book_ids=book)
    base, train = niah.make_prompts(tok, **kw), niah.make_prompts(tok, **kw, key_words=lists)
    eval_words = set(niah.PROTOCOL["key_adjectives"]) | set(niah.PROTOCOL["key_nouns"])
    for b, t in zip(base, train):
        adj, noun = t["key"].split("-")
        assert adj in lists[0] and noun in lists[1] and not {adj, noun} & eval_words
        assert b["key"].split("-")[0] in niah.PROTOCOL["key_adjectives"]
        assert t["key"] in tok.decode(t["input_ids"]) and b["key"] not in tok.decode(t["input_ids"])
        for f in ("task", "length", "depth", "value", "distractors", "haystack_offset"):
            assert t[f] == b[f], f


def test_errors_name_the_field() -> None:
    tok = byte_tok()
    with pytest.raises(ValueError, match="eval.niah.lengths"):
        niah.make_sample(tok, "s_niah_1", 50, 0.0, 0, seed=0)
    with pytest.raises(ValueError, match="eval.niah.tasks"):
        niah.make_sample(tok, "s_niah_9", 800, 0.0, 0, seed=0)
    with pytest.raises(ValueError, match="n_depths"):
        niah.depths_percent(0)


class _StubCache:
    def __init__(self, B: int, max_len: int) -> None:
        self.batch_size, self.max_len, self.pos = B, max_len, 0
        self.hist: list[list[int]] = [[] for _ in range(B)]

    def check_room(self, n: int) -> None:
        if self.pos + n > self.max_len:
            raise ValueError("stub cache full")


class ScriptedLM(torch.nn.Module):
    """Test-only cheat: handed each prompt's continuation, it predicts it with certainty, through the
    same ``forward(ids, cache=...)`` / ``new_cache`` contract as :class:`yocou.model.lm.LM`."""

    def __init__(self, script: dict[tuple[int, ...], list[int]], vocab: int) -> None:
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.script, self.V = script, vocab
        # the shapes the entry points' memory check reads (yocou.model.limits.new_cache)
        self.cfg = C.transformer(n_layers=1, vocab_size=vocab, d_model=8, n_heads=1, n_kv_heads=1, head_dim=8, d_ff=8)

    def new_cache(self, B: int, max_len: int, **_) -> _StubCache:
        return _StubCache(B, max_len)

    def forward(self, ids_BN: torch.Tensor, *, cache: _StubCache, last_only: bool = False,
                compute_logits: bool = True) -> SimpleNamespace:
        B, N = ids_BN.shape
        cache.check_room(N)
        for b in range(B):
            cache.hist[b].extend(ids_BN[b].tolist())
        cache.pos += N
        if not compute_logits:
            return SimpleNamespace(logits_BNV=None)
        logits = torch.full((B, N, self.V), -10.0)
        for b in range(B):
            prompt = next(k for k in self.script if tuple(cache.hist[b][:len(k)]) == k)
            cont = self.script[prompt]
            for j in range(N):
                k = cache.pos - N + j + 1 - len(prompt)  # index of the next token in the continuation
                logits[b, j, cont[k] if 0 <= k < len(cont) else 10] = 10.0  # 10 = "\n" after the answer
        return SimpleNamespace(logits_BNV=logits[:, -1:] if last_only else logits)


def _prompts() -> tuple[TokenizerAdapter, list[dict]]:
    tok = byte_tok()
    return tok, niah.make_prompts(tok, tasks=niah.TASKS, lengths=[600, 900], n_depths=3, n_samples=2, seed=5,
                                  book_ids=book_ids(tok))


def test_cheating_stub_scores_one_and_shuffled_scores_zero() -> None:
    tok, prompts = _prompts()
    cheat = ScriptedLM({tuple(p["input_ids"]): p["answer_ids"] for p in prompts}, tok.vocab_size)
    recs = niah.evaluate(cheat, tok, prompts, max_new_tokens=10, chunk_size=128, batch=5)
    assert len(recs) == len(prompts)
    assert all(r["correct"] == 1 for r in recs)
    assert max(abs(r["logp_value"]) for r in recs) < 1e-3
    assert min(r["logp_value"] - r["logp_distractor"] for r in recs) > 50

    rng = random.Random(0)
    shuffled = {}
    for p in prompts:
        digits = list(p["value"])
        while "".join(digits) == p["value"]:
            rng.shuffle(digits)
        shuffled[tuple(p["input_ids"])] = tok.encode(" " + "".join(digits))
    recs = niah.evaluate(ScriptedLM(shuffled, tok.vocab_size), tok, prompts, max_new_tokens=10,
                         chunk_size=128, batch=5)
    assert all(r["correct"] == 0 for r in recs)
    assert max(r["logp_value"] for r in recs) < -19  # at least one digit forced wrong: -20 nats
    cells = niah.summarise(recs)
    assert len(cells) == 2 * 2 * 3 and all(c["n"] == 2 and c["acc"] == 0.0 for c in cells)


def test_cached_scoring_equals_full_forward() -> None:
    """Teacher-forced log-prob and greedy output through prefill/decode == a plain full forward."""
    tok, prompts = _prompts()
    torch.manual_seed(0)
    cfg = C.yocou(n_layers=4, window=32, n_loops=2, vocab_size=tok.vocab_size, d_model=32, n_heads=2,
                  n_kv_heads=1, head_dim=16, d_ff=64)
    m = LM(cfg).eval()
    rows = [p for p in prompts if p["length"] == 600][:3]
    x = torch.tensor([r["input_ids"] for r in rows])
    res = niah.score_batch(m, x, [r["answer_ids"] for r in rows], [r["distractor_ids"] for r in rows],
                           max_new_tokens=5, chunk_size=100)
    for b, r in enumerate(rows):
        full = torch.tensor([r["input_ids"] + r["answer_ids"]])
        with torch.no_grad():
            lp = torch.log_softmax(m(full).logits_BNV[0].float(), -1)
        N = len(r["input_ids"])
        want = sum(float(lp[N - 1 + j, t]) for j, t in enumerate(r["answer_ids"]))
        assert res["logp_value"][b] == pytest.approx(want, abs=1e-3)
    assert res["generated"] == generate(m, x, 5, chunk_size=100).tolist()


def test_choices_are_distinct_distractors_not_in_the_prompt_and_move_no_earlier_draw(monkeypatch) -> None:
    tok = byte_tok()
    book = book_ids(tok)
    base = niah.make_sample(tok, "s_niah_2", 700, 50.0, 3, seed=11, book_ids=book)
    monkeypatch.setattr(niah, "N_CHOICES", 6)
    s = niah.make_sample(tok, "s_niah_2", 700, 50.0, 3, seed=11, book_ids=book)
    # the prompt, value and first distractor are those of fewer choices: the extra ones come from their own stream
    assert (s["input_ids"], s["value"], s["distractor"]) == (base["input_ids"], base["value"], base["distractor"])
    assert base["distractors"] == [base["distractor"]]
    d = s["distractors"]
    assert len(d) == 5 and d[0] == s["distractor"] and len(set(d)) == 5 and s["value"] not in d
    text = tok.decode(s["input_ids"])
    assert s["value"] in text and not any(x in text for x in d)
    assert all(len(x) == len(s["value"]) for x in d)  # drawn like the value (same number of digits)
    assert s["distractors_ids"] == [tok.encode(f" {x}") for x in d]


def test_multiple_choice_scores_equal_the_full_forward_and_the_cheat_always_chooses_right(monkeypatch) -> None:
    monkeypatch.setattr(niah, "N_CHOICES", 4)
    tok, prompts = _prompts()
    cheat = ScriptedLM({tuple(p["input_ids"]): p["answer_ids"] for p in prompts}, tok.vocab_size)
    recs = niah.evaluate(cheat, tok, prompts, max_new_tokens=10, chunk_size=128, batch=5)
    assert all(r["choice_correct"] == 1 and r["n_choices"] == 4 and len(r["logp_choices"]) == 3 for r in recs)
    assert all(c["choice_acc"] == 1.0 and c["n_choices"] == 4 for c in niah.summarise(recs))

    torch.manual_seed(1)
    cfg = C.yoco(n_layers=4, window=32, vocab_size=tok.vocab_size, d_model=32, n_heads=2, n_kv_heads=1,
                 head_dim=16, d_ff=64)
    m = LM(cfg).eval()
    rows = [p for p in prompts if p["length"] == 900][:4]
    recs = niah.evaluate(m, tok, rows, max_new_tokens=3, chunk_size=100, batch=4)
    for r, rec in zip(rows, recs):
        N = len(r["input_ids"])

        def full(cont):
            with torch.no_grad():
                lp = torch.log_softmax(m(torch.tensor([r["input_ids"] + cont])).logits_BNV[0].float(), -1)
            return sum(float(lp[N - 1 + j, t]) for j, t in enumerate(cont))

        want = [full(c) for c in r["distractors_ids"]]
        assert rec["logp_choices"] == pytest.approx(want, abs=1e-3)
        assert rec["logp_choices"][0] == pytest.approx(rec["logp_distractor"], abs=1e-6)
        assert rec["choice_correct"] == int(full(r["answer_ids"]) > max(want))


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["1", "two", "true"])
def test_a_bad_n_choices_fails_in_one_line_naming_the_field(tmp_path, bad) -> None:
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    src = Path(niah.__file__).resolve().parents[3] / "eval"   # yocou/evaluation/longctx/niah.py -> the repository
    shutil.copytree(src, tmp_path / "eval")
    p = tmp_path / "eval" / "protocols.yaml"
    d = yaml.safe_load(p.read_text())
    d["niah"]["n_choices"] = yaml.safe_load(bad)
    p.write_text(yaml.safe_dump(d))
    env = {**os.environ, "YOCOU_EVAL_DIR": str(tmp_path / "eval")}
    r = subprocess.run([sys.executable, "-c", "import yocou.evaluation.longctx.niah"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr  # importing never fails: the check runs where the protocol is used
    r = subprocess.run([sys.executable, "-m", "yocou.evaluation.longctx.niah", "prompts", "--tokenizer", "t", "--book", "b",
                        "--lengths", "256", "--out", str(tmp_path / "p.jsonl")], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "eval/protocols.yaml: niah.n_choices must be an integer >= 2" in lines[0], r.stderr
