"""Figure 2: training loss against training FLOPs (left) and against tokens (right).

Input: the tidy table ``results/<scale>/tidy/fig2.{csv,json}`` (:func:`yocou.results.summarize.training.summarize_fig2`:
each core run's logged training loss, raw and smoothed, on axes ``tokens`` and ``train_flops``, and Figure 2's
numbers as rows of the role ``yocou|yoco``). Outputs: ``<out>.png/.pdf``, the final logged point per run
``<data>.{csv,md,json}`` and the caption's numbers beside the paper's ``<summary>.{csv,md,json}``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from yocou.results.names import COLORS, label
from yocou.results.render.common import numeric, save_figure, stem_of, write_table
from yocou.results.render.labels import drawn, loss_axis
from yocou.results.tidy import read_tidy, select


def load_curves(tidy: pd.DataFrame, metric: str = "train_loss_smoothed") -> pd.DataFrame:
    """``variant, step, tokens, train_flops, loss`` per logged step of each role (``variant`` = the role), from
    the tidy rows of ``metric`` (the two axes side by side), in the tidy file's order of roles."""
    d = tidy[tidy["metric"] == metric]
    if d["seed"].nunique() > 1 and not metric.endswith(".seed_mean"):  # replicas: the first seed's curves
        d = d[d["seed"] == d.groupby("role")["seed"].transform("min")]
    by = ["role", "step"]
    tok = d[d["axis"] == "tokens"].set_index(by)
    flops = d[d["axis"] == "train_flops"].set_index(by)["axis_value"]
    out = pd.DataFrame({"tokens": tok["axis_value"], "train_flops": flops.reindex(tok.index), "loss": tok["value"]})
    for c in ("seed_min", "seed_max", "n"):
        if c in tok:
            out[c] = pd.to_numeric(tok[c], errors="coerce")
    out = out.reset_index().rename(columns={"role": "variant"})
    order = list(dict.fromkeys(d["role"]))
    out["variant"] = pd.Categorical(out["variant"], order)
    out = out.sort_values(["variant", "step"]).reset_index(drop=True)
    out["variant"] = out["variant"].astype(str)
    out["step"] = out["step"].astype(int)
    return out


def log_axis(ax) -> None:
    """Log x axis whose ticks carry labels even when the data span less than a decade.

    Matplotlib labels only powers of ten on a log axis once minor labels are switched off; a span inside
    one decade then shows no number at all. Under two decades the minor ticks at 2 and 5 x 10^k are labelled
    too (all of 2..9 would overlap).
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter

    def two_five(v: float, _pos) -> str:
        digit, exp = f"{v:.0e}".split("e")
        return f"${digit}\\times10^{{{int(exp)}}}$" if digit in ("2", "5") else ""

    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    ax.xaxis.set_minor_formatter(FuncFormatter(two_five) if hi / lo < 100 else NullFormatter())


def render(tidy: str | Path, *, out: str | Path, data: str | Path, summary: str | Path | None = None,
           scale: str = "", ref: str = "yoco", new: str = "yocou") -> None:
    """Draw Figure 2 and write its data and caption numbers from the tidy ``fig2`` table.

    ``out``: figure stem or ``.png`` path (png + pdf); ``data``, ``summary``: table stems or ``.csv`` paths;
    ``ref``/``new``: the roles whose derived rows (``<new>|<ref>``) fill the summary.
    """
    df = numeric(read_tidy(tidy), "step", "seed_min", "seed_max")
    held = "heldout_loss.seed_mean" in set(df["metric"])
    curves = load_curves(df, "heldout_loss.seed_mean" if held else "train_loss_smoothed")
    how = drawn("fig2", held)
    cfg = {"tidy": str(tidy), "scale": scale, "ref": ref, "new": new}
    save_figure(plot(curves, how, scale, held), stem_of(out), config=cfg)
    raw = load_curves(df, "train_loss")
    final = raw.groupby("variant", sort=False).tail(1)
    write_table(final.reset_index(drop=True), stem_of(data), title="Figure 2 data: final logged training loss",
                notes=["Full curves in each run's metrics.jsonl and in tidy/fig2.csv; FLOPs are analytic "
                       "(yocou.model.accounting)."], config=cfg)
    if summary is not None:
        write_summary(df, ref, new, how, stem_of(summary), scale, cfg)


def plot(df: pd.DataFrame, how: str, scale: str, held: bool = False):
    """The figure: loss against training FLOPs (left) and tokens (right); y spans every curve. ``df``:
    :func:`load_curves` of the rows drawn; ``how``: what they are, for the title; ``held``: the held-out seed
    means, drawn with their min-max band across seeds and the number of seeds in the legend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for v, g in df.groupby("variant", sort=False):
        g = g.sort_values("step")
        n = int(g["n"].max()) if held and "n" in g else 1
        kw = dict(label=label(v) + (f" (mean of {n} seed{'s' if n != 1 else ''})" if held else ""),
                  color=COLORS.get(v), lw=1.8)
        for ax, x in zip(axes, ("train_flops", "tokens")):
            ax.plot(g[x], g["loss"], **kw)
            if held and n > 1:
                ax.fill_between(g[x], g["seed_min"], g["seed_max"], color=COLORS.get(v), alpha=0.2, lw=0)
    axes[0].set_xlabel("Training FLOPs (analytic)")
    axes[1].set_xlabel("Training tokens")
    for ax in axes:
        ax.set_ylabel(loss_axis(held, smoothed=True))
        log_axis(ax)
        ax.grid(alpha=0.3, which="both")
    axes[1].legend(frameon=False)
    fig.suptitle(f"Figure 2 (ours, {scale} scale, CPU): loss vs training FLOPs and tokens\n{how}", fontsize=10)
    fig.tight_layout()
    return fig


def write_summary(df: pd.DataFrame, ref: str, new: str, how: str, out: str | Path, scale: str,
                  config: dict) -> dict:
    """Figure 2's caption numbers (the tidy rows of the role ``<new>|<ref>``), beside the paper's."""
    d = select(df, role=f"{new}|{ref}")
    if d.empty:
        raise ValueError(f"tidy fig2: no rows of the role {new}|{ref} (are {ref!r} and {new!r} core roles?)")
    sfx = ".seed_mean_curve"
    if d["metric"].str.endswith(sfx).any():  # the numbers on the curves averaged over seeds
        d = d[d["metric"].str.endswith(sfx)].assign(metric=lambda x: x["metric"].str.removesuffix(sfx))
    n = {m: float(v) for m, v in zip(d["metric"], d["value"])}
    gap_at = str(select(d, metric="loss_gap_at_equal_flops")["detail"].iloc[0])
    reached = "tokens_to_reach" in n
    rows = [{"quantity": "token saving at equal loss (1 − tokens_new / tokens_ref)", "paper": 0.62,
             "ours": n.get("token_saving"),
             "how": f"{label(new)} first reaches {label(ref)}'s final loss {n['reference_final_loss']:.4f} at "
                    + (f"{n['tokens_to_reach']:.4g} tokens of {n['reference_tokens']:.4g}" if reached
                       else "no logged step (never within the run)")},
            {"quantity": "loss gap at equal training FLOPs (L_ref − L_new)", "paper": 0.033,
             "ours": n["loss_gap_at_equal_flops"], "how": gap_at}]
    numbers = {**n, "tokens_to_reach": n.get("tokens_to_reach"), "token_saving": n.get("token_saving"),
               "loss_gap_at": gap_at}
    write_table(pd.DataFrame(rows), out, title=f"Figure 2 numbers: {label(new)} against {label(ref)}",
                notes=[f"Curves: {how}; {scale} scale, CPU. Computed by "
                       "yocou.results.summarize.training.summarize_fig2 (tidy/fig2.csv, role "
                       f"{new}|{ref}).",
                       "The paper: \"approximately 62% fewer tokens to reach comparable performance\" (1 − 80/210, "
                       "docs/design.md section 8) and ΔL = 0.033 at the same FLOPs budget (Figure 2 caption). "
                       "Positive values favour the compared run."], config={**config, **numbers}, floatfmt=".4f")
    return numbers
