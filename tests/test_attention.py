"""The attention dispatch (yocou.model.attention.attention): every backend, forced by name, against a slow float64
reference (an explicit softmax over each query's visible keys) at odd shapes, windows, key offsets and GQA ratios;
the model forward and cached decoding under each backend; flex traced into a fullgraph compile; bad backend names.

flex_attention has no CPU backward in torch 2.13, so its gradients are checked on a GPU (benchmarks/gpu_check.py),
and here under ``torch.no_grad``.
"""

from __future__ import annotations

import pytest
import torch

from yocou.model import attention as A
from yocou.model import config as C
from yocou.model.generate import decode_step, prefill
from yocou.model.lm import LM

# (N queries, K keys, window, H, G, D): a training forward (K == N), prefill chunks after a history (K > N),
# a window past the keys (global then), windows below and past the blocked threshold, decode steps, GQA 1, 2, 3, 6.
CASES = [
    (37, 37, None, 4, 2, 16), (37, 37, 7, 6, 3, 16), (130, 130, 16, 4, 1, 8), (29, 29, 40, 2, 2, 8),
    (9, 50, 12, 6, 2, 16), (13, 13 + 200, None, 4, 4, 8), (5, 5 + 3, 7, 4, 2, 8), (1, 12, 12, 6, 1, 16),
    (1, 77, None, 4, 2, 8), (140, 140 + 33, 33, 3, 1, 16), (1, 1, 4, 2, 1, 8),
]


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None) -> torch.Tensor:
    """Query i at key position ``K - N + i`` sees key j iff ``0 <= K - N + i - j`` (``< window``): one softmax per
    query in float64."""
    B, H, N, D = q.shape
    G, K = k.shape[1], k.shape[2]
    out = torch.zeros(B, H, N, D, dtype=torch.float64)
    for h in range(H):
        kh, vh = k[:, h // (H // G)].double(), v[:, h // (H // G)].double()
        for i in range(N):
            p = K - N + i
            lo = 0 if window is None else max(0, p - window + 1)
            s = (q[:, h, i].double()[:, None, :] * kh[:, lo:p + 1]).sum(-1) / D ** 0.5
            out[:, h, i] = (s.softmax(-1)[..., None] * vh[:, lo:p + 1]).sum(1)
    return out


@pytest.mark.parametrize("backend", A.BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[f"N{c[0]}-K{c[1]}-W{c[2]}-H{c[3]}G{c[4]}" for c in CASES])
def test_every_backend_equals_the_slow_reference(backend: str, case: tuple) -> None:
    N, K, window, H, G, D = case
    g = torch.Generator().manual_seed(N * 1000 + K)
    q, k, v = (torch.randn(2, h, n, D, generator=g) for h, n in ((H, N), (G, K), (G, K)))
    with torch.no_grad():
        got = A.attention(q, k, v, window=window, backend=backend)
    assert got.shape == (2, H, N, D)
    torch.testing.assert_close(got.double(), reference(q, k, v, window), rtol=0, atol=2e-5)


def test_the_backends_differ_in_the_path_they_take(monkeypatch: pytest.MonkeyPatch) -> None:
    """A window call goes to flex under ``flex`` and never under ``sdpa`` (so the test above compares two paths)."""
    calls = []
    real = A._flex
    monkeypatch.setattr(A, "_flex", lambda *a: calls.append(1) or real(*a))
    q, k = torch.randn(1, 2, 20, 8), torch.randn(1, 2, 20, 8)
    with torch.no_grad():
        A.attention(q, k, k, window=5, backend="sdpa")
        assert calls == []
        A.attention(q, k, k, window=5, backend="flex")
    assert calls == [1]


def test_sdpa_backend_keeps_the_cpu_gradient() -> None:
    """Under ``sdpa`` the window path is differentiable on CPU and its gradient equals the reference's."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, h, 41, 8, generator=g, dtype=torch.float64, requires_grad=True) for h in (4, 2, 2))
    A.attention(q, k, v, window=9, backend="sdpa").pow(2).sum().backward()
    got = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    reference(q, k, v, 9).pow(2).sum().backward()
    for a, b in zip(got, (q.grad, k.grad, v.grad)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-9)


def test_flex_traces_into_a_fullgraph_compile() -> None:
    """flex with its cached BlockMask compiles with ``fullgraph=True`` (no graph break) and equals eager sdpa."""
    q, k, v = torch.randn(1, 4, 70, 16), torch.randn(1, 2, 70, 16), torch.randn(1, 2, 70, 16)

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return A.attention(q, k, v, window=11, backend="flex")

    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(f, fullgraph=True, dynamic=False)(q, k, v)
        want = A.attention(q, k, v, window=11, backend="sdpa")
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


KW = dict(vocab_size=97, d_model=32, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=64)


@pytest.mark.parametrize("cfg", [C.transformer(n_layers=2, **KW), C.yocou(n_layers=4, window=5, n_loops=2, **KW),
                                 C.rins(n_layers=2, n_loops=2, **KW)], ids=["transformer", "yocou", "rins"])
def test_model_forward_and_cached_decoding_under_flex_equal_sdpa(cfg: C.ModelConfig) -> None:
    """The whole model under ``flex``: the full forward equals ``sdpa``'s, and chunked prefill plus decode under
    ``flex`` (window rings, global chunks over a history) equals that full forward at every position."""
    torch.manual_seed(0)
    m = LM(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, 19), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        with A.attention_backend("sdpa"):
            want = m(ids).logits_BNV
        with A.attention_backend("flex"):
            torch.testing.assert_close(m(ids).logits_BNV, want, rtol=0, atol=1e-5)
            cache = m.new_cache(2, 19, fill=float("nan"))
            got = [prefill(m, ids[:, :11], cache, chunk_size=4)]
            got += [decode_step(m, ids[:, p], cache) for p in range(11, 18)]
    torch.testing.assert_close(torch.stack(got, dim=1), want[:, 10:18], rtol=0, atol=1e-5)


def test_backend_follows_the_device_unless_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YOCOU_ATTENTION_BACKEND", raising=False)
    assert A.backend_for("cpu") == "sdpa" and A.backend_for("cuda") == "flex"
    with A.attention_backend("flex"):
        assert A.backend_for("cpu") == "flex"
    assert A.backend_for("cpu") == "sdpa"
    monkeypatch.setenv("YOCOU_ATTENTION_BACKEND", "flex")
    assert A.backend_for("cpu") == "flex"


@pytest.mark.parametrize("how", ["set", "env", "arg"])
def test_an_unknown_backend_is_named(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    q = torch.zeros(1, 2, 3, 8)
    with pytest.raises(ValueError, match=r"unknown attention backend 'triton'.*sdpa, flex") as e:
        if how == "set":
            A.set_attention_backend("triton")
        elif how == "env":
            monkeypatch.setenv("YOCOU_ATTENTION_BACKEND", "triton")
            A.attention(q, q, q)
        else:
            A.attention(q, q, q, backend="triton")
    assert ("YOCOU_ATTENTION_BACKEND" in str(e.value)) == (how == "env")


def test_fewer_keys_than_queries_is_refused() -> None:
    with pytest.raises(ValueError, match="3 keys for 5 queries"):
        A.attention(torch.zeros(1, 2, 5, 8), torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 3, 8))


def test_call_sites_on_cpu_name_the_kernels() -> None:
    """On CPU every SDPA call is the fused CPU kernel; the window sites are blocked at N >= 4 W under sdpa and flex
    under flex; without a window there is no window site."""
    kw = dict(n_heads=4, n_kv_heads=2, head_dim=8, device="cpu", dtype=torch.float32)
    sdpa = A.call_sites(seq_len=64, window=8, backend="sdpa", **kw)
    assert sdpa == {"train/global": "cpu", "prefill/global": "cpu", "train/window": "blocked+cpu",
                    "prefill/window": "blocked+cpu", "decode": "cpu"}
    assert A.call_sites(seq_len=20, window=8, backend="sdpa", **kw)["train/window"] == "cpu"
    flex = A.call_sites(seq_len=64, window=8, backend="flex", **kw)
    assert flex["train/window"] == flex["prefill/window"] == flex["prefill/global"] == "flex (unfused)"
    assert "train/window" not in A.call_sites(seq_len=64, window=None, backend="flex", **kw)


def test_training_refuses_the_math_kernel_at_8k_unless_allowed() -> None:
    """The refusal reads the call sites' kernels: a math site at seq_len 8192 is refused naming the site, the field
    that allows it and the dtype; below 8192, with the field set, or on a fused kernel it runs."""
    from yocou.training.train import MATH_ATTENTION_MAX_SEQ_LEN, TrainConfig, math_attention_refusal

    n = MATH_ATTENTION_MAX_SEQ_LEN
    tc = TrainConfig(steps=1, batch_size=1, seq_len=n, dtype="fp32")
    msg = math_attention_refusal({"train/global": "math", "train/window": "flex"}, tc)
    assert msg is not None and msg.count("\n") == 0
    assert "train/global" in msg and "train/window" not in msg and "train.allow_math_attention" in msg
    assert "fp32" in msg
    assert "YOCOU_ATTENTION_BACKEND" not in msg  # flex does not change a global site's kernel
    window_msg = math_attention_refusal({"train/global": "flash", "train/window": "blocked+math"}, tc)
    assert window_msg is not None and "YOCOU_ATTENTION_BACKEND=flex" in window_msg
    assert math_attention_refusal({"train/global": "flash", "train/window": "flex"}, tc) is None
    assert math_attention_refusal({"train/global": "math"}, TrainConfig(steps=1, batch_size=1, seq_len=n - 1)) is None
    allowed = TrainConfig(steps=1, batch_size=1, seq_len=n, allow_math_attention=True)
    assert math_attention_refusal({"train/global": "math"}, allowed) is None


def test_training_kernels_on_cpu_are_the_cpu_kernel() -> None:
    from yocou.training.train import TrainConfig, attention_kernels

    cfg = C.yocou(n_layers=4, window=8, n_loops=2, **KW)
    got = attention_kernels(cfg, TrainConfig(steps=1, batch_size=1, seq_len=64), torch.device("cpu"))
    assert got == {"train/global": "cpu", "train/window": "blocked+cpu"}


def test_train_step_check_dry_on_cpu(tmp_path) -> None:
    """The GPU check's training step (yocou.evaluation.bench.train_step) runs its code paths on CPU: kernels named for
    both backends, flex against sdpa within tolerance (forward only on CPU), an eager and a compiled step that learn
    nothing wrong (finite loss) and the planner's total recorded."""
    import json

    from yocou.evaluation.bench import train_step

    assert train_step.main(["--out", str(tmp_path), "--device", "cpu", "--dry", "--steps", "1"]) == 0
    r = json.loads((tmp_path / "train_step.json").read_text())
    assert r["kernels"]["flex"]["train/window"] == "flex (unfused)"
    assert r["kernels"]["sdpa"]["train/window"] == "blocked+cpu"
    assert r["attention"]["backward"] is False and r["attention"]["forward_rel"] < 2e-2
    assert [s["mode"] for s in r["steps"]] == ["eager", "compiled"]
    assert all(s["tokens_per_s"] > 0 and s["planned_bytes"] > 0 and s["mfu"] is None for s in r["steps"])
    assert abs(r["steps"][0]["loss"] - r["steps"][1]["loss"]) < 2e-2  # the same model, seed, batch and steps
    assert r["status"] == "passed" and "provenance" in r


def test_flex_with_a_gradient_on_cpu_is_refused_in_one_line() -> None:
    q = torch.randn(1, 2, 20, 8, requires_grad=True)
    with pytest.raises(ValueError, match="attention backend 'flex' has no backward on CPU.*sdpa") as e:
        A.attention(q, q, q, window=5, backend="flex")
    assert "\n" not in str(e.value)
