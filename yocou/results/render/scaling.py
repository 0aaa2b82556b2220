"""Figures 5 and 6: parameter scaling and loop scaling of YOCO-U against YOCO (paper Section 4).

Inputs: the tidy tables ``results/<scale>/tidy/fig5`` or ``tidy/fig6`` (:mod:`yocou.results.summarize.training`) and
``tidy/runs`` (each run's steps, tokens and training FLOPs). "Held-out loss" is the mean of the book and code NLL
in nats per token (the paper plots validation loss on its own corpus, which is not available offline).

* Figure 5 (the paper: "YOCO-U achieves comparable performance with 50% fewer parameters than YOCO"; left
  against parameters, right against activated parameters): held-out loss against total parameters and against
  active matrix parameters per token, one line per family over the size ladder, same steps for all. The
  parameter saving at each YOCO-U rung is ``1 − P_yocou / P_yoco(L)``, with ``P_yoco(L)`` the YOCO parameters
  that reach the same loss, interpolated linearly in log P along YOCO's ladder (empty outside it), computed by
  :func:`yocou.results.summarize.training.summarize_fig5`.
* Figure 6 (the paper: "consistent improvements when scaling up loop numbers (1, 2, 3, 5)"): training loss
  against tokens per loop count, and held-out loss against T.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from yocou.results.names import COLORS, label
from yocou.results.render.common import save_figure, stem_of, write_table
from yocou.results.render.labels import HELDOUT_LOSS, HELDOUT_SPLITS, loss_axis
from yocou.results.summarize.training import fig5_derived_run
from yocou.results.tidy import one, read_tidy, select


def _budget(runs: pd.DataFrame, run: str) -> dict[str, Any]:
    """``steps, tokens, train_flops`` of ``run`` from the tidy ``runs`` table."""
    out = {}
    for m in ("steps", "tokens", "train_flops"):
        r = one(runs, run=run, metric=m)
        if r is None:
            raise ValueError(f"tidy runs: no {m!r} row for run {run!r}")
        out[m] = int(r["value"]) if m != "train_flops" else float(r["value"])
    return out


def _mean_row(tidy: pd.DataFrame, run: str, metric: str, axis: str | None = None) -> pd.Series | None:
    """The ``<metric>.seed_mean`` row of ``run`` (on ``axis`` when given), else its one per-seed row (older tables)."""
    for m in (f"{metric}.seed_mean", metric):
        r = tidy[(tidy["run"] == run) & (tidy["metric"] == m)]
        r = r if axis is None else r[r["axis"] == axis]
        if not r.empty:
            return r.iloc[0]
    return None


def _band(r: pd.Series) -> dict[str, Any]:
    """``loss_min``, ``loss_max`` (min-max across seeds) and ``seeds`` of a seed-mean row (the value itself when the
    table has no seed columns)."""
    get = lambda k, d: r[k] if k in r and not pd.isna(r[k]) else d  # noqa: E731
    return {"loss_min": float(get("seed_min", r["value"])), "loss_max": float(get("seed_max", r["value"])),
            "seeds": int(get("n", 1)) if str(r["metric"]).endswith(".seed_mean") else 1}


def fig5_table(tidy: pd.DataFrame, runs: pd.DataFrame, ref: str = "yoco", new: str = "yocou") -> pd.DataFrame:
    """Figure 5's data, one row per ladder run (family = its role; loss = the mean over its seeds, with the min-max
    band), from the tidy ``fig5`` and ``runs`` tables."""
    fl = tidy[(tidy["axis"] == "params") & tidy["metric"].isin(["final_loss.seed_mean", "final_loss"])]
    fl = fl[fl["metric"] == "final_loss.seed_mean"] if (fl["metric"] == "final_loss.seed_mean").any() else fl
    ref_runs = list(fl[fl["role"] == ref]["run"])
    rows = []
    for r in fl.itertuples():
        act = _mean_row(tidy, r.run, "final_loss", "activated_params")
        book, code = _mean_row(tidy, r.run, "book.loss"), _mean_row(tidy, r.run, "code.loss")
        row = {"run": r.run, "params": int(r.axis_value), "active_params": float(act["axis_value"]),
               **_budget(runs, r.run), "book": float(book["value"]), "code": float(code["value"]), "loss": r.value,
               **_band(pd.Series(r._asdict())), "family": r.role, "yoco_params_same_loss": None,
               "param_saving": None}
        if r.role == new:
            d = fig5_derived_run(r.run, ref_runs)
            for col, m in (("yoco_params_same_loss", "yoco_params_at_loss"), ("param_saving", "param_saving")):
                x = select(tidy, run=d, metric=m)
                row[col] = None if x.empty else float(x["value"].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def fig5_render(tidy: str | Path, runs: str | Path, *, out: str | Path, data: str | Path,
                scale: str = "", embedding: Mapping[str, Mapping[str, int]] | None = None) -> pd.DataFrame:
    """Draw Figure 5 and write its data from the tidy ``fig5`` and ``runs`` tables.

    ``embedding``: run -> ``{"params", "embedding"}`` from the model config
    (:func:`yocou.workflow.pipeline.embedding_params`); given, the parameter axis is non-embedding parameters
    (``params - embedding``), and each run's ``params`` must equal the table's.

    Raises:
        ValueError: a run of the table missing from ``embedding``, or whose parameters differ from the config's.
    """
    t = read_tidy(tidy)
    df = fig5_table(t, read_tidy(runs))
    if embedding is not None:
        for r in df.itertuples():
            e = embedding.get(r.run)
            if e is None or int(e["params"]) != int(r.params):
                raise ValueError(f"{tidy}: run {r.run}: {r.params} parameters, the config gives "
                                 f"{None if e is None else e['params']}; expected the config that made the table")
        df.insert(2, "non_embedding_params", [int(r.params) - int(embedding[r.run]["embedding"])
                                              for r in df.itertuples()])
    where = str(select(t, metric="final_loss")["detail"].iloc[0])
    return fig5(df, scale=scale, out=out, data_out=data, where=where, config={"tidy": str(tidy), "runs": str(runs),
                                                                                "scale": scale})


def fig5(df: pd.DataFrame, *, scale: str, out: str | Path, data_out: str | Path, where: str,
         config: dict | None = None) -> pd.DataFrame:
    """Render Figure 5 from :func:`fig5_table`'s rows; ``where``: the held-out loss's description."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    x_col = "non_embedding_params" if "non_embedding_params" in df.columns else "params"
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for f, g in df.groupby("family", sort=False):
        g = g.sort_values("params")
        n = int(g["seeds"].max())
        kw = dict(marker="o", label=f"{label(f)} ({'mean of up to ' + str(n) + ' seeds' if n > 1 else 'one seed'})",
                  color=COLORS.get(f), lw=1.8, capsize=3)
        err = [g["loss"] - g["loss_min"], g["loss_max"] - g["loss"]]
        axes[0].errorbar(g[x_col] / 1e6, g["loss"], yerr=err, **kw)
        axes[1].errorbar(g["active_params"] / 1e6, g["loss"], yerr=err, **kw)
    axes[0].set_xlabel("Non-embedding parameters (M; embedding and LM head left out)" if x_col != "params"
                       else "Parameters (M)")
    axes[1].set_xlabel("Activated matrix parameters per token (M, loops counted)")
    for ax in axes:
        ax.set_xscale("log")
        # plain numbers (0.2, 0.3, 0.5) on a log axis of less than a decade, not 2×10⁻¹
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(
            lambda v, _pos: f"{v:g}" if v > 0 and round(v / 10 ** math.floor(math.log10(v))) in (2, 3, 5) else ""))
        ax.set_ylabel(HELDOUT_LOSS)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(frameon=False, fontsize=8, title="bars: min-max across seeds", title_fontsize=8)
    fig.suptitle(f"Figure 5 (ours, {scale} scale, CPU): parameter scaling at equal steps", fontsize=10)
    fig.tight_layout()
    save_figure(fig, stem_of(out), config=config)
    plt.close(fig)
    sav = [s for s in df.param_saving if s is not None and not pd.isna(s)]
    notes = [f"Held-out loss: {where}, the "
             "substitute for the paper's validation loss; every run has the same steps and tokens.",
             *(["non_embedding_params: params less the input embedding and the untied LM head (2 x vocabulary x "
                "d_model each run), the figure's left axis; at this scale they are "
                + ", ".join(f"{int(r.non_embedding_params) / int(r.params):.0%}" for r in df.itertuples()
                            if r.family == df["family"].iloc[0]) + " of the parameters along the ladder."]
               if x_col != "params" else []),
             "param_saving: 1 − P(YOCO-U) / P(YOCO at the same loss), P all parameters, YOCO interpolated in log P along its ladder; "
             "empty where YOCO-U's loss lies outside YOCO's range. The paper: about 0.5 (\"comparable performance "
             "with 50% fewer parameters\").",
             "Ours: " + (", ".join(f"{s:.2f}" for s in sav) if sav else "no YOCO-U rung falls inside YOCO's range")]
    write_table(df, stem_of(data_out), title="Figure 5 data: held-out loss against parameters", notes=notes,
                config=config)
    return df


def loop_trend(diffs: list[float]) -> str:
    """What the held-out loss does as T grows, from its changes between consecutive loop counts (nats/token)."""
    listed = " (changes " + ", ".join(f"{d:+.3f}" for d in diffs) + ")"
    if diffs and all(d < 0 for d in diffs):
        return "falls with T at every step" + listed
    if diffs and all(d > 0 for d in diffs):
        return "rises with T at every step" + listed
    if diffs and sum(diffs) > 0:
        return "rises with T overall, not at every step" + listed
    return "does not fall at every step of T" + listed


def fig6_table(tidy: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Figure 6's data, one row per role in order of T (loss = the mean over its seeds, with the min-max band), from
    the tidy ``fig6`` and ``runs`` tables."""
    fl = tidy[(tidy["axis"] == "T") & tidy["metric"].isin(["final_loss.seed_mean", "final_loss"])]
    fl = fl[fl["metric"] == "final_loss.seed_mean"] if (fl["metric"] == "final_loss.seed_mean").any() else fl
    rows = []
    for r in fl.sort_values("axis_value", kind="stable").itertuples():
        sm = one(runs, run=r.run, metric="params"), one(runs, run=r.run, metric="activated_params")
        book, code = _mean_row(tidy, r.run, "book.loss", "T"), _mean_row(tidy, r.run, "code.loss", "T")
        rows.append({"T": int(r.axis_value), "run": r.run, "params": None if sm[0] is None else int(sm[0]["value"]),
                     "active_params": None if sm[1] is None else float(sm[1]["value"]), **_budget(runs, r.run),
                     "book": float(book["value"]), "code": float(code["value"]), "loss": r.value,
                     **_band(pd.Series(r._asdict()))})
    return pd.DataFrame(rows)


def fig6_render(tidy: str | Path, runs: str | Path, *, out: str | Path, data: str | Path,
                scale: str = "") -> pd.DataFrame:
    """Draw Figure 6 and write its data from the tidy ``fig6`` and ``runs`` tables."""
    t = read_tidy(tidy)
    return fig6(t, fig6_table(t, read_tidy(runs)), scale=scale, out=out, data_out=data,
                config={"tidy": str(tidy), "runs": str(runs), "scale": scale})


def fig6(tidy: pd.DataFrame, df: pd.DataFrame, *, scale: str, out: str | Path, data_out: str | Path,
         config: dict | None = None) -> pd.DataFrame:
    """Render Figure 6: the held-out curves of the tidy ``fig6`` rows (the smoothed training curves where the runs
    logged no held-out loss) against tokens (left) and :func:`fig6_table`'s held-out losses against T (right); the
    axis labels are :mod:`yocou.results.render.labels`'."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    cmap = plt.get_cmap("Reds")
    ts = list(df["T"])
    held = tidy[(tidy["metric"] == "heldout_loss.seed_mean") & (tidy["axis"] == "tokens")]
    curves = held if not held.empty else select(tidy, metric="train_loss_smoothed", axis="tokens")
    for i, r in enumerate(df.itertuples()):
        c = curves[curves["run"] == r.run].sort_values("axis_value")
        if c.empty:  # older tables: the replicas' own rows
            c = curves[curves["role"] == f"T{r.T}"].groupby("axis_value", as_index=False)["value"].mean()
        col = cmap(0.35 + 0.65 * i / max(1, len(ts) - 1))
        axes[0].plot(c["axis_value"], c["value"], color=col, lw=1.6,
                     label=f"T = {r.T}" + (" (YOCO)" if r.T == 1 else "") + (f", {r.seeds} seeds" if r.seeds > 1 else ""))
        if not held.empty and "seed_min" in c:
            axes[0].fill_between(c["axis_value"], c["seed_min"], c["seed_max"], color=col, alpha=0.2, lw=0)
    axes[1].errorbar(df["T"], df["loss"], yerr=[df["loss"] - df["loss_min"], df["loss_max"] - df["loss"]], marker="o",
                     color=COLORS.get("yocou"), capsize=3, label="mean (bars: min-max across seeds)")
    axes[1].plot(df["T"], df["book"], marker=".", ls="--", color="#555555", label="book")
    axes[1].plot(df["T"], df["code"], marker=".", ls=":", color="#555555", label="code")
    axes[0].set_xlabel("Training tokens")
    axes[0].set_ylabel(loss_axis(not held.empty, smoothed=True))
    axes[0].set_xscale("log")
    axes[1].set_xlabel("Loops T")
    axes[1].set_xticks(ts)
    axes[1].set_ylabel(HELDOUT_SPLITS)
    for ax in axes:
        ax.grid(alpha=0.3)
        # beside the panel, not over the curves
        ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle(f"Figure 6 (ours, {scale} scale, CPU): YOCO-U loop scaling, T = {', '.join(map(str, ts))}",
                 fontsize=10)
    fig.tight_layout()
    save_figure(fig, stem_of(out), config=config)
    plt.close(fig)
    diffs = [float(b - a) for a, b in zip(df["loss"], df["loss"][1:])]  # seed means, consecutive T
    notes = ["T = 1 is YOCO (YOCO-U with one loop is YOCO exactly; tests/test_model.py). Same steps and tokens for "
             "every T; training FLOPs grow with T.",
             "The paper: consistent improvements when scaling up the loop count (1, 2, 3, 5). Ours: held-out loss "
             + loop_trend(diffs) + "."]
    write_table(df, stem_of(data_out), title="Figure 6 data: held-out loss against loop count", notes=notes,
                config=config)
    return df
