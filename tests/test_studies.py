"""The paper's studies: analytic FLOPs against a count of what runs, MoE routing against a dense
reference, and the angular distance of Figure 8 against a slow reference.

Upper Loop with T = 1 equals YOCO (shared and recomputed K̂V̂) is tested in
tests/test_model.py::test_upper_loop_one_loop_equals_yoco.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import (
    FlopCounterMode,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)

from yocou.evaluation.analysis import angular
from yocou.model import accounting as A
from yocou.model import config as C
from yocou.model.lm import LM
from yocou.training.train import _loss

aten = torch.ops.aten

# Attention is a large share of the FLOPs at these shapes (N = 64 against D = 32), so a wrong attention
# term (causal half, window W, a missing cross layer) moves the total by more than the 2% tolerance.
KW = dict(vocab_size=64, d_model=32, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=64)
MOE = dict(n_experts=4, top_k=2, d_expert=16, d_shared_expert=16)
W, N, B = 8, 64, 2


def flop_variants() -> dict[str, C.ModelConfig]:
    return {
        "transformer": C.transformer(n_layers=2, **KW),
        "loop": C.loop(n_layers=2, n_loops=2, **KW),
        "rins": C.rins(n_layers=4, n_loops=3, **KW),
        "yoco": C.yoco(n_layers=4, window=W, **KW),
        "yocou": C.yocou(n_layers=4, window=W, n_loops=3, **KW),
        "upper_loop": C.upper_loop(n_layers=4, window=W, n_loops=2, **KW),
        "upper_loop_noshare": C.upper_loop(n_layers=4, window=W, n_loops=2, shared_kv=False, **KW),
        "yoco_moe": C.yoco(n_layers=4, window=W, **KW, **MOE),
        "yocou_moe": C.yocou(n_layers=4, window=W, n_loops=3, **KW, **{**MOE, "top_k": 1}),
    }


# -- SDPA formulas for the CPU kernel (torch registers its formulas for the CUDA kernels only) ---------------
def _visible_pairs(q: torch.Tensor, k: torch.Tensor, is_causal: bool, attn_mask: torch.Tensor | None) -> int:
    """(query head, query, key) triples the mask lets through, read from the call's own arguments."""
    Bq, H, Nq, _ = q.shape
    K = k.shape[2]
    vis = torch.ones(Nq, K, dtype=torch.bool)
    if is_causal:
        vis = vis.tril()
    if attn_mask is not None:
        m = attn_mask if attn_mask.dtype == torch.bool else attn_mask > float("-inf")
        vis = vis & m.cpu()
    return int(vis.expand(Bq, H, Nq, K).sum())


def _visible_fwd(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None, out_val=None):
    """Q·Kᵀ and P·V over visible pairs only: 2·d_h + 2·d_v FLOPs per pair."""
    return _visible_pairs(query, key, is_causal, attn_mask) * 2 * (query.shape[-1] + value.shape[-1])


def _visible_bwd(grad_out, query, key, value, out, logsumexp, dropout_p=0.0, is_causal=False, *, attn_mask=None,
                 scale=None, out_val=None):
    """dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q over visible pairs (no recompute of the scores)."""
    return _visible_pairs(query, key, is_causal, attn_mask) * 2 * (2 * query.shape[-1] + 2 * value.shape[-1])


def _stock_fwd(query, key, value, *args, out_val=None, **kwargs):
    """torch's own formula: the full score matrix, whatever the mask."""
    return sdpa_flop_count(query.shape, key.shape, value.shape)


def _stock_bwd(grad_out, query, key, value, *args, out_val=None, **kwargs):
    return sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape)


for _f in (_visible_fwd, _visible_bwd, _stock_fwd, _stock_bwd):
    _f._get_raw = True  # FlopCounterMode passes the tensors themselves (the mask is needed)

CPU_SDPA = aten._scaled_dot_product_flash_attention_for_cpu
CPU_SDPA_BWD = aten._scaled_dot_product_flash_attention_for_cpu_backward
VISIBLE = {CPU_SDPA: _visible_fwd, CPU_SDPA_BWD: _visible_bwd}
STOCK = {CPU_SDPA: _stock_fwd, CPU_SDPA_BWD: _stock_bwd}
MATMUL_OPS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten._grouped_mm"}  # _grouped_mm: the MoE
ATTN_OPS = {str(CPU_SDPA), str(CPU_SDPA_BWD), "aten._scaled_dot_product_flash_attention",
            "aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_flash_attention_backward",
            "aten._scaled_dot_product_efficient_attention_backward"}


def _split_counts(fc: FlopCounterMode) -> tuple[int, int]:
    """(matmul FLOPs, attention FLOPs) of a counter; any other counted op fails the test."""
    counts = {str(k): v for k, v in fc.get_flop_counts()["Global"].items()}
    other = set(counts) - MATMUL_OPS - ATTN_OPS
    assert not other, f"unexpected counted ops {other}"
    return (sum(v for k, v in counts.items() if k in MATMUL_OPS), sum(v for k, v in counts.items() if k in ATTN_OPS))


def _model(cfg: C.ModelConfig) -> LM:
    torch.manual_seed(0)
    m = LM(cfg)
    if cfg.n_experts:  # spread the router so that several experts get tokens
        with torch.no_grad():
            for mod in m.modules():
                if hasattr(mod, "router"):
                    mod.router.weight.normal_(0, 1.0)
    return m


def _sdpa_calls(cfg: C.ModelConfig) -> int:
    return sum(1 for a in C.expand_plan(cfg) if a.kind != "kv")


def _counted_training_step(cfg: C.ModelConfig, sdpa_formulas: dict) -> tuple[tuple[int, int], tuple[int, int]]:
    """(matmul, attention) FLOPs of the forward (with the loss) and of the backward of one training step on
    random tokens, SDPA charged by ``sdpa_formulas``."""
    m = _model(cfg)
    x = torch.randint(0, KW["vocab_size"], (B, N))
    y = torch.randint(0, KW["vocab_size"], (B, N))
    with FlopCounterMode(display=False, custom_mapping=sdpa_formulas) as fwd:
        loss, _ = _loss(m, x, y, cfg.moe_aux_weight)
    with FlopCounterMode(display=False, custom_mapping=sdpa_formulas) as bwd:
        loss.backward()
    return _split_counts(fwd), _split_counts(bwd)


@pytest.mark.parametrize("name", list(flop_variants()))
def test_training_step_flops_match_the_analytic_count(name: str) -> None:
    """A real training step (forward, loss, backward) under FlopCounterMode, SDPA charged for the
    (query, key) pairs its causal flag or mask lets through, equals ``train_flops_per_token`` (the
    ``visible`` convention logged with every run) × tokens, within 2%; each part separately exactly."""
    cfg = flop_variants()[name]
    (mm_f, attn_f), (mm_b, attn_b) = _counted_training_step(cfg, VISIBLE)
    mm, attn = mm_f + mm_b, attn_f + attn_b
    n_tok = B * N
    assert mm + attn == pytest.approx(A.train_flops_per_token(cfg, N) * n_tok, rel=0.02)
    # The parts: 3 × 2 × active matmul parameters; 3 × the visible-pairs attention term.
    assert mm == pytest.approx(6 * A.active_params_per_token(cfg) * n_tok, rel=1e-9)
    assert attn == pytest.approx(3 * A.attention_flops_per_token(cfg, N) * n_tok, rel=1e-9)
    assert attn > 0 and mm > 0


@pytest.mark.parametrize("name", list(flop_variants()))
def test_forward_flops_dense_convention_match_torch_counter(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward under torch's stock SDPA formula (full N×N score matrix per call, as a forward that hands
    SDPA a causal flag or a window mask for all N keys; window layers kept in one masked call here) equals
    ``forward_flops_per_token(attention="dense")``; the backward under the stock formula is 2 × the matmuls
    + 2.5 × the attention (the fused backward's recomputation of the scores counted), the documented factor."""
    monkeypatch.setattr("yocou.model.attention.WINDOW_BLOCKED_MIN", N)  # N < N·W: window layers in one masked call
    cfg = flop_variants()[name]
    (mm_f, attn_f), (mm_b, attn_b) = _counted_training_step(cfg, STOCK)
    n_tok = B * N
    assert mm_f + attn_f == pytest.approx(A.forward_flops_per_token(cfg, N, attention="dense") * n_tok, rel=0.02)
    hd = cfg.n_heads * cfg.head_dim
    assert attn_f == 4 * hd * N * n_tok * _sdpa_calls(cfg)  # independent: N keys per query, every application
    assert mm_b == 2 * mm_f
    assert attn_b == pytest.approx(2.5 * attn_f, rel=1e-12)


def test_attention_conventions_differ_where_expected() -> None:
    """The two attention conventions written out by hand for YOCO (2 window + 2 cross applications);
    they coincide for a one-token sequence; an unknown convention is refused."""
    cfg = C.yoco(n_layers=4, window=W, **KW)
    hd = KW["n_heads"] * KW["head_dim"]
    vis = A.attention_flops_per_token(cfg, N)
    dense = A.attention_flops_per_token(cfg, N, attention="dense")
    win_ctx = (sum(min(i + 1, W) for i in range(N))) / N
    assert vis == pytest.approx(2 * 4 * hd * win_ctx + 2 * 4 * hd * (N + 1) / 2)
    assert dense == 4 * 4 * hd * N
    one = C.transformer(n_layers=1, **KW)
    assert A.attention_flops_per_token(one, 1) == A.attention_flops_per_token(one, 1, attention="dense")
    with pytest.raises(ValueError, match="attention"):
        A.train_flops_per_token(cfg, N, attention="causal-ish")


# -- MoE: routed computation against every expert computed densely and masked by the router ----------------
def _dense_moe_reference(moe: torch.nn.Module, x_TD: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every expert on every token from the raw weights, weighted by the renormalised top-k router
    probabilities (zero elsewhere), plus the shared expert; and the Switch load-balancing loss."""
    probs = torch.softmax(x_TD.double() @ moe.router.weight.double().T, dim=-1)  # [T, E]
    T, E = probs.shape
    order = torch.argsort(probs, dim=-1, descending=True, stable=True)[:, :top_k]
    chosen = torch.zeros(T, E, dtype=torch.float64).scatter(1, order, 1.0)  # 1 on the top-k, 0 elsewhere
    gate = probs * chosen / (probs * chosen).sum(-1, keepdim=True)  # renormalised over the chosen k

    def swiglu(w13: torch.Tensor, w2: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        d_ff = w2.shape[1]
        g, u = x @ w13[:d_ff].T, x @ w13[d_ff:].T
        return (g * torch.sigmoid(g) * u) @ w2.T

    dense = torch.stack([swiglu(w13, w2, x_TD) for w13, w2 in zip(moe.experts.w13, moe.experts.w2)], dim=1)
    out = (gate.to(dense.dtype)[:, :, None] * dense).sum(1)
    if moe.shared is not None:
        out = out + swiglu(moe.shared.w13.weight, moe.shared.w2.weight, x_TD)
    counts = torch.zeros(E, dtype=torch.float64)
    for t in range(T):
        for e in order[t].tolist():
            counts[e] += 1
    aux = E * float(((counts / (T * top_k)) * probs.detach().mean(0)).sum())
    return out, torch.tensor(aux, dtype=torch.float64), order


@pytest.mark.parametrize("top_k", [1, 2])
def test_moe_routed_equals_dense_masked_computation(top_k: int) -> None:
    """Forward, gradients (input and every expert's weights) and load-balancing loss of ``MoE.forward``
    against the dense masked reference, 5 experts and a shared expert."""
    cfg = C.yocou(n_layers=2, window=W, n_loops=2, **{**KW, "n_experts": 5, "top_k": top_k, "d_expert": 16,
                                                        "d_shared_expert": 24})
    moe = _model(cfg).stages[0][0].ffn
    x = torch.randn(3, 11, KW["d_model"], requires_grad=True)
    got = moe(x)
    ref, aux_ref, order = _dense_moe_reference(moe, x.reshape(-1, KW["d_model"]), top_k)
    assert len(set(order.reshape(-1).tolist())) >= 4, "routing must reach several experts for the test to bite"
    torch.testing.assert_close(got, ref.reshape(3, 11, -1), rtol=1e-5, atol=1e-6)
    assert float(moe.aux_loss.detach()) == pytest.approx(float(aux_ref), rel=1e-5)
    # Gradients: the same linear functional of both outputs.
    proj = torch.randn_like(got)
    params = [x, moe.experts.w13, moe.experts.w2] + list(moe.shared.parameters())
    g_got = torch.autograd.grad((got * proj).sum(), params, allow_unused=True)
    g_ref = torch.autograd.grad((ref.reshape(3, 11, -1) * proj).sum(), params, allow_unused=True)
    for a, b in zip(g_got, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_model_aux_loss_sums_every_moe_application() -> None:
    """``LM.forward``'s aux_loss is the sum of the independently computed loss of every MoE application
    (self layers applied T = 2 times, cross layers once), each on the input that application saw."""
    cfg = C.yocou(n_layers=4, window=W, n_loops=2, **{**KW, "n_experts": 4, "top_k": 2, "d_expert": 16,
                                                        "d_shared_expert": 16})
    m = _model(cfg).eval()
    seen: list[tuple[torch.nn.Module, torch.Tensor]] = []
    hooks = [mod.register_forward_hook(lambda mod, inp, out: seen.append((mod, inp[0].detach())))
             for mod in m.modules() if hasattr(mod, "router")]
    with torch.no_grad():
        out = m(torch.randint(0, KW["vocab_size"], (2, 16)))
    for h in hooks:
        h.remove()
    assert len(seen) == sum(1 for a in m.plan if a.kind != "kv") == 2 * 2 + 2
    ref = sum(float(_dense_moe_reference(mod, x.reshape(-1, KW["d_model"]), 2)[1]) for mod, x in seen)
    assert float(out.aux_loss) == pytest.approx(ref, rel=1e-5)


# -- Figure 8: angular distance ---------------------------------------------------------------------------
def _slow_angular(hidden: list[torch.Tensor]) -> list[float]:
    """The definition, token by token: mean over tokens of acos(a·b / (|a||b|)) / π."""
    out = []
    for j in range(len(hidden) - 1):
        D = hidden[j].shape[-1]
        a, b = hidden[j].double().reshape(-1, D), hidden[j + 1].double().reshape(-1, D)
        vals = []
        for u, v in zip(a.tolist(), b.tolist()):
            dot = sum(p * q for p, q in zip(u, v))
            nu, nv = math.sqrt(sum(p * p for p in u)), math.sqrt(sum(q * q for q in v))
            vals.append(math.acos(max(-1.0, min(1.0, dot / (nu * nv)))) / math.pi)
        out.append(sum(vals) / len(vals))
    return out


def test_angular_distance_matches_slow_reference_on_a_model() -> None:
    cfg = C.yocou(n_layers=4, window=4, n_loops=2, **KW)
    m = _model(cfg).eval()
    ids = torch.randint(0, KW["vocab_size"], (2, 12))
    with torch.no_grad():
        hidden = m(ids, return_hidden=True).hidden
    sums, n = angular.angular_sums(m, [w for w in ids.numpy()], batch=2)
    assert n == 24
    ref = _slow_angular(hidden)
    assert len(ref) == len(sums) == 2 * 2 + 2
    np.testing.assert_allclose((sums / n).numpy(), ref, rtol=1e-6, atol=1e-9)
    assert all(0 < r < 1 for r in ref)


def test_angular_distance_degenerate_cases() -> None:
    h = torch.randn(2, 5, 16)
    d = angular.consecutive_angular_distances([h, h.clone(), 3.0 * h, -h])
    assert float(d[0].abs().max()) == 0.0  # identical
    assert float(d[1].abs().max()) < 1e-6  # same direction, other length (float32 rounding of 3·h)
    torch.testing.assert_close(d[2], torch.ones(2, 5, dtype=torch.float64))  # opposite: π/π
    e = torch.zeros(1, 1, 2)
    e[..., 0] = 1
    f = torch.zeros(1, 1, 2)
    f[..., 1] = 2
    assert float(angular.consecutive_angular_distances([e, f])) == pytest.approx(0.5)  # orthogonal


def test_an_identity_layer_application_has_zero_distance_at_its_label() -> None:
    """Zero the output projections of self layer 1: each of its T = 3 applications returns its input, so
    exactly those applications, labelled (self, loop t, layer 1), have distance 0."""
    cfg = C.yocou(n_layers=4, window=4, n_loops=3, **KW)
    m = _model(cfg).eval()
    with torch.no_grad():
        m.stages[0][1].wo.weight.zero_()
        m.stages[0][1].ffn.w2.weight.zero_()
    sums, n = angular.angular_sums(m, [np.arange(10) % KW["vocab_size"]], batch=1)
    labels = angular.application_labels(m.plan)
    assert [(l["kind"], l["loop"], l["layer"]) for l in labels] == [
        ("self", 0, 0), ("self", 0, 1), ("self", 1, 0), ("self", 1, 1), ("self", 2, 0), ("self", 2, 1),
        ("cross", 0, 0), ("cross", 0, 1)]
    zero = [i for i, l in enumerate(labels) if l["kind"] == "self" and l["layer"] == 1]
    d = (sums / n).tolist()
    assert all(d[i] == 0.0 for i in zero)
    assert all(d[i] > 1e-4 for i in range(len(d)) if i not in zero)


def test_held_out_windows_round_robin_and_budget() -> None:
    docs = [np.arange(10), np.arange(100, 103), np.arange(200, 225)]
    w = angular.held_out_windows(docs, 4, 19)
    assert [(d, x.tolist()) for d, x in w] == [
        (0, [0, 1, 2, 3]), (1, [100, 101, 102]), (2, [200, 201, 202, 203]),
        (0, [4, 5, 6, 7]), (2, [204, 205, 206, 207])]  # 19 tokens: the last window is whole, budget spent
    # Without a budget every token is taken except doc 2's one-token tail (windows need 2 tokens).
    assert sum(len(x) for _, x in angular.held_out_windows(docs, 4, 1000)) == 10 + 3 + 24


def test_angular_cli_writes_labelled_json(tmp_path, token_dir) -> None:
    from yocou.training.train import TrainConfig, train

    cfg = C.yocou(n_layers=2, window=4, n_loops=2, **{**KW, "vocab_size": 300})
    out = tmp_path / "models" / "yocou"
    train(cfg, TrainConfig(steps=2, batch_size=2, seq_len=16, log_every=1, ckpt_every=2), token_dir / "train.bin",
          out, progress=False)
    res_path = tmp_path / "angular" / "yocou.json"
    assert angular.main(["--model", str(out / "model.pt"), "--data", str(token_dir), "--max-tokens", "40",
                         "--seq-len", "16", "--device", "cpu", "--out", str(res_path)]) == 0
    res = json.loads(res_path.read_text())
    assert res["variant"] == "yocou" and res["seq_len"] == 16 and res["device"] == "cpu"
    assert [(a["kind"], a["loop"], a["layer"]) for a in res["applications"]] == [
        ("self", 0, 0), ("self", 1, 0), ("cross", 0, 0)]
    for split in ("book", "code"):
        s = res["splits"][split]
        assert s["n_tokens"] == 40 and len(s["distance"]) == 3
    n_b, n_c = res["splits"]["book"]["n_tokens"], res["splits"]["code"]["n_tokens"]
    for j in range(3):
        mean = (res["splits"]["book"]["distance"][j] * n_b + res["splits"]["code"]["distance"][j] * n_c) / (n_b + n_c)
        assert res["all"]["distance"][j] == pytest.approx(mean)
    assert "git_commit" in res["provenance"]
    # The summary reads it (one tidy row per split and application), the renderer the tidy table: the figure
    # and the data written.
    from yocou.results.render import fig8
    from yocou.results.summarize.training import summarize_fig8
    from yocou.results.tidy import write_tidy

    tidy = summarize_fig8({"yocou": out}, angular_root=tmp_path / "angular")
    assert len(tidy[tidy["axis"] == "application"]) == 3 * 3 and set(tidy["seed"]) == {0}
    path = write_tidy(tidy, tmp_path / "tidy" / "fig8")["json"]
    fig8.render(path, fig=tmp_path / "fig8.png", data=tmp_path / "fig8_data.csv", scale="test")
    import pandas as pd

    df = pd.read_csv(tmp_path / "fig8_data.csv")
    assert len(df) == 3 * 3 and set(df["split"]) == {"book", "code", "all"}
    assert (tmp_path / "fig8.png").stat().st_size > 1000 and (tmp_path / "fig8.pdf").is_file()


def test_fig8_marks_loop_and_stage_boundaries() -> None:
    """Upper Loop w/o shared KV, T = 2: S1 S2 | C1 C2 : C1 C2 (stage boundary after application 2,
    loop boundary after application 4); the kv applications add no point."""
    import pandas as pd

    from yocou.results.render.fig8 import boundaries

    cfg = C.upper_loop(n_layers=4, window=W, n_loops=2, shared_kv=False, **KW)
    apps = pd.DataFrame(angular.application_labels(C.expand_plan(cfg))).rename(columns={"index": "application"})
    assert len(apps) == 6
    loops, stages = boundaries(apps)
    assert loops == [4.5] and stages == [2.5]
