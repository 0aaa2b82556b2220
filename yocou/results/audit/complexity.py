"""Analytic cost model for the audit: prefill and decode FLOPs per variant, and Table 1's expressions.

Sources: paper Table 1 (complexities), docs/design.md sections 4-5 (prefill with early exit for the YOCO family, decode
step, KV bytes), :mod:`yocou.model.accounting` (parameters, attention context, KV bytes). FLOPs count each matrix
multiply as ``2·m·n·k``; attention as ``4·h·d_h`` per (query, key) pair (scores and weighted sum).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from itertools import product
from typing import Callable

from yocou.model.accounting import attention_context, kv_cache_bytes
from yocou.model.config import Application, ModelConfig, early_exit_index, expand_plan

__all__ = ["parse_big_o", "prefill_flops", "decode_flops", "layer_flops", "paper_config", "COMPLEXITY_GRID",
           "complexity_band"]

_VARS = ("N", "L", "D", "T", "W")


def parse_big_o(expr: str) -> Callable[..., float]:
    """Turn a printed Table 1 cell such as ``$\\mathcal{O}(\\frac{L}{2}(N+WT)D)$`` into ``f(N, L, D, T, W)``.

    Supports single-letter symbols N, L, D, T, W, integers, ``+``, ``\\frac{a}{b}``, ``^{k}``, parentheses and
    implicit multiplication. Raises ValueError naming the expression when it cannot be read.
    """
    s = expr.strip().strip("$").strip()
    m = re.fullmatch(r"\\mathcal\{O\}\((.*)\)", s)
    if not m:
        raise ValueError(f"Table 1 cell {expr!r}: expected $\\mathcal{{O}}(...)$")
    body = m.group(1)
    for _ in range(8):  # nested \frac
        body = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", body)
    body = re.sub(r"\^\{([^{}]*)\}", r"^(\1)", body)
    tokens = re.findall(r"[NLDTW]|\d+|[+()/^]|\S", body)
    out: list[str] = []
    prev = ""
    for tok in tokens:
        if tok not in _VARS and not tok.isdigit() and tok not in "+()/^":
            raise ValueError(f"Table 1 cell {expr!r}: cannot read {tok!r}")
        starts_factor = tok in _VARS or tok.isdigit() or tok == "("
        ends_factor = prev in _VARS or prev.isdigit() or prev == ")"
        if starts_factor and ends_factor:
            out.append("*")
        out.append("**" if tok == "^" else tok)
        prev = tok
    code = "".join(out)
    try:
        compiled = compile(code, "<table1>", "eval")
    except SyntaxError:
        raise ValueError(f"Table 1 cell {expr!r}: cannot parse {code!r}") from None

    def f(N: float, L: float, D: float, T: float, W: float) -> float:
        return float(eval(compiled, {"__builtins__": {}}, {"N": N, "L": L, "D": D, "T": T, "W": W}))

    f.code = code  # type: ignore[attr-defined]
    return f


@lru_cache(maxsize=4096)
def _plan(cfg: ModelConfig):
    return expand_plan(cfg)


def layer_flops(cfg: ModelConfig, kind: str) -> int:
    """Matmul FLOPs per token of one application: ``self`` (Q, K, V, O, FFN), ``cross`` (Q, O, FFN), ``kv`` (K̂V̂)."""
    D, H, G, Dh = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    if cfg.n_experts:
        ffn = D * cfg.n_experts + cfg.top_k * 3 * D * cfg.d_expert + 3 * D * cfg.d_shared_expert
    else:
        ffn = 3 * D * cfg.d_ff
    if kind == "self":
        return 2 * (2 * D * H * Dh + 2 * D * G * Dh + ffn)
    if kind == "cross":
        return 2 * (2 * D * H * Dh + ffn)
    if kind == "kv":
        return 2 * (2 * D * G * Dh)
    raise ValueError(f"unknown application kind {kind!r}")


def prefill_flops(cfg: ModelConfig, n_tokens: int) -> float:
    """FLOPs to prefill a prompt of ``n_tokens`` (docs/design.md section 4).

    Applications up to the early-exit index (:func:`yocou.model.config.early_exit_index`) run on every position
    (causal attention over the mean context, window-limited for SWA); the rest (YOCO's cross-decoder) run on the
    last position only; the LM head runs once.
    """
    plan = _plan(cfg)
    ex = early_exit_index(plan)
    N = n_tokens
    f = 0.0
    for i, a in enumerate(plan):
        if i < ex:
            window = a.window if a.kind == "self" else None
            f += N * (layer_flops(cfg, a.kind) + _attention_flops(cfg, a.kind, attention_context(window, N)))
        else:
            f += _one_position_flops(cfg, a, N)
    return f + 2 * cfg.d_model * cfg.vocab_size


def _attention_flops(cfg: ModelConfig, kind: str, keys: float) -> float:
    """Attention FLOPs of one query of an application of ``kind`` over ``keys`` keys (0 for the K̂V̂ maker)."""
    return 4 * cfg.n_heads * cfg.head_dim * keys if kind in ("self", "cross") else 0.0


def _one_position_flops(cfg: ModelConfig, a: Application, n_keys: int) -> float:
    """One application at one position that follows ``n_keys`` positions' keys (its own included for prefill's
    last token): the layer, plus attention over the window (SWA) or over all of them (global, cross)."""
    keys = min(n_keys, a.window or n_keys) if a.kind == "self" else n_keys
    return layer_flops(cfg, a.kind) + _attention_flops(cfg, a.kind, keys)


def decode_flops(cfg: ModelConfig, position: int) -> float:
    """FLOPs of one decode step at ``position`` (tokens already cached): every application once, attention over
    the window (SWA) or over all cached positions (global, cross), plus the LM head."""
    f = sum(_one_position_flops(cfg, a, position) for a in _plan(cfg))
    return f + 2 * cfg.d_model * cfg.vocab_size


def paper_config(variant: str, **overrides) -> ModelConfig:
    """The paper's 1.3B shape for a variant (``yocou.model.config.preset("<variant>-paper-1.3b")``), with overrides."""
    from yocou.model.config import preset

    return preset(f"{variant}-paper-1.3b", **overrides)


# Table 1 row -> (preset variant, which Table 1 symbols it depends on). Loop/Universal Transformer loops the
# whole stack T times (docs/design.md section 3).
TABLE1_VARIANTS = {"Transformer": "transformer", "YOCO": "yoco", "Loop / Universal Transformer": "loop",
                   "YOCO-U": "yocou"}

# The asymptotic regime of Table 1's caption (W << N): N from 64K to 4M tokens, L, T, W over the ranges the
# paper and its baselines use. D is held at 2560 (paper 1.3B): per-token projections cost O(D^2), a term the
# table's expressions leave out, so D-scaling is not what they state.
COMPLEXITY_GRID = {"N": [2 ** 16, 2 ** 19, 2 ** 22], "L": [4, 12, 32], "T": [1, 2, 3, 5, 8], "W": [128, 2048]}
COMPLEXITY_D = 2560


@lru_cache(maxsize=4096)
def _grid_config(variant: str, L: int, T: int, W: int) -> ModelConfig:
    kw: dict = {"n_layers": L}
    if variant in ("yoco", "yocou"):
        kw["window"] = W
    if variant in ("yocou", "loop"):
        kw["n_loops"] = T
    return paper_config(variant, **kw)


def _cost(variant: str, quantity: str, N: int, L: int, T: int, W: int) -> float:
    cfg = _grid_config(variant, L, T, W)
    if quantity == "KV Cache Memory":
        return float(kv_cache_bytes(cfg, N))
    if quantity == "Prefilling Time":
        return prefill_flops(cfg, N)
    if quantity == "Decoding Time":
        return decode_flops(cfg, N)
    raise ValueError(f"unknown Table 1 quantity {quantity!r}")


def complexity_band(model: str, quantity: str, expression: str) -> tuple[float, str]:
    """Spread of ``cost / expression`` over :data:`COMPLEXITY_GRID` for one Table 1 cell.

    The cost is the analytic one of this module (KV bytes from :func:`yocou.model.accounting.kv_cache_bytes`,
    prefill / decode FLOPs) for the Table 1 row's variant at the paper's 1.3B width. A cell that states the
    right order in N, L, T and W keeps the ratio within a constant band; the returned value is
    ``max ratio / min ratio`` (1.0 = exact up to a constant) and a note of where the extremes are.

    Raises:
        ValueError: unknown model or quantity, or an unreadable expression.
    """
    if model not in TABLE1_VARIANTS:
        raise ValueError(f"Table 1 row {model!r} has no variant (known: {sorted(TABLE1_VARIANTS)})")
    f = parse_big_o(expression)
    variant = TABLE1_VARIANTS[model]
    loops = variant in ("yocou", "loop")
    costs: dict[tuple, float] = {}
    ratios = []
    g = COMPLEXITY_GRID
    for N, L, T, W in product(g["N"], g["L"], g["T"], g["W"]):
        # a variant without loops costs the same at every T: its expression must not grow with T either
        key = (N, L, T if loops else 1, W)
        if key not in costs:
            costs[key] = _cost(variant, quantity, *key)
        ratios.append((costs[key] / f(N=N, L=L, D=COMPLEXITY_D, T=T, W=W), (N, L, T, W)))
    lo = min(ratios, key=lambda r: r[0])
    hi = max(ratios, key=lambda r: r[0])
    if not (lo[0] > 0 and math.isfinite(hi[0])):
        return math.inf, "ratio not positive and finite"
    return hi[0] / lo[0], f"min at (N, L, T, W) = {lo[1]}, max at {hi[1]}"
