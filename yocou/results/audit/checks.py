"""Consistency checks of the paper's reported numbers that need no training.

Each check reads printed cells (and registry claims) through a :class:`~yocou.results.audit.claims.Sources`, states its
tolerance, and returns one of three results:

- ``holds``: the printed numbers agree within the stated tolerance;
- ``does not hold``: they do not;
- ``cannot be checked from what is published``: the numbers needed are not on the page (e.g. a figure's points).

Groups (docs/design.md section 8 lists the seeds of most of them). The checks that are table arithmetic are
declared rows of ``eval/checks.yaml``, expanded and decided by :mod:`yocou.results.audit.arith`; this module holds the ones
that need model formulas, the checks' types and the driver (:data:`ORDER`, the report's order):

- ``averages`` (declared): Avg. columns of Tables 2, 3, 5 against the mean of their rows;
- ``cross-table`` (declared): Table 3's YOCO row against Table 5's, Table 6 against Table 7, Table 2's caption
  against its rows;
- ``kv-formula``: the 24 cells of Table 10 against :func:`yocou.model.accounting.kv_cache_bytes` with the paper's
  1.3B configuration (docs/design.md section 5) and the global cache's independence of T; declared: the KV statements
  of the captions against Table 10's cells;
- ``throughput-vs-compute`` (declared): ratios within Tables 8 and 9 against the analytic work each variant does
  (:mod:`yocou.results.audit.complexity`);
- ``params-vs-shapes``: Table 7's size labels and Table 6's MoE against :func:`yocou.model.accounting.param_count`;
  declared: Table 7's head dimension;
- ``quoted-numbers``: declared: percentages and multiples quoted in prose against the numbers they summarise;
  here: the statements whose numbers the page does not print;
- ``complexity``: Table 1's expressions against the analytic cost model over a grid of N, L, T, W.

A check's ``covers`` lists the cells whose change must make it stop holding (tests mutate each one); its
``kind`` says how: ``equality`` (the value must match within tolerance: any large change in either direction
breaks it) or ``bound`` (an inequality: a large change in at least one direction breaks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Callable

from yocou.results.audit.claims import Sources, cell_ref

__all__ = ["HOLDS", "FAILS", "UNCHECKABLE", "RESULTS", "Check", "CheckResult", "build_checks", "run_checks",
           "run_check"]

HOLDS = "holds"
FAILS = "does not hold"
UNCHECKABLE = "cannot be checked from what is published"
RESULTS = (HOLDS, FAILS, UNCHECKABLE)

MIB = 2 ** 20
SEQ = [8192 * 2 ** k for k in range(6)]  # Tables 8-10 columns, tokens
VARIANT_OF = {"Transformer": "transformer", "YOCO": "yoco", "RINS": "rins", "YOCO-U": "yocou"}


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check. ``observed`` / ``expected`` are numbers or short strings; ``message`` explains."""

    id: str
    group: str
    kind: str
    claims: tuple[str, ...]
    covers: tuple[str, ...]
    tolerance: str
    result: str
    observed: float | str | None
    expected: float | str | None
    message: str

    def as_row(self) -> dict:
        d = dict(self.__dict__)
        d["claims"] = " ".join(self.claims)
        d["covers"] = " ".join(self.covers)
        return d


@dataclass(frozen=True)
class Check:
    """A check before evaluation: identity, what it reads, its tolerance and the function that decides.

    ``fn(src)`` returns ``(result, observed, expected, message)``. ``covers`` are the cells it reads (a large
    change of one must break it); ``judges`` the claims its result speaks for (default: ``covers``), e.g. an
    average check reads every cell of the row but judges the printed average; ``claims`` adds registry claims.
    """

    id: str
    group: str
    kind: str
    covers: tuple[str, ...]
    claims: tuple[str, ...]
    tolerance: str
    fn: Callable[[Sources], tuple[str, object, object, str]] = field(repr=False)
    judges: tuple[str, ...] | None = None

    def run(self, src: Sources) -> CheckResult:
        result, observed, expected, message = self.fn(src)
        assert result in RESULTS, (self.id, result)
        judged = self.covers if self.judges is None else self.judges
        claims = tuple(dict.fromkeys([*(c[2:] if c.startswith("C:") else c for c in judged), *self.claims]))
        return CheckResult(self.id, self.group, self.kind, claims, self.covers, self.tolerance, result,
                           _clean(observed), _clean(expected), message)


def _clean(x):
    if isinstance(x, Decimal):
        return float(x)
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _verdict(ok: bool) -> str:
    return HOLDS if ok else FAILS


def _rel(a: float, b: float) -> float:
    return abs(a / b - 1.0) if b else math.inf


# --------------------------------------------------------------------------------------------- KV formulas


def _paper_cfg(variant: str, **kw):
    from yocou.results.audit.complexity import paper_config

    return paper_config(variant, **kw)


def _kv_checks(src: Sources) -> list[Check]:
    from yocou.model.accounting import kv_cache_bytes

    out = []
    for model in src.rows(10):
        if model not in VARIANT_OF:
            continue
        for n in SEQ:
            ref = cell_ref(10, model, n)

            def fn(s: Sources, ref=ref, model=model, n=n):
                want = kv_cache_bytes(_paper_cfg(VARIANT_OF[model]), n) / MIB
                got = s.num(ref)
                return _verdict(got == want), got, want, f"{model} at N = {n}: printed {got:g} MiB, formula {want:g} MiB"

            out.append(Check(f"kv.T10.{model}.{n}", "kv-formula", "equality", (ref,), ("derived.table10_config",),
                             "exact (MiB; L=20, 4 KV heads x 128, bf16, W=512, T=3, RINS 40 applications)", fn))

    # Figure 1 / Table 1 caption / abstract: the global KV is independent of T; only windows grow with T.
    def fn_global(s: Sources):
        shared = [kv_cache_bytes(_paper_cfg("yocou", n_loops=t), 65536, by_kind=True) for t in (1, 2, 3, 5)]
        const = len({k["shared"] for k in shared}) == 1
        window = [k["window"] for k in shared]
        linear = all(w == window[0] * t for w, t in zip(window, (1, 2, 3, 5)))
        return (_verdict(const and linear), f"shared {shared[0]['shared'] / MIB:g} MiB at every T",
                "constant in T; windows proportional to T",
                f"window MiB at T = 1, 2, 3, 5: {[w / MIB for w in window]}; shared K̂V̂ slot constant: {const}")

    out.append(Check("kv.global_independent_of_T", "kv-formula", "equality", (),
                     ("fig1.global_kv_independent_of_T", "abstract.constant_global_kv",
                      "table1.caption.global_kv_ND", "table1.caption.local_kv_WTLD"),
                     "exact (bytes of the cache slots, yocou.model.accounting.kv_cache_bytes by kind)", fn_global))
    return out


# --------------------------------------------------------------------------------------------- parameters


def _t7_cfg(s: Sources, size: str, variant: str = "yoco"):
    import math as _m

    from yocou.model.config import swiglu_hidden, yoco

    d, nl, nh = s.num(cell_ref(7, size, "d_model")), s.num(cell_ref(7, size, "n_layers")), s.num(
        cell_ref(7, size, "n_heads"))
    if not all(float(x).is_integer() and x >= 1 for x in (d, nl, nh)):
        raise ValueError(f"Table 7 {size}: d_model, n_layers, n_heads must be positive integers, got {d}, {nl}, {nh}")
    d, nl, nh = int(d), int(nl), int(nh)
    return yoco(n_layers=nl, window=512, vocab_size=100277, d_model=d, n_heads=nh, n_kv_heads=_m.gcd(nh, 4),
                head_dim=128, d_ff=swiglu_hidden(d, 128))


def _label_to_params(label: str) -> float:
    units = {"M": 1e6, "B": 1e9}
    if not label or label[-1] not in units:
        raise ValueError(f"Table 7 size label {label!r}: expected a number followed by M or B")
    return float(label[:-1]) * units[label[-1]]


def _param_checks(src: Sources) -> list[Check]:
    from yocou.model.accounting import param_count

    out = []
    for size in src.rows(7):
        covers = tuple(cell_ref(7, size, c) for c in ("d_model", "n_layers", "n_heads"))

        def fn(s: Sources, size=size):
            label = _label_to_params(size)
            try:
                cfg = _t7_cfg(s, size)
            except ValueError as e:
                return FAILS, None, label, f"the printed shape does not build a model: {e}"
            body = param_count(cfg, embedding=False) - cfg.vocab_size * cfg.d_model
            return (_verdict(_rel(body, label) <= 0.05), body, label,
                    f"YOCO at D={cfg.d_model}, {cfg.n_layers} layers, {cfg.n_heads} heads x 128, SwiGLU {cfg.d_ff}: "
                    f"{body / 1e6:.0f}M parameters without embedding and LM head ({100 * (body / label - 1):+.1f}% "
                    f"of the label {size})")

        out.append(Check(f"params.T7.{size}", "params-vs-shapes", "equality", covers, ("table7.caption.section",),
                         "within 5% of the size label (non-embedding, non-head parameters; SwiGLU 8/3 D rounded to 128)",
                         fn))

    t6 = tuple(cell_ref(6, p, "value") for p in src.rows(6))

    def fn_moe(s: Sources):
        from yocou.model.config import swiglu_hidden, yoco

        v = {p: s.num(cell_ref(6, p, "value")) for p in s.rows(6)}
        claim = s.num("C:derived.moe_activated_1p3b") * 1e9
        need = ("Layers", "Hidden Size", "Expert Number", "Expert Topk", "Expert FFN Size", "Shared Expert FFN Size")
        missing = [k for k in need if k not in v]
        if missing:
            raise ValueError(f"Table 6 ({s.origin}) lacks row(s) {missing}")
        try:
            ints = {k: int(v[k]) for k in need if float(v[k]).is_integer()}
            if len(ints) != len(need):
                raise ValueError(f"Table 6 values must be integers, got {v}")
            cfg = yoco(n_layers=ints["Layers"], window=512, vocab_size=100277, d_model=ints["Hidden Size"],
                       n_heads=max(1, ints["Hidden Size"] // 128), n_kv_heads=4 if ints["Hidden Size"] // 128 % 4 == 0 else 1,
                       head_dim=128, d_ff=swiglu_hidden(ints["Hidden Size"], 128), n_experts=ints["Expert Number"],
                       top_k=ints["Expert Topk"], d_expert=ints["Expert FFN Size"],
                       d_shared_expert=ints["Shared Expert FFN Size"])
        except ValueError as e:
            return FAILS, None, claim, f"the Table 6 shapes do not build a model: {e}"
        from yocou.model.accounting import active_params_per_token

        act = active_params_per_token(cfg) - cfg.d_model * cfg.vocab_size  # without the LM head
        total = param_count(cfg, embedding=False) - cfg.d_model * cfg.vocab_size
        return (_verdict(_rel(act, claim) <= 0.05), act, claim,
                f"activated per token without embedding and LM head: {act / 1e9:.2f}B "
                f"({100 * (act / claim - 1):+.0f}% of the quoted {claim / 1e9:g}B); with the LM head "
                f"{(act + cfg.d_model * cfg.vocab_size) / 1e9:.2f}B; total {total / 1e9:.2f}B; the label fits the dense "
                "1.3B shape (Table 7), not the MoE's activated count")

    out.append(Check("params.T6.moe_activated", "params-vs-shapes", "equality", (*t6, "C:derived.moe_activated_1p3b"),
                     (), "within 5% of the quoted 1.3B activated parameters (YOCO with Table 6's MoE, 20 heads x 128)",
                     fn_moe, judges=("C:derived.moe_activated_1p3b",)))

    moe_cells = tuple(r for r in t6 if r.split(":", 1)[1].split("|")[0] not in ("Layers", "Hidden Size"))

    def fn_t6(s: Sources):
        return (UNCHECKABLE, None, None, "the page prints no parameter count for the MoE model, so the expert shapes "
                "cannot be recounted against one; they enter params.T6.moe_activated (the quoted 1.3B activated)")

    out.append(Check("params.T6.expert_shapes", "params-vs-shapes", "bound", (), (), "-", fn_t6, judges=moe_cells))

    lrs = tuple(cell_ref(7, z, "lr") for z in src.rows(7)) if "lr" in src.columns(7) else ()

    def fn_lr(s: Sources):
        return (UNCHECKABLE, None, None, "learning rates enter training only; no printed number depends on them")

    out.append(Check("params.T7.lr", "params-vs-shapes", "bound", (), (), "-", fn_lr, judges=lrs))

    def fn_same(s: Sources):
        counts = {m: param_count(_paper_cfg(v)) for m, v in VARIANT_OF.items()}
        spread = max(counts.values()) / min(counts.values()) - 1
        return (_verdict(spread <= 0.05), spread, "<= 0.05",
                "parameters at the paper's 1.3B shape: " + ", ".join(f"{m} {c / 1e9:.3f}B" for m, c in counts.items()))

    out.append(Check("params.fig7.same_params", "params-vs-shapes", "bound", (), ("fig7.same_params",),
                     "max / min - 1 <= 5% over the four variants", fn_same))
    return out


# --------------------------------------------------------------------------------------------- quoted numbers


def _unpublished_checks(src: Sources) -> list[Check]:
    """Statements whose numbers the page does not print."""
    out = []
    unpublished = {
        "fig2.loss_gap_equal_flops": "Figure 2's curves are not printed: the loss gap at equal FLOPs cannot be recomputed",
        "fig5.half_params": None,
        "fig3.n_math_benchmarks": "Figure 3's benchmark list is not on the page",
        "fig3.yocou_beats_yoco_all": "Figure 3's values are not printed",
        "table3.caption.comparable_to_rins": "the page prints no RINS or YOCO-U row in Table 3",
        "table4.caption.N_needles": "Table 4's header has no N column; S-NIAH-1/2 read as single-needle tasks "
                                    "(RULER), so the caption's N is not used by the printed table",
        "table5.caption.deep_same_size": "Deep (Instead of Wide)'s width is not printed, so its size cannot be recounted",
        "fig4.yocou_lower_ppl_than_nonrecursive": "Figure 4's curves are not printed",
        "fig4.yocou_parity_rins": "Figure 4's curves are not printed",
        "fig4.ppl_decreases_with_length": "Figure 4's curves are not printed",
        "fig6.loops": "Figure 6's values are not printed",
        "fig5.same_steps": "the number of training steps per size is not printed",
    }
    for cid, why in unpublished.items():
        if cid not in src.claims:
            continue

        def fn(s: Sources, cid=cid, why=why):
            if cid == "fig5.half_params":
                from yocou.model.accounting import param_count

                sizes = s.rows(7)
                counts = {}
                for z in sizes:
                    try:
                        c = _t7_cfg(s, z)
                        counts[z] = param_count(c, embedding=False) - c.vocab_size * c.d_model
                    except ValueError:
                        pass
                pairs = [f"{a}/{b} = {counts[a] / counts[b]:.2f}" for a in counts for b in counts
                         if counts[a] < counts[b] and abs(counts[a] / counts[b] - 0.5) <= 0.05]
                why = ("Figure 5's points are not printed; Table 7 size pairs with a parameter ratio of 0.50 +- 0.05: "
                       + (", ".join(pairs) or "none"))
            return UNCHECKABLE, None, s.text(f"C:{cid}"), why

        out.append(Check(f"unpublished.{cid}", "quoted-numbers", "bound", (), (cid,), "-", fn))
    return out


# --------------------------------------------------------------------------------------------- complexity


COMPLEXITY_BAND = 4.0


def _complexity_checks(src: Sources) -> list[Check]:
    from yocou.results.audit.complexity import TABLE1_VARIANTS

    out = []
    for model in src.rows(1):
        for q in src.columns(1):
            ref = cell_ref(1, model, q)

            def fn(s: Sources, ref=ref, model=model, q=q):
                from yocou.results.audit.complexity import complexity_band

                if model not in TABLE1_VARIANTS:
                    return UNCHECKABLE, None, None, f"no variant for Table 1 row {model!r}"
                band, where = complexity_band(model, q, s.text(ref))
                return (_verdict(band <= COMPLEXITY_BAND), band, f"<= {COMPLEXITY_BAND:g}",
                        f"analytic cost / {s.text(ref)} varies by {band:.2f}x over N 64K-4M, L 4-32, T 1-8, W 128-2048 "
                        f"at D = 2560 ({where})")

            out.append(Check(f"cx.T1.{model}.{q}", "complexity", "equality", (ref,), (),
                             f"max/min of cost / expression <= {COMPLEXITY_BAND:g} over the grid (same order in N, L, T, W)",
                             fn))
    return out


# --------------------------------------------------------------------------------------------- driver

# The report's order: a group's name stands for its declared rows (eval/checks.yaml), a function for code checks.
ORDER = ("averages", "cross-table", _kv_checks, "kv-formula", "throughput-vs-compute", _param_checks,
         "params-vs-shapes", "quoted-numbers", _unpublished_checks, _complexity_checks)


def build_checks(src: Sources, declared: str | Path | None = None) -> list[Check]:
    """Every check, built from the layout (rows, columns) of ``src``; evaluate with :meth:`Check.run`.
    ``declared``: the declared rows (default ``eval/checks.yaml``, :mod:`yocou.results.audit.arith`).

    Raises:
        ValueError: a declared row is malformed (naming the file and the row).
    """
    from yocou.results.audit.arith import declared_checks

    decl = declared_checks(src, declared)
    out: list[Check] = []
    for b in ORDER:
        out.extend(b(src) if callable(b) else [c for c in decl if c.group == b])
    ids = [c.id for c in out]
    assert len(ids) == len(set(ids)) and len(out) >= len(decl), "check ids must be unique"
    return out


def run_check(check_id: str, src: Sources, declared: str | Path | None = None) -> CheckResult:
    """Build the checks of ``src`` and run the one named ``check_id`` (KeyError naming it when unknown)."""
    for c in build_checks(src, declared):
        if c.id == check_id:
            return c.run(src)
    raise KeyError(f"no consistency check {check_id!r}")


def run_checks(src: Sources, declared: str | Path | None = None) -> list[CheckResult]:
    """Run every consistency check on ``src``; results in a stable order (by group, then as built).

    Raises:
        ValueError: a covered cell is not a number, naming the cell and the table source; a declared row is
            malformed, naming the file and the row.
    """
    return [c.run(src) for c in build_checks(src, declared)]
