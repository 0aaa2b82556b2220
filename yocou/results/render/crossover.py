"""The crossover figure and table: YOCO and YOCO-U trained for ``crossover.factor`` x the budget,
held-out loss at checkpoints (left) and YOCO-U's gap to YOCO with its 95% interval across seeds (right); reads
only the tidy ``crossover`` table (:mod:`yocou.results.summarize.crossover`). Called by ``workflows/scripts/crossover.py``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from yocou.results.names import COLORS, label
from yocou.results.render.common import save_figure, stem_of, write_table
from yocou.results.summarize.crossover import (
    crossover_verdict,
    final_gap,
    gap_by_tokens,
)
from yocou.results.tidy import read_tidy

__all__ = ["render"]


def render(tidy: str | Path, *, out: str | Path, data: str | Path, scale: str = "",
           splits: tuple[str, ...] = ("book", "code"), budget_tokens: float | None = None) -> dict:
    """Draw ``out`` (png + pdf; one row of panels per held-out split) and write ``data`` (csv/md/json: the gap per
    checkpoint and split, the final models' gap on the whole held-out set, the verdicts) from the tidy crossover
    table; ``budget_tokens``: the core runs' budget, marked on the token axis. Returns ``{split: verdict}``
    (:func:`yocou.results.summarize.crossover.crossover_verdict`, with ``final``: :func:`final_gap` or None).

    Raises:
        ValueError: the table has no checkpoint that both roles reached (the message names the file).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = read_tidy(tidy)
    splits = tuple(sp for sp in splits if (t["metric"] == f"heldout_loss.{sp}").any())
    gaps = {sp: gap_by_tokens(t, f"heldout_loss.{sp}") for sp in splits}
    if not splits or any(g.empty for g in gaps.values()):
        raise ValueError(f"{tidy}: no checkpoint with both yoco and yocou rows of heldout_loss.<split>")
    finals = {sp: final_gap(t, sp) for sp in splits}
    verdicts = {sp: {**crossover_verdict(g, ref_tokens=budget_tokens, final=finals[sp]), "final": finals[sp]}
                for sp, g in gaps.items()}
    fig, axes = plt.subplots(len(splits), 3, figsize=(14, 3.6 * len(splits)), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 1, 0.45]})
    for row, sp in enumerate(splits):
        ax0, ax1, ax2 = axes[row]
        metric, g, v = f"heldout_loss.{sp}", gaps[sp], verdicts[sp]
        for role in ("yoco", "yocou"):
            c = t[(t["role"] == role) & (t["metric"] == metric)].groupby("axis_value")["value"]
            m, lo, hi, n = c.mean(), c.min(), c.max(), int(t[t["role"] == role]["seed"].nunique())
            ax0.plot(m.index, m.values, color=COLORS.get(role), lw=1.6, label=f"{label(role)} (mean of {n} seeds)")
            ax0.fill_between(m.index, lo.values, hi.values, color=COLORS.get(role), alpha=0.2, lw=0)
            # the final models on the whole held-out set: another level than the checkpoints' subset, own axis
            full = t[(t["role"] == role) & (t["metric"] == f"heldout_full.{sp}")]["value"]
            if len(full):
                x = ("yoco", "yocou").index(role)
                ax2.errorbar([x], [full.mean()], yerr=[[full.mean() - full.min()], [full.max() - full.mean()]],
                             color=COLORS.get(role), marker="D", ms=5, lw=0, elinewidth=1, capsize=3)
        ax0.set_ylabel(f"Held-out loss (nats/token), {sp}")
        ax0.legend(frameon=False, fontsize=7, title="band / bars: min-max over seeds", title_fontsize=7)
        ax1.axhline(0, color="black", lw=0.8)
        ax1.plot(g["tokens"], g["gap"], color=COLORS.get("yocou"), marker=".", lw=1.4, label="YOCO-U - YOCO")
        ax1.fill_between(g["tokens"], g["low"].clip(lower=-10), g["high"].clip(upper=10), color=COLORS.get("yocou"),
                         alpha=0.2, lw=0, label="95% interval across seeds")
        ax2.set_xticks([0, 1], [label("yoco"), label("yocou")])
        ax2.set_xlim(-0.6, 1.6)
        ax2.set_ylabel(f"Held-out loss (nats/token), {sp}")
        ax2.grid(alpha=0.3, axis="y")
        if v["final"]:
            f = v["final"]
            ax2.set_title(f"final models, whole held-out set\n({f['n_tokens']:,} tokens): gap {f['gap']:+.3f} "
                          f"[{f['low']:+.3f}, {f['high']:+.3f}]", fontsize=8)
        else:
            ax2.set_title("final models: not evaluated", fontsize=8)
        ax1.set_ylabel(f"Gap in held-out loss (nats/token), {sp}")
        ax1.set_title(f"{sp}: {v['status']}", fontsize=9)
        for ax in (ax0, ax1):
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            if budget_tokens:
                ax.axvline(budget_tokens, color="grey", ls=":", lw=1, label="core runs' budget")
            if row == len(splits) - 1:
                ax.set_xlabel("Training tokens")
        ax1.legend(frameon=False, fontsize=7)
    fig.suptitle(f"Crossover (ours, {scale} scale, CPU): does YOCO-U's equal-steps gap to YOCO close with more "
                 f"tokens? " + ", ".join(f"{sp}: {verdicts[sp]['status']}" for sp in splits), fontsize=10)
    fig.tight_layout()
    cfg = {"tidy": str(tidy), "scale": scale, "splits": list(splits), "budget_tokens": budget_tokens}
    save_figure(fig, stem_of(out), config=cfg)
    plt.close(fig)
    notes = ["Gap = YOCO-U minus YOCO held-out loss (nats/token); positive: YOCO-U worse. Checkpoints: the first "
             "train.eval_tokens tokens of each held-out split, every train.eval_every steps; final: the final models "
             "on the whole held-out split (rule ppl). The two differ in level (the whole code split is harder than "
             "its first train.eval_tokens tokens), so compare gaps, not a checkpoint's loss with a final one."]
    rows = []
    for sp in splits:
        v, last, ref = verdicts[sp], verdicts[sp]["last"], verdicts[sp]["reference"]
        rows += [{"split": sp, "checkpoint": "held-out subset", **r} for r in gaps[sp].to_dict("records")]
        text = (f"{sp}: {v['status']} (judged at the {v['end']})"
                + (f", every checkpoint's interval contains or lies below 0 from {v['at_tokens']:.3g} tokens"
                   if v["status"] == "closed" and v["at_tokens"] else
                   f", below 0 from {v['at_tokens']:.3g} tokens" if v["at_tokens"] else "")
                + f"; reference: at {ref['tokens']:.3g} tokens the gap is {ref['gap']:+.3f} "
                  f"[{ref['low']:+.3f}, {ref['high']:+.3f}]"
                + f"; at {last['tokens']:.3g} tokens the checkpoint gap is {last['gap']:+.3f} "
                  f"[{last['low']:+.3f}, {last['high']:+.3f}] ({last['method']}, 95%)")
        if v["final"]:
            f = v["final"]
            rows.append({"split": sp, "checkpoint": "final, whole held-out set", **{k: f[k] for k in gaps[sp].columns}})
            side = "above 0" if f["low"] > 0 else "below 0" if f["high"] < 0 else "contains 0"
            text += (f"; final models on the whole held-out set ({f['n_tokens']:,} tokens): {f['gap']:+.3f} "
                     f"[{f['low']:+.3f}, {f['high']:+.3f}] ({f['method']}, 95%; the interval {side})")
        notes.append(text + ".")
    if budget_tokens:
        notes.append(f"The core runs' budget ({budget_tokens:.3g} tokens) is the dotted line; the crossover runs are "
                     "the same models trained longer (their own cosine schedule, so their curve at the budget is not "
                     "the core runs' end point).")
    notes.append("No published result answers this at small scale; the paper reports YOCO-U ahead at 1.3B+ (Figure 2).")
    write_table(pd.DataFrame(rows), stem_of(data), title="Crossover: YOCO-U's held-out-loss gap to YOCO by tokens",
                notes=notes, config=cfg | {"verdict": verdicts})
    return verdicts
