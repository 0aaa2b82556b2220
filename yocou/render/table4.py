"""Table 4: needle in a haystack (S-NIAH-1, S-NIAH-2), ours beside the paper's, and a
length-by-depth heatmap per model.

Inputs: the ``python -m yocou.longctx.niah eval`` JSON per variant (file stem = variant).
Outputs: ``<out>.{csv,md,json}`` (per model and task: accuracy, teacher-forced log-probability of the
value and of a distractor, their difference), ``<out>_cells.{csv,md,json}`` (per model, task, length,
depth) and the heatmap figure ``<fig>.{png,pdf}``. Paper values: :func:`yocou.reported.load_table` (4).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from ..longctx.niah import TASK_LABELS
from ..reported import load_table
from ..readers import read_niah
from .common import label, save_figure, write_table


def build(results: dict[str, dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, cells) from ``{variant: niah result}``."""
    paper = load_table(4)
    paper = {(r.model, r.column): float(r.value) for r in paper.itertuples()}
    rows, cells = [], []
    for v, res in results.items():
        recs = pd.DataFrame(res["records"])
        row = {"model": label(v), "variant": v}
        for task, g in recs.groupby("task", sort=False):
            t = TASK_LABELS[task]
            row[f"{t} acc"] = g["correct"].mean()
            row[f"{t} acc (paper)"] = paper.get((label(v), t), np.nan)
            row[f"{t} logp value"] = g["logp_value"].mean()
            row[f"{t} gain"] = (g["logp_value"] - g["logp_distractor"]).mean()
            row[f"{t} n"] = len(g)
        row["mean acc"] = recs["correct"].mean()
        row["mean acc (paper)"] = np.nanmean([row.get(f"{t} acc (paper)", np.nan) for t in TASK_LABELS.values()])
        rows.append(row)
        for c in res["cells"]:
            cells.append({"model": label(v), "variant": v, "task": TASK_LABELS[c["task"]], **{
                k: c[k] for k in ("length", "depth", "n", "acc", "logp_value", "logp_distractor", "gain")},
                "extrapolated": bool(res.get("train_seq_len") and c["length"] > res["train_seq_len"])})
    return pd.DataFrame(rows), pd.DataFrame(cells)


def heatmap(cells: pd.DataFrame, title: str):
    """Rows: models; columns: per task, accuracy and retrieval gain, each length (y) by depth (x)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(cells["model"]))
    tasks = list(dict.fromkeys(cells["task"]))
    panels = [(t, "acc") for t in tasks] + [(t, "gain") for t in tasks]
    gmax = max(1.0, float(np.nanmax(np.abs(cells["gain"])))) if len(cells) else 1.0
    fig, axes = plt.subplots(len(models), len(panels), figsize=(3.0 * len(panels), 2.3 * len(models)),
                             squeeze=False, constrained_layout=True)
    for i, m in enumerate(models):
        for j, (t, q) in enumerate(panels):
            ax = axes[i][j]
            g = cells[(cells["model"] == m) & (cells["task"] == t)]
            piv = g.pivot(index="length", columns="depth", values=q).sort_index()
            kw = dict(vmin=0, vmax=1, cmap="RdYlGn") if q == "acc" else dict(vmin=-gmax, vmax=gmax, cmap="PuOr")
            im = ax.imshow(piv.values, aspect="auto", origin="lower", **kw)
            ax.set_xticks(range(len(piv.columns)), [f"{d:g}" for d in piv.columns], fontsize=7)
            ax.set_yticks(range(len(piv.index)), [str(n) for n in piv.index], fontsize=7)
            for (a, b), val in np.ndenumerate(piv.values):
                ax.text(b, a, f"{val:.2f}" if q == "acc" else f"{val:+.1f}", ha="center", va="center", fontsize=6)
            if i == 0:
                ax.set_title(f"{t}: {'accuracy' if q == 'acc' else 'log p(value) − log p(distractor)'}",
                             fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{m}\nlength (tokens)", fontsize=8)
            if i == len(models) - 1:
                ax.set_xlabel("needle depth (%)", fontsize=8)
            if i == len(models) - 1 and j in (0, len(tasks)):
                fig.colorbar(im, ax=axes[:, j], shrink=0.6, location="bottom")
    fig.suptitle(title, fontsize=10)
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--niah", nargs="+", required=True, help="niah result JSON per variant (stem = variant)")
    ap.add_argument("--out", required=True, help="table stem (results/<scale>/table4)")
    ap.add_argument("--fig", required=True, help="heatmap stem (figures/<scale>/niah_heatmap)")
    ap.add_argument("--scale-name", default="")
    a = ap.parse_args(argv)
    results = {Path(p).stem: read_niah(p, TASK_LABELS) for p in a.niah}
    df, cells = build(results)
    first = next(iter(results.values()))
    lengths = sorted({c["length"] for c in first["cells"]})
    depths = sorted({c["depth"] for c in first["cells"]})
    n_cell = sorted({c["n"] for c in first["cells"]})
    train_len = first.get("train_seq_len")
    ptxt = (first.get("prompts_provenance") or {}).get("config", {})
    n_task = int(df.iloc[0][TASK_LABELS[first["cells"][0]["task"]] + " n"])
    summary = "; ".join(
        f"{r['model']}: " + ", ".join(f"{t} acc {r[f'{t} acc']:.2f} (paper {r[f'{t} acc (paper)']:.2f}), "
                                      f"log p(value) {r[f'{t} logp value']:.1f} nats, gain {r[f'{t} gain']:+.2f}"
                                      for t in TASK_LABELS.values() if f"{t} acc" in r)
        for r in df.to_dict("records"))
    notes = [
        f"{a.scale_name} scale, evaluated on CPU; the paper's models are 1.3B-parameter YOCO family models on GPUs: "
        "compare the ordering of variants, not absolute values.",
        f"Samples per cell (task, length, depth): {', '.join(map(str, n_cell))}; lengths {lengths} tokens "
        f"(prompt, in the models' own tokenizer); depths {[f'{d:g}%' for d in depths]}; "
        f"{n_task} samples per task and model; seed "
        f"{ptxt.get('seed')}.",
        f"Training length {train_len} tokens: lengths above it are extrapolation.",
        "S-NIAH-1: noise haystack (RULER's repeated 'The grass is green. ...' block). S-NIAH-2: real book prose, "
        f"the held-out book {first.get('book') or '?'} (never trained on) excerpted at a seeded offset; RULER's Paul Graham essays are not available offline.",
        "acc: the 7-digit value appears in the greedy continuation (12 tokens, cached early-exit prefill and "
        "decode). logp value: teacher-forced log-probability of ' <value>' after the answer prefix (nats, summed "
        "over its tokens; uniform digits would give 7·ln 10 = −16.1); gain: the same minus that of a seeded "
        "distractor number that is not in the prompt (> 0: the model uses the needle).",
        f"Measured: {summary}.",
    ]
    write_table(df, a.out, title=f"Table 4: needle in a haystack ({a.scale_name} scale, CPU)", notes=notes,
                config=vars(a))
    write_table(cells, a.out + "_cells", title=f"Table 4 cells: S-NIAH per length and depth ({a.scale_name})",
                notes=notes[:4], config=vars(a))
    fig = heatmap(cells, f"S-NIAH by length and depth ({a.scale_name} scale, CPU; {n_cell[0]} samples per cell)")
    save_figure(fig, a.fig, config=vars(a))
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
