"""Figures 5 and 6: parameter scaling and loop scaling of YOCO-U against YOCO (paper Section 4, issue 6).

Inputs per run: ``results/<scale>/ppl/<run>.json`` (held-out book and code NLL, :mod:`yocou.ppl`), the run's
``summary.json`` (parameters, active parameters per token, budget) and, for Figure 6, ``metrics.jsonl``.
"Held-out loss" is the mean of the book and code NLL in nats per token (the paper plots validation loss on
its own corpus, which is not available offline).

* Figure 5 (the paper: "YOCO-U achieves comparable performance with 50% fewer parameters than YOCO"; left
  against parameters, right against activated parameters): held-out loss against total parameters and against
  active matrix parameters per token, one line per family over the size ladder, same steps for all. The
  parameter saving at each YOCO-U rung is ``1 − P_yocou / P_yoco(L)``, with ``P_yoco(L)`` the YOCO parameters
  that reach the same loss, interpolated linearly in log P along YOCO's ladder (``None`` outside it).
* Figure 6 (the paper: "consistent improvements when scaling up loop numbers (1, 2, 3, 5)"): training loss
  against tokens per loop count, and held-out loss against T.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..readers import ResultFileError, read_metrics, read_ppl, read_summary
from .common import COLORS, label, save_figure, write_table


def heldout(ppl_path: str | Path) -> dict[str, float]:
    """``{"book", "code", "loss"}``: held-out NLL (nats/token) per split and their mean, from a ppl JSON."""
    splits = read_ppl(ppl_path)["splits"]
    missing = [s for s in ("heldout_book", "heldout_code") if s not in splits]
    if missing:
        raise ResultFileError(ppl_path, "splits", f"expected heldout_book and heldout_code, missing {missing}")
    book, code = splits["heldout_book"]["nll"], splits["heldout_code"]["nll"]
    return {"book": book, "code": code, "loss": (book + code) / 2}


def heldout_docs(ppl_paths: list[str]) -> dict[str, list[str]]:
    """``{split: [document id, ...]}`` evaluated in the ppl JSONs (the held-out splits of the corpus manifest).

    Every run is evaluated on the same documents; where runs differ, the union per split is returned so
    that a count in a note never understates what was held out.
    """
    out: dict[str, list[str]] = {}
    for p in ppl_paths:
        for split, s in read_ppl(p)["splits"].items():
            ids = out.setdefault(split, [])
            ids += [d["id"] for d in s.get("docs", []) if d["id"] not in ids]
    return out


def describe_heldout(docs: dict[str, list[str]] | None) -> str:
    """``"book (1 document: milton/paradise_lost) and code (3 documents: stdlib/a.py, ...)"`` from the ids."""
    if not docs:
        return "book and code"
    parts = []
    for split in ("heldout_book", "heldout_code"):
        ids = docs.get(split, [])
        shown = ", ".join(ids[:4]) + (", …" if len(ids) > 4 else "")
        parts.append(f"{split.removeprefix('heldout_')} ({len(ids)} document{'s' if len(ids) != 1 else ''}"
                     f"{': ' + shown if ids else ''})")
    return " and ".join(parts)


def _run_row(run: str, ppl: str, summary: str) -> dict[str, Any]:
    sm = read_summary(summary, require=("params", "active_params_per_token"))
    return {"run": run, "params": sm["params"], "active_params": sm["active_params_per_token"],
            "steps": sm["steps"], "tokens": sm["tokens"], "train_flops": sm["train_flops"], **heldout(ppl)}


def param_saving(yoco: pd.DataFrame, loss: float) -> float | None:
    """YOCO parameters reaching ``loss`` on YOCO's ladder (interpolated in log P), or ``None`` outside it."""
    y = yoco.sort_values("params")
    lp, ls = np.log(y["params"].to_numpy(float)), y["loss"].to_numpy(float)
    for i in range(len(ls) - 1):
        lo, hi = sorted((ls[i], ls[i + 1]))
        if lo <= loss <= hi and ls[i] != ls[i + 1]:
            return float(math.exp(lp[i] + (lp[i + 1] - lp[i]) * (ls[i] - loss) / (ls[i] - ls[i + 1])))
    return None


def fig5(families: dict[str, list[dict[str, Any]]], *, scale: str, out: str, data_out: str,
         config: dict | None = None, docs: dict[str, list[str]] | None = None) -> pd.DataFrame:
    """Render Figure 5 from ``{"yoco": [run rows], "yocou": [run rows]}`` (rows of :func:`_run_row`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = pd.concat([pd.DataFrame(rows).assign(family=f) for f, rows in families.items()], ignore_index=True)
    yoco = df[df.family == "yoco"]
    eq = [param_saving(yoco, l) if f == "yocou" else None for f, l in zip(df.family, df.loss)]
    df["yoco_params_same_loss"] = eq
    df["param_saving"] = [None if e is None else 1 - p / e for e, p in zip(eq, df.params)]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for f, g in df.groupby("family", sort=False):
        g = g.sort_values("params")
        kw = dict(marker="o", label=label(f), color=COLORS.get(f), lw=1.8)
        axes[0].plot(g["params"] / 1e6, g["loss"], **kw)
        axes[1].plot(g["active_params"] / 1e6, g["loss"], **kw)
    axes[0].set_xlabel("Parameters (M)")
    axes[1].set_xlabel("Activated matrix parameters per token (M, loops counted)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_ylabel("Held-out loss (nats/token, book+code mean)")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(frameon=False)
    fig.suptitle(f"Figure 5 (ours, {scale} scale, CPU): parameter scaling at equal steps", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out, config=config)
    plt.close(fig)
    sav = [s for s in df.param_saving if s is not None and not pd.isna(s)]
    notes = [f"Held-out loss: mean of the NLL on the held-out {describe_heldout(docs)}, the "
             "substitute for the paper's validation loss; every run has the same steps and tokens.",
             "param_saving: 1 − P(YOCO-U) / P(YOCO at the same loss), YOCO interpolated in log P along its ladder; "
             "empty where YOCO-U's loss lies outside YOCO's range. The paper: about 0.5 (\"comparable performance "
             "with 50% fewer parameters\").",
             "Ours: " + (", ".join(f"{s:.2f}" for s in sav) if sav else "no YOCO-U rung falls inside YOCO's range")]
    write_table(df, data_out, title="Figure 5 data: held-out loss against parameters", notes=notes, config=config)
    return df


def fig6(rows: dict[int, dict[str, Any]], curves: dict[int, pd.DataFrame], *, scale: str, out: str,
         data_out: str, smooth: float = 0.3, config: dict | None = None) -> pd.DataFrame:
    """Render Figure 6 from held-out rows and training curves keyed by loop count T."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    cmap = plt.get_cmap("Reds")
    ts = sorted(rows)
    for i, t in enumerate(ts):
        c = curves[t].sort_values("step")
        y = c["loss"].ewm(alpha=smooth).mean() if smooth < 1 else c["loss"]
        axes[0].plot(c["tokens"], y, color=cmap(0.35 + 0.65 * i / max(1, len(ts) - 1)), lw=1.6,
                     label=f"T = {t}" + (" (YOCO)" if t == 1 else ""))
    df = pd.DataFrame([{"T": t, **rows[t]} for t in ts])
    axes[1].plot(df["T"], df["loss"], marker="o", color=COLORS.get("yocou"), label="mean")
    axes[1].plot(df["T"], df["book"], marker=".", ls="--", color="#555555", label="book")
    axes[1].plot(df["T"], df["code"], marker=".", ls=":", color="#555555", label="code")
    axes[0].set_xlabel("Training tokens")
    axes[0].set_ylabel("Training loss")
    axes[0].set_xscale("log")
    axes[1].set_xlabel("Loops T")
    axes[1].set_xticks(ts)
    axes[1].set_ylabel("Held-out loss (nats/token)")
    for ax in axes:
        ax.grid(alpha=0.3)
        # beside the panel, not over the curves
        ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle(f"Figure 6 (ours, {scale} scale, CPU): YOCO-U loop scaling, T = {', '.join(map(str, ts))}",
                 fontsize=10)
    fig.tight_layout()
    save_figure(fig, out, config=config)
    plt.close(fig)
    diffs = np.diff(df["loss"].to_numpy(float))
    notes = ["T = 1 is YOCO (YOCO-U with one loop is YOCO exactly; tests/test_model.py). Same steps and tokens for "
             "every T; training FLOPs grow with T.",
             "The paper: consistent improvements when scaling up the loop count (1, 2, 3, 5). Ours: held-out loss "
             + ("decreases at every step of T" if (diffs < 0).all() else
                "does not decrease at every step of T (differences " + ", ".join(f"{d:+.3f}" for d in diffs) + ")")
             + "."]
    write_table(df, data_out, title="Figure 6 data: held-out loss against loop count", notes=notes, config=config)
    return df


def _curve(run_dir: Path) -> pd.DataFrame:
    p = run_dir / "metrics.jsonl"
    if not p.is_file():
        raise FileNotFoundError(f"{p} not found (train the run first)")
    return pd.DataFrame(read_metrics(p))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["fig5", "fig6"])
    ap.add_argument("--runs", required=True,
                    help='JSON: fig5 {"yoco": [run, ...], "yocou": [...]}; fig6 {"T": run, ...}')
    ap.add_argument("--run-root", required=True, help="runs/<scale>/models")
    ap.add_argument("--ppl-root", required=True, help="results/<scale>/ppl")
    ap.add_argument("--out", required=True, help="figure stem")
    ap.add_argument("--data", required=True, help="data table stem")
    ap.add_argument("--scale-name", required=True)
    a = ap.parse_args(argv)
    try:
        runs = json.loads(a.runs)
    except json.JSONDecodeError as e:
        ap.error(f"--runs: not valid JSON ({e}): {a.runs!r}")
    if a.what == "fig5":
        if not (isinstance(runs, dict) and set(runs) == {"yoco", "yocou"}
                and all(isinstance(v, list) and all(isinstance(r, str) for r in v) for v in runs.values())):
            ap.error(f'--runs for fig5: expected {{"yoco": [run, ...], "yocou": [run, ...]}}, got {a.runs}')
    elif not (isinstance(runs, dict) and all(str(t).isdigit() and int(t) >= 1 and isinstance(r, str)
                                              for t, r in runs.items())):
        ap.error(f'--runs for fig6: expected {{"<T, an integer >= 1>": run, ...}}, got {a.runs}')
    root, proot = Path(a.run_root), Path(a.ppl_root)
    cfg = {"runs": runs, "scale": a.scale_name}

    def row(r: str) -> dict[str, Any]:
        return _run_row(r, str(proot / f"{r}.json"), str(root / r / "summary.json"))

    if a.what == "fig5":
        fig5({f: [row(r) for r in rs] for f, rs in runs.items()}, scale=a.scale_name, out=a.out, data_out=a.data,
             config=cfg, docs=heldout_docs([str(proot / f"{r}.json") for rs in runs.values() for r in rs]))
    else:
        ts = {int(t): r for t, r in runs.items()}
        fig6({t: row(r) for t, r in ts.items()}, {t: _curve(root / r) for t, r in ts.items()}, scale=a.scale_name,
             out=a.out, data_out=a.data, config=cfg)
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
