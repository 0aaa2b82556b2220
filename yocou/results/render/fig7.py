"""Figure 7: prefill throughput, decode throughput and KV-cache memory against sequence length,
one line per core role, measured by :mod:`yocou.evaluation.bench.profile` (CPU figures labelled CPU).

Input: the tidy ``efficiency`` table (:func:`yocou.results.summarize.efficiency.summarize_efficiency`). Output:
``<out>.png/.pdf`` and the plotted data ``<data>.{csv,md,json}``. The renderer only pivots and draws.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from yocou.results.names import COLORS, label
from yocou.results.render.common import save_figure, stem_of, write_table
from yocou.results.tidy import read_tidy

# extra columns of the tidy efficiency rows, the same for every metric of one (role, N)
INFO = ("run", "loaded", "device", "device_kind", "device_label", "dtype", "n_threads", "n_cpus", "mem_kind",
        "prompt_len", "n_decode", "kv_equal")


def efficiency_wide(eff: pd.DataFrame) -> pd.DataFrame:
    """The tidy ``efficiency`` rows as one row per (role, N): ``role, seq_len``, one column per metric and the
    :data:`INFO` columns, roles in the order of the tidy table (a pivot, nothing computed)."""
    eff = eff[eff["axis"] == "seq_len"]
    w = eff.pivot_table(index=["role", "axis_value"], columns="metric", values="value", sort=False)
    info = eff.drop_duplicates(["role", "axis_value"]).set_index(["role", "axis_value"])[list(INFO)]
    w = w.join(info).reset_index().rename(columns={"axis_value": "seq_len"})
    w["seq_len"] = w["seq_len"].astype(int)
    order = {r: i for i, r in enumerate(dict.fromkeys(eff["role"]))}
    return w.sort_values(["role", "seq_len"], key=lambda c: c.map(order) if c.name == "role" else c,
                         kind="stable").reset_index(drop=True)


def device_of(w: pd.DataFrame) -> tuple[str, str]:
    """(``device_kind``, ``device_label``) of the profile: ``("CPU", "CPU (model, 2 threads, bf16)")``."""
    return str(w["device_kind"].iloc[0]), str(w["device_label"].iloc[0])


PANELS = (("prefill_tokens_per_s", "Prefill throughput (tokens/s)", 8),
          ("decode_tokens_per_s", "Decode throughput (tokens/s)", 9),
          ("kv_mib", "KV cache (MiB)", 10))
TIMED = {"prefill_tokens_per_s", "decode_tokens_per_s"}


def paper_series() -> pd.DataFrame:
    """The paper's Tables 8-10 (GPU, 1.3B) as ``model, seq_len, <panel column>`` (KV in MiB as printed)."""
    from yocou.results.reported import load_table

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


def plot(df: pd.DataFrame, scale: str):
    """Top row: our measurements (points measured under load ringed); bottom row, on axes of their own: the
    paper's Tables 8-10 (GPU, 1.3B), never on the same axes as ours. ``df``: :func:`efficiency_wide`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    kind, dev = device_of(df)
    loaded = df["loaded"].astype(bool)
    n_cpus = int(df["n_cpus"].iloc[0])
    paper = paper_series()
    fig, axes = plt.subplots(2, 3, figsize=(15.5, 7.6))
    for v, g in df.assign(_loaded=loaded).groupby("role", sort=False):
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
        _log_axes(ax, ylabel + (", measured" if col == "kv_mib" else ""))
        ax.set_title(f"ours: {scale} scale, {kind}", fontsize=9)
    for ax, (col, ylabel, t) in zip(axes[1], PANELS):
        _log_axes(ax, ylabel)
        ax.set_title(f"paper: Table {t} (GPU, 1.3B), reported", fontsize=9)
    loads = pd.concat([df[c] for c in ("loadavg_1m_before", "loadavg_1m_after") if c in df]).dropna() \
        if any(c in df for c in ("loadavg_1m_before", "loadavg_1m_after")) else pd.Series(dtype=float)
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


# fig7_data's columns (the profile's names) <- tidy metric or column
DATA_COLUMNS = {"variant": "run", "seq_len": "seq_len", "prompt_len": "prompt_len",
                "prefill_tokens_per_s": "prefill_tokens_per_s", "decode_tokens_per_s": "decode_tokens_per_s",
                "ttft_s": "ttft_s", "kv_bytes_measured": "kv_bytes", "kv_bytes_analytic": "kv_bytes_formula",
                "kv_equal": "kv_equal", "peak_mem_bytes": "peak_mem_bytes", "mem_kind": "mem_kind",
                "n_threads": "n_threads", "dtype": "dtype", "device": "device",
                "loadavg_1m_before": "loadavg_1m_before", "loadavg_1m_after": "loadavg_1m_after",
                "under_load": "loaded"}


def render(efficiency: str | Path, png: str | Path, data: str | Path, *, scale: str = "") -> None:
    """Figure 7 (``png`` and the ``.pdf`` beside it) and its data table ``data`` (``.csv/.md/.json``) from the
    tidy ``efficiency`` table."""
    cfg = {"efficiency": str(efficiency), "scale": scale}
    df = efficiency_wide(read_tidy(efficiency))
    _, dev = device_of(df)
    n_cpus = int(df["n_cpus"].iloc[0])
    save_figure(plot(df, scale), stem_of(png), config=cfg)
    t = pd.DataFrame({k: (df[c] if c in df else None) for k, c in DATA_COLUMNS.items()})
    for c in ("seq_len", "prompt_len", "kv_bytes_measured", "kv_bytes_analytic", "peak_mem_bytes", "n_threads"):
        t[c] = t[c].astype("int64")
    write_table(t, stem_of(data), title=f"Figure 7 data ({dev})",
                notes=[f"Measured on {dev}: absolute numbers are not comparable with the paper's GPU figures.",
                       "N = prompt + decoded tokens; prefill tokens/s over the prompt, decode tokens/s over the "
                       "decoded tokens only; medians of repeats (python -m yocou.evaluation.bench.profile).",
                       "loadavg columns: 1-minute load average before and after each measurement; under_load: "
                       f"either exceeds the machine's {n_cpus} CPUs (ringed in the figure).",
                       "The figure's bottom row draws the paper's Tables 8-10 (GPU, 1.3B) on axes of their own "
                       "(yocou/results/reported/table08.csv ... table10.csv)."],
                config=cfg)
