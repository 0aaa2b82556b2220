"""Model correctness in fp32: cached decoding against the full forward, degenerate
cases against their simpler equals, parameters against the shapes, HF Llama parity."""

from __future__ import annotations

import pytest
import torch

from yocou.model import config as C
from yocou.model.accounting import param_count
from yocou.model.generate import decode_step, generate, prefill
from yocou.model.lm import LM

KW = dict(vocab_size=101, d_model=48, n_heads=4, n_kv_heads=2, head_dim=12, d_ff=96)
W = 6  # window, shorter than the test sequences


def variants(vocab_size: int = 101) -> list[C.ModelConfig]:
    """Every preset, small (also the export tests' set, tests/test_export_hf.py)."""
    kw = {**KW, "vocab_size": vocab_size}
    return [
        C.transformer(n_layers=2, **kw),
        C.yoco(n_layers=4, window=W, **kw),
        C.yocou(n_layers=4, window=W, n_loops=3, **kw),
        C.loop(n_layers=2, n_loops=2, **kw),
        C.rins(n_layers=4, n_loops=3, **kw),
        C.upper_loop(n_layers=4, window=W, n_loops=2, **kw),
        C.upper_loop(n_layers=4, window=W, n_loops=2, shared_kv=False, **kw),
        C.yoco(n_layers=4, window=W, cross_rope=True, **kw),
        C.yocou(n_layers=4, window=W, n_loops=2, **{**kw, "n_experts": 4, "top_k": 2, "d_expert": 32,
                                                    "d_shared_expert": 32}),
    ]


def _model(cfg: C.ModelConfig, seed: int = 0) -> LM:
    torch.manual_seed(seed)
    m = LM(cfg).eval()
    # Perturb norms so that a norm applied twice or skipped shows in the logits.
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.3)
    return m


IDS = [f"{c.name}{'-rope' if c.cross_rope else ''}{'-moe' if c.n_experts else ''}" for c in variants()]


@pytest.mark.parametrize("cfg", variants(), ids=IDS)
@pytest.mark.parametrize("prompt_len,chunk", [(1, 4), (7, 3), (13, 5), (17, 16)])
def test_prefill_then_decode_equals_full_forward(cfg: C.ModelConfig, prompt_len: int, chunk: int) -> None:
    """Chunked early-exit prefill + token-by-token decode == full forward at every position."""
    m = _model(cfg)
    N = 23  # > window, not a multiple of any chunk
    ids = torch.randint(0, cfg.vocab_size, (2, N), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = m(ids).logits_BNV
    cache = m.new_cache(2, N, fill=float("nan"))
    got = [prefill(m, ids[:, :prompt_len], cache, chunk_size=chunk)]
    for p in range(prompt_len, N):
        got.append(decode_step(m, ids[:, p], cache))
    got_BNV = torch.stack(got, dim=1)
    torch.testing.assert_close(got_BNV, full[:, prompt_len - 1:], rtol=0, atol=1e-5)
    assert cache.pos == N


@pytest.mark.parametrize("cfg", variants(), ids=IDS)
def test_last_only_without_a_cache_gives_the_last_position(cfg: C.ModelConfig) -> None:
    """``last_only`` on a full forward (no cache; the exported model's early exit) gives the full forward's last
    position: the cut cross-decoder's one query still sees every key."""
    m = _model(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 3 * W + 2), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = m(ids).logits_BNV
        last = m(ids, last_only=True).logits_BNV
    assert last.shape == (2, 1, cfg.vocab_size)
    torch.testing.assert_close(last[:, 0], full[:, -1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("cfg", variants(), ids=IDS)
def test_grown_selected_recorded_and_cropped_caches_decode_as_the_full_forward(cfg: C.ModelConfig) -> None:
    """What a decoding library asks of the cache, against the full forward: a cache grown when full
    (``grow``), rows selected with repeats (``select``: beam search), and, after ``record_window_history``,
    tokens taken back (``crop``) and decoded again, past several windows. A ring takes back one token, no more."""
    m = _model(cfg)
    N = 4 * W + 3
    ids = torch.randint(0, cfg.vocab_size, (2, N), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full = m(ids).logits_BNV
        cache = m.new_cache(2, W, fill=float("nan"))
        got = [m(ids[:, :W], cache=cache).logits_BNV]
        cache.grow(2 * W)
        got.append(m(ids[:, W:2 * W], cache=cache).logits_BNV)
        torch.testing.assert_close(torch.cat(got, 1), full[:, :2 * W], rtol=0, atol=1e-5)
        rows = torch.tensor([1, 0, 1])
        picked = cache.select(rows)
        assert picked.batch_size == 3 and picked.pos == cache.pos
        cache.grow(N)
        picked.grow(N)
        out = m(ids[rows, 2 * W:2 * W + 1], cache=picked).logits_BNV
        torch.testing.assert_close(out[:, 0], full[rows, 2 * W], rtol=0, atol=1e-5)
        windowed = any(s.kind == "window" for s in cache.slots.values())
        if windowed:
            cache.check_crop(2 * W - 1)  # a ring gives back one token
            with pytest.raises(ValueError, match="record_window_history"):
                cache.crop(2 * W - 2)
        assert cache.pos == 2 * W  # a refused crop changes nothing
        cache.record_window_history()
        m(ids[:, 2 * W:3 * W + 1], cache=cache)  # tokens to be taken back
        cache.crop(2 * W + 1)
        again = [m(ids[:, p:p + 1], cache=cache).logits_BNV for p in range(2 * W + 1, N)]
    torch.testing.assert_close(torch.cat(again, 1), full[:, 2 * W + 1:], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"crop\(-1\): pos must be in 0\.\."):
        cache.crop(-1)


def _assert_chunked_equals_full(cfg: C.ModelConfig, batch: int, n: int, chunk: int, seed: int) -> None:
    """Chunks of ``chunk`` through the cache with logits at every position (no early exit) == full forward."""
    m = _model(cfg)
    ids = torch.randint(0, cfg.vocab_size, (batch, n), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        full = m(ids).logits_BNV
        cache = m.new_cache(batch, n, fill=float("nan"))
        parts = [m(ids[:, s:s + chunk], cache=cache).logits_BNV for s in range(0, n, chunk)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("cfg", variants(), ids=IDS)
def test_chunked_all_logits_equal_full_forward(cfg: C.ModelConfig) -> None:
    """Chunks of 5 with logits at every position (no early exit) == full forward."""
    _assert_chunked_equals_full(cfg, batch=3, n=19, chunk=5, seed=2)


@pytest.mark.parametrize("cfg", variants()[:3], ids=IDS[:3])
def test_full_forward_at_training_length_equals_chunked(cfg: C.ModelConfig) -> None:
    """At N = 384 (causal attention on CPU as two calls; window layers in blocks, N >= 4W) the full forward
    equals chunks of 100 through the cache, which take neither path."""
    _assert_chunked_equals_full(cfg, batch=2, n=384, chunk=100, seed=3)


def _copy_weights(dst: LM, src: LM) -> None:
    dst.load_state_dict(src.state_dict())


def test_the_plan_is_the_one_lm_forward_documents() -> None:
    """LM.forward's docstring draws YOCO-U's plan at L = 4, T = 3: three loops of the same two self layers, each
    loop with its own window slots, then one kv application and two cross layers reading its one slot."""
    cfg = C.yocou(n_layers=4, window=W, n_loops=3, **KW)
    got = [(a.kind, a.stage, a.loop, a.layer, a.slot, a.window) for a in C.expand_plan(cfg)]
    selfs = [("self", 0, t, i, 2 * t + i, W) for t in range(3) for i in range(2)]
    assert got == selfs + [("kv", 1, 0, -1, 6, None), ("cross", 1, 0, 0, 6, None), ("cross", 1, 0, 1, 6, None)]
    assert "kv    stage 1                     slot 6" in LM.forward.__doc__


def test_yocou_one_loop_equals_yoco() -> None:
    a, b = C.yocou(n_layers=4, window=W, n_loops=1, **KW), C.yoco(n_layers=4, window=W, **KW)
    ma, mb = _model(a), _model(b, seed=5)
    _copy_weights(mb, ma)
    ids = torch.randint(0, 101, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(ma(ids).logits_BNV, mb(ids).logits_BNV, rtol=0, atol=0)


def test_upper_loop_one_loop_equals_yoco() -> None:
    for shared in (True, False):
        a, b = C.upper_loop(n_layers=4, window=W, n_loops=1, shared_kv=shared, **KW), C.yoco(n_layers=4, window=W, **KW)
        ma, mb = _model(a), _model(b, seed=5)
        _copy_weights(mb, ma)
        ids = torch.randint(0, 101, (2, 20))
        with torch.no_grad():
            torch.testing.assert_close(ma(ids).logits_BNV, mb(ids).logits_BNV, rtol=0, atol=0)


@pytest.mark.parametrize("other", [C.rins(n_layers=4, n_loops=1, **KW), C.loop(n_layers=4, n_loops=1, **KW)],
                         ids=["rins-r1", "loop-t1"])
def test_single_pass_loops_equal_transformer(other: C.ModelConfig) -> None:
    t = C.transformer(n_layers=4, **KW)
    mt, mo = _model(t), _model(other, seed=7)
    # Same layers in the same order; only the module nesting differs.
    src = [l for st in mt.stages for l in st]
    dst = [l for st in mo.stages for l in st]
    for s, d in zip(src, dst, strict=True):
        d.load_state_dict(s.state_dict())
    for name in ("embed", "norm", "lm_head"):
        getattr(mo, name).load_state_dict(getattr(mt, name).state_dict())
    ids = torch.randint(0, 101, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(mo(ids).logits_BNV, mt(ids).logits_BNV, rtol=0, atol=0)


def test_loop_applies_shared_weights_twice() -> None:
    """Loop T=2 over L layers == Transformer of 2L layers whose second half copies the first."""
    lp, t = C.loop(n_layers=2, n_loops=2, **KW), C.transformer(n_layers=4, **KW)
    ml, mt = _model(lp), _model(t, seed=3)
    for i in range(4):
        mt.stages[0][i].load_state_dict(ml.stages[0][i % 2].state_dict())
    for name in ("embed", "norm", "lm_head"):
        getattr(mt, name).load_state_dict(getattr(ml, name).state_dict())
    ids = torch.randint(0, 101, (2, 15))
    with torch.no_grad():
        torch.testing.assert_close(ml(ids).logits_BNV, mt(ids).logits_BNV, rtol=0, atol=1e-6)


def test_window_at_least_sequence_equals_global() -> None:
    N = 16
    a = C.ModelConfig(**{**KW, "stages": (C.Stage(kind="self", n_layers=2, window=N),)})
    b = C.transformer(n_layers=2, **KW)
    ma, mb = _model(a), _model(b, seed=9)
    _copy_weights(mb, ma)
    ids = torch.randint(0, 101, (2, N))
    with torch.no_grad():
        torch.testing.assert_close(ma(ids).logits_BNV, mb(ids).logits_BNV, rtol=0, atol=1e-6)
        # and through the cache, where the window path (ring buffer) is used
        cache = ma.new_cache(2, N, fill=float("nan"))
        torch.testing.assert_close(ma(ids, cache=cache).logits_BNV, mb(ids).logits_BNV, rtol=0, atol=1e-5)


@pytest.mark.parametrize("n", [14, 30])  # one masked call; blocks (n >= WINDOW_BLOCKED_MIN · W)
def test_sliding_window_matches_slow_reference(n: int) -> None:
    """One SWA layer against an explicit per-query loop over its window."""
    cfg = C.ModelConfig(**{**KW, "n_kv_heads": 4, "stages": (C.Stage(kind="self", n_layers=1, window=W),)})
    m = _model(cfg)
    layer = m.stages[0][0]
    x = torch.randn(1, n, KW["d_model"])
    from yocou.model.layers import apply_rope, rope_cos_sin
    with torch.no_grad():
        out = layer(x, m.plan[0], rope_cos_sin(torch.arange(n), 12, 10000.0, x.dtype), None, 0)
        h = layer.attn_norm(x)
        # slow reference: separate Q, K, V matmuls on the row blocks of the fused matrix
        wq, wk, wv = layer.wqkv.weight.split([48, 48, 48], dim=0)
        q = (h @ wq.T).view(1, n, 4, 12).transpose(1, 2)
        k = (h @ wk.T).view(1, n, 4, 12).transpose(1, 2)
        v = (h @ wv.T).view(1, n, 4, 12).transpose(1, 2)
        cos, sin = rope_cos_sin(torch.arange(n), 12, 10000.0, x.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        o = torch.zeros_like(q)
        for i in range(n):
            lo = max(0, i - W + 1)
            s = q[:, :, i:i + 1] @ k[:, :, lo:i + 1].transpose(-1, -2) / 12 ** 0.5
            o[:, :, i] = (s.softmax(-1) @ v[:, :, lo:i + 1])[:, :, 0]
        h2 = x + layer.wo(o.transpose(1, 2).reshape(1, n, -1))
        ref = h2 + layer.ffn(layer.ffn_norm(h2))
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("cfg", variants(), ids=IDS)
def test_param_count_matches_module(cfg: C.ModelConfig) -> None:
    m = LM(cfg)
    assert param_count(cfg) == sum(p.numel() for p in m.parameters())
    assert param_count(cfg, embedding=False) == sum(p.numel() for p in m.parameters()) - m.embed.weight.numel()


def test_yocou_shares_weights_across_loops() -> None:
    """YOCO-U has exactly YOCO's parameters (paper: same model size)."""
    assert param_count(C.yocou(n_layers=4, window=W, n_loops=3, **KW)) == param_count(C.yoco(n_layers=4, window=W, **KW))


def test_generate_greedy_matches_argmax_of_full_forward() -> None:
    m = _model(C.yocou(n_layers=4, window=W, **KW))
    prompt = torch.randint(0, 101, (2, 9))
    out = generate(m, prompt, 8, chunk_size=4)
    seq = prompt
    with torch.no_grad():
        for _ in range(8):
            nxt = m(seq).logits_BNV[:, -1].argmax(-1)
            seq = torch.cat([seq, nxt[:, None]], dim=1)
    assert torch.equal(out, seq[:, 9:])


def _greedy_reference(m: LM, prompt: torch.Tensor, n: int) -> torch.Tensor:
    """n greedy tokens [B, n] from the full forward (no cache)."""
    seq = prompt
    with torch.no_grad():
        for _ in range(n):
            seq = torch.cat([seq, m(seq).logits_BNV[:, -1].argmax(-1)[:, None]], dim=1)
    return seq[:, prompt.shape[1]:]


def _pad_after_eos(ref: torch.Tensor, eos: int) -> torch.Tensor:
    """Each row of ref kept up to and including its first eos, eos after it (plain Python)."""
    rows = []
    for r in ref.tolist():
        k = r.index(eos) if eos in r else len(r)
        rows.append(r[:k + 1] + [eos] * (len(r) - k - 1))
    return torch.tensor(rows)


def test_generate_with_eos_keeps_its_shape_and_pads_finished_rows() -> None:
    """generate(..., eos_id) returns [B, max_new_tokens]: a finished row holds eos_id after its first EOS,
    also when every row has finished early (the loop stops, the width stays)."""
    m = _model(C.yocou(n_layers=4, window=W, **KW))
    torch.manual_seed(1)
    prompt = torch.randint(0, 101, (2, 9))
    ref = _greedy_reference(m, prompt, 10)
    eos = int(ref[0, 2])  # row 0 stops at step 2 (or earlier); row 1 may run on
    out = generate(m, prompt, 10, chunk_size=4, eos_id=eos)
    assert out.shape == (2, 10)
    assert torch.equal(out, _pad_after_eos(ref, eos))
    one = generate(m, prompt[:1], 10, chunk_size=4, eos_id=eos)  # its only row stops early
    assert one.shape == (1, 10) and torch.equal(one, _pad_after_eos(ref[:1], eos))
    assert generate(m, prompt, 0, eos_id=eos).shape == (2, 0)


def test_generate_sampling_is_seeded() -> None:
    m = _model(C.yoco(n_layers=4, window=W, **KW))
    prompt = torch.randint(0, 101, (1, 5))
    a = generate(m, prompt, 6, temperature=1.0, top_k=10, generator=torch.Generator().manual_seed(3))
    b = generate(m, prompt, 6, temperature=1.0, top_k=10, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.shape == (1, 6)
    # top_k past the vocabulary keeps all of it (as transformers does): the same draws as no top_k
    c = generate(m, prompt, 6, temperature=1.0, top_k=10**6, generator=torch.Generator().manual_seed(3))
    d = generate(m, prompt, 6, temperature=1.0, generator=torch.Generator().manual_seed(3))
    assert torch.equal(c, d)
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        generate(m, prompt, 6, temperature=1.0, top_k=0)


def test_cache_overflow_is_a_clear_error() -> None:
    m = _model(C.yoco(n_layers=4, window=W, **KW))
    cache = m.new_cache(1, 4)
    with pytest.raises(ValueError, match="max_len"):
        prefill(m, torch.zeros(1, 5, dtype=torch.long), cache)


def test_a_window_slot_is_not_read_as_a_global_one() -> None:
    """write_and_read serves global and shared slots only; a window slot there is an error naming it."""
    m = _model(C.yoco(n_layers=4, window=W, **KW))
    cache = m.new_cache(1, 8)
    app = next(a for a in m.plan if a.window is not None)
    kv = torch.zeros(1, m.cfg.n_kv_heads, 2, m.cfg.head_dim)
    with pytest.raises(ValueError, match=rf"slot {app.slot} is a window slot"):
        cache.write_and_read(app, kv, kv, 0)


def test_moe_routed_equals_dense_masked_reference() -> None:
    """Every expert computed densely and masked by the router == the routed computation."""
    cfg = C.yocou(n_layers=2, window=W, **{**KW, "n_experts": 5, "top_k": 2, "d_expert": 16, "d_shared_expert": 16})
    moe = _model(cfg).stages[0][0].ffn
    x = torch.randn(3, 7, KW["d_model"])
    with torch.no_grad():
        got = moe(x)
        xt = x.reshape(-1, KW["d_model"])
        probs, idx, w = moe.route(xt)
        gate = torch.zeros_like(probs).scatter(1, idx, w)  # [T, E], zero off the top-k
        dense = torch.stack([_expert(moe, e, xt) for e in range(5)], dim=1)  # [T, E, D]
        ref = (gate[:, :, None] * dense).sum(1) + moe.shared(xt)
    torch.testing.assert_close(got, ref.reshape(3, 7, -1), rtol=0, atol=1e-5)


def _expert(moe: torch.nn.Module, e: int, x_TD: torch.Tensor) -> torch.Tensor:
    """Expert ``e`` of an MoE as a :class:`SwiGLU` with its weights."""
    from yocou.model.layers import SwiGLU
    dense = SwiGLU(x_TD.shape[-1], moe.experts.d_expert)
    dense.load_state_dict({"w13.weight": moe.experts.w13[e], "w2.weight": moe.experts.w2[e]})
    return dense(x_TD)


def test_moe_one_expert_top1_equals_dense_swiglu() -> None:
    from yocou.model.layers import SwiGLU
    cfg = C.yoco(n_layers=2, window=W, **{**KW, "n_experts": 1, "top_k": 1, "d_expert": 32})
    moe = _model(cfg).stages[0][0].ffn
    dense = SwiGLU(KW["d_model"], 32)
    dense.load_state_dict({"w13.weight": moe.experts.w13[0], "w2.weight": moe.experts.w2[0]})
    x = torch.randn(2, 5, KW["d_model"])
    with torch.no_grad():
        torch.testing.assert_close(moe(x), dense(x), rtol=0, atol=1e-6)


def test_hf_llama_parity() -> None:
    """The Transformer preset equals HF transformers' Llama with copied weights."""
    transformers = pytest.importorskip("transformers")
    cfg = C.transformer(n_layers=2, **KW)
    m = _model(cfg)
    from yocou.model.hf import to_llama
    hf = to_llama(m, max_position_embeddings=64).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, 17))
    with torch.no_grad():
        torch.testing.assert_close(m(ids).logits_BNV, hf(ids).logits, rtol=0, atol=1e-5)


def test_rope_frequencies_stay_fp32_when_the_model_is_cast() -> None:
    """RoPE's inverse frequencies are a buffer outside the state dict that a dtype cast leaves exact:
    a bf16 model rotates by the fp32 angles of ``theta^(-2i/Dh)``, computed here in float64."""
    cfg = C.transformer(n_layers=1, **KW)
    m = _model(cfg)
    assert "rope_inv_freq" not in m.state_dict()
    expect = torch.tensor([cfg.rope_theta ** (-2 * i / cfg.head_dim) for i in range(cfg.head_dim // 2)],
                          dtype=torch.float64)
    for cast in (lambda x: x.to(torch.bfloat16), lambda x: x.half(), lambda x: x.double()):
        buf = cast(_model(cfg)).rope_inv_freq
        assert buf.dtype == torch.float32
        torch.testing.assert_close(buf.double(), expect, rtol=4e-7, atol=0)  # a few fp32 ulps; a bf16 cast is off by ~4e-3
    meta = LM(cfg).to("meta")
    meta.to_empty(device="cpu")
    torch.testing.assert_close(meta.rope_inv_freq.double(), expect, rtol=4e-7, atol=0)  # a few fp32 ulps; a bf16 cast is off by ~4e-3


@pytest.mark.parametrize("n", [255, 256, 301, 512, 513])
def test_causal_attend_matches_slow_reference(n: int) -> None:
    """Causal grouped-query attention (including the two-call split used on CPU for N in [256, 512]) equals
    softmax(QKᵀ/√d + causal mask)·V computed in float64 with repeated key heads, in value and gradient."""
    from yocou.model.attention import attend

    g = torch.Generator().manual_seed(n)
    B, H, G, Dh = 2, 4, 2, 16
    q, k, v = (torch.randn(B, h, n, Dh, generator=g, requires_grad=True) for h in (H, G, G))
    out = attend(q, k, v, causal=True)
    go = torch.randn(out.shape, generator=g)
    grads = torch.autograd.grad(out, (q, k, v), go)

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    kr, vr = k64.repeat_interleave(H // G, dim=1), v64.repeat_interleave(H // G, dim=1)
    scores = q64 @ kr.transpose(-1, -2) / Dh ** 0.5
    allowed = torch.ones(n, n, dtype=torch.bool).tril()
    ref = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ vr
    ref_grads = torch.autograd.grad(ref, (q64, k64, v64), go.double())
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=2e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-4)


def test_fused_linear_both_paths_match_float64_reference() -> None:
    """``fused_linear``'s training path (a matmul per weight block) and its inference path (one matmul, split)
    give ``x @ W.T`` split into the row blocks, computed in float64; the training path's gradients of ``x`` and
    ``W`` equal the float64 ones, and the inference path records no graph."""
    from yocou.model.layers import fused_linear

    g = torch.Generator().manual_seed(7)
    sizes = [96, 48, 48]
    x = torch.randn(3, 17, 64, generator=g, requires_grad=True)
    w = torch.randn(sum(sizes), 64, generator=g, requires_grad=True)
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    ref = list((x64 @ w64.T).split(sizes, dim=-1))
    got = fused_linear(x, w, sizes)
    assert [t.shape[-1] for t in got] == sizes and all(t.is_contiguous() for t in got)
    gos = [torch.randn(t.shape, generator=g) for t in got]
    grads = torch.autograd.grad(got, (x, w), gos)
    ref_grads = torch.autograd.grad(ref, (x64, w64), [t.double() for t in gos])
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.double(), b, rtol=0, atol=1e-4)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a.double(), b, rtol=0, atol=1e-3)
    with torch.no_grad():
        inf = fused_linear(x, w, sizes)
    assert all(t.grad_fn is None for t in inf)
    for a, b in zip(inf, ref):
        torch.testing.assert_close(a.double(), b, rtol=0, atol=1e-4)


def _moe(n_experts: int = 5, top_k: int = 2) -> torch.nn.Module:
    cfg = C.yocou(n_layers=2, window=W, **{**KW, "n_experts": n_experts, "top_k": top_k, "d_expert": 16,
                                           "d_shared_expert": 16})
    return _model(cfg).stages[0][0].ffn


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_moe_grouped_and_padded_expert_paths_agree(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch._grouped_mm`` over the expert groups and the padded batched matmul give the same output and
    gradients (both sync-free forms of the same computation)."""
    moe = _moe().to(dtype)
    x = torch.randn(3, 7, KW["d_model"], dtype=dtype)
    outs, grads = [], []
    for grouped in (True, False):
        monkeypatch.setattr(type(moe.experts), "_grouped", lambda self, x, g=grouped: g)
        moe.zero_grad()
        y = moe(x)
        (y.float() * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
        outs.append(y.detach().float())
        grads.append([moe.experts.w13.grad.float().clone(), moe.experts.w2.grad.float().clone()])
    tol = dict(rtol=0, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(outs[0], outs[1], **tol)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_moe_compiles_with_fullgraph_no_host_sync(dtype: torch.dtype) -> None:
    """No data-dependent host sync (``nonzero``, ``.item()``, shapes from counts): the layer compiles with
    ``fullgraph=True``, forward and backward, and equals eager."""
    moe = _moe().to(dtype)
    x = torch.randn(2, 9, KW["d_model"], dtype=dtype, requires_grad=True)
    torch._dynamo.reset()
    compiled = torch.compile(moe, fullgraph=True, dynamic=False)
    got = compiled(x)
    got.float().sum().backward()
    want = moe(x.detach())
    tol = dict(rtol=0, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got.float(), want.float(), **tol)
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_moe_loads_a_checkpoint_with_one_module_per_expert() -> None:
    """A state dict with ``experts.<e>.w13.weight`` / ``experts.<e>.w2.weight`` loads into the stacked weights."""
    moe = _moe()
    sd = {k: v for k, v in moe.state_dict().items() if not k.startswith("experts.")}
    for e in range(5):
        sd[f"experts.{e}.w13.weight"] = moe.experts.w13[e].detach().clone()
        sd[f"experts.{e}.w2.weight"] = moe.experts.w2[e].detach().clone()
    fresh = _moe()
    with torch.no_grad():
        fresh.experts.w13.zero_()
    fresh.load_state_dict(sd)
    assert torch.equal(fresh.experts.w13, moe.experts.w13) and torch.equal(fresh.experts.w2, moe.experts.w2)
