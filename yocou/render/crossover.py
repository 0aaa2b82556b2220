"""The crossover figure and table (issue 15, item 4): YOCO and YOCO-U trained for ``crossover.factor`` x the budget,
held-out loss at checkpoints (left) and YOCO-U's gap to YOCO with its 95% interval across seeds (right); reads
only the tidy ``crossover`` table (:mod:`yocou.summarize.crossover`). Called by ``workflows/scripts/crossover.py``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..names import COLORS, label
from ..summarize.crossover import crossover_verdict, gap_by_tokens
from ..tidy import read_tidy
from .common import save_figure, stem_of, write_table

__all__ = ["render"]


def render(tidy: str | Path, *, out: str | Path, data: str | Path, scale: str = "", split: str = "book") -> dict:
    """Draw ``out`` (png + pdf) and write ``data`` (csv/md/json: the gap per checkpoint and the verdict) from the
    tidy crossover table; returns the verdict (:func:`yocou.summarize.crossover.crossover_verdict`).

    Raises:
        ValueError: the table has no checkpoint that both roles reached (the message names the file).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = read_tidy(tidy)
    metric = f"heldout_loss.{split}"
    g = gap_by_tokens(t, metric)
    if g.empty:
        raise ValueError(f"{tidy}: no checkpoint with both yoco and yocou rows of {metric}")
    verdict = crossover_verdict(g)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for role in ("yoco", "yocou"):
        c = t[(t["role"] == role) & (t["metric"] == metric)].groupby("axis_value")["value"]
        m, lo, hi, n = c.mean(), c.min(), c.max(), int(t[t["role"] == role]["seed"].nunique())
        axes[0].plot(m.index, m.values, color=COLORS.get(role), lw=1.6, label=f"{label(role)} (mean of {n} seeds)")
        axes[0].fill_between(m.index, lo.values, hi.values, color=COLORS.get(role), alpha=0.2, lw=0)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("Training tokens")
    axes[0].set_ylabel(f"Held-out loss (nats/token), {split}")
    axes[0].legend(frameon=False, fontsize=8, title="band: min-max over seeds", title_fontsize=8)
    axes[1].axhline(0, color="black", lw=0.8)
    axes[1].plot(g["tokens"], g["gap"], color=COLORS.get("yocou"), marker=".", lw=1.4, label="YOCO-U - YOCO")
    axes[1].fill_between(g["tokens"], g["low"].clip(lower=-10), g["high"].clip(upper=10), color=COLORS.get("yocou"),
                         alpha=0.2, lw=0, label="95% interval across seeds")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("Training tokens")
    axes[1].set_ylabel("Gap in held-out loss (nats/token)")
    axes[1].legend(frameon=False, fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(f"Crossover (ours, {scale} scale, CPU): does YOCO-U's equal-steps gap close? {verdict['status']}",
                 fontsize=10)
    fig.tight_layout()
    cfg = {"tidy": str(tidy), "scale": scale, "split": split}
    save_figure(fig, stem_of(out), config=cfg)
    plt.close(fig)
    last = verdict["last"]
    notes = [f"Gap = YOCO-U minus YOCO held-out loss on the first train.eval_tokens tokens of the held-out {split}; "
             f"positive: YOCO-U worse. Interval: {last['method']}, 95%.",
             f"Verdict: {verdict['status']}" + (f" from {verdict['at_tokens']:.3g} tokens" if verdict["at_tokens"]
                                                 else "") +
             f"; at {last['tokens']:.3g} tokens the gap is {last['gap']:+.3f} [{last['low']:+.3f}, {last['high']:+.3f}].",
             "No published result answers this at small scale; the paper reports YOCO-U ahead at 1.3B+ (Figure 2)."]
    write_table(pd.DataFrame(g), stem_of(data), title="Crossover: YOCO-U's held-out-loss gap to YOCO by tokens",
                notes=notes, config=cfg | {"verdict": verdict})
    return verdict
