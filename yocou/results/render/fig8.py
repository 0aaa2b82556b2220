"""Figure 8: angular distance between consecutive layer applications, one panel per variant.

Input: the tidy table ``results/<scale>/tidy/fig8`` (:func:`yocou.results.summarize.training.summarize_fig8`, from the
``python -m yocou.evaluation.analysis.angular`` JSON per run). Outputs: ``<fig>.{png,pdf}`` (x: layer application in forward
order, y: mean angular distance arccos(cos_sim)/π between the residual stream before and after it; one line per
held-out split and their token-weighted mean; loop boundaries dotted, stage boundaries solid, the cross-decoder
shaded) and the data ``<data>.{csv,md,json}``. The paper's Figure 8 is a plot without printed values, so no paper
numbers are shown.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from yocou.results.names import COLORS, label
from yocou.results.render.common import numeric, save_figure, stem_of, write_table
from yocou.results.tidy import read_tidy

SPLIT_STYLE = {"all": dict(color="k", lw=1.8, marker="o", ms=3), "book": dict(color="#1f77b4", lw=1, ls="--"),
               "code": dict(color="#ff7f0e", lw=1, ls="--")}


def table(tidy: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, split, application), from the tidy rows on axis ``application``."""
    d = tidy[tidy["axis"] == "application"]
    rows = []
    for r in d.itertuples():
        rows.append({"model": label(r.role), "variant": r.run, "split": r.split, "application": int(r.axis_value),
                     "kind": r.kind, "stage": int(r.stage), "loop": int(r.loop), "layer": int(r.layer),
                     "window": None if pd.isna(r.window) else int(r.window), "angular_distance": r.value,
                     "n_tokens": int(r.n), "seq_len": int(r.seq_len)})
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


def summary(tidy: pd.DataFrame) -> list[str]:
    """Per variant: the mean distance of each (stage, loop) stretch (tidy ``stage_mean_angular_distance``)."""
    out = []
    d = tidy[tidy["metric"] == "stage_mean_angular_distance"]
    for role, g in d.groupby("role", sort=False):
        parts = [f"{r.kind} stage {int(r.axis_value)}{f' t={int(r.axis2_value)}' if r.stage_loops > 1 else ''} "
                 f"{r.value:.3f}" for r in g.itertuples()]
        out.append(f"{label(role)}: " + ", ".join(parts))
    return out


def render(tidy: str | Path, *, fig: str | Path, data: str | Path, scale: str = "") -> pd.DataFrame:
    """Draw Figure 8 and write its data from the tidy ``fig8`` table (``fig``, ``data``: stems or file paths)."""
    t = numeric(read_tidy(tidy), "stage", "loop", "layer", "window", "seq_len", "n_windows", "n_docs",
                "stage_loops")
    df = table(t)
    cfg = {"tidy": str(tidy), "scale": scale}
    devices = sorted({str(x).split(":")[0] for x in t[t["axis"] == "application"]["device"]})
    where = "CPU" if devices == ["cpu"] else "/".join(x.upper() if x == "cuda" else x for x in devices)
    first = t[(t["run"] == t["run"].iloc[0]) & (t["axis"] == "application") & (t["split"] != "all")]
    split_desc = "; ".join(
        f"{r.split}: {int(r.n)} tokens in {int(r.n_windows)} windows of ≤{int(r.seq_len)} from {int(r.n_docs)} "
        f"document{'s' if int(r.n_docs) != 1 else ''} ({r.docs})"
        for r in first.drop_duplicates("split").itertuples())
    notes = [
        f"{scale} scale, our models evaluated on {where}; the paper's Figure 8 prints no values, so only ours "
        "are shown.",
        "Angular distance of a layer application = arccos(cos_sim(h_in, h_out))/π per token between the residual "
        "stream before and after it (application 1 starts from the embedding), averaged over tokens; full forward "
        "without cache (docs/design.md section 7).",
        f"Held-out text (never trained on), per variant: {split_desc}. split = all is the token-weighted mean.",
        "Ticks: S<k>/C<k> = self/cross layer k of its stage; where two stages are both self-attention (RINS = "
        "A^T B) A<k>/B<k> = layer k of the looped block A / of block B applied once after it; t = loop iteration "
        "of a looped stage (dotted lines), solid lines = stage boundaries, shaded = cross-decoder.",
        "Measured mean per stage and loop: " + "; ".join(summary(t)) + ".",
    ]
    title = f"Figure 8: angular distance between consecutive layer applications ({scale} scale, {where})"
    write_table(df, stem_of(data), notes=notes, config=cfg,
                title=f"Figure 8 data: angular distance per layer application ({scale} scale, {where})")
    save_figure(plot(df, title), stem_of(fig), config=cfg)
    return df
