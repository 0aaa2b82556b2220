"""Figure 4: perplexity against input length on book and code data, one line per model.

Input: the tidy table ``results/<scale>/tidy/fig4`` (:func:`yocou.results.summarize.training.summarize_fig4`, from the
``python -m yocou.evaluation.longctx.longppl`` JSON per run, whose curves are derived from per-token NLL stored once per
document). Outputs: ``<fig>.{png,pdf}`` (top row: cumulative perplexity of an input of L tokens; bottom row:
perplexity of its final span; one line per model, the mean over its seeds, with a min-max band across seeds) and
the data ``<data>.{csv,md,json}`` (one row per run: every seed). Lengths beyond the training length are
shaded and flagged ``extrapolated``. The paper's Figure 4 is a plot without printed values, so no paper numbers
are shown.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from yocou.results.names import COLORS, label
from yocou.results.render.common import numeric, save_figure, stem_of, write_table
from yocou.results.tidy import read_tidy


def table(tidy: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, split, length) with its cumulative and final-span perplexity, from the tidy rows."""
    rows = []
    cum = tidy[tidy["metric"].isin([f"{s}.cum_ppl" for s in dict.fromkeys(tidy["split"])])]
    for r in cum.itertuples():
        span = tidy[(tidy["run"] == r.run) & (tidy["metric"] == f"{r.split}.span_ppl")
                    & (tidy["axis_value"] == r.axis_value)]
        rows.append({"model": label(r.role), "role": r.role, "variant": r.run, "seed": int(r.seed), "split": r.split,
                     "length": int(r.axis_value),
                     "cum_ppl": r.value, "span_ppl": float(span["value"].iloc[0]) if len(span) else None,
                     "span": int(r.span), "extrapolated": bool(r.extrapolated), "train_seq_len": int(r.train_seq_len),
                     "n_docs": int(r.n), "source": r.detail if r.split == "book" else "held-out stdlib modules"})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = list(dict.fromkeys(df["split"]))
    fig, axes = plt.subplots(2, len(splits), figsize=(4.6 * len(splits), 6.4), squeeze=False,
                             constrained_layout=True)
    for j, split in enumerate(splits):
        for i, (col, what) in enumerate((("cum_ppl", "cumulative ppl (tokens 1..L)"),
                                         ("span_ppl", "ppl of the final {span} tokens"))):
            ax = axes[i][j]
            d = df[df["split"] == split]
            for role, g in d.groupby("role", sort=False):
                st = g.dropna(subset=[col]).groupby("length")[col].agg(["mean", "min", "max"]).sort_index()
                n = int(g["seed"].nunique())
                line, = ax.plot(st.index, st["mean"], marker="o", ms=3, color=COLORS.get(role),
                                label=label(role) + (f" (mean of {n} seeds)" if n > 1 else ""))
                if n > 1:
                    ax.fill_between(st.index, st["min"], st["max"], color=line.get_color(), alpha=0.2, lw=0)
            tl = d["train_seq_len"].dropna()
            if len(tl):
                t = float(tl.iloc[0])
                ax.axvline(t, color="k", ls=":", lw=1)
                ax.axvspan(t, d["length"].max() * 1.05, facecolor="0.97", edgecolor="0.75", hatch="//", lw=0, zorder=0,
                           label="extrapolation (> training length)")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("input length L (tokens)")
            ax.set_ylabel(what.format(span=int(d["span"].iloc[0])))
            if i == 0:
                ax.set_title(f"{split}: {d['source'].iloc[0]}, {int(d['n_docs'].iloc[0])} docs", fontsize=9)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def render(tidy: str | Path, *, fig: str | Path, data: str | Path, scale: str = "") -> pd.DataFrame:
    """Draw Figure 4 and write its data from the tidy ``fig4`` table (``fig``, ``data``: stems or file paths)."""
    t = numeric(read_tidy(tidy), "train_seq_len", "span")
    df = table(t)
    cfg = {"tidy": str(tidy), "scale": scale}
    first = df[df["variant"] == df["variant"].iloc[0]]
    lmax = int(first["length"].max())
    tsl = int(first["train_seq_len"].iloc[0])
    span = int(first["span"].iloc[0])
    run0 = t[t["run"] == first["variant"].iloc[0]]
    docs = {s: (int(g["n_docs"].iloc[-1]), str(run0[run0["split"] == s]["detail"].iloc[0]))
            for s, g in first.groupby("split", sort=False)}
    measured = []
    mean = df.groupby(["split", "role", "length"], sort=False)[["cum_ppl", "span_ppl"]].mean()
    seeds = df.groupby("role", sort=False)["seed"].nunique()
    for split in dict.fromkeys(df["split"]):
        measured.append(f"{split}: " + ", ".join(
            f"{label(role)} {mean.loc[(split, role, tsl), 'cum_ppl']:.2f}"
            f"→{mean.loc[(split, role, lmax), 'cum_ppl']:.2f} (final span {mean.loc[(split, role, lmax), 'span_ppl']:.2f})"
            for role in dict.fromkeys(df[df["split"] == split]["role"])
            if (split, role, tsl) in mean.index and (split, role, lmax) in mean.index))
    notes = [
        f"{scale} scale, evaluated on CPU; the paper's Figure 4 prints no values, so only ours are shown.",
        "One cached pass per document up to the longest length (chunked prefill with logits at every position); "
        "per-token NLL stored once (results/<scale>/longppl/<variant>.npz); cum_ppl = exp(mean NLL of tokens "
        f"1..L−1), span_ppl = exp(mean NLL of the last {span} tokens of an input of L tokens).",
        "Documents held out of training whole: book = " + (f"{docs['book'][0]} excerpts of {lmax} tokens "
        f"of {docs['book'][1]} at evenly spaced offsets" if "book" in docs else "none") + "; code = "
        + (f"the first {lmax} tokens of {docs['code'][0]} stdlib modules ({docs['code'][1]})"
           if "code" in docs else "none") + ".",
        f"Training length {tsl} tokens: lengths above it (extrapolated = true) are extrapolation.",
        f"Measured cumulative ppl at the training length → at {lmax} tokens, mean over each model's seeds ("
        + ", ".join(f"{label(r)} {int(n)}" for r, n in seeds.items()) + "; the band in the figure is the min-max "
        "across seeds): " + "; ".join(measured) + ".",
    ]
    write_table(df, stem_of(data), title=f"Figure 4 data: perplexity against input length ({scale} scale, CPU)",
                notes=notes, config=cfg)
    save_figure(plot(df, f"Perplexity vs input length ({scale} scale, CPU)"), stem_of(fig), config=cfg)
    return df
