"""Reproduced verdicts: our measured values beside the paper's, for every claim our runs can test at a scale.

Inputs are the result files of the pipeline under ``results/<scale>/`` (the render outputs of
``reproduce_all``); a file that is absent gives the verdict ``inconclusive`` with qualifier
``not run at this scale``. Paper values come from :class:`yocou.audit.claims.Sources` (the reported tables and
the registry), never from our files.

Verdicts (never stronger than the evidence):

- ``same direction and size``: our effect has the paper's sign and is within a factor of 2 of it (on the scale
  named in the message: difference, log-ratio or exponent), and the evidence allows a size comparison
  (deterministic quantities, timings with repeats, or several seeds);
- ``same direction``: same sign, beyond the noise we can estimate, but the size differs or cannot be compared
  (different model shapes, hardware, a single training seed);
- ``opposite``: the other sign, beyond the noise we can estimate;
- ``inconclusive``: not run at this scale, within 2 standard errors, at the floor (e.g. accuracy 0 for both), a
  training-dependent effect with one seed and no spread estimate, or any effect at the smoke scale (which checks
  the plumbing, not the paper).

Evidence kinds: ``deterministic`` (bytes of a real cache, analytic counts), ``timing`` (median of repeats; the
spread over repeats is the noise), ``eval`` (benchmark items with standard errors from lm-eval; one training
seed unless the files carry a ``seed`` column), ``training`` (training-dependent values without any spread).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .claims import Sources, cell_ref

__all__ = ["SAME_SIZE", "SAME", "OPPOSITE", "INCONCLUSIVE", "VERDICTS", "Verdict", "decide", "reproduce"]

SAME_SIZE = "same direction and size"
SAME = "same direction"
OPPOSITE = "opposite"
INCONCLUSIVE = "inconclusive"
VERDICTS = (SAME_SIZE, SAME, OPPOSITE, INCONCLUSIVE)
NOT_RUN = "not run at this scale"

SEQ = [8192 * 2 ** k for k in range(6)]
LABEL = {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS", "yocou": "YOCO-U", "loop": "Loop/Universal TRM"}


@dataclass(frozen=True)
class Verdict:
    """One reproduced comparison: the paper's effect, ours, the noise we could estimate, and the verdict."""

    id: str
    claims: tuple[str, ...]
    comparison: str
    paper: str
    ours: str
    spread: str
    n_seeds: int | None
    evidence: str
    verdict: str
    qualifier: str
    message: str
    files: tuple[str, ...]

    def as_row(self) -> dict:
        d = dict(self.__dict__)
        d["claims"] = " ".join(self.claims)
        d["files"] = " ".join(self.files)
        return d


def decide(paper: float, ours: float | None, *, evidence: str, se: float | None = None,
           size_comparable: bool = True, n_seeds: int | None = 1, scale: str = "",
           floor: bool = False) -> tuple[str, str]:
    """The verdict and its qualifier for one effect (signed: positive = the paper's claimed direction when
    ``paper > 0``).

    Args:
        paper: the paper's effect (its sign is the claimed direction; 0 is not allowed).
        ours: our effect on the same scale, or None when not measured.
        evidence: ``deterministic``, ``timing``, ``eval`` or ``training`` (see the module docstring).
        se: standard error of ``ours`` (eval: items; timing: half the range over repeats), if known.
        size_comparable: whether the two effects are on a comparable footing (same shapes / scale-free ratio).
        n_seeds: training seeds behind ``ours`` (None for measurements that do not depend on training).
        scale: the scale name; at ``smoke`` every non-deterministic verdict is capped at inconclusive.
        floor: both values at a floor or ceiling (e.g. 0 accuracy), which makes the comparison empty.

    Raises:
        ValueError: ``paper`` is 0 or not finite, or ``evidence`` is unknown.
    """
    if evidence not in ("deterministic", "timing", "eval", "training"):
        raise ValueError(f"unknown evidence kind {evidence!r}")
    if not (paper and math.isfinite(paper)):
        raise ValueError(f"paper effect must be a non-zero finite number, got {paper!r}")
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):  # +-inf keeps its sign (never reached)
        return INCONCLUSIVE, NOT_RUN
    seeds = n_seeds or 0
    direction = SAME if (ours > 0) == (paper > 0) and ours != 0 else OPPOSITE
    observed = f"observed: {direction if ours != 0 else 'no difference'}"
    if floor:
        return INCONCLUSIVE, "at the floor for both (no signal)"
    if evidence == "training" and seeds < 2:
        return INCONCLUSIVE, f"one seed, no spread ({observed})"
    if se is not None and abs(ours) <= 2 * se:
        return INCONCLUSIVE, f"within 2 standard errors ({observed})"
    if ours == 0:
        return INCONCLUSIVE, "no difference"
    if scale == "smoke" and evidence != "deterministic":
        return INCONCLUSIVE, f"smoke scale checks the plumbing, not the paper ({observed})"
    quals = []
    if evidence in ("eval", "training") and seeds < 2:
        quals.append("one seed")
    if evidence == "timing" and se is None:
        quals.append("no repeat spread")
    if direction == SAME:
        ratio = ours / paper
        strong = evidence in ("deterministic", "timing") or seeds >= 2
        if size_comparable and strong and 0.5 <= ratio <= 2.0:
            return SAME_SIZE, "; ".join(quals)
        if not size_comparable:
            quals.append("size not comparable across scales")
        elif not strong:
            quals.append("size not judged with one seed")
        else:
            quals.append(f"size differs ({ratio:.2f}x the paper's)")
        return SAME, "; ".join(quals)
    return OPPOSITE, "; ".join(quals)


# --------------------------------------------------------------------------------------------- file helpers


class _Results:
    """Reads result files of one scale, remembering which were used."""

    def __init__(self, results_dir: Path, scale: str):
        self.dir = Path(results_dir)
        self.scale = scale

    def path(self, name: str) -> Path:
        return self.dir / name

    def csv(self, name: str, required: Iterable[str] = ()) -> pd.DataFrame | None:
        """The CSV, or None if absent. Raises ValueError naming the file and the missing columns."""
        p = self.path(name)
        if not p.is_file():
            return None
        try:
            df = pd.read_csv(p)
        except Exception as e:  # noqa: BLE001 - re-raised with the file's name
            raise ValueError(f"{p}: cannot read as CSV: {e}") from None
        missing = [c for c in required if c not in df.columns]
        if missing:
            raise ValueError(f"{p}: missing column(s) {missing}; has {list(df.columns)}")
        return df

    def profile(self) -> dict | None:
        """``profile.json`` checked by :func:`yocou.readers.read_profile` (``{"rows", "provenance"}``), or None
        if absent."""
        from ..readers import read_profile

        p = self.path("profile.json")
        if not p.is_file():
            return None
        rows, prov = read_profile(p)
        return {"rows": rows, "provenance": prov}

    def json(self, name: str) -> Any | None:
        p = self.path(name)
        if not p.is_file():
            return None
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: not valid JSON: {e}") from None


def _fmt(x: float | None, nd: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{nd}g}" if abs(x) >= 1000 or abs(x) < 0.01 else f"{x:.{nd}f}".rstrip("0").rstrip(".")


def _n_seeds(df: pd.DataFrame | None) -> int:
    if df is None or "seed" not in df.columns:
        return 1
    return max(1, int(df["seed"].nunique()))


def _not_run(vid: str, claims: Iterable[str], comparison: str, paper: str, files: Iterable[str],
             evidence: str, why: str | None = None, qualifier: str = NOT_RUN) -> Verdict:
    """An inconclusive verdict for data we do not have: ``why`` says what is missing (default: the files)."""
    files = tuple(files)
    return Verdict(vid, tuple(claims), comparison, paper, "-", "-", None, evidence, INCONCLUSIVE, qualifier,
                   why or f"{', '.join(files)} not found", files)


def _ours_ratio_by_length(df: pd.DataFrame | None, name: str, fname: str) -> tuple[pd.Series | None, str | None]:
    """Our row ``name`` (e.g. ``"YOCO-U / YOCO"``) of a rendered ratio table (columns ``ratio``, ``source``,
    one per length, ``mean``) as floats by length, missing lengths dropped; or ``(None, why)``, ``why`` None
    when the file itself is missing (:func:`_not_run`'s default message)."""
    if df is None:
        return None, None
    row = df[(df["ratio"] == name) & df["source"].str.startswith("ours")]
    if row.empty:
        return None, f"no row {name!r} in {fname}"
    lens = [c for c in row.columns if c not in ("ratio", "source", "mean")]
    return row.iloc[0][lens].astype(float).dropna(), None


# --------------------------------------------------------------------------------------------- KV (Table 10)


def _kv_verdicts(src: Sources, R: _Results) -> list[Verdict]:
    out = []
    f_meas, f_rat = "table10_measured.csv", "table10_ratios.csv"
    meas = R.csv(f_meas, ["variant", "seq_len", "measured_bytes", "analytic_bytes"])
    t10 = tuple(src.refs(10))
    claims = (*t10, "fig1.global_kv_independent_of_T", "table1.caption.global_kv_ND", "table1.caption.local_kv_WTLD",
              "abstract.constant_global_kv")
    comp = "KV bytes of a real cache after prefill against the SPEC section 5 formulas that give Table 10's 24 cells"
    if meas is None:
        out.append(_not_run("v.kv.formula", claims, comp, "24/24 cells = formula", [f_meas], "deterministic"))
    else:
        eq = (meas["measured_bytes"] == meas["analytic_bytes"])
        n_ok, n = int(eq.sum()), len(eq)
        verdict = SAME_SIZE if n and n_ok == n else OPPOSITE
        out.append(Verdict("v.kv.formula", claims, comp, "24 of 24 cells equal the formula", f"{n_ok} of {n} measured = formula",
                           "exact", None, "deterministic", verdict, f"measured at {R.scale} shapes",
                           "the formula that reproduces Table 10 at 1.3B is what our cache holds at every (variant, N) "
                           "measured" if verdict == SAME_SIZE else "measured cache bytes differ from the formula",
                           (f_meas,)))

    rat = R.csv(f_rat, ["ratio", "source"])
    specs = [
        ("v.kv.rins_over_transformer", "RINS / Transformer", ("derived.table10_config",), math.log, True,
         "KV bytes, RINS over Transformer (log-ratio)"),
        ("v.kv.yocou_over_yoco", "YOCO-U / YOCO", ("fig2.kv_overhead_negligible", "fig7.kv_curves_overlap",
                                                    "table2.caption.negligible_kv", "table1.caption.negligible_for_long"),
         lambda r: r - 1, False, "KV overhead of YOCO-U over YOCO at the longest length (ratio - 1)"),
        ("v.kv.yoco_over_transformer", "YOCO / Transformer", ("abstract.constant_global_kv",), math.log, False,
         "KV bytes, YOCO over Transformer at the longest length (log-ratio)"),
    ]
    for vid, name, extra, tf, comparable, comp in specs:
        a, b = [VAR for VAR in name.split(" / ")]
        cells = tuple(cell_ref(10, m, n) for m in (a, b) for n in SEQ)
        paper_r = src.num(cell_ref(10, a, SEQ[-1])) / src.num(cell_ref(10, b, SEQ[-1]))
        vals, why = _ours_ratio_by_length(rat, name, f_rat)
        if vals is None:
            out.append(_not_run(vid, (*cells, *extra), comp, f"{paper_r:.3f} at 256K", [f_rat], "deterministic", why))
            continue
        ours_r, at = float(vals.iloc[-1]), vals.index[-1]
        shrink = ""
        if vid == "v.kv.yocou_over_yoco":
            shrink = f"; ours falls from {vals.iloc[0]:.3f} at {vals.index[0]} (the paper: 1.769 at 8K)"
        verdict, qual = decide(tf(paper_r), tf(ours_r), evidence="deterministic", size_comparable=comparable,
                               n_seeds=None, scale=R.scale)
        out.append(Verdict(vid, (*cells, *extra), comp, f"{paper_r:.3f} at 256K", f"{ours_r:.3f} at {at}", "exact",
                           None, "deterministic", verdict, qual,
                           f"{name}: paper {paper_r:.3f} at 256K, ours {ours_r:.3f} at {at}{shrink}", (f_rat,)))
    return out


# --------------------------------------------------------------------------------------------- timing (Tables 8, 9; Table 1)


def _repeat_ratios(profile: dict | None, a: str, b: str, key: str) -> dict[int, tuple[float, float]]:
    """Per N: (min, max) over repeats of throughput(a) / throughput(b), from ``profile.json`` repeats."""
    if not profile or "rows" not in profile:
        return {}
    rows = {(r.get("variant"), r.get("seq_len")): r for r in profile["rows"]}
    out = {}
    for (v, n), r in rows.items():
        if v != a or (b, n) not in rows:
            continue
        ra, rb = r.get("repeats") or [], rows[(b, n)].get("repeats") or []
        tok = {"prefill": lambda x, r: r["prompt_len"] / x["prefill_s"],
               "decode": lambda x, r: r["n_decode"] / x["decode_s"]}[key]
        ta = [tok(x, r) for x in ra]  # fields checked by read_profile: positive seconds and lengths
        tb = [tok(x, rows[(b, n)]) for x in rb]
        if ta and tb:
            q = [x / y for x in ta for y in tb]
            out[int(n)] = (min(q), max(q))
    return out


def _timing_verdicts(src: Sources, R: _Results) -> list[Verdict]:
    out = []
    prof = R.profile()
    for table, key, fname in ((8, "prefill", "table8.csv"), (9, "decode", "table9.csv")):
        df = R.csv(fname, ["ratio", "source"])
        specs = [("RINS / Transformer", True, ("derived.prefill_rins_half",) if table == 8 else ()),
                 ("YOCO-U / YOCO", table == 8, ("derived.prefill_yocou_third",) if table == 8 else
                  ("derived.decode_yocou_yoco_8k", "derived.decode_yocou_yoco_256k", "fig7.competitive_throughput")),
                 ("YOCO / Transformer", False, ()),
                 ("YOCO-U / Transformer", False, (("derived.prefill_10x_transformer", "fig7.competitive_throughput")
                                                 if table == 8 else ("fig7.competitive_throughput",)))]
        for name, comparable, extra in specs:
            a, b = name.split(" / ")
            vid = f"v.T{table}.{a}_over_{b}"
            cells = tuple(cell_ref(table, m, n) for m in (a, b) for n in SEQ)
            paper = [src.num(cell_ref(table, a, n)) / src.num(cell_ref(table, b, n)) for n in SEQ]
            p_mean = sum(paper) / len(paper)
            comp = (f"{key} tokens/s, {a} over {b} (log of the ratio; mean over lengths when the ratio is a scale-free "
                    "compute ratio, else at the longest length)")
            vals, why = _ours_ratio_by_length(df, name, fname)
            if vals is None:
                out.append(_not_run(vid, (*cells, *extra), comp, f"{p_mean:.3f} mean", [fname], "timing", why))
                continue
            spread_by_n = _repeat_ratios(prof, _variant(a), _variant(b), key)
            if comparable:
                ours = float(vals.mean())
                p_eff, o_eff = math.log(p_mean), math.log(ours)
                lo = [spread_by_n[n][0] for n in spread_by_n]
                hi = [spread_by_n[n][1] for n in spread_by_n]
                se = ((math.log(sum(hi) / len(hi)) - math.log(sum(lo) / len(lo))) / 2) if lo else None
                spread = f"{sum(lo) / len(lo):.3f}-{sum(hi) / len(hi):.3f} over repeats" if lo else "-"
                paper_s, ours_s = f"{p_mean:.3f} (mean, 8K-256K)", f"{ours:.3f} (mean, {vals.index[0]}-{vals.index[-1]})"
                # the effect is the log-ratio; its sign says which is faster
                verdict, qual = decide(p_eff, o_eff, evidence="timing", se=se, size_comparable=True, n_seeds=None,
                                       scale=R.scale)
            else:
                ours = float(vals.iloc[-1])
                nmax = _len_tokens(vals.index[-1])
                p_eff, o_eff = math.log(paper[-1]), math.log(ours)
                sp = spread_by_n.get(nmax)
                se = (math.log(sp[1]) - math.log(sp[0])) / 2 if sp else None
                spread = f"{sp[0]:.3f}-{sp[1]:.3f} over repeats" if sp else "-"
                paper_s, ours_s = f"{paper[-1]:.3f} at 256K", f"{ours:.3f} at {vals.index[-1]}"
                verdict, qual = decide(p_eff, o_eff, evidence="timing", se=se, size_comparable=False, n_seeds=None,
                                       scale=R.scale)
            trend = ""
            if name == "YOCO-U / YOCO" and table == 9:
                rising = all(y >= x - 0.02 for x, y in zip(vals, vals.iloc[1:]))
                trend = (f"; ours {'rises' if rising else 'does not rise steadily'} with N "
                         f"({' '.join(f'{v:.2f}' for v in vals)}), the paper's rises 0.72 -> 0.95")
            out.append(Verdict(vid, (*cells, *extra), comp, paper_s, ours_s, spread, None, "timing", verdict, qual,
                               f"{name} {key}: paper (GPU, 1.3B) {paper_s}; ours (CPU, {R.scale}) {ours_s}{trend}",
                               (fname, "profile.json") if prof else (fname,)))
    # "20x prefill": YOCO-U over RINS, from our absolute tokens/s (table8.csv has no such ratio row)
    fname = "table8_ours.csv"
    vid, claims = "v.T8.YOCO-U_over_RINS", ("derived.prefill_20x_rins", "table3.caption.lower_kv_than_rins")
    paper = src.num(cell_ref(8, "YOCO-U", SEQ[-1])) / src.num(cell_ref(8, "RINS", SEQ[-1]))
    comp = "prefill tokens/s, YOCO-U over RINS at the longest length (log of the ratio)"
    ours_tab = R.csv(fname, ["model"])
    rows = {} if ours_tab is None else {str(r["model"]): r for _, r in ours_tab.iterrows()}
    if ours_tab is None or not {"YOCO-U", "RINS"} <= set(rows):
        out.append(_not_run(vid, claims, comp, f"{paper:.2f} at 256K", [fname], "timing"))
    else:
        lens = [c for c in ours_tab.columns if c != "model"]
        at = lens[-1]
        ours = float(rows["YOCO-U"][at]) / float(rows["RINS"][at])
        sp = _repeat_ratios(prof, "yocou", "rins", "prefill").get(_len_tokens(at))
        se = (math.log(sp[1]) - math.log(sp[0])) / 2 if sp else None
        verdict, qual = decide(math.log(paper), math.log(ours), evidence="timing", se=se, size_comparable=False,
                               n_seeds=None, scale=R.scale)
        out.append(Verdict(vid, claims, comp, f"{paper:.2f} at 256K", f"{ours:.2f} at {at}",
                           f"{sp[0]:.2f}-{sp[1]:.2f} over repeats" if sp else "-", None, "timing", verdict, qual,
                           f"YOCO-U / RINS prefill: paper (GPU, 1.3B) {paper:.2f} at 256K; ours (CPU, {R.scale}) "
                           f"{ours:.2f} at {at}", (fname, "profile.json") if prof else (fname,)))
    out.extend(_table1_verdicts(src, R, prof))
    return out


def _variant(label: str) -> str:
    return {v: k for k, v in LABEL.items()}.get(label, label.lower())


def _len_tokens(name: str) -> int:
    m = re.fullmatch(r"(\d+)K", str(name))
    return int(m.group(1)) * 1024 if m else int(name)


def _fit_slope(xs: list[float], ys: list[float]) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((x - mx) ** 2 for x in lx)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / den if den else math.nan


def _table1_verdicts(src: Sources, R: _Results, prof: dict | None) -> list[Verdict]:
    fname = "table1.csv"
    df = R.csv(fname, ["model", "fitted_prefill_exponent", "fitted_kv_exponent", "fitted_decode_exponent"])
    meta = R.json("table1.json") or {}
    m = re.search(r"between (\d+) and (\d+) tokens", str(meta.get("title", "")))
    lo, hi = (int(m.group(1)), int(m.group(2))) if m else (0, 1 << 60)
    rows = {"Transformer": ("Transformer", 2.0), "YOCO": ("YOCO", 1.0), "RINS": ("Loop / Universal Transformer", 2.0),
            "YOCO-U": ("YOCO-U", 1.0)}
    out = []
    for model, (t1row, p_exp) in rows.items():
        claims = (cell_ref(1, t1row, "Prefilling Time"),) + (("abstract.linear_prefill",) if p_exp == 1 else ())
        vid = f"v.T1.prefill.{model}"
        comp = ("growth exponent of prefill time in N (the effect is exponent - 1.5: above = superlinear, "
                "below = linear)")
        if df is None:
            out.append(_not_run(vid, claims, comp, f"{p_exp:g}", [fname], "timing"))
            continue
        r = df[df["model"] == model]
        if r.empty:
            out.append(_not_run(vid, claims, comp, f"{p_exp:g}", [fname], "timing", f"no row {model!r} in {fname}"))
            continue
        col = "fitted_prefill_exponent_cpu_s" if "fitted_prefill_exponent_cpu_s" in r.columns else "fitted_prefill_exponent"
        ours = float(r.iloc[0][col])
        # spread: the same fit on each repeat's wall seconds
        slopes = []
        if prof and "rows" in prof:
            pr = sorted((x for x in prof["rows"] if x.get("variant") == _variant(model) and lo <= x["seq_len"] <= hi),
                        key=lambda x: x["seq_len"])
            k = min((len(x.get("repeats") or []) for x in pr), default=0)
            if len(pr) >= 2:
                for i in range(k):
                    try:
                        slopes.append(_fit_slope([x["seq_len"] for x in pr], [x["repeats"][i]["prefill_s"] for x in pr]))
                    except (ValueError, ZeroDivisionError):
                        pass
        se = (max(slopes) - min(slopes)) / 2 if len(slopes) >= 2 else None
        # direction: superlinear (exponent > 1.5) vs linear; size: within 0.25 of the asymptotic exponent
        eff_p, eff_o = p_exp - 1.5, ours - 1.5
        verdict, qual = decide(eff_p, eff_o, evidence="timing", se=se, size_comparable=False, n_seeds=None,
                               scale=R.scale)
        if verdict == SAME and abs(ours - p_exp) <= 0.25:
            verdict = SAME_SIZE
            qual = "; ".join(q for q in qual.split("; ") if q and not q.startswith("size not comparable"))
        out.append(Verdict(vid, claims, comp, f"{p_exp:g} ({src.text(claims[0])})", f"{ours:.2f} ({col}, N {lo}-{hi})",
                           f"{min(slopes):.2f}-{max(slopes):.2f} over repeats" if slopes else "-", None, "timing",
                           verdict, qual, f"{model}: fitted prefill exponent {ours:.2f} against Table 1's {p_exp:g}",
                           (fname, "profile.json") if prof else (fname,)))
    # KV exponent: bytes are exact; Transformer and RINS must be linear in N with no fixed part
    for model, t1row in (("Transformer", "Transformer"), ("RINS", "Loop / Universal Transformer")):
        vid = f"v.T1.kv.{model}"
        claims = (cell_ref(1, t1row, "KV Cache Memory"),)
        comp = "growth exponent of KV bytes in N (log of the exponent)"
        if df is None or df[df["model"] == model].empty:
            out.append(_not_run(vid, claims, comp, "1", [fname], "deterministic"))
            continue
        ours = float(df[df["model"] == model].iloc[0]["fitted_kv_exponent"])
        verdict = SAME_SIZE if abs(ours - 1) <= 0.01 else (SAME if ours > 0.5 else OPPOSITE)
        out.append(Verdict(vid, claims, comp, "1", f"{ours:.3f}", "exact", None, "deterministic", verdict, "",
                           f"{model}: KV bytes grow as N^{ours:.3f}", (fname,)))
    return out


# --------------------------------------------------------------------------------------------- downstream (Tables 2-5)


def _cells(R: _Results, fname: str) -> pd.DataFrame | None:
    return R.csv(fname, ["variant", "column", "value", "stderr", "status"])


def _cell(df: pd.DataFrame, variant: str, column: str) -> tuple[float | None, float | None, int]:
    r = df[(df["variant"] == variant) & (df["column"] == column)]
    if r.empty:
        return None, None, 0
    seeds = _n_seeds(r)
    v = pd.to_numeric(r["value"], errors="coerce")
    se = pd.to_numeric(r["stderr"], errors="coerce")
    if v.isna().all():
        return None, None, seeds
    if seeds > 1:
        vals = v.dropna()
        return float(vals.mean()), float(vals.std(ddof=1) / math.sqrt(len(vals))), seeds
    return float(v.iloc[0]), (None if pd.isna(se.iloc[0]) else float(se.iloc[0])), seeds


def _avg_se(df: pd.DataFrame, variant: str, columns: list[str]) -> float | None:
    ses = [_cell(df, variant, c)[1] for c in columns]
    ses = [s for s in ses if s is not None]
    return math.sqrt(sum(s * s for s in ses)) / len(ses) if ses else None


def _downstream_verdicts(src: Sources, R: _Results) -> list[Verdict]:
    out: list[Verdict] = []
    acc_cols = ["LMB. acc", "PIQA", "OBQA", "Hella.", "Wino.", "ARC-E", "ARC-C"]

    def one(table: int, fname: str, df: pd.DataFrame | None, paper_a: str, paper_b: str, ours_a: str | None,
            ours_b: str | None, column: str, extra: tuple = (), note: str = "") -> Verdict:
        ppl = column.endswith("ppl")
        pa, pb = src.num(cell_ref(table, paper_a, column)), src.num(cell_ref(table, paper_b, column))
        # effect: improvement of a over b (accuracy points; for perplexity, relative decrease)
        p_eff = (pb - pa) / pb if ppl else pa - pb
        vid = f"v.T{table}.{paper_a}_vs_{paper_b}.{column}"
        claims = (cell_ref(table, paper_a, column), cell_ref(table, paper_b, column), *extra)
        comp = (f"{paper_a} against {paper_b} on {column} "
                + ("(relative perplexity decrease)" if ppl else "(difference in points)"))
        paper_s = f"{pa:g} vs {pb:g} ({'+' if p_eff >= 0 else ''}{p_eff * 100 if ppl else p_eff:.2f}{'%' if ppl else ''})"
        if df is None or ours_a is None or ours_b is None:
            if df is not None:
                return Verdict(vid, claims, comp, paper_s, "-", "-", None, "eval", INCONCLUSIVE, NOT_RUN,
                               f"{fname} has no run for {paper_a if ours_a is None else paper_b}{note}", (fname,))
            return _not_run(vid, claims, comp, paper_s, [fname], "eval")
        if p_eff == 0:
            return Verdict(vid, claims, comp, paper_s, "-", "-", None, "eval", INCONCLUSIVE,
                           "the paper shows no difference", "no direction to reproduce", (fname,))
        if column in ("Avg.", "Average"):
            a, _, seeds = _cell(df, ours_a, column)
            b, _, _ = _cell(df, ours_b, column)
            cols = acc_cols if column == "Avg." else [c for c in src.columns(table) if c != column]
            sa, sb = _avg_se(df, ours_a, cols), _avg_se(df, ours_b, cols)
        else:
            a, sa, seeds = _cell(df, ours_a, column)
            b, sb, _ = _cell(df, ours_b, column)
        if a is None or b is None:
            return _not_run(vid, claims, comp, paper_s, [fname], "eval",
                            f"{column} not measured for {ours_a} or {ours_b} in {fname}")
        o_eff = (b - a) / b if ppl and b else a - b
        se = None
        if sa is not None and sb is not None:
            se = math.sqrt(sa * sa + sb * sb) / (b if ppl and b else 1)
        evidence = "eval" if se is not None else "training"
        floor = (not ppl) and a == 0 and b == 0
        verdict, qual = decide(p_eff, o_eff, evidence=evidence, se=se, size_comparable=(not ppl), n_seeds=seeds,
                               scale=R.scale, floor=floor)
        ours_s = f"{a:.4g} vs {b:.4g} ({'+' if o_eff >= 0 else ''}{o_eff * 100 if ppl else o_eff:.2f}{'%' if ppl else ''})"
        spread = f"±{(se * 100 if ppl else se):.2f}{'%' if ppl else ''} (1 se of the difference)" if se is not None else "-"
        return Verdict(vid, claims, comp, paper_s, ours_s, spread, seeds, evidence, verdict, qual,
                       f"{LABEL.get(ours_a, ours_a)} vs {LABEL.get(ours_b, ours_b)} ({R.scale}){note}", (fname,))

    # Table 3: YOCO vs Transformer, Loop vs Transformer; Table 5: YOCO-U vs YOCO (and Deep vs YOCO if run).
    t3 = _cells(R, "table3_cells.csv")
    t5 = _cells(R, "table5_cells.csv")
    names3 = set(t3["variant"]) if t3 is not None else set()
    names5 = set(t5["variant"]) if t5 is not None else set()
    for col in src.columns(3):
        out.append(one(3, "table3_cells.csv", t3, "YOCO", "Transformer", "yoco" if "yoco" in names3 else None,
                       "transformer" if "transformer" in names3 else None, col))
        loop = next((v for v in sorted(names3) if v.startswith("loop")), None)
        out.append(one(3, "table3_cells.csv", t3, "Loop/Universal TRM", "Transformer", loop,
                       "transformer" if "transformer" in names3 else None, col))
    for col in src.columns(5):
        out.append(one(5, "table5_cells.csv", t5, "YOCO-U", "YOCO", "yocou" if "yocou" in names5 else None,
                       "yoco" if "yoco" in names5 else None, col))
        deep = next((v for v in sorted(names5) if "deep" in v and "yocou" not in v), None)
        out.append(one(5, "table5_cells.csv", t5, "Deep (Instead of Wide)", "YOCO", deep,
                       "yoco" if "yoco" in names5 else None, col))

    # Table 3 caption: YOCO-U comparable to RINS (the page prints neither row): parity on the accuracy average.
    vid, cid = "v.T3.yocou_parity_rins", "table3.caption.comparable_to_rins"
    comp = "YOCO-U against RINS on the Avg. of the 7 accuracy columns (the paper: comparable; rows not printed)"
    if t3 is None or not {"yocou", "rins"} <= names3:
        out.append(_not_run(vid, (cid,), comp, "comparable", ["table3_cells.csv"], "eval"))
    else:
        a, _, seeds = _cell(t3, "yocou", "Avg.")
        b, _, _ = _cell(t3, "rins", "Avg.")
        sa, sb = _avg_se(t3, "yocou", acc_cols), _avg_se(t3, "rins", acc_cols)
        se = math.hypot(sa, sb) if sa is not None and sb is not None else None
        within = se is not None and a is not None and b is not None and abs(a - b) <= 2 * se
        out.append(Verdict(vid, (cid,), comp, "comparable", "-" if a is None or b is None else f"{a:.2f} vs {b:.2f}",
                           "-" if se is None else f"±{se:.2f} (1 se of the difference)", seeds, "eval", INCONCLUSIVE,
                           "parity cannot be shown by a non-significant difference"
                           + ("" if seeds > 1 else "; one seed"),
                           f"difference {'within' if within else 'beyond'} 2 standard errors ({R.scale})",
                           ("table3_cells.csv",)))

    # Table 2: the MoE budgets; our variants are resolved by name (dense YOCO / YOCO-U stand in when no MoE run).
    t2 = _cells(R, "table2_cells.csv")
    names2 = sorted(set(t2["variant"])) if t2 is not None else []
    moe = [v for v in names2 if "moe" in v]
    pool = moe or names2
    base = next((v for v in pool if "yoco" in v and "yocou" not in v), None)
    eq_flops = next((v for v in pool if "yocou" in v and "flop" in v), None)
    eq_steps = next((v for v in pool if "yocou" in v and "step" in v), None) or next(
        (v for v in pool if "yocou" in v and "flop" not in v and "deep" not in v), None)
    note = "" if moe else " (dense models stand in for the MoE of Table 2)"
    for col in src.columns(2):
        extra = ("table2.caption.consistent_gains",)
        out.append(one(2, "table2_cells.csv", t2, "YOCO-U (Equal Steps)", "YOCO", eq_steps, base, col, extra, note))
        out.append(one(2, "table2_cells.csv", t2, "YOCO-U (Equal FLOPS)", "YOCO", eq_flops, base, col, extra, note))
    return out


# --------------------------------------------------------------------------------------------- NIAH, math (Table 4, Fig 3)


def _niah_verdicts(src: Sources, R: _Results) -> list[Verdict]:
    fname = "table4_cells.csv"
    df = R.csv(fname, ["variant", "task", "acc", "n"])
    out = []
    for task in src.columns(4):
        for a, b in (("YOCO-U", "Transformer"), ("YOCO-U", "YOCO"), ("YOCO-U", "RINS"), ("YOCO", "Transformer")):
            pa, pb = src.num(cell_ref(4, a, task)), src.num(cell_ref(4, b, task))
            vid = f"v.T4.{a}_vs_{b}.{task}"
            claims = (cell_ref(4, a, task), cell_ref(4, b, task))
            comp = f"{a} against {b} on {task} (accuracy difference)"
            paper_s = f"{pa:g} vs {pb:g}"
            if df is None:
                out.append(_not_run(vid, claims, comp, paper_s, [fname], "eval"))
                continue
            if pa == pb:
                out.append(Verdict(vid, claims, comp, paper_s, "-", "-", None, "eval", INCONCLUSIVE,
                                   "the paper shows no difference", "no direction to reproduce", (fname,)))
                continue
            accs = {}
            for m in (a, b):
                r = df[(df["variant"] == _variant(m)) & (df["task"] == task)]
                if r.empty:
                    accs[m] = None
                    continue
                n = float(r["n"].sum())
                accs[m] = (float((r["acc"] * r["n"]).sum() / n), n)
            if accs[a] is None or accs[b] is None:
                out.append(_not_run(vid, claims, comp, paper_s, [fname], "eval", f"{task} not run for {a} or {b}"))
                continue
            (xa, na), (xb, nb) = accs[a], accs[b]
            se = math.sqrt(xa * (1 - xa) / na + xb * (1 - xb) / nb)
            verdict, qual = decide(pa - pb, xa - xb, evidence="eval", se=se, size_comparable=False, n_seeds=1,
                                   scale=R.scale, floor=(xa == 0 and xb == 0) or (xa == 1 and xb == 1))
            out.append(Verdict(vid, claims, comp, paper_s, f"{xa:.3f} vs {xb:.3f}", f"±{se:.3f} (binomial se)", 1,
                               "eval", verdict, qual, f"greedy accuracy over {int(na)} prompts ({R.scale})", (fname,)))
    fname = "fig3_data.csv"
    df = R.csv(fname, ["benchmark", "variant", "value"])
    claims = ("fig3.yocou_beats_yoco_all",)
    comp = "YOCO-U against YOCO on each math benchmark (Figure 3: YOCO-U better on all)"
    if df is None:
        out.append(_not_run("v.fig3.yocou_vs_yoco", claims, comp, "11 of 11 better", [fname], "eval"))
    else:
        wins, ties, losses, sig = 0, 0, 0, 0
        for bench, g in df.groupby("benchmark", sort=False):
            ya, yb = g[g["variant"] == "yocou"], g[g["variant"] == "yoco"]
            if ya.empty or yb.empty:
                continue
            d = float(ya["value"].iloc[0]) - float(yb["value"].iloc[0])
            se = math.hypot(float(ya.get("stderr", pd.Series([0])).iloc[0] or 0),
                            float(yb.get("stderr", pd.Series([0])).iloc[0] or 0))
            wins, ties, losses = wins + (d > 0), ties + (d == 0), losses + (d < 0)
            sig += abs(d) > 2 * se and se > 0
        n = wins + ties + losses
        verdict, qual = (INCONCLUSIVE, "at the floor for both (no signal)") if wins == losses == 0 else (
            decide(1.0, (wins - losses) / max(n, 1), evidence="eval", n_seeds=1, scale=R.scale,
                   se=None if sig else abs((wins - losses) / max(n, 1))))
        out.append(Verdict("v.fig3.yocou_vs_yoco", claims, comp, "better on all (values not printed)",
                           f"better on {wins}, tied on {ties}, worse on {losses} of {n}", f"{sig} beyond 2 se", 1,
                           "eval", verdict, qual, f"math benchmarks at {R.scale} scale", (fname,)))
    return out


# --------------------------------------------------------------------------------------------- perplexity (Fig 4, Wiki ppl)


def _ppl_verdicts(src: Sources, R: _Results) -> list[Verdict]:
    out = []
    fname = "heldout_ppl.csv"
    df = R.csv(fname, ["variant", "heldout_book ppl"])
    for a, b, table in (("YOCO-U", "YOCO", 5), ("YOCO", "Transformer", 3)):
        pa, pb = src.num(cell_ref(table, a, "Wiki. ppl")), src.num(cell_ref(table, b, "Wiki. ppl"))
        vid = f"v.heldout_ppl.{a}_vs_{b}"
        claims = (cell_ref(table, a, "Wiki. ppl"), cell_ref(table, b, "Wiki. ppl"))
        comp = f"{a} against {b}: relative perplexity decrease (Wiki. ppl; ours: held-out book, Paradise Lost)"
        paper_s = f"{pa:g} vs {pb:g} ({(pb - pa) / pb * 100:+.1f}%)"
        if df is None:
            out.append(_not_run(vid, claims, comp, paper_s, [fname], "training"))
            continue
        ra, rb = df[df["variant"] == _variant(a)], df[df["variant"] == _variant(b)]
        if ra.empty or rb.empty:
            out.append(_not_run(vid, claims, comp, paper_s, [fname], "training", f"{a} or {b} not in {fname}"))
            continue
        xa, xb = float(ra["heldout_book ppl"].mean()), float(rb["heldout_book ppl"].mean())
        seeds = _n_seeds(ra)
        o_eff = (xb - xa) / xb
        se = None
        if seeds > 1:
            se = math.hypot(ra["heldout_book ppl"].std(ddof=1) / math.sqrt(seeds),
                            rb["heldout_book ppl"].std(ddof=1) / math.sqrt(_n_seeds(rb))) / xb
        verdict, qual = decide((pb - pa) / pb, o_eff, evidence="training", se=se, size_comparable=False,
                               n_seeds=seeds, scale=R.scale)
        out.append(Verdict(vid, claims, comp, paper_s, f"{xa:.1f} vs {xb:.1f} ({o_eff * 100:+.1f}%)",
                           "-" if se is None else f"±{se * 100:.1f}%", seeds, "training", verdict, qual,
                           f"held-out book perplexity at {R.scale} scale (substitute for WikiText)", (fname,)))

    fname = "fig4_data.csv"
    df = R.csv(fname, ["variant", "split", "length", "cum_ppl"])
    for other, cid in (("transformer", "fig4.yocou_lower_ppl_than_nonrecursive"),
                       ("yoco", "fig4.yocou_lower_ppl_than_nonrecursive"), ("rins", "fig4.yocou_parity_rins")):
        vid = f"v.fig4.yocou_vs_{other}"
        parity = other == "rins"
        comp = (f"YOCO-U against {LABEL[other]}: relative decrease of cumulative perplexity at the longest length "
                "(mean over book and code)" + (" (the paper: parity)" if parity else ""))
        paper_s = "parity" if parity else "lower at every length (curves not printed)"
        if df is None:
            out.append(_not_run(vid, (cid,), comp, paper_s, [fname], "training"))
            continue
        effs, at_len = [], []
        for split, g in df.groupby("split", sort=False):
            ya, yb = g[g["variant"] == "yocou"], g[g["variant"] == other]
            if ya.empty or yb.empty:
                continue
            L = int(min(ya["length"].max(), yb["length"].max()))
            a = float(ya[ya["length"] == L]["cum_ppl"].mean())
            b = float(yb[yb["length"] == L]["cum_ppl"].mean())
            effs.append((b - a) / b)
            at_len.append(f"{split} {a:.1f} vs {b:.1f} at {L}")
        if not effs:
            out.append(_not_run(vid, (cid,), comp, paper_s, [fname], "training", f"yocou or {other} not in {fname}"))
            continue
        o_eff = sum(effs) / len(effs)
        if parity:
            verdict, qual = INCONCLUSIVE, "parity cannot be shown with one seed and no spread"
        else:
            verdict, qual = decide(1.0, o_eff, evidence="training", n_seeds=1, scale=R.scale, size_comparable=False)
        out.append(Verdict(vid, (cid,), comp, paper_s, f"{o_eff * 100:+.1f}% ({'; '.join(at_len)})", "-", 1, "training",
                           verdict, qual, f"Figure 4 data at {R.scale} scale", (fname,)))

    vid = "v.fig4.ppl_falls_with_length"
    comp = "cumulative perplexity at the training length against the shortest length (relative decrease)"
    if df is None:
        out.append(_not_run(vid, ("fig4.ppl_decreases_with_length",), comp, "decreasing", [fname], "training"))
    else:
        effs, parts = [], []
        for (v, split), g in df.groupby(["variant", "split"], sort=False):
            g = g.sort_values("length")
            inside = g[~g["extrapolated"].astype(str).str.lower().eq("true")] if "extrapolated" in g else g
            if len(inside) < 2:
                continue
            a, b = float(inside["cum_ppl"].iloc[-1]), float(inside["cum_ppl"].iloc[0])
            effs.append((b - a) / b)
            parts.append(f"{v}/{split} {(b - a) / b * 100:+.0f}%")
        signs = {e > 0 for e in effs}
        if not effs:
            verdict, qual = INCONCLUSIVE, "no lengths inside the training length"
        elif len(signs) > 1:
            verdict, qual = INCONCLUSIVE, "mixed across models and splits"
        else:
            verdict, qual = decide(1.0, sum(effs) / len(effs), evidence="training", n_seeds=1, scale=R.scale,
                                   size_comparable=False)
        out.append(Verdict(vid, ("fig4.ppl_decreases_with_length",), comp, "decreasing", "; ".join(parts), "-", 1,
                           "training", verdict, qual, "within the training length only", (fname,)))
    return out


# --------------------------------------------------------------------------------------------- training curves (Figs 2, 5, 6)


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        out[prefix] = obj
    return out


def _find_number(flat: dict[str, Any], pattern: str) -> tuple[str, float] | None:
    rx = re.compile(pattern, re.I)
    hits = [(k, v) for k, v in flat.items() if rx.search(k) and isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not hits:
        return None
    hits.sort(key=lambda kv: (("se" in kv[0].split(".")[-1].lower() or "std" in kv[0].lower()), len(kv[0])))
    return hits[0]


def _curves_from_fig2_data(df: pd.DataFrame) -> tuple[float | None, float | None, str]:
    """Loss gap at YOCO's final FLOPs and token saving at YOCO's final loss, from full curves (if the file has them)."""
    need = {"variant", "tokens", "train_flops", "loss"}
    if not need <= set(df.columns):
        return None, None, f"fig2_data.csv lacks {sorted(need - set(df.columns))}"
    y, u = df[df["variant"] == "yoco"].sort_values("tokens"), df[df["variant"] == "yocou"].sort_values("tokens")
    if len(y) < 3 or len(u) < 3:
        return None, None, "fig2_data.csv holds the final point per model only, not the curves"
    ly = y["loss"].rolling(5, min_periods=1).mean()
    lu = u["loss"].rolling(5, min_periods=1).mean()
    f_star, l_star, t_star = float(y["train_flops"].iloc[-1]), float(ly.iloc[-1]), float(y["tokens"].iloc[-1])
    gap = None
    if float(u["train_flops"].max()) >= f_star:
        import numpy as np

        lu_at = float(np.interp(math.log(f_star), np.log(u["train_flops"].to_numpy(float)), lu.to_numpy(float)))
        gap = l_star - lu_at
    reach = u[lu.to_numpy() <= l_star]
    saving = 1 - float(reach["tokens"].iloc[0]) / t_star if len(reach) else -math.inf
    return gap, saving, "computed from the curves in fig2_data.csv (5-point rolling mean)"


def _fig2_verdicts(src: Sources, R: _Results) -> list[Verdict]:
    out = []
    summ = R.json("fig2_summary.json")
    data = R.csv("fig2_data.csv")
    gap = saving = None
    seeds, se_gap, se_sav = 1, None, None
    how = ""
    files: tuple[str, ...] = ()
    cfg = (summ or {}).get("provenance", {}).get("config", {}) if isinstance(summ, dict) else {}
    if isinstance(cfg, dict) and "loss_gap_at_equal_flops" in cfg:
        # the format of yocou.render.fig2 --summary (yocou.studies.figure2_numbers in the provenance config)
        gap = cfg.get("loss_gap_at_equal_flops")
        saving = cfg.get("token_saving")
        if saving is None and "tokens_to_reach" in cfg and cfg.get("tokens_to_reach") is None:
            saving = -math.inf  # YOCO-U never reaches YOCO's final loss within its run
        seeds = int(cfg.get("n_seeds", 1) or 1)
        how = (f"fig2_summary.json (yocou.studies.figure2_numbers): loss gap at the {cfg.get('loss_gap_at', '?')}, "
               f"EMA alpha {cfg.get('smoothing_alpha', '?')}; positive favours YOCO-U")
        files = ("fig2_summary.json",)
    elif summ is not None:
        flat = _flatten(summ)
        g = _find_number(flat, r"loss.?gap")
        s = _find_number(flat, r"token.?sav|saving")
        n = _find_number(flat, r"n_?seeds")
        gap = float(g[1]) if g else None
        if s is not None:
            saving = float(s[1]) / (100.0 if abs(float(s[1])) > 1.5 else 1.0)
        seeds = int(n[1]) if n else 1
        sg = _find_number(flat, r"loss.?gap.*(std|se)\b")
        ss = _find_number(flat, r"sav.*(std|se)\b")
        se_gap = float(sg[1]) if sg and seeds > 1 else None
        se_sav = float(ss[1]) / (100.0 if ss and abs(float(ss[1])) > 1.5 else 1.0) if ss and seeds > 1 else None
        how = (f"fig2_summary.json keys: {g[0] if g else '-'} (loss gap, positive = YOCO-U lower, as the paper's "
               f"ΔL), {s[0] if s else '-'} (token saving)")
        files = ("fig2_summary.json",)
    elif data is not None:
        gap, saving, how = _curves_from_fig2_data(data)
        files = ("fig2_data.csv",)
    paper_gap = src.num("C:fig2.loss_gap_equal_flops")
    paper_sav = src.num("C:fig2.tokens_saved_pct") / 100
    for vid, cid, p, o, se, unit in (("v.fig2.loss_gap_equal_flops", "fig2.loss_gap_equal_flops", paper_gap, gap, se_gap,
                                      "nats"),
                                     ("v.fig2.tokens_saved", "fig2.tokens_saved_pct", paper_sav, saving, se_sav,
                                      "fraction of YOCO's tokens")):
        comp = ("YOCO's loss minus YOCO-U's at YOCO's training FLOPs" if "gap" in vid else
                "1 - tokens YOCO-U needs to reach YOCO's final loss / YOCO's tokens")
        if not files:
            out.append(_not_run(vid, (cid,), comp, f"{p:g} {unit}", ["fig2_summary.json", "fig2_data.csv"], "training"))
            continue
        if o is None:
            out.append(_not_run(vid, (cid,), comp, f"{p:g} {unit}", list(files), "training", how or "value not found"))
            continue
        verdict, qual = decide(p, o, evidence="training", se=se, n_seeds=seeds, scale=R.scale, size_comparable=True)
        ours_s = "never reaches YOCO's final loss" if o == -math.inf else f"{o:.3f} {unit}"
        out.append(Verdict(vid, (cid, "fig2.tokens_yocou_B", "fig2.tokens_yoco_B") if "saved" in vid else (cid,), comp,
                           f"{p:g} {unit}", ours_s, "-" if se is None else f"±{se:.3f}", seeds, "training", verdict, qual,
                           how, files))
    return out


def _pick(df: pd.DataFrame, *patterns: str) -> str | None:
    for pat in patterns:
        for c in df.columns:
            if re.search(pat, str(c), re.I):
                return c
    return None


def _fig5_fig6_verdicts(src: Sources, R: _Results) -> list[Verdict]:
    out = []
    fname = "fig5_data.csv"
    df = R.csv(fname)
    vid, cid = "v.fig5.half_params", "fig5.half_params"
    comp = "parameter saving of the smallest YOCO-U whose final loss is at most the largest YOCO's"
    if df is None:
        out.append(_not_run(vid, (cid,), comp, "0.5", [fname], "training"))
    else:
        vcol = _pick(df, r"^family$", r"^variant$", r"model", r"arch")
        pcol = _pick(df, r"param")
        lcol = _pick(df, r"^loss$", r"final.?loss", r"loss")
        if not (vcol and pcol and lcol):
            out.append(_not_run(vid, (cid,), comp, "0.5", [fname], "training",
                                f"{fname}: columns not recognised (need variant, params, loss; has {list(df.columns)})",
                                "columns not recognised"))
        else:
            y = df[df[vcol].astype(str).str.lower().str.contains("yoco") & ~df[vcol].astype(str).str.lower().str.contains(
                "yocou|yoco-u")]
            u = df[df[vcol].astype(str).str.lower().str.contains("yocou|yoco-u")]
            if y.empty or u.empty:
                out.append(_not_run(vid, (cid,), comp, "0.5", [fname], "training", f"{fname}: no YOCO or YOCO-U rows"))
            elif "param_saving" in df.columns:
                # the renderer's own interpolation: 1 - P(YOCO-U) / P(YOCO at the same loss) on YOCO's ladder
                sv = pd.to_numeric(u["param_saving"], errors="coerce").dropna()
                seeds = _n_seeds(df)
                if sv.empty:
                    out.append(_not_run(vid, (cid,), comp, "0.5", [fname], "training",
                                        f"{fname}: no YOCO-U rung has a loss inside YOCO's range (param_saving empty)",
                                        "outside the measured range"))
                else:
                    verdict, qual = decide(0.5, float(sv.max()), evidence="training", n_seeds=seeds, scale=R.scale)
                    out.append(Verdict(vid, (cid,), comp, "0.5", ", ".join(f"{x:.2f}" for x in sv), "-", seeds,
                                       "training", verdict, qual,
                                       f"{fname}: param_saving of the YOCO-U rungs (the largest is compared)", (fname,)))
            else:
                yb = y.loc[y[pcol].idxmax()]
                ok = u[u[lcol] <= yb[lcol]]
                sav = 1 - float(ok[pcol].min()) / float(yb[pcol]) if len(ok) else -1.0
                seeds = _n_seeds(df)
                verdict, qual = decide(0.5, sav if len(ok) else -1.0, evidence="training", n_seeds=seeds, scale=R.scale)
                out.append(Verdict(vid, (cid,), comp, "0.5", f"{sav:.2f}" if len(ok) else
                                   "no YOCO-U size reaches the largest YOCO's loss", "-", seeds, "training", verdict,
                                   qual, f"{fname}: {vcol}, {pcol}, {lcol}", (fname,)))
    fname = "fig6_data.csv"
    df = R.csv(fname)
    vid, cid = "v.fig6.loops", "fig6.loops"
    comp = "YOCO-U final loss as T grows over 1, 2, 3, 5 (relative decrease from the smallest to the largest T)"
    if df is None:
        out.append(_not_run(vid, (cid,), comp, "decreasing", [fname], "training"))
    else:
        tcol = _pick(df, r"^n_loops$", r"^T$", r"loop")
        lcol = _pick(df, r"^loss$", r"final.?loss", r"loss")
        if not (tcol and lcol):
            out.append(_not_run(vid, (cid,), comp, "decreasing", [fname], "training",
                                f"{fname}: columns not recognised (need n_loops, loss; has {list(df.columns)})",
                                "columns not recognised"))
        else:
            vcol = _pick(df, r"^variant$")
            g = df if vcol is None else df[df[vcol].astype(str).str.contains("yocou", case=False)]
            g = g.groupby(tcol)[lcol].mean().sort_index()
            if len(g) < 2:
                out.append(_not_run(vid, (cid,), comp, "decreasing", [fname], "training", "fewer than 2 loop counts"))
            else:
                eff = (float(g.iloc[0]) - float(g.iloc[-1])) / float(g.iloc[0])
                mono = all(b <= a for a, b in zip(g, g.iloc[1:]))
                seeds = _n_seeds(df)
                verdict, qual = decide(1.0, eff, evidence="training", n_seeds=seeds, scale=R.scale, size_comparable=False)
                out.append(Verdict(vid, (cid,), comp, "consistent improvements",
                                   " ".join(f"T={t}: {v:.3f}" for t, v in g.items()) + f" ({'monotone' if mono else 'not monotone'})",
                                   "-", seeds, "training", verdict, qual, f"{fname}: {tcol}, {lcol}", (fname,)))
    return out


# --------------------------------------------------------------------------------------------- driver


def reproduce(src: Sources, results_dir: str | Path, scale: str) -> list[Verdict]:
    """Every reproduced verdict for one scale, reading ``results_dir`` (``results/<scale>``).

    Missing files give ``inconclusive`` / ``not run at this scale``. Raises ValueError naming the file and the
    columns when a present file lacks the columns its renderer writes.
    """
    R = _Results(Path(results_dir), scale)
    out: list[Verdict] = []
    for f in (_kv_verdicts, _timing_verdicts, _downstream_verdicts, _niah_verdicts, _ppl_verdicts, _fig2_verdicts,
              _fig5_fig6_verdicts):
        out.extend(f(src, R))
    ids = [v.id for v in out]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    return out
