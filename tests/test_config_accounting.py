"""Config validation, and the analytic accounting against independent arithmetic."""

from __future__ import annotations

import pytest
import torch

from yocou.model import config as C
from yocou.model.accounting import kv_cache_bytes, train_flops_per_token
from yocou.model.lm import LM

KW = dict(vocab_size=64, d_model=32, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=64)


def test_unknown_key_names_the_field() -> None:
    with pytest.raises(ValueError, match="n_loop"):
        C.config_from_dict({**C.yoco(n_layers=2, window=4, **KW).to_dict(), "n_loop": 3})
    bad_stage = C.yoco(n_layers=2, window=4, **KW).to_dict()
    bad_stage["stages"][0]["windw"] = 3
    with pytest.raises(ValueError, match="windw"):
        C.config_from_dict(bad_stage)


def test_wrong_type_names_the_field() -> None:
    d = C.yoco(n_layers=2, window=4, **KW).to_dict()
    d["d_model"] = "32"
    with pytest.raises(TypeError, match="d_model"):
        C.config_from_dict(d)
    d = C.yoco(n_layers=2, window=4, **KW).to_dict()
    d["stages"][0]["n_loops"] = 2.5
    with pytest.raises(TypeError, match="n_loops"):
        C.config_from_dict(d)
    with pytest.raises(TypeError, match="n_layers"):
        C.Stage(kind="self", n_layers=True)


def test_invalid_values_are_named() -> None:
    with pytest.raises(ValueError, match="n_kv_heads"):
        C.transformer(n_layers=2, **{**KW, "n_kv_heads": 3})
    with pytest.raises(ValueError, match="n_layers must be even"):
        C.yoco(n_layers=3, window=4, **KW)
    with pytest.raises(ValueError, match="unknown preset"):
        C.preset("yocoo-tiny")


def test_config_round_trips_through_dict() -> None:
    cfg = C.yocou(n_layers=4, window=8, n_loops=3, **KW)
    assert C.config_from_dict(cfg.to_dict()) == cfg


def test_paper_preset_is_the_1_3b_configuration() -> None:
    cfg = C.preset("paper-1.3b")
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim) == (20, 2560, 20, 4, 128)
    assert cfg.stages[0].window == 512 and cfg.stages[0].n_loops == 3 and cfg.stages[1].kind == "cross"


# -- KV bytes: the generic plan walk against docs/design.md section 5's closed forms --
@pytest.mark.parametrize("N", [8192, 65536, 262144])
def test_kv_formulas_closed_form(N: int) -> None:
    b, L, dkv, Wn, T = 2, 20, 512, 512, 3
    Ls = L // 2
    p = {v: C.preset(f"{v}-paper-1.3b") for v in ("transformer", "rins", "yoco", "yocou", "loop", "upper_loop")}
    assert kv_cache_bytes(p["transformer"], N) == 2 * b * L * dkv * N
    assert kv_cache_bytes(p["loop"], N) == 2 * b * 2 * L * dkv * N
    assert kv_cache_bytes(p["rins"], N) == 2 * b * (T * Ls + Ls) * dkv * N
    assert kv_cache_bytes(p["yoco"], N) == 2 * b * dkv * N + 2 * b * Ls * Wn * dkv
    assert kv_cache_bytes(p["yocou"], N) == 2 * b * dkv * N + 2 * b * T * Ls * Wn * dkv
    assert kv_cache_bytes(p["upper_loop"], N) == 2 * b * dkv * N + 2 * b * Ls * Wn * dkv
    noshare = C.preset("upper_loop-paper-1.3b", shared_kv=False)
    assert kv_cache_bytes(noshare, N) == 2 * b * T * dkv * N + 2 * b * Ls * Wn * dkv


@pytest.mark.parametrize("make", [
    lambda: C.transformer(n_layers=3, **KW),
    lambda: C.yoco(n_layers=4, window=5, **KW),
    lambda: C.yocou(n_layers=4, window=5, n_loops=3, **KW),
    lambda: C.rins(n_layers=4, n_loops=2, **KW),
    lambda: C.upper_loop(n_layers=4, window=5, n_loops=2, shared_kv=False, **KW),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_measured_cache_bytes_equal_formula(make, dtype) -> None:
    cfg = make()
    m = LM(cfg)
    N, B = 13, 3
    cache = m.new_cache(B, N, dtype=dtype)
    with torch.no_grad():
        m(torch.zeros(B, N, dtype=torch.long), cache=cache, last_only=True)
    assert cache.nbytes() == kv_cache_bytes(cfg, N, batch_size=B, dtype=dtype)
    assert cache.nbytes_by_kind() == {k: v for k, v in kv_cache_bytes(cfg, N, batch_size=B, dtype=dtype,
                                                                      by_kind=True).items() if v}


def test_train_flops_match_hand_count_for_a_transformer() -> None:
    """6·(matmul params) + 3·4·d·ctx per layer, written out by hand."""
    cfg = C.transformer(n_layers=2, **KW)
    N = 10
    D, V, F, hd, kvd = 32, 64, 64, 32, 16
    per_layer = D * hd * 2 + D * kvd * 2 + 3 * D * F
    matmul = 2 * per_layer + D * V
    attn = 2 * 4 * hd * (N + 1) / 2
    assert train_flops_per_token(cfg, N) == pytest.approx(3 * (2 * matmul + attn))


def test_kv_table_cli_prints_all_24_cells_of_table10(capsys) -> None:
    """`yocou kv-table --preset paper-1.3b` against the paper's reported Table 10 (yocou/results/reported)."""
    import json

    from yocou.cli import main
    from yocou.results.reported import load_table

    assert main(["kv-table", "--preset", "paper-1.3b", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    rep = load_table(10)
    n = 0
    for r in rows:
        for seq_len, mib in r.items():
            if seq_len == "model":
                continue
            paper = rep[(rep["model"] == r["model"]) & (rep["seq_len"] == int(seq_len))]["value"]
            assert float(paper.iloc[0]) == mib, (r["model"], seq_len)
            n += 1
    assert n == 24
    assert main(["kv-table", "--preset", "paper-1.3b"]) == 0
    md = capsys.readouterr().out
    assert "| YOCO-U | 46 | 62 | 94 | 158 | 286 | 542 |" in md


def test_kv_cli_measure_equals_analytic(capsys) -> None:
    import json

    from yocou.cli import main

    assert main(["kv", "--preset", "yocou-smoke", "--seq-len", "40", "--batch", "2", "--measure"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measured_bytes"] == out["analytic_bytes"] > 0 and out["measured_equals_analytic"]


@pytest.mark.parametrize("preset", [["yocou"], {"a": 1}, 3, None])
def test_check_variant_names_a_preset_that_is_not_a_name(preset: object) -> None:
    """variants.<name>.preset of the wrong type fails naming the field (a list used to raise a bare
    'unhashable type' TypeError at planning)."""
    from yocou.workflow.variants import check_variant

    with pytest.raises(ValueError, match=r"variants\.v\.preset|variants\.v: missing key 'preset'"):
        check_variant("v", {"preset": preset})
