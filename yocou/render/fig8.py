"""Figure 8: angular distance between consecutive layer applications, one panel per variant.

Inputs: the ``python -m yocou.analysis.angular`` JSON per variant (file stem = variant). Outputs:
``<fig>.{png,pdf}`` (x: layer application in forward order, y: mean angular distance
arccos(cos_sim)/π between the residual stream before and after it; one line per held-out split and their
token-weighted mean; loop boundaries dotted, stage boundaries solid, the cross-decoder shaded) and the tidy
data ``<data>.{csv,md,json}``. The paper's Figure 8 is a plot without printed values, so no paper numbers
are shown.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from ..readers import read_angular
from .common import COLORS, label, save_figure, write_table

SPLIT_STYLE = {"all": dict(color="k", lw=1.8, marker="o", ms=3), "book": dict(color="#1f77b4", lw=1, ls="--"),
               "code": dict(color="#ff7f0e", lw=1, ls="--")}


def tidy(results: dict[str, dict]) -> pd.DataFrame:
    """One row per (variant, split, application)."""
    rows = []
    for v, res in results.items():
        parts = {**res["splits"], "all": res["all"]}
        for split, s in parts.items():
            if len(s["distance"]) != len(res["applications"]):
                raise ValueError(f"{v}/{split}: {len(s['distance'])} distances for "
                                 f"{len(res['applications'])} applications")
            for app, d in zip(res["applications"], s["distance"]):
                rows.append({"model": label(v), "variant": v, "split": split, "application": app["index"],
                             "kind": app["kind"], "stage": app["stage"], "loop": app["loop"] + 1,
                             "layer": app["layer"] + 1, "window": app["window"], "angular_distance": d,
                             "n_tokens": s["n_tokens"], "seq_len": res["seq_len"]})
    return pd.DataFrame(rows)


def boundaries(apps: pd.DataFrame) -> tuple[list[float], list[float]]:
    """x positions (between applications) of loop boundaries and of stage boundaries."""
    loops, stages = [], []
    prev = None
    for r in apps.itertuples():
        if prev is not None:
            if r.stage != prev.stage:
                stages.append(r.application - 0.5)
            elif r.loop != prev.loop:
                loops.append(r.application - 0.5)
        prev = r
    return loops, stages


def tick_labels(apps: pd.DataFrame) -> list[str]:
    """``S<k>``/``C<k>`` per application; where two stages share a kind (RINS = A^T B: both self-attention),
    the stage's block letter instead (``A<k>`` for the looped block, ``B<k>`` after it), so that layer k of B
    is not labelled like layer k of A."""
    kinds = apps.groupby("stage")["kind"].first()
    by_block = kinds.duplicated().any()
    return [f"{chr(ord('A') + int(r.stage))}{r.layer}" if by_block else f"{'S' if r.kind == 'self' else 'C'}{r.layer}"
            for r in apps.itertuples()]


def plot(df: pd.DataFrame, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(df["variant"]))
    n_col = min(3, len(variants))
    n_row = math.ceil(len(variants) / n_col)
    fig, axes = plt.subplots(n_row, n_col, figsize=(4.4 * n_col, 3.0 * n_row), squeeze=False, sharey=True,
                             constrained_layout=True)
    for k, v in enumerate(variants):
        ax = axes[k // n_col][k % n_col]
        d = df[df["variant"] == v]
        apps = d[d["split"] == "all"].sort_values("application")
        for split in dict.fromkeys(d["split"]):
            g = d[d["split"] == split].sort_values("application")
            ax.plot(g["application"], g["angular_distance"], label=split if split != "all" else "mean (tokens)",
                    **SPLIT_STYLE.get(split, {}))
        loops, stages = boundaries(apps)
        for x in loops:
            ax.axvline(x, color="0.4", ls=":", lw=1)
        for x in stages:
            ax.axvline(x, color="0.2", ls="-", lw=1)
        cross = apps[apps["kind"] == "cross"]
        if len(cross):
            ax.axvspan(cross["application"].min() - 0.5, cross["application"].max() + 0.5, color="0.93", zorder=0)
        # Loop labels above each looped stretch.
        labels = tick_labels(apps)
        by_block = any(lab[0] not in "SC" for lab in labels)
        for (stage, loop), g in apps.groupby(["stage", "loop"], sort=False):
            n_loops = apps[apps["stage"] == stage]["loop"].max()
            block = chr(ord("A") + int(stage)) if by_block else ""
            text = f"{block} t={loop}".strip() if n_loops > 1 else (f"{block} (once)" if block else "")
            if text:
                ax.text(g["application"].mean(), 1.0, text, transform=ax.get_xaxis_transform(),
                        ha="center", va="bottom", fontsize=7, color="0.3")
        ax.set_title(f"{label(v)}", fontsize=9, color=COLORS.get(v, "k"), pad=12)
        ax.set_xlabel("layer application (forward order)")
        ax.set_xticks(list(apps["application"]))
        ax.set_xticklabels(labels, fontsize=6, rotation=90)
        ax.grid(alpha=0.3)
        if k % n_col == 0:
            ax.set_ylabel("angular distance arccos(cos)/π")
    for k in range(len(variants), n_row * n_col):
        axes[k // n_col][k % n_col].axis("off")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def summary(df: pd.DataFrame) -> list[str]:
    """Per variant: mean distance of each (stage, loop) stretch, on the token-weighted mean of the splits."""
    out = []
    d = df[df["split"] == "all"]
    for v, g in d.groupby("variant", sort=False):
        parts = []
        for (stage, loop), s in g.groupby(["stage", "loop"], sort=False):
            kind = s["kind"].iloc[0]
            looped = g[g["stage"] == stage]["loop"].max() > 1
            parts.append(f"{kind} stage {stage}{f' t={loop}' if looped else ''} {s['angular_distance'].mean():.3f}")
        out.append(f"{label(v)}: " + ", ".join(parts))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--angular", nargs="+", required=True, help="angular JSON per variant (stem = variant)")
    ap.add_argument("--fig", required=True, help="figure stem (figures/<scale>/fig8)")
    ap.add_argument("--data", required=True, help="data stem (results/<scale>/fig8_data)")
    ap.add_argument("--scale-name", default="")
    a = ap.parse_args(argv)
    results = {Path(p).stem: read_angular(p) for p in a.angular}
    df = tidy(results)
    first = next(iter(results.values()))
    devices = sorted({str(r.get("device", "cpu")).split(":")[0] for r in results.values()})
    where = "CPU" if devices == ["cpu"] else "/".join(d.upper() if d == "cuda" else d for d in devices)
    split_desc = "; ".join(
        f"{k}: {s['n_tokens']} tokens in {s['n_windows']} windows of ≤{first['seq_len']} from {s['n_docs']} "
        f"document{'s' if s['n_docs'] != 1 else ''} ({', '.join(s['docs'][:4])}{', …' if s['n_docs'] > 4 else ''})"
        for k, s in first["splits"].items())
    notes = [
        f"{a.scale_name} scale, our models evaluated on {where}; the paper's Figure 8 prints no values, so only ours "
        "are shown.",
        "Angular distance of a layer application = arccos(cos_sim(h_in, h_out))/π per token between the residual "
        "stream before and after it (application 1 starts from the embedding), averaged over tokens; full forward "
        "without cache (SPEC.md section 7).",
        f"Held-out text (never trained on), per variant: {split_desc}. split = all is the token-weighted mean.",
        "Ticks: S<k>/C<k> = self/cross layer k of its stage; where two stages are both self-attention (RINS = "
        "A^T B) A<k>/B<k> = layer k of the looped block A / of block B applied once after it; t = loop iteration "
        "of a looped stage (dotted lines), solid lines = stage boundaries, shaded = cross-decoder.",
        "Measured mean per stage and loop: " + "; ".join(summary(df)) + ".",
    ]
    title = f"Figure 8: angular distance between consecutive layer applications ({a.scale_name} scale, {where})"
    write_table(df, a.data, notes=notes, config=vars(a),
                title=f"Figure 8 data: angular distance per layer application ({a.scale_name} scale, {where})")
    save_figure(plot(df, title), a.fig, config=vars(a))
    print("\n".join(summary(df)))
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
