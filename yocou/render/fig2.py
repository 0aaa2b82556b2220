"""Figure 2: training loss against training FLOPs (left) and against tokens (right).

Inputs: each run's ``metrics.jsonl`` (analytic training FLOPs per row) and
``summary.json``. Output: ``<out>.png/.pdf`` and the tidy data ``<data>.csv``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ..readers import read_metrics
from .common import COLORS, label, save_figure, write_table


def load_curves(run_dirs: list[str]) -> pd.DataFrame:
    """Tidy ``variant, step, tokens, train_flops, loss`` from run folders (FileNotFoundError if absent,
    :class:`yocou.readers.ResultFileError` naming the file and line of a row that cannot be plotted)."""
    frames = []
    for d in run_dirs:
        p = Path(d) / "metrics.jsonl"
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (train the model first)")
        df = pd.DataFrame(read_metrics(p))  # validated: finite loss, unique increasing steps, ...
        df["variant"] = Path(d).name
        frames.append(df[["variant", "step", "tokens", "train_flops", "loss"]])
    return pd.concat(frames, ignore_index=True)


def smooth(s: pd.Series, alpha: float) -> pd.Series:
    return s.ewm(alpha=alpha).mean() if alpha < 1 else s


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", nargs="+", required=True, help="run folders (named by variant)")
    ap.add_argument("--out", required=True, help="figure stem (png + pdf)")
    ap.add_argument("--data", required=True, help="table stem for the plotted data")
    ap.add_argument("--smooth", type=float, default=0.3, help="EMA alpha for display (1 = raw)")
    ap.add_argument("--scale-name", default="")
    ap.add_argument("--summary", default=None,
                    help="table stem for the caption's numbers (token saving, loss gap at equal FLOPs)")
    ap.add_argument("--ref", default="yoco", help="--summary: the reference run (YOCO)")
    ap.add_argument("--new", default="yocou", help="--summary: the compared run (YOCO-U)")
    a = ap.parse_args(argv)
    df = load_curves(a.runs)
    fig = plot(df, a.smooth, a.scale_name)
    save_figure(fig, a.out, config=vars(a))
    final = df.sort_values("step").groupby("variant", sort=False).tail(1)
    write_table(final.reset_index(drop=True), a.data, title="Figure 2 data: final logged training loss",
                notes=["Full curves in each run's metrics.jsonl; FLOPs are analytic (yocou.accounting)."],
                config=vars(a))
    if a.summary:
        write_summary(df, a.ref, a.new, a.smooth, a.summary, a.scale_name, vars(a))
    return 0


def plot(df: pd.DataFrame, alpha: float, scale: str):
    """The figure: smoothed loss against training FLOPs (left) and tokens (right); y spans every curve."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for v, g in df.groupby("variant", sort=False):
        g = g.sort_values("step")
        y = smooth(g["loss"], alpha)
        kw = dict(label=label(v), color=COLORS.get(v), lw=1.8)
        axes[0].plot(g["train_flops"], y, **kw)
        axes[1].plot(g["tokens"], y, **kw)
    axes[0].set_xlabel("Training FLOPs (analytic)")
    axes[1].set_xlabel("Training tokens")
    for ax in axes:
        ax.set_ylabel("Training loss (full range)")
        log_axis(ax)
        ax.grid(alpha=0.3, which="both")
    axes[1].legend(frameon=False)
    fig.suptitle(f"Figure 2 (ours, {scale} scale, CPU): loss vs training FLOPs and tokens"
                 + (f", EMA alpha {alpha}" if alpha < 1 else ""), fontsize=10)
    fig.tight_layout()
    return fig


def write_summary(df: pd.DataFrame, ref: str, new: str, alpha: float, out: str, scale: str, config: dict) -> dict:
    """Figure 2's caption numbers from our curves (:func:`yocou.studies.figure2_numbers`), beside the paper's."""
    from ..studies import figure2_numbers

    for v in (ref, new):
        if v not in set(df["variant"]):
            raise ValueError(f"--summary: run {v!r} is not among --runs ({sorted(set(df['variant']))})")
    n = figure2_numbers(df[df.variant == ref], df[df.variant == new], alpha)
    rows = [{"quantity": "token saving at equal loss (1 − tokens_new / tokens_ref)", "paper": 0.62,
             "ours": n["token_saving"],
             "how": f"{label(new)} first reaches {label(ref)}'s final loss {n['reference_final_loss']:.4f} at "
                    + (f"{n['tokens_to_reach']:.4g} tokens of {n['reference_tokens']:.4g}"
                       if n["tokens_to_reach"] is not None else "no logged step (never within the run)")},
            {"quantity": "loss gap at equal training FLOPs (L_ref − L_new)", "paper": 0.033,
             "ours": n["loss_gap_at_equal_flops"], "how": f"at the {n['loss_gap_at']} ({n['reference_train_flops']:.3g})"}]
    write_table(pd.DataFrame(rows), out, title=f"Figure 2 numbers: {label(new)} against {label(ref)}",
                notes=[f"Training loss smoothed by an EMA (alpha {alpha}) over the logged rows; {scale} scale, CPU.",
                       "The paper: \"approximately 62% fewer tokens to reach comparable performance\" (1 − 80/210, "
                       "SPEC.md section 8) and ΔL = 0.033 at the same FLOPs budget (Figure 2 caption). Positive "
                       "values favour the compared run."], config={**config, **n}, floatfmt=".4f")
    return n


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
