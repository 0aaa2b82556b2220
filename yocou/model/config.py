"""Model configuration: one frozen config type for every variant of the paper.

The architecture is data (``Stage`` tuples), never branches in ``forward``.
``expand_plan`` turns the stages into the fixed sequence of layer applications
that the model, the cache and the analytic accounting all walk.

Variants (docs/design.md section 3; paper Sections 2-4):

=========================  =====================================================
Transformer                ``(Stage("self", L),)``
YOCO                       ``(Stage("self", L/2, window=W), Stage("cross", L/2))``
YOCO-U                     ``(Stage("self", L/2, n_loops=T, window=W), Stage("cross", L/2))``
Loop / Universal TRM       ``(Stage("self", L, n_loops=T_ut),)``
RINS (A^r B)               ``(Stage("self", L/2, n_loops=r), Stage("self", L/2))``
Upper Loop                 ``(Stage("self", L/2, window=W), Stage("cross", L/2, n_loops=T))``
Upper Loop w/o shared KV   as Upper Loop with ``kv_per_loop=True``
Deep (instead of wide)     parent variant at 2L layers, smaller ``d_model``
=========================  =====================================================
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal, Mapping

from yocou.model.plan import Application as Application  # noqa: F401 (re-exported: the plan is part of a config)
from yocou.model.plan import early_exit_index as early_exit_index  # noqa: F401
from yocou.model.plan import expand_plan as expand_plan  # noqa: F401
from yocou.utils.validation import (
    Bool,
    Float,
    NonNegInt,
    PosFloat,
    PosInt,
    Str,
    config_dataclass,
    from_mapping,
)

StageKind = Literal["self", "cross"]


@config_dataclass
class Stage:
    """One stage of the layer stack.

    Attributes:
        kind: ``"self"`` (self-attention layers with their own K/V) or ``"cross"``
            (YOCO cross-decoder layers reading the one shared K̂V̂ made from the
            stage's input; YOCO paper Section 2.2).
        n_layers: number of distinct layers (weights) in the stage.
        n_loops: how many times the stage's layers are applied in a row with shared
            weights (layers 1..n, then 1..n again, ...). Paper: T.
        window: sliding-window size W in tokens for self-attention; ``None`` means
            global causal attention. Ignored for ``cross`` stages.
        kv_per_loop: cross stages only. ``False``: K̂V̂ is made once from the stage
            input and read by every loop (YOCO, Upper Loop). ``True``: K̂V̂ is
            recomputed from the hidden state entering each loop with the same
            projection weights ("Upper Loop w/o shared KV", docs/design.md section 3
            [assume]).
    """

    kind: StageKind
    n_layers: PosInt
    n_loops: PosInt = 1
    window: PosInt | None = None
    kv_per_loop: Bool = False

    def __post_init__(self) -> None:
        if self.kind == "cross" and self.window is not None:
            raise ValueError("Stage.window must be None for a 'cross' stage (cross attention is global)")
        if self.kind == "self" and self.kv_per_loop:
            raise ValueError("Stage.kv_per_loop applies to 'cross' stages only")


@config_dataclass
class ModelConfig:
    """Every hyperparameter of a model, frozen and keyword-only.

    Shapes use the field's names: ``d_model`` (D), ``n_heads`` (h),
    ``n_kv_heads`` (h_kv), ``head_dim`` (d_h), ``d_ff`` (SwiGLU inner size).

    Attributes:
        name: variant name, recorded in results (``transformer``, ``yoco``, ...).
        vocab_size: tokenizer vocabulary size V.
        d_model: hidden size D.
        n_heads: query heads h.
        n_kv_heads: key/value heads h_kv (grouped-query attention); must divide h.
        head_dim: d_h.
        d_ff: SwiGLU inner size (docs/design.md section 2: about 8/3·D rounded to 64).
        stages: the architecture, see module docstring.
        rope_theta: RoPE base (docs/design.md section 2: 10000).
        cross_rope: whether cross-decoder queries/keys get RoPE. The YOCO-U paper does not say; the
            public YOCO code rotates the cross queries; False here is a departure (docs/design.md section 3) [assume].
        norm_eps: RMSNorm epsilon [assume].
        init_std: std of the normal init of every weight matrix [assume].
        init_scaled_out: scale output projections (wo, w2) by 1/sqrt(2·applications)
            as GPT-2 does [assume].
        n_experts, top_k, d_expert, d_shared_expert: MoE SwiGLU (Table 6). ``n_experts
            = 0`` is a dense SwiGLU of size ``d_ff``.
        moe_aux_weight: weight of the load-balancing loss [assume].
    """

    name: Str = "model"
    vocab_size: PosInt
    d_model: PosInt
    n_heads: PosInt
    n_kv_heads: PosInt
    head_dim: PosInt
    d_ff: PosInt
    stages: tuple[Stage, ...]
    rope_theta: PosFloat = 10000.0
    cross_rope: Bool = False
    norm_eps: PosFloat = 1e-6
    init_std: PosFloat = 0.02
    init_scaled_out: Bool = True
    n_experts: NonNegInt = 0
    top_k: NonNegInt = 0
    d_expert: NonNegInt = 0
    d_shared_expert: NonNegInt = 0
    moe_aux_weight: Float = 0.01

    def __post_init__(self) -> None:
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"ModelConfig.n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"ModelConfig.head_dim must be even for RoPE, got {self.head_dim}")
        if not self.stages:
            raise ValueError("ModelConfig.stages must hold at least one Stage")
        if self.stages[0].kind != "self":
            raise ValueError("ModelConfig.stages[0] must be a 'self' stage (a cross stage needs an input)")
        if self.n_experts:
            if not (1 <= self.top_k <= self.n_experts):
                raise ValueError(f"ModelConfig.top_k must be in [1, n_experts={self.n_experts}], got {self.top_k}")
            if self.d_expert < 1:
                raise ValueError("ModelConfig.d_expert must be >= 1 when n_experts > 0")

    # -- derived quantities -------------------------------------------------
    @property
    def d_kv(self) -> int:
        """Width of one K (or V) row in the cache: ``n_kv_heads * head_dim``."""
        return self.n_kv_heads * self.head_dim

    @property
    def n_layers(self) -> int:
        """Distinct layers L (self + cross), as Table 7 counts them."""
        return sum(s.n_layers for s in self.stages)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON/YAML ready); inverse of :func:`config_from_dict`."""
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)


def config_from_dict(d: Mapping[str, Any]) -> ModelConfig:
    """Build a :class:`ModelConfig` from a plain mapping (e.g. YAML); its ``stages`` may be mappings.

    Raises:
        yocou.utils.validation.FieldError: not a mapping, an unknown or missing key, a wrong type or a value out
            of range, naming the field (``ModelConfig.stages[0].n_layers``).
    """
    return from_mapping(ModelConfig, d, "model config")


# ---------------------------------------------------------------------------
# Presets (docs/design.md section 3). Each returns a ModelConfig.
# ---------------------------------------------------------------------------
def swiglu_hidden(d_model: int, multiple: int = 64) -> int:
    """SwiGLU inner size: 8/3·D rounded up to a multiple (docs/design.md section 2)."""
    return int(math.ceil(8 * d_model / 3 / multiple) * multiple)


def _base(name: str, *, vocab_size: int, d_model: int, n_heads: int, n_kv_heads: int, head_dim: int | None,
          d_ff: int | None, stages: tuple[Stage, ...], **kw: Any) -> ModelConfig:
    return ModelConfig(
        name=name, vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads,
        head_dim=head_dim if head_dim is not None else d_model // n_heads,
        d_ff=d_ff if d_ff is not None else swiglu_hidden(d_model), stages=stages, **kw,
    )


def _halves(n_layers: int, what: str) -> int:
    if n_layers % 2:
        raise ValueError(f"n_layers must be even for {what} (L/2 self + L/2 cross), got {n_layers}")
    return n_layers // 2


def transformer(*, n_layers: int, **kw: Any) -> ModelConfig:
    """Transformer baseline: L full-attention layers (paper Table 3)."""
    return _base("transformer", stages=(Stage(kind="self", n_layers=n_layers),), **kw)


def loop(*, n_layers: int, n_loops: int = 2, **kw: Any) -> ModelConfig:
    """Loop / Universal Transformer: the whole stack applied ``n_loops`` times (Table 3, T_ut = 2)."""
    return _base("loop", stages=(Stage(kind="self", n_layers=n_layers, n_loops=n_loops),), **kw)


def rins(*, n_layers: int, n_loops: int = 3, **kw: Any) -> ModelConfig:
    """RINS A^r B: first L/2 layers applied r times, then last L/2 once (Table 3, r = 3)."""
    h = _halves(n_layers, "rins")
    return _base("rins", stages=(Stage(kind="self", n_layers=h, n_loops=n_loops), Stage(kind="self", n_layers=h)), **kw)


def yoco(*, n_layers: int, window: int, n_self_layers: int | None = None, **kw: Any) -> ModelConfig:
    """YOCO: L/2 SWA self-decoder layers, then L/2 cross-decoder layers over one K̂V̂.

    ``n_self_layers``: self-decoder layers other than L/2 (the cross-decoder gets the other ``n_layers -
    n_self_layers``), e.g. 9 self + 3 cross, the unshared network that YOCO-U T = 3 ties (the depth control of
    ``eval/ladder.yaml``, not a configuration of the paper).

    Raises:
        ValueError: ``n_layers`` odd (without ``n_self_layers``), or ``n_self_layers`` not in [1, n_layers - 1].
    """
    if n_self_layers is None:
        n_self = n_cross = _halves(n_layers, "yoco")
    elif isinstance(n_self_layers, bool) or not isinstance(n_self_layers, int) or not 1 <= n_self_layers < n_layers:
        raise ValueError(f"n_self_layers: expected an integer in [1, n_layers - 1 = {n_layers - 1}], got {n_self_layers!r}")
    else:
        n_self, n_cross = n_self_layers, n_layers - n_self_layers
    return _base("yoco", stages=(Stage(kind="self", n_layers=n_self, window=window),
                                 Stage(kind="cross", n_layers=n_cross)), **kw)


def yocou(*, n_layers: int, window: int, n_loops: int = 3, **kw: Any) -> ModelConfig:
    """YOCO-U: the SWA self-decoder applied T times with shared weights, then the cross-decoder (paper Sec. 2)."""
    h = _halves(n_layers, "yocou")
    return _base("yocou", stages=(Stage(kind="self", n_layers=h, n_loops=n_loops, window=window),
                                  Stage(kind="cross", n_layers=h)), **kw)


def upper_loop(*, n_layers: int, window: int, n_loops: int = 3, shared_kv: bool = True, **kw: Any) -> ModelConfig:
    """Upper Loop (Table 5): YOCO with the cross-decoder looped T times; ``shared_kv=False``
    recomputes K̂V̂ at each loop ("w/o shared KV")."""
    h = _halves(n_layers, "upper_loop")
    name = "upper_loop" if shared_kv else "upper_loop_noshare"
    return _base(name, stages=(Stage(kind="self", n_layers=h, window=window),
                               Stage(kind="cross", n_layers=h, n_loops=n_loops, kv_per_loop=not shared_kv)), **kw)


PRESETS = {
    "transformer": transformer,
    "loop": loop,
    "rins": rins,
    "yoco": yoco,
    "yocou": yocou,
    "upper_loop": upper_loop,
}

# Named sizes. Paper sizes: Table 7 (d_model, n_layers, n_heads) with head_dim 128,
# 4 KV heads, W = 512, cl100k vocabulary (docs/design.md sections 5-6; Table 10's
# configuration at 1.3b). "tiny" is the tiny scale's base shape (workflows/config/tiny.yaml sizes.base with its
# vocabulary of 2048; tests/test_budgets.py keeps them equal), "small" a larger CPU shape of the benchmarks, "smoke"
# the tests' [assume]; the pipeline's scales define their own shapes in their config's `sizes:`.
SIZES: dict[str, dict[str, Any]] = {
    # 870m has 18 heads, which 4 KV heads do not divide: 6, the nearest count that does [assume]
    **{f"paper-{k}": dict(vocab_size=100277, d_model=d, n_layers=nl, n_heads=nh, n_kv_heads=4 if nh % 4 == 0 else 6,
                          head_dim=128,
                          d_ff=swiglu_hidden(d, 128), window=512)
       for k, (d, nl, nh) in {"300m": (1536, 12, 12), "500m": (2048, 12, 16), "870m": (2304, 16, 18),
                              "1.3b": (2560, 20, 20), "3.4b": (4096, 20, 32), "6.4b": (5120, 24, 40)}.items()},
    "tiny": dict(vocab_size=2048, d_model=96, n_layers=6, n_heads=2, n_kv_heads=1, head_dim=48, d_ff=256,
                 window=64),
    "small": dict(vocab_size=8192, d_model=256, n_layers=8, n_heads=4, n_kv_heads=2, head_dim=64,
                  d_ff=swiglu_hidden(256), window=128),
    "smoke": dict(vocab_size=512, d_model=64, n_layers=4, n_heads=2, n_kv_heads=1, head_dim=32,
                  d_ff=swiglu_hidden(64), window=16),
}
# The studies' shapes at the CPU scales (Table 5's "deep", Figure 5's ladder, the MoE of Table 2) live in each
# scale config's `sizes:` (workflows/config/<scale>.yaml), not here: a new scale needs no code edit.

# Loop counts of the paper's baselines (docs/design.md section 3): YOCO-U T = 3, RINS r = 3, Loop T_ut = 2.
DEFAULT_LOOPS = {"yocou": 3, "rins": 3, "upper_loop": 3, "loop": 2}
_WINDOWED = ("yoco", "yocou", "upper_loop")


def preset(name: str, *, sizes: Mapping[str, Mapping[str, Any]] | None = None, **overrides: Any) -> ModelConfig:
    """A variant at a named size: ``"<variant>-<size>"``, e.g. ``yocou-paper-1.3b``, ``yoco-tiny``.

    ``variant`` is a key of :data:`PRESETS`; ``size`` a key of :data:`SIZES`
    (``"paper-1.3b"`` alone means YOCO-U at 1.3B, the model of Table 10).
    ``overrides`` replace any size or variant argument (``n_loops``, ``window``,
    ``shared_kv``, ``vocab_size``, ...). ``sizes``: more named sizes (a scale config's ``sizes:``), looked up
    before :data:`SIZES`.

    Raises:
        ValueError: unknown variant or size, naming the known ones.
    """
    table = {**SIZES, **(sizes or {})}
    if name in table:
        name = "yocou-" + name
    variant, _, size = name.partition("-")
    if variant not in PRESETS:
        raise ValueError(f"unknown preset {name!r}: variant {variant!r} not in {sorted(PRESETS)}")
    if size not in table:
        raise ValueError(f"unknown preset {name!r}: size {size!r} not in {sorted(table)}")
    kw = dict(table[size])
    if variant not in _WINDOWED:
        kw.pop("window")
    if variant in DEFAULT_LOOPS:
        kw["n_loops"] = DEFAULT_LOOPS[variant]
    kw.update(overrides)
    return PRESETS[variant](**kw)
