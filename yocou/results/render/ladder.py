"""Figure 2 redrawn from the annealed token ladder: held-out loss against training tokens and training FLOPs.

One row of panels per held-out split (book, code, and the plays held out of the ladder's training where the points have
them, reported, not decided); left: tokens, right: training FLOPs (both log scale). Points:
each variant's seed mean at every annealed budget (bars: min to max over seeds); lines: the fitted
``L(D) = E + B D^-beta`` with its band: at each D the Student t interval (n - 1 df) of the per-seed fitted curves;
dashed grey: the Kneser-Ney bigram fitted on each budget's own training windows (a point above it has not left the bigram regime).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yocou.results.render.common import COLORS, label, save_figure


def _sci(x: float, _pos: int) -> str:
    """``2×10^6`` for a minor tick (mathtext), the way the major ticks read."""
    e = int(np.floor(np.log10(x)))
    return f"${x / 10 ** e:.0f}\\times10^{{{e}}}$"


def draw(pts: pd.DataFrame, res: Mapping[str, Any], figure: str | Path, rules: Mapping[str, Any],
         scale: str) -> None:
    """Draw the figure from the points and :func:`yocou.results.summarize.ladder_fits.analyse`'s result into ``figure``
    (PNG and PDF, :func:`yocou.results.render.common.save_figure`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    from yocou.results.summarize.ladder_fits import SPLITS, power_law, t_band

    splits = [s for s in (*SPLITS, "plays") if s in res["fits"]]
    fig, axes = plt.subplots(len(splits), 2, figsize=(11, 4.2 * len(splits)), squeeze=False)
    variants = list(dict.fromkeys(pts["variant"]))
    fpt = res["flops_per_token"]
    for i, s in enumerate(splits):
        for j, x_of in enumerate(("tokens", "flops")):
            ax = axes[i][j]
            for v in variants:
                g = pts[pts["variant"] == v].groupby("tokens")[s]
                d = np.array(sorted(g.groups))
                mean, lo, hi = g.mean().to_numpy(), g.min().to_numpy(), g.max().to_numpy()
                scale_x = 1.0 if x_of == "tokens" else fpt[v]
                c = COLORS.get(v, None)
                n = int(pts[pts["variant"] == v]["seed"].nunique())
                ax.errorbar(d * scale_x, mean, yerr=[mean - lo, hi - mean], fmt="o", color=c, ms=4, capsize=2,
                            label=f"{label(v)} ({n} seed{'s' if n > 1 else ''})")
                p = res["fits"][s].get(v)
                if p:
                    grid = np.logspace(np.log10(d.min()), np.log10(d.max()), 100)
                    ax.plot(grid * scale_x, power_law(grid, *p), color=c, lw=1.2)
                    band = t_band(grid, [f for f in res["seed_fits"][s].get(v, {}).values() if f],
                                  float(rules["confidence"]))
                    if band is not None:
                        ax.fill_between(grid * scale_x, *band, color=c, alpha=0.15, lw=0)
            big = pts.groupby("tokens")[f"bigram_{s}"].first()
            if x_of == "tokens":
                ax.plot(big.index, big.to_numpy(), ls="--", color="0.5", lw=1,
                        label="bigram fitted on the budget's own windows")
            ax.set_xscale("log")
            # label the minor ticks at 2 and 5 only: a decade's 2, 3, 4, 6 x 10^k labels overlap
            ax.xaxis.set_minor_locator(ticker.LogLocator(base=10, subs=(2.0, 5.0)))
            ax.xaxis.set_minor_formatter(ticker.FuncFormatter(_sci))
            ax.set_xlabel("training tokens" if x_of == "tokens" else "training FLOPs")
            ax.set_ylabel(f"held-out {s} loss (nats/token)")
            ax.grid(alpha=0.3, which="both")
            if i == 0 and j == 0:
                ax.legend(fontsize=8, loc="upper right")
            held = " (plays held out of training; reported, not decided)" if s not in SPLITS else ""
            ax.set_title(f"{s}: loss against {'tokens' if x_of == 'tokens' else 'FLOPs'}{held}", fontsize=10)
    dec = [d for d in res["decisions"] if d["quantity"] == "equal_tokens"]
    words = "; ".join(f"{d['split']}: YOCO-U - YOCO {d['gap']:+.3f} at {d['tokens'] / 1e6:.1f}M tokens, {d['verdict']}"
                      for d in dec)
    fig.suptitle(f"Figure 2 from the annealed token ladder ({scale}, CPU): each point annealed at its own budget, "
                 f"bracketed learning rates; bands: 95% t interval of the per-seed fits\n{words}", fontsize=10)
    fig.tight_layout()
    save_figure(fig, figure, config={"scale": scale, "rules": dict(rules)})
    plt.close(fig)


def draw_depth(pts: pd.DataFrame, deep: pd.DataFrame, figure: str | Path, scale: str,
               variants: tuple[str, ...] = ("yoco", "yocou")) -> None:
    """The depth control beside YOCO and YOCO-U (:mod:`yocou.results.summarize.depth`): per decided split, the
    held-out loss against training tokens (left) and training FLOPs (right), each variant's seed mean at every
    budget of the ladder (bars: min to max over seeds); the Kneser-Ney bigram of each budget dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from yocou.results.summarize.ladder_fits import SPLITS

    both = pd.concat([pts[pts["variant"].isin(variants)], deep], ignore_index=True)
    fig, axes = plt.subplots(len(SPLITS), 2, figsize=(11, 4 * len(SPLITS)), squeeze=False)
    for i, s in enumerate(SPLITS):
        for j, x_of in enumerate(("tokens", "flops")):
            ax = axes[i][j]
            for v in dict.fromkeys(both["variant"]):
                g = both[both["variant"] == v]
                fpt = float((g["train_flops"] / g["tokens"]).mean()) if x_of == "flops" else 1.0
                agg = g.groupby("tokens")[s]
                d = np.array(sorted(agg.groups), dtype=float)
                mean, lo, hi = agg.mean().to_numpy(), agg.min().to_numpy(), agg.max().to_numpy()
                n = int(g["seed"].nunique())
                ax.errorbar(d * fpt, mean, yerr=[mean - lo, hi - mean], fmt="o-", color=COLORS.get(v), ms=4,
                            capsize=2, lw=1, label=f"{label(v)} ({n} seed{'s' if n > 1 else ''})")
            if x_of == "tokens":
                big = both.groupby("tokens")[f"bigram_{s}"].first()
                ax.plot(big.index, big.to_numpy(), ls="--", color="0.5", lw=1, label="bigram (the budget's windows)")
            ax.set_xscale("log")
            ax.set_xlabel("training tokens" if x_of == "tokens" else "training FLOPs")
            ax.set_ylabel(f"held-out {s.removeprefix('heldout_')} loss (nats/token)")
            ax.grid(alpha=0.3, which="both")
            if i == 0 and j == 0:
                ax.legend(fontsize=8, loc="lower left")
            ax.set_title(f"{s.removeprefix('heldout_')}: loss against {'tokens' if x_of == 'tokens' else 'FLOPs'}",
                         fontsize=10)
    fig.suptitle(f"Positive control for depth ({scale}, CPU): {label(str(deep['variant'].iloc[0]))} at YOCO-U's "
                 "FLOPs per token, beside YOCO and YOCO-U; annealed points, bracketed rates", fontsize=10)
    fig.tight_layout()
    save_figure(fig, figure, config={"scale": scale})
    plt.close(fig)
