"""The probe's results across models and seeds: a tidy CSV, a table with 95% intervals across seeds and the chance
level beside each accuracy, and a figure of accuracy against hops.

Reads the JSON results of :func:`yocou.evaluation.probe.run.run_probe`. Interval: the mean over seeds ± ``t(0.975, n - 1) ·
sd / sqrt(n)`` (Student t, ``sd`` with ``n - 1`` in the denominator, ``scipy.stats.t``); one seed gives no
interval (None / NaN), equal values give a zero-width one. The interval is across training seeds only: every model
is scored on the same held-out sequences, so it says how much the result moves with the seed, not how precisely one
model's accuracy is measured (the binomial error of one run, ``n`` answers per cell, is far smaller at the default
sizes).
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    model_validator,
)

from yocou.utils.io import atomic_write_text

__all__ = ["ORDER", "TIDY_COLUMNS", "collect", "label", "render", "summary_table", "t_interval", "wide_table"]

#: Columns of the tidy CSV, one row per (run, task, k).
TIDY_COLUMNS = ("variant", "preset", "n_loops", "seed", "task", "k", "accuracy", "correct", "n", "chance", "params",
                "steps", "train_flops")
#: The probe's models in the order of tables and legends (the default names of :func:`yocou.evaluation.probe.run.run_probe`
#: and the pipeline's shorter ``rins`` and ``yoco_eqflops``); others follow, sorted.
ORDER = ("transformer", "yoco", "yocou_t1", "yocou_t2", "yocou_t3", "rins", "rins_r3", "yoco_eqflops",
         "yoco_eqflops_yocou_t3")
_LABELS = {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS (r=3)", "rins_r3": "RINS (r=3)",
           "yoco_eqflops": "YOCO, FLOPs of YOCO-U T=3", "yoco_eqflops_yocou_t3": "YOCO, FLOPs of YOCO-U T=3"}
_COLORS = {"transformer": "#7f7f7f", "yoco": "#1f77b4", "yocou_t1": "#f4a582", "yocou_t2": "#e34a33",
           "yocou_t3": "#99000d", "rins": "#2ca02c", "rins_r3": "#2ca02c", "yoco_eqflops": "#9467bd",
           "yoco_eqflops_yocou_t3": "#9467bd"}


def _accuracy_limit(summary: pd.DataFrame) -> float:
    """The accuracy axis' upper end: a quarter above the highest interval end or chance level, at most 1 (a probe
    whose models all stay near chance keeps its points apart instead of squeezed at the bottom of [0, 1])."""
    top = max([0.0, *summary["high"].dropna().tolist(), *summary["mean"].dropna().tolist(),
               *summary["chance"].dropna().tolist()])
    return min(1.02, max(0.05, 1.25 * top))


def label(variant: str) -> str:
    """A run's name in words: ``yocou_t2`` -> ``YOCO-U (T=2)``."""
    if variant in _LABELS:
        return _LABELS[variant]
    if variant.startswith("yocou_t") and variant[7:].isdigit():
        return f"YOCO-U (T={variant[7:]})"
    return variant


def _order_key(variant: str) -> tuple[int, str]:
    return (ORDER.index(variant), "") if variant in ORDER else (len(ORDER), variant)


class ProbeCell(BaseModel):
    """One (task, k) cell of a probe result: ``correct`` of ``n`` answers, ``accuracy`` = correct / n."""

    accuracy: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    correct: NonNegativeInt
    n: PositiveInt

    @model_validator(mode="after")
    def _consistent(self) -> "ProbeCell":
        if self.correct > self.n or abs(self.accuracy - self.correct / self.n) > 1e-9:
            raise ValueError(f"accuracy {self.accuracy} is not correct / n = {self.correct} / {self.n}")
        return self


class ProbeResult(BaseModel):
    """A ``python -m yocou.evaluation.probe train`` result file: the fields :func:`collect` reads."""

    model_config = ConfigDict(extra="allow")
    variant: str
    preset: str
    n_loops: PositiveInt
    seed: NonNegativeInt
    accuracy: dict[str, dict[int, ProbeCell]]
    chance: dict[str, float]
    params: PositiveInt
    steps: PositiveInt
    train_flops: float = Field(gt=0.0, allow_inf_nan=False)


def collect(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """One row per (result file, task, k) with :data:`TIDY_COLUMNS`, sorted by model, task, k and seed.

    Raises:
        FileNotFoundError: a path does not exist.
        ValueError: a file is not a probe result (naming it and the missing key or the field out of range:
            :class:`ProbeResult`), or two files hold the same (variant, seed).
    """
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, int], str] = {}
    for p in map(Path, paths):
        try:
            r = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: not JSON ({e})") from None
        except UnicodeDecodeError as e:
            raise ValueError(f"{p}: not UTF-8 text (byte {e.start}); expected a probe result JSON") from None
        missing = [k for k in ("variant", "preset", "n_loops", "seed", "accuracy", "chance", "params", "steps",
                               "train_flops") if not isinstance(r, dict) or k not in r]
        if missing:
            raise ValueError(f"{p}: not a probe result, missing key(s) {missing}")
        try:
            res = ProbeResult.model_validate(r)
        except ValidationError as e:
            err = e.errors()[0]
            raise ValueError(f"{p}: {'.'.join(map(str, err['loc']))}: {err['msg']} (got {err.get('input')!r})") \
                from None
        key = (res.variant, res.seed)
        if key in seen:
            raise ValueError(f"{p}: variant {key[0]!r} seed {key[1]} again (also in {seen[key]})")
        seen[key] = str(p)
        for task, by_k in res.accuracy.items():
            if task not in res.chance:
                raise ValueError(f"{p}: chance: no chance level for task {task!r}")
            for k, cell in by_k.items():
                rows.append({"variant": res.variant, "preset": res.preset, "n_loops": res.n_loops, "seed": res.seed,
                             "task": task, "k": k, "accuracy": cell.accuracy, "correct": cell.correct, "n": cell.n,
                             "chance": res.chance[task], "params": res.params, "steps": res.steps,
                             "train_flops": res.train_flops})
    df = pd.DataFrame(rows, columns=list(TIDY_COLUMNS))
    if df.empty:
        return df
    df["_o"] = df["variant"].map(_order_key)
    return df.sort_values(["_o", "task", "k", "seed"], kind="stable").drop(columns="_o").reset_index(drop=True)


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the Student-t interval of the mean of ``values`` at confidence ``level``; with one
    value ``low`` and ``high`` are NaN.

    Raises:
        ValueError: no values, or ``level`` not in (0, 1).
    """
    from scipy import stats

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    v = [float(x) for x in values]
    if not v:
        raise ValueError("t_interval needs at least one value")
    n = len(v)
    mean = sum(v) / n
    if n < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def summary_table(tidy: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per (variant, task, k): ``mean``, ``low``, ``high`` (:func:`t_interval` across seeds), ``sd``, ``n_seeds``,
    ``n`` (answers per seed, the smallest), ``chance``, ``params``, ``steps`` and ``train_flops`` (the first
    seed's), in :data:`ORDER`."""
    out = []
    for (variant, task, k), g in tidy.groupby(["variant", "task", "k"], sort=False):
        mean, lo, hi = t_interval(g["accuracy"].tolist(), level)
        out.append({"variant": variant, "label": label(variant), "n_loops": int(g["n_loops"].iloc[0]), "task": task,
                    "k": int(k), "mean": mean, "low": lo, "high": hi,
                    "sd": float(g["accuracy"].std(ddof=1)) if len(g) > 1 else math.nan, "n_seeds": len(g),
                    "n": int(g["n"].min()), "chance": float(g["chance"].iloc[0]), "params": int(g["params"].iloc[0]),
                    "steps": int(g["steps"].iloc[0]), "train_flops": float(g["train_flops"].iloc[0])})
    return pd.DataFrame(out)


def _cell(r: pd.Series) -> str:
    if math.isnan(r["low"]):
        return f"{r['mean']:.3f} (1 seed)"
    return f"{r['mean']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def wide_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per model: parameters, training steps and FLOPs, then ``mean [low, high]`` of MQAR followed by its
    chance level, and of each k followed by k-hop's chance level (the same for every k)."""
    rows = []
    for variant, g in summary.groupby("variant", sort=False):
        first = g.iloc[0]
        row: dict[str, Any] = {"model": label(variant), "params": int(first["params"]), "steps": int(first["steps"]),
                               "train FLOPs": f"{first['train_flops']:.3g}", "seeds": int(g["n_seeds"].min())}
        for task in ("mqar", "khop"):
            cells = g[g["task"] == task].sort_values("k")
            for _, r in cells.iterrows():
                row["MQAR" if task == "mqar" else f"{int(r['k'])}-hop"] = _cell(r)
            if len(cells):
                row["MQAR chance" if task == "mqar" else "k-hop chance"] = f"{cells['chance'].iloc[0]:.3f}"
        rows.append(row)
    return pd.DataFrame(rows)


def _figure(summary: pd.DataFrame, out_stem: Path, *, title: str, config: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from yocou.results.render.common import save_figure

    variants = list(dict.fromkeys(summary["variant"]))
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10.5, 4.6), gridspec_kw={"width_ratios": [1.6, 1]})
    kh = summary[summary["task"] == "khop"]
    ks = sorted(kh["k"].unique())
    n_var = max(1, len(variants))
    for i, v in enumerate(variants):
        g = kh[kh["variant"] == v].sort_values("k")
        if g.empty:
            continue
        dx = (i - (n_var - 1) / 2) * 0.045  # spread the markers so the error bars do not hide each other
        yerr = [(g["mean"] - g["low"].clip(lower=0)).fillna(0), (g["high"].clip(upper=1) - g["mean"]).fillna(0)]
        ax0.errorbar(g["k"] + dx, g["mean"], yerr=yerr, color=_COLORS.get(v), marker="o", ms=4, lw=1.5, capsize=3,
                     ls="--" if "eqflops" in v else "-", label=label(v))
    if not kh.empty:
        ax0.axhline(kh["chance"].iloc[0], color="black", ls=":", lw=1, label="chance")
    ax0.set_xticks(ks)
    ax0.set_xlabel("hops k")
    ax0.set_ylabel("accuracy (held-out)")
    lim = _accuracy_limit(summary)
    ax0.set_ylim(-0.02 * lim, lim)
    ax0.set_title("k-hop pointer chasing, beyond the window", fontsize=10)
    ax0.grid(alpha=0.3)
    mq = summary[summary["task"] == "mqar"].set_index("variant").reindex(variants).dropna(subset=["mean"])
    y = range(len(mq))
    ax1.errorbar(mq["mean"], list(y), xerr=[(mq["mean"] - mq["low"].clip(lower=0)).fillna(0),
                                            (mq["high"].clip(upper=1) - mq["mean"]).fillna(0)],
                 fmt="none", ecolor="black", capsize=3, lw=1)
    ax1.scatter(mq["mean"], list(y), c=[_COLORS.get(v, "#333333") for v in mq.index], zorder=3, s=30)
    if not mq.empty:
        ax1.axvline(mq["chance"].iloc[0], color="black", ls=":", lw=1)
    ax1.set_yticks(list(y), [label(v) for v in mq.index], fontsize=8)
    ax1.invert_yaxis()
    ax1.set_xlim(-0.02 * lim, lim)
    ax1.set_xlabel("accuracy (held-out)")
    ax1.set_title("multi-query associative recall, beyond the window", fontsize=10)
    ax1.grid(alpha=0.3, axis="x")
    n_seeds = int(summary["n_seeds"].min()) if not summary.empty else 0
    handles, labels = ax0.get_legend_handles_labels()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=4, frameon=False, fontsize=8,
               title=(f"mean of {n_seeds} seeds; bars: 95% Student-t interval across seeds (clipped to [0, 1]); "
                      if n_seeds > 1 else "one seed: no interval; ") + "dotted: chance"
               + ("" if lim >= 1 else f"; accuracy axis to {lim:.2f}, not 1"), title_fontsize=8)
    save_figure(fig, out_stem, config=config)
    plt.close(fig)


def render(paths: Iterable[str | os.PathLike], out_dir: str | os.PathLike, *, title: str = "",
           level: float = 0.95, notes: Sequence[str] = (), figure: str | os.PathLike | None = None
           ) -> dict[str, Path]:
    """From probe results, write to ``out_dir``: ``probe_tidy.csv`` (:func:`collect`), ``probe_summary.{csv,md,
    json}`` (:func:`summary_table`), ``probe_table.{csv,md,json}`` (:func:`wide_table`) and ``probe.{png,pdf}``
    (accuracy against k, one line per model, with the MQAR accuracies beside; at ``figure``, a stem or a .png
    path, when given). Returns the paths by name.

    Raises:
        ValueError: no results, or a result file that is not one (naming it).
    """
    from yocou.results.render.common import write_table

    paths = [Path(p) for p in paths]
    tidy = collect(paths)
    if tidy.empty:
        raise ValueError("no probe results to summarize")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    tidy.to_csv(buf, index=False)
    atomic_write_text(out / "probe_tidy.csv", buf.getvalue())
    summary = summary_table(tidy, level)
    cfg = {"results": [str(p) for p in paths], "level": level}
    chance = {t: float(tidy[tidy["task"] == t]["chance"].iloc[0]) for t in tidy["task"].unique()}
    all_notes = [(f"Accuracy: greedy answer over the whole 256-token vocabulary on the same held-out sequences for "
                  f"every model; mean over seeds with a {level:.0%} Student-t interval across seeds."),
                 ("Chance (yocou.evaluation.probe.tasks.chance_level): a uniform guess among the context's candidates (MQAR: its "
                  "values; k-hop: the nodes some edge points to) less the answers already given earlier in the query "
                  "block, the level of the elimination shortcut: "
                  + ", ".join(f"{t} {c:.3f}" for t, c in chance.items()) + "."),
                 *notes]
    write_table(summary, out / "probe_summary", title=f"Probe: accuracy by model, task and k{title and ' (' + title + ')'}",
                notes=all_notes, config=cfg, floatfmt=".3f")
    write_table(wide_table(summary), out / "probe_table", title=f"Probe: accuracy against hops{title and ' (' + title + ')'}",
                notes=all_notes, config=cfg)
    from yocou.results.render.common import stem_of

    fig_stem = stem_of(figure) if figure is not None else out / "probe"
    fig_stem.parent.mkdir(parents=True, exist_ok=True)
    _figure(summary, fig_stem, title=title or "Mechanism probe: retrieval beyond the sliding window", config=cfg)
    return {"tidy": out / "probe_tidy.csv", "summary": out / "probe_summary.csv", "table": out / "probe_table.md",
            "png": fig_stem.with_suffix(".png"), "pdf": fig_stem.with_suffix(".pdf")}
