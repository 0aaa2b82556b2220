"""Figure 7: prefill throughput, decode throughput and KV-cache memory against sequence length,
one line per variant, measured by :mod:`yocou.bench.profile` (CPU figures labelled CPU).

Input: the profile JSON (``results/<scale>/profile.json``). Output: ``<out>.png/.pdf`` and the tidy
plotted data ``<data>.{csv,md,json}``.
"""

from __future__ import annotations

import argparse
from typing import Any

import pandas as pd

from ..readers import read_profile
from .common import COLORS, label, save_figure, stem_of, write_table

MIB = 1024 * 1024


def load_profile(path: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Rows of a profile JSON as a DataFrame (without per-repeat lists) and its provenance, validated by
    :func:`yocou.readers.read_profile` (a corrupt number or a repeated row fails naming the file and the row)."""
    rows, prov = read_profile(path)
    df = pd.DataFrame([{k: v for k, v in r.items() if k != "repeats"} for r in rows])
    return df, prov


def device_label(df: pd.DataFrame, prov: dict[str, Any]) -> str:
    """``"CPU (model, 2 threads, bf16)"`` or ``"GPU (name, bf16)"`` for titles."""
    dev = str(df["device"].iloc[0])
    dtype = str(df["dtype"].iloc[0])
    if dev.startswith("cuda"):
        return f"GPU ({prov.get('device', {}).get('cuda') or dev}, {dtype})"
    cpu = prov.get("device", {}).get("cpu_model", "")
    return f"CPU ({cpu}, {int(df['n_threads'].iloc[0])} threads, {dtype})"


PANELS = (("prefill_tokens_per_s", "Prefill throughput (tokens/s)", 8),
          ("decode_tokens_per_s", "Decode throughput (tokens/s)", 9),
          ("kv_MiB", "KV cache (MiB)", 10))
TIMED = {"prefill_tokens_per_s", "decode_tokens_per_s"}


def under_load(df: pd.DataFrame, prov: dict[str, Any]) -> tuple[pd.Series, int]:
    """Rows measured while the 1-minute load average (before or after) exceeded the machine's CPU count:
    more runnable work than cores, so the timings include waiting for a CPU. Returns (mask, CPU count)."""
    n_cpus = int(prov.get("device", {}).get("n_cpus") or df["n_threads"].max())
    load = df[["loadavg_1m_before", "loadavg_1m_after"]].max(axis=1)
    return load.gt(n_cpus).fillna(False).astype(bool), n_cpus


def paper_series() -> pd.DataFrame:
    """The paper's Tables 8-10 (GPU, 1.3B) as ``model, seq_len, <panel column>`` (KV in MiB as printed)."""
    from ..reported import load_table

    parts = [load_table(t).rename(columns={"value": col}).set_index(["model", "seq_len"])
             for col, _, t in PANELS]
    return pd.concat(parts, axis=1).reset_index()


def _log_axes(ax, ylabel: str) -> None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1024:g}K" if v >= 1024 else f"{v:g}"))
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("Sequence length N (tokens)")
    lo, hi = ax.get_ylim()
    if hi / lo < 100:  # under two decades: label 2x and 5x 10^k too, not one power of ten alone
        digits = "2357" if hi / lo < 10 else "25"  # inside one decade 2x, 5x alone can leave one label
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in digits else ""))
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")


def plot(df: pd.DataFrame, prov: dict[str, Any], scale: str):
    """Top row: our measurements (points measured under load ringed); bottom row, on axes of their own: the
    paper's Tables 8-10 (GPU, 1.3B), never on the same axes as ours."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    dev = device_label(df, prov)
    loaded, n_cpus = under_load(df, prov)
    paper = paper_series()
    fig, axes = plt.subplots(2, 3, figsize=(15.5, 7.6))
    for v, g in df.assign(_loaded=loaded).groupby("variant", sort=False):
        g = g.sort_values("seq_len")
        for ax, (col, _, _) in zip(axes[0], PANELS):
            ax.plot(g["seq_len"], g[col], marker="o", ms=3.5, lw=1.8, label=label(v), color=COLORS.get(v))
            if col in TIMED and g["_loaded"].any():
                h = g[g["_loaded"]]
                ax.plot(h["seq_len"], h[col], ls="none", marker="o", ms=9, mfc="none", mec="k", mew=1.2,
                        label="_loaded")
    variant_of = {label(v): v for v in COLORS}
    for m, g in paper.groupby("model", sort=False):
        g = g.sort_values("seq_len")
        for ax, (col, _, _) in zip(axes[1], PANELS):
            ax.plot(g["seq_len"], g[col], marker="s", ms=3.5, lw=1.5, ls="--", label=f"{m} (paper)",
                    color=COLORS.get(variant_of.get(m, "")))
    for ax, (col, ylabel, t) in zip(axes[0], PANELS):
        _log_axes(ax, ylabel + (", measured" if col == "kv_MiB" else ""))
        ax.set_title(f"ours: {scale} scale, {dev.split(' (')[0]}", fontsize=9)
    for ax, (col, ylabel, t) in zip(axes[1], PANELS):
        _log_axes(ax, ylabel)
        ax.set_title(f"paper: Table {t} (GPU, 1.3B), reported", fontsize=9)
    loads = pd.concat([df["loadavg_1m_before"], df["loadavg_1m_after"]]).dropna()
    handles, labels = axes[0][0].get_legend_handles_labels()
    if loaded.any():
        handles.append(Line2D([], [], ls="none", marker="o", ms=9, mfc="none", mec="k", mew=1.2))
        labels.append(f"under load (1-min load > {n_cpus} CPUs)")
    # beside the right-hand panels, off the data
    axes[0][2].legend(handles, labels, frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                      borderaxespad=0)
    axes[1][2].legend(*axes[1][0].get_legend_handles_labels(), frameon=False, fontsize=8, loc="upper left",
                      bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    load_txt = (f"1-min load average during our measurements: {loads.min():.2f} to {loads.max():.2f} on {n_cpus} "
                f"CPUs; {int(loaded.sum())} of {len(df)} rows measured with load > {n_cpus} (ringed: timings "
                "include waiting for a CPU)." if len(loads) else "Load average not recorded.")
    fig.suptitle(f"Figure 7 — top: ours at the {scale} scale, {dev}; bottom: the paper's reported values "
                 "(GPU, 1.3B; separate axes, not comparable in absolute value)", fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.text(0.01, 0.005, load_txt, fontsize=8, ha="left", va="bottom",
             color="#b00000" if loaded.any() else "0.3")
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", required=True, help="profile JSON (python -m yocou.bench.profile)")
    ap.add_argument("--out", required=True, help="figure stem (png + pdf)")
    ap.add_argument("--data", required=True, help="table stem of the plotted data")
    ap.add_argument("--scale-name", default="")
    a = ap.parse_args(argv)
    df, prov = load_profile(a.profile)
    dev = device_label(df, prov)
    df["kv_MiB"] = df["kv_bytes_measured"] / MIB
    save_figure(plot(df, prov, a.scale_name), stem_of(a.out), config=vars(a))
    df["under_load"], n_cpus = under_load(df, prov)
    cols = ["variant", "seq_len", "prompt_len", "prefill_tokens_per_s", "decode_tokens_per_s", "ttft_s",
            "kv_bytes_measured", "kv_bytes_analytic", "kv_equal", "peak_mem_bytes", "mem_kind", "n_threads",
            "dtype", "device", "loadavg_1m_before", "loadavg_1m_after", "under_load"]
    write_table(df[cols], stem_of(a.data), title=f"Figure 7 data ({dev})",
                notes=[f"Measured on {dev}: absolute numbers are not comparable with the paper's GPU figures.",
                       "N = prompt + decoded tokens; prefill tokens/s over the prompt, decode tokens/s over the "
                       "decoded tokens only; medians of repeats (python -m yocou.bench.profile).",
                       "loadavg columns: 1-minute load average before and after each measurement; under_load: "
                       f"either exceeds the machine's {n_cpus} CPUs (ringed in the figure).",
                       "The figure's bottom row draws the paper's Tables 8-10 (GPU, 1.3B) on axes of their own "
                       "(yocou/reported/table08.csv ... table10.csv)."],
                config=vars(a))
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
