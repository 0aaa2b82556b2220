"""Figure 4: perplexity against input length on book and code data, one line per model.

Inputs: the ``python -m yocou.longctx.longppl`` JSON per variant (file stem = variant), whose curves
are derived from per-token NLL stored once per document. Outputs: ``<fig>.{png,pdf}`` (top row:
cumulative perplexity of an input of L tokens; bottom row: perplexity of its final span) and the
tidy data ``<data>.{csv,md,json}``. Lengths beyond the training length are shaded and flagged
``extrapolated``. The paper's Figure 4 is a plot without printed values, so no paper numbers are shown.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ..readers import read_longppl
from .common import COLORS, label, save_figure, write_table

def tidy(results: dict[str, dict]) -> pd.DataFrame:
    rows = []
    for v, res in results.items():
        for split, s in res["splits"].items():
            for r in s["curves"]:
                rows.append({"model": label(v), "variant": v, "split": split, "length": r["length"],
                             "cum_ppl": r["cum_ppl"], "span_ppl": r["span_ppl"], "span": res["span"],
                             "extrapolated": r["extrapolated"], "train_seq_len": res["train_seq_len"],
                             "n_docs": s["n_docs"], "source": s["docs"][0]["id"] if split == "book" else
                             "held-out stdlib modules"})
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
            for v, g in d.groupby("variant", sort=False):
                g = g.dropna(subset=[col]).sort_values("length")
                ax.plot(g["length"], g[col], marker="o", ms=3, label=label(v), color=COLORS.get(v))
            tl = d["train_seq_len"].dropna()
            if len(tl):
                t = float(tl.iloc[0])
                ax.axvline(t, color="k", ls=":", lw=1)
                ax.axvspan(t, d["length"].max() * 1.05, color="0.9", zorder=0,
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--longppl", nargs="+", required=True, help="longppl JSON per variant (stem = variant)")
    ap.add_argument("--fig", required=True, help="figure stem (figures/<scale>/fig4)")
    ap.add_argument("--data", required=True, help="data stem (results/<scale>/fig4_data)")
    ap.add_argument("--scale-name", default="")
    a = ap.parse_args(argv)
    results = {Path(p).stem: read_longppl(p) for p in a.longppl}
    df = tidy(results)
    first = next(iter(results.values()))
    docs = {k: [d["id"] for d in s["docs"]] for k, s in first["splits"].items()}
    Lmax = max(first["lengths"])
    measured = []
    for split in dict.fromkeys(df["split"]):
        d = df[(df["split"] == split) & (df["length"] == Lmax)]
        t = df[(df["split"] == split) & (df["length"] == first["train_seq_len"])]
        measured.append(f"{split}: " + ", ".join(
            f"{r.model} {float(t[t['variant'] == r.variant]['cum_ppl'].iloc[0]) if len(t) else float('nan'):.2f}"
            f"→{r.cum_ppl:.2f} (final span {r.span_ppl:.2f})" for r in d.itertuples()))
    notes = [
        f"{a.scale_name} scale, evaluated on CPU; the paper's Figure 4 prints no values, so only ours are shown.",
        "One cached pass per document up to the longest length (chunked prefill with logits at every position); "
        "per-token NLL stored once (results/<scale>/longppl/<variant>.npz); cum_ppl = exp(mean NLL of tokens "
        f"1..L−1), span_ppl = exp(mean NLL of the last {first['span']} tokens of an input of L tokens).",
        "Documents held out of training whole: book = " + (f"{len(docs.get('book', []))} excerpts of {Lmax} tokens "
        f"of {docs['book'][0]} at evenly spaced offsets" if docs.get("book") else "none") + "; code = "
        + (f"the first {Lmax} tokens of {len(docs['code'])} stdlib modules ({', '.join(docs['code'])})"
           if docs.get("code") else "none") + ".",
        f"Training length {first['train_seq_len']} tokens: lengths above it (extrapolated = true) are extrapolation.",
        f"Measured cumulative ppl at the training length → at {Lmax} tokens: " + "; ".join(measured) + ".",
    ]
    write_table(df, a.data, title=f"Figure 4 data: perplexity against input length ({a.scale_name} scale, CPU)",
                notes=notes, config=vars(a))
    save_figure(plot(df, f"Perplexity vs input length ({a.scale_name} scale, CPU)"), a.fig, config=vars(a))
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
