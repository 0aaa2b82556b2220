"""The static-shape decode path (StaticKVCache, StaticDecoder) against today's path: token for token and logit for
logit for every variant, at batch 1 and batched with different prompt lengths; its bytes against the KV formula;
the step as one graph (no host sync, no graph break: what a CUDA graph capture needs)."""

from __future__ import annotations

import pytest
import torch

from test_model import IDS, W, _model, variants
from yocou.model.accounting import kv_cache_bytes
from yocou.model.attention import attention
from yocou.model.cache import StaticKVCache
from yocou.model.generate import StaticDecoder, decode_step, generate, prefill

NEW = 2 * W + 3  # decode well past the window: every ring wraps


def _prompts(cfg, lengths, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, cfg.vocab_size, (n,), generator=g) for n in lengths]


@pytest.mark.parametrize("cfg", variants(), ids=IDS)
@pytest.mark.parametrize("lengths", [(9,), (1, 7, 13)], ids=["B1", "B3-ragged"])
def test_static_decode_equals_todays_path(cfg, lengths):
    """Each row of a static batch decodes the tokens (greedy) and logits that row alone gives through generate()
    and decode_step() over a growing KVCache."""
    m = _model(cfg)
    prompts = _prompts(cfg, lengths)
    dec = StaticDecoder(m, len(prompts), max(lengths) + NEW)
    assert dec.mode == "eager" and "CUDA" in dec.why_eager
    got = dec.generate(prompts, NEW, chunk_size=4)
    for b, p in enumerate(prompts):
        want = generate(m, p[None], NEW, chunk_size=4)[0]
        assert torch.equal(got[b], want), f"row {b} (prompt length {len(p)})"
    # logits step by step: the static step against decode_step on each row's own cache
    dec = StaticDecoder(m, len(prompts), max(lengths) + NEW)
    logits = dec.prefill(prompts, chunk_size=4)
    caches = [m.new_cache(1, max(lengths) + NEW) for _ in prompts]
    ref = torch.stack([prefill(m, p[None], c, chunk_size=4)[0] for p, c in zip(prompts, caches)])
    torch.testing.assert_close(logits, ref, rtol=0, atol=0)
    for _ in range(NEW):
        tok = ref.argmax(-1)
        logits = dec.step(tok)
        ref = torch.stack([decode_step(m, tok[b:b + 1], c)[0] for b, c in enumerate(caches)])
        torch.testing.assert_close(logits, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cfg", variants()[:3], ids=IDS[:3])
def test_static_cache_bytes_equal_the_formula(cfg):
    for B, L, dt in [(1, 17, torch.float32), (3, 40, torch.bfloat16)]:
        assert StaticKVCache(cfg, B, L, dtype=dt).nbytes() == kv_cache_bytes(cfg, L, batch_size=B, dtype=dt)


@pytest.mark.parametrize("cfg", [variants()[2], variants()[-1]], ids=[IDS[2], IDS[-1]])
def test_static_step_is_one_graph(cfg):
    """The step compiles with fullgraph=True (a host sync or data-dependent branch would break the graph, and would
    break a CUDA graph capture) and gives the eager step's logits."""
    m = _model(cfg)
    prompts = _prompts(cfg, (5, 11))
    eager, comp = StaticDecoder(m, 2, 40), StaticDecoder(m, 2, 40)
    tok = eager.prefill(prompts).argmax(-1)
    comp.prefill(prompts)
    step = torch.compile(comp._step, fullgraph=True, backend="aot_eager", dynamic=False)
    with torch.no_grad():
        for _ in range(W + 2):
            comp.token_B.copy_(tok)
            got = step()
            want = eager.step(tok)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            tok = want.argmax(-1)
    assert torch.equal(comp.cache.pos_B, eager.cache.pos_B)


def test_static_errors_name_the_field():
    cfg = variants()[2]
    m = _model(cfg)
    with pytest.raises(ValueError, match="fill"):
        StaticKVCache(cfg, 1, 8, fill=float("nan"))
    with pytest.raises(ValueError, match="graphs"):
        StaticDecoder(m, 1, 8, graphs=True)
    dec = StaticDecoder(m, 2, 6)
    with pytest.raises(ValueError, match="max_new_tokens"):
        dec.generate(_prompts(cfg, (3, 2)), -1)
    assert dec.lengths == [0, 0]  # refused before any prefill
    with pytest.raises(ValueError, match="prompts"):
        dec.prefill(_prompts(cfg, (3,)))
    dec.prefill(_prompts(cfg, (5, 2)))
    dec.step(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="max_len"):
        dec.step(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="decode steps"):
        m(torch.zeros(2, 2, dtype=torch.int64), cache=dec.cache)
    q = torch.zeros(1, 4, 2, 12)
    with pytest.raises(ValueError, match="key_mask"):
        attention(q, q[:, :2], q[:, :2], key_mask=torch.ones(1, 1, 1, 2, dtype=torch.bool))
