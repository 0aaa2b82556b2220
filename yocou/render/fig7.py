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


def main(argv: list[str] | None = None) -> int:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", required=True, help="profile JSON (python -m yocou.bench.profile)")
    ap.add_argument("--out", required=True, help="figure stem (png + pdf)")
    ap.add_argument("--data", required=True, help="table stem of the plotted data")
    ap.add_argument("--scale-name", default="")
    a = ap.parse_args(argv)
    df, prov = load_profile(a.profile)
    dev = device_label(df, prov)
    df["kv_MiB"] = df["kv_bytes_measured"] / MIB
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.9))
    panels = (("prefill_tokens_per_s", "Prefill throughput (tokens/s)", True),
              ("decode_tokens_per_s", "Decode throughput (tokens/s)", True),
              ("kv_MiB", "KV cache (MiB, measured)", True))
    for v, g in df.groupby("variant", sort=False):
        g = g.sort_values("seq_len")
        for ax, (col, _, _) in zip(axes, panels):
            ax.plot(g["seq_len"], g[col], marker="o", ms=3.5, lw=1.8, label=label(v), color=COLORS.get(v))
    for ax, (_, ylabel, logy) in zip(axes, panels):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1024:g}K" if v >= 1024 else f"{v:g}"))
        if logy:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("Sequence length N (tokens)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(frameon=False, fontsize=8)
    fig.suptitle(f"Figure 7 at our {a.scale_name} scale — {dev}; paper: GPU, 1.3B", fontsize=10)
    fig.tight_layout()
    save_figure(fig, stem_of(a.out), config=vars(a))
    cols = ["variant", "seq_len", "prompt_len", "prefill_tokens_per_s", "decode_tokens_per_s", "ttft_s",
            "kv_bytes_measured", "kv_bytes_analytic", "kv_equal", "peak_mem_bytes", "mem_kind", "n_threads",
            "dtype", "device", "loadavg_1m_before", "loadavg_1m_after"]
    write_table(df[cols], stem_of(a.data), title=f"Figure 7 data ({dev})",
                notes=[f"Measured on {dev}: absolute numbers are not comparable with the paper's GPU figures.",
                       "N = prompt + decoded tokens; prefill tokens/s over the prompt, decode tokens/s over the "
                       "decoded tokens only; medians of repeats (python -m yocou.bench.profile).",
                       "loadavg columns: 1-minute load average before and after each measurement."],
                config=vars(a))
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
