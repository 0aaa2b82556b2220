"""The paper-shape efficiency study (docs/design.md section 7): a Figure 7 at the paper's 1.3B shape, measured on
this machine, with the paper's ratios marked, and its tables beside Tables 8 and 9.

Input: the tidy ``efficiency_paper_shape`` table (:func:`yocou.results.summarize.paper_shape.summarize_paper_shape`) and
the measurement's Snakemake benchmark file (the study's own wall time). Outputs:

* ``<png>`` (and ``.pdf``): top row our prefill and decode tokens/s and KV GiB against N (decode rows that did not
  fit in memory marked at the bottom of the panel); bottom row the ratios against N, ours (points with their
  spread) beside the paper's (dashed, Tables 8 and 9), and each row's fraction of the hardware limit (decode: the
  bytes a step must read over the measured triad bandwidth; prefill: its FLOP/s over the measured matmul peak).
* ``<ratios>.{csv,md,json}``: every ratio, ours with its spread beside the paper's at the same N.
* ``<rows>.{csv,md,json}``: every measured row (tokens/s, ms per token, KV bytes measured and by the formula,
  bytes read per step, bandwidth and peak fractions, load average), the rows that did not fit, the
  filled-against-prefilled check, the limits and the wall time.

The renderer only pivots, divides nothing new and draws.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from yocou.results.names import COLORS, label
from yocou.results.render.common import save_figure, write_table
from yocou.results.tidy import read_tidy
from yocou.results.timing import read_benchmark

__all__ = ["read_wall_time", "render"]

GB = 1e9
RATIO_COLORS = {"yocou|yoco": "#d62728", "rins|transformer": "#2ca02c", "yoco|transformer": "#1f77b4",
                "yocou|transformer": "#ff7f0e"}
RATIO_LABELS = {"yocou|yoco": "YOCO-U / YOCO", "rins|transformer": "RINS / Transformer",
                "yoco|transformer": "YOCO / Transformer", "yocou|transformer": "YOCO-U / Transformer"}


def read_wall_time(path: str | Path) -> dict[str, float]:
    """``s`` (wall seconds), ``cpu_s`` and ``max_rss_mib`` of the measurement's Snakemake benchmark file
    (:func:`yocou.results.timing.read_benchmark`; NaN where Snakemake could not sample them).

    Raises:
        FileNotFoundError: no such file. ValueError: the file is not a Snakemake benchmark (naming it).
    """
    job = read_benchmark(path, "paper_shape_measure")
    return {"s": job.wall_s, "cpu_s": math.nan if job.cpu_s is None else job.cpu_s,
            "max_rss_mib": math.nan if job.max_rss_mib is None else job.max_rss_mib}


def _one(df: pd.DataFrame, metric: str, axis: str = "") -> pd.DataFrame:
    return df[(df["metric"] == metric) & (df["axis"] == axis)]


def ratios_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (kind, pair, N): ours (value, spread) and the paper's at the same N and its mean."""
    rows = []
    for kind in ("prefill", "decode"):
        ours = df[(df["metric"] == f"{kind}_ratio") & (df["run"] != "paper")]
        paper = df[df["metric"] == f"paper.{kind}_ratio"]
        for role in dict.fromkeys(list(ours["role"]) + list(paper["role"])):
            o = ours[ours["role"] == role]
            p = paper[(paper["role"] == role) & (paper["axis"] == "seq_len")]
            pm = paper[(paper["role"] == role) & (paper["axis"] == "")]["value"]
            for n in sorted(set(o["axis_value"]) | set(p["axis_value"])):
                oo, pp = o[o["axis_value"] == n], p[p["axis_value"] == n]
                rows.append({"kind": kind, "ratio": RATIO_LABELS.get(role, role), "seq_len": int(n),
                             "ours": float(oo["value"].iloc[0]) if len(oo) else math.nan,
                             "ours_spread": float(oo["stderr"].iloc[0]) if len(oo) else math.nan,
                             "paper": float(pp["value"].iloc[0]) if len(pp) else math.nan,
                             "paper_mean": float(pm.iloc[0]) if len(pm) else math.nan})
    return pd.DataFrame(rows)


def rows_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, kind, N) measured or not fitted, the columns of the module docstring."""
    m = df[(df["axis"] == "seq_len") & (df["run"].isin(list(COLORS))) & ~df["metric"].str.contains("ratio")
           & ~df["metric"].str.startswith("check_")]
    w = m.pivot_table(index=["run", "axis_value"], columns="metric", values="value", sort=False)
    se = m[m["metric"].isin(["decode_tokens_per_s", "prefill_tokens_per_s"])].pivot_table(
        index=["run", "axis_value"], columns="metric", values="stderr", sort=False)
    w = w.join(se.add_suffix("_spread")).reset_index().rename(columns={"run": "variant", "axis_value": "seq_len"})
    w["seq_len"] = w["seq_len"].astype(int)
    order = {v: i for i, v in enumerate(COLORS)}
    w = w.sort_values(["variant", "seq_len"], key=lambda c: c.map(order) if c.name == "variant" else c)
    cols = {"decode_tokens_per_s": "decode tok/s", "decode_tokens_per_s_spread": "± (half range)",
            "decode_ms_per_token": "ms/token", "kv_gib": "KV GiB", "kv_bytes": "KV bytes",
            "kv_bytes_formula": "KV bytes (formula)", "decode_read_bytes": "read bytes/step",
            "decode_bandwidth_fraction": "of bandwidth", "decode_bandwidth_fraction_once": "of bandwidth (weights once)",
            "decode_needs_bytes": "not fitted: needs bytes", "decode_available_bytes": "available bytes",
            "prefill_tokens_per_s": "prefill tok/s", "prefill_tokens_per_s_spread": "± (half range) ",
            "prefill_s": "prefill s", "prefill_flop": "prefill FLOP", "prefill_flop_per_s": "FLOP/s",
            "prefill_peak_fraction": "of matmul peak", "loadavg_1m_before": "load before",
            "loadavg_1m_after": "load after"}
    return w[["variant", "seq_len"] + [c for c in cols if c in w]].rename(columns=cols).reset_index(drop=True)


def check_table(df: pd.DataFrame) -> pd.DataFrame:
    """The filled-against-prefilled check: one row per variant."""
    c = df[df["metric"].str.startswith("check_")]
    if c.empty:
        return pd.DataFrame()
    w = c.pivot_table(index=["run", "axis_value"], columns="metric", values="value", sort=False).reset_index()
    se = c[c["metric"].str.endswith("ms_per_token")].pivot_table(index=["run", "axis_value"], columns="metric",
                                                                 values="stderr", sort=False)
    w = w.join(se.add_suffix("_spread"), on=["run", "axis_value"])
    w = w.rename(columns={"run": "variant", "axis_value": "seq_len"})
    w["seq_len"] = w["seq_len"].astype(int)
    return w


def _log(ax, ylabel: str, kfmt) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(kfmt))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
    ax.set_xlabel("Sequence length N (tokens)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")


def plot(df: pd.DataFrame, wall: dict[str, float] | None):
    """The 2 x 3 figure of the module docstring."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    def kfmt(v, _):
        return f"{v / 1024:g}K" if v >= 1024 else f"{v:g}"

    fig, axes = plt.subplots(2, 3, figsize=(16, 9.6))
    variants = [v for v in COLORS if v in set(df["run"])]
    panels = (("prefill_tokens_per_s", "Prefill throughput (tokens/s)"),
              ("decode_tokens_per_s", "Decode throughput (tokens/s)"), ("kv_gib", "KV cache (GiB), measured"))
    for ax, (metric, ylabel) in zip(axes[0], panels):
        for v in variants:
            g = _one(df, metric, "seq_len")
            g = g[g["run"] == v].sort_values("axis_value")
            if g.empty:
                continue
            ax.errorbar(g["axis_value"], g["value"], yerr=g["stderr"].fillna(0), marker="o", ms=4, lw=1.8,
                        capsize=3, label=label(v), color=COLORS[v])
        if metric == "decode_tokens_per_s":
            nf = _one(df, "decode_needs_bytes", "seq_len")
            for r in nf.itertuples():
                ax.annotate(f"{label(r.run)}: not fitted\n(needs {r.value / 2**30:.1f} GiB)", (r.axis_value, 0.02),
                            xycoords=("data", "axes fraction"), ha="right", fontsize=7, color=COLORS[r.run])
                ax.plot([r.axis_value], [0.0], marker="x", ms=8, color=COLORS[r.run], transform=ax.get_xaxis_transform(),
                        clip_on=False)
        _log(ax, ylabel, kfmt)
        ax.set_title(f"{ylabel.split(' (')[0]}, ours (CPU, fp32)", fontsize=9)
    axes[0][0].legend(frameon=False, fontsize=8, loc="center right", bbox_to_anchor=(1.0, 0.7))
    for ax, kind in ((axes[1][0], "prefill"), (axes[1][1], "decode")):
        for role, color in RATIO_COLORS.items():
            o = df[(df["metric"] == f"{kind}_ratio") & (df["role"] == role) & (df["run"] != "paper")]
            o = o.sort_values("axis_value")
            p = df[(df["metric"] == f"paper.{kind}_ratio") & (df["role"] == role) & (df["axis"] == "seq_len")]
            p = p.sort_values("axis_value")
            if not o.empty:
                ax.errorbar(o["axis_value"], o["value"], yerr=o["stderr"].fillna(0), marker="o", ms=4, lw=1.8,
                            capsize=3, color=color, label=f"{RATIO_LABELS[role]}, ours")
            if not p.empty:
                ax.plot(p["axis_value"], p["value"], marker="s", ms=3.5, lw=1.2, ls="--", color=color, alpha=0.55,
                        label=f"{RATIO_LABELS[role]}, paper")
        ax.axhline(1.0, color="0.5", lw=0.8)
        _log(ax, f"{kind.capitalize()} tokens/s ratio", kfmt)
        ax.set_title(f"{kind} ratios: ours (solid) and the paper's Table {8 if kind == 'prefill' else 9} (dashed)",
                     fontsize=9)
        ax.legend(frameon=False, fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    ax = axes[1][2]
    for v in variants:
        for metric, ls, mk, what in (("decode_bandwidth_fraction", "-", "o", "decode, of bandwidth"),
                                     ("prefill_peak_fraction", "--", "^", "prefill, of matmul peak")):
            g = _one(df, metric, "seq_len")
            g = g[g["run"] == v].sort_values("axis_value")
            if not g.empty:
                ax.plot(g["axis_value"], g["value"], ls=ls, marker=mk, ms=4, lw=1.5, color=COLORS[v],
                        label=f"{label(v)}: {what}")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(kfmt))
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("Sequence length N (tokens)")
    ax.set_ylabel("Fraction of the measured limit")
    ax.set_title("decode: of triad bandwidth; prefill: of matmul peak", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    dev = str(df["device_label"].iloc[0])
    bw = _one(df, "bandwidth_bytes_per_s")["value"]
    pk = _one(df, "peak_flop_per_s")["value"]
    limits = (f"limits measured in the run (medians): triad {bw.iloc[0] / GB:.1f} GB/s, fp32 matmul "
              f"{pk.iloc[0] / GB:.0f} GFLOP/s" if len(bw) and len(pk) else "limits not recorded")
    loads = df[df["metric"].str.contains("loadavg")]["value"]
    wall_txt = f"; the study's wall time {wall['s'] / 60:.1f} min" if wall else ""
    fig.suptitle(f"Figure 7 at the paper's 1.3B shape (random weights), measured on {dev}\n"
                 "top: ours; bottom: the ratios, ours (solid, bars: the repeats' half range) beside the paper's GPU "
                 "ratios (dashed, Tables 8-9), and each row's fraction of the hardware limit", fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 0.96))
    fig.text(0.01, 0.005, f"CPU, fp32. {limits}; 1-min load average {loads.min():.2f} to {loads.max():.2f}"
             f"{wall_txt}. Decode fraction: the bytes a step must read (weights at every loop, plus the keys and "
             "values attended to) times steps/s over the triad bandwidth.", fontsize=7.5, ha="left", va="bottom",
             color="0.3")
    return fig


def render(tidy: str | Path, benchmark: str | Path | None, png: str | Path, ratios: str | Path,
           rows: str | Path) -> None:
    """The figure ``png`` (and ``.pdf``), ``ratios.{csv,md,json}`` and ``rows.{csv,md,json}`` (module docstring).

    Raises:
        ValueError: the tidy table is not the study's (naming the file), or the benchmark file is invalid.
    """
    df = read_tidy(tidy)
    if set(df["study"]) != {"efficiency_paper_shape"}:
        raise ValueError(f"{tidy}: expected the study efficiency_paper_shape, got {sorted(set(df['study']))}")
    wall = read_wall_time(benchmark) if benchmark else None
    dev = str(df["device_label"].iloc[0])
    cfg = {"study": "efficiency_paper_shape", "tidy": str(tidy)}
    save_figure(plot(df, wall), png, config=cfg)
    write_table(ratios_table(df), ratios, config=cfg, floatfmt=".3g",
                title="Tokens/s ratios at the paper's 1.3B shape: ours (CPU, fp32) beside the paper's (GPU)",
                notes=[(f"Ours: {dev}, random weights, the shapes of workflows/config/paper.yaml (Table 7 at 1.3B, "
                       "RINS and YOCO-U with T = 3). ours_spread: the ratio's spread by the delta method from the "
                       "half ranges of the repeats."),
                       ("paper: Table 8 (prefill, 8K-256K) or Table 9 (decode) at the same N; paper_mean: the mean "
                       "over every printed length (a scale-free compute ratio's expected value). Our prefill "
                       "lengths (1K-4K) are shorter than the paper's, so only paper_mean applies to them."),
                       "Timing on a shared 2-core CPU: ratios, not absolute numbers, are comparable with the paper."])
    rt = rows_table(df)
    chk = check_table(df)
    notes = [(f"{dev}, random weights. ± : half the range of the repeats. 'of bandwidth': the bytes a decode step "
             "must read (weights, a looped stage's at every loop, plus the keys and values it attends to) times "
             "steps/s, over the triad bandwidth of the run; 'weights once': the same with each weight read once "
             "per step (the lower bound of the traffic). 'of matmul peak': the prefill's useful FLOPs (YOCO's "
             "early exit counted) per second over the run's fp32 matmul FLOP/s.")]
    for r in _one(df, "decode_needs_bytes", "seq_len").itertuples():
        notes.append(f"Not fitted: {label(r.run)} decode at N = {int(r.axis_value)}: {r.detail} (needs "
                     f"{int(r.value)} bytes).")
    for r in chk.itertuples():
        notes.append(f"Check at N = {r.seq_len}, {label(r.variant)}: decode from a filled cache "
                     f"{r.check_filled_ms_per_token:.1f} ± {r.check_filled_ms_per_token_spread:.1f} ms/token, from a "
                     f"prefilled one {r.check_prefilled_ms_per_token:.1f} ± {r.check_prefilled_ms_per_token_spread:.1f}"
                     f" (ratio {r.check_filled_over_prefilled:.3f}; "
                     f"{'within' if r.check_within_spread else 'NOT within'} the repeats' spread; KV bytes "
                     f"{'equal the formula' if r.check_kv_bytes_equal else 'DIFFER from the formula'}).")
    for metric, unit, what in (("triad_bytes_per_s", GB, "GB/s triad"), ("matmul_flop_per_s", GB, "GFLOP/s matmul")):
        lim = _one(df, metric, "limit_measurement").sort_values("axis_value")
        notes.append(f"{what}, each measurement in order: " + ", ".join(
            f"{r.value / unit:.1f} ({r.detail})" for r in lim.itertuples()))
    if wall:
        notes.append(f"The measurement's wall time {wall['s']:.0f} s ({wall['s'] / 60:.1f} min), CPU time "
                     f"{wall['cpu_s']:.0f} s, peak RSS {wall['max_rss_mib'] / 1024:.1f} GiB (its Snakemake "
                     "benchmark file).")
    write_table(rt, rows, config=cfg, floatfmt=".4g", notes=notes,
                title="Every row of the paper-shape study (CPU, fp32, 1.3B shape)")
