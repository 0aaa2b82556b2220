"""Does a model use context beyond its sliding window? Held-out loss against position, and the loss with the context
farther than ``W`` tokens shuffled.

YOCO-U's loop runs only window layers; what reaches farther than the self-decoder's reach (layers x loops x W)
is the cross-decoder over the one global K̂V̂. Two measurements per held-out split, on the windows rule ``ppl``
scores (:mod:`yocou.evaluation.heldout`: documents in stored order up to ``max_tokens``), full windows only:

* **loss against position**: the mean NLL (nats) of the prediction at each position ``p`` of a ``seq_len`` window
  (``p + 1`` tokens of context), over all windows;
* **shuffled beyond W**: the last ``scored`` positions of each window are scored twice, with the window as it is and
  with its tokens ``[0, seq_len - scored - W)`` permuted (one fixed permutation per window, seed ``seed``), so every
  scored position keeps at least its nearest ``W`` tokens (at most ``W + scored - 1``) and loses the order of
  everything farther. ``delta = shuffled - intact``: 0 for a model that reads nothing beyond ``W`` (a model whose
  reach is at most ``W`` gives exactly 0), > 0 when it uses the farther context. Its interval is the Student t
  interval over windows (each window's mean difference), the windows as the independent units.

Command line::

    python -m yocou.evaluation.analysis.context_use measure --model runs/tiny/ladder/yocou_seed0_d4000/model.pt \\
        --data runs/tiny/ladder/tokens --splits heldout_book heldout_code --seq-len 256 --window 64 \\
        --max-tokens 131072 --out results/tiny/ladder/context/yocou_seed0_d4000.json
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from yocou.evaluation.heldout import capped_documents
from yocou.model.config import ModelConfig


def reach(cfg: ModelConfig) -> int | None:
    """Tokens back a model's self layers can see before any global layer (layers x loops x W of the window stages
    up to the first global one); None when its first layer already attends globally."""
    total = 0
    for st in cfg.stages:
        if st.kind != "self" or st.window is None:
            return total or None
        total += st.n_layers * st.n_loops * st.window
    return total


def windows(stream: Any, seq_len: int, max_tokens: int | None) -> torch.Tensor:
    """``[n_windows, seq_len + 1]`` token ids: every full window of rule ppl's (``seq_len`` predictions each) of the
    capped documents (a document's last, shorter window is left out, so every position has every window).

    Raises:
        ValueError: no document holds a full window.
    """
    rows = []
    for _, ids, _ in capped_documents(stream, max_tokens):
        for s in range(0, len(ids) - seq_len, seq_len):
            rows.append(np.asarray(ids[s:s + seq_len + 1], dtype=np.int64))
    if not rows:
        raise ValueError(f"no held-out document of {stream} holds a full window of {seq_len + 1} tokens")
    return torch.from_numpy(np.stack(rows))


@torch.no_grad()
def position_nll(model: torch.nn.Module, win: torch.Tensor, batch_size: int = 16) -> torch.Tensor:
    """``[n_windows, seq_len]`` NLL (nats) of each window's predictions (``win``: ``[n, seq_len + 1]`` ids)."""
    dev = next(model.parameters()).device
    out = []
    for b in range(0, len(win), batch_size):
        x = win[b:b + batch_size]
        logits = model(x[:, :-1].to(dev)).logits_BNV
        out.append(F.cross_entropy(logits.float().transpose(1, 2), x[:, 1:].to(dev), reduction="none").cpu())
    return torch.cat(out)


def shuffle_beyond(win: torch.Tensor, window: int, scored: int, seed: int = 0) -> torch.Tensor:
    """``win`` with the input tokens ``[0, seq_len - scored - window)`` of each row permuted (a fixed permutation
    per row from ``seed``); the last ``scored + window`` input tokens and the targets unchanged.

    Raises:
        ValueError: nothing would be shuffled (``scored + window >= seq_len``).
    """
    seq_len = win.shape[1] - 1
    cut = seq_len - scored - window
    if cut < 2:
        raise ValueError(f"--scored {scored} + --window {window} leave {max(cut, 0)} tokens of seq_len {seq_len} to "
                         "shuffle; expected at least 2")
    g = torch.Generator().manual_seed(seed)
    out = win.clone()
    for i in range(len(win)):
        out[i, :cut] = win[i, torch.randperm(cut, generator=g)]
    return out


def context_use(model: torch.nn.Module, stream: Any, seq_len: int, window: int, *, max_tokens: int | None = None,
                scored: int = 16, seed: int = 0, batch_size: int = 16, level: float = 0.95) -> dict[str, Any]:
    """Both measurements of the module docstring on one split.

    Returns:
        ``{"seq_len", "window", "scored", "n_windows", "position_nll": [seq_len] mean NLL at each position,
        "intact", "shuffled" (mean NLL of the scored positions), "delta", "low", "high" (t interval over windows at
        ``level``), "level"}``.
    """
    from scipy import stats

    win = windows(stream, seq_len, max_tokens)
    intact = position_nll(model, win, batch_size)
    shuffled = position_nll(model, shuffle_beyond(win, window, scored, seed), batch_size)
    d = (shuffled[:, -scored:] - intact[:, -scored:]).double().mean(dim=1).numpy()
    n = len(d)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return {"seq_len": seq_len, "window": window, "scored": scored, "n_windows": n,
            "position_nll": intact.double().mean(dim=0).tolist(),
            "intact": float(intact[:, -scored:].double().mean()), "shuffled": float(shuffled[:, -scored:].double().mean()),
            "delta": float(d.mean()), "low": float(d.mean() - half), "high": float(d.mean() + half), "level": level}


def variant_of(run: str) -> str:
    """The variant of a ladder run's folder name: ``yoco_deep9_seed1_d2000`` -> ``yoco_deep9``."""
    import re

    return re.sub(r"_seed\d+(_[sd]\d+)?$", "", run)


#: Bin edges of the loss-against-position figure and table (tokens of context, position + 1): 1, 2, 3-4, ... .
def position_bins(seq_len: int) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]`` tokens of context per bin, doubling: (1, 1), (2, 2), (3, 4), (5, 8), ... up to seq_len."""
    bins, lo = [], 1
    while lo <= seq_len:
        hi = min(seq_len, max(lo, 2 * lo - 2)) if lo > 2 else lo
        bins.append((lo, hi))
        lo = hi + 1
    return bins


def summarize(docs: list[dict[str, Any]], level: float = 0.95) -> tuple[Any, Any]:
    """The per-run table (run, variant, split, reach, global, intact, shuffled, delta with its interval over windows,
    n_windows) and per variant and split the seed mean of delta with a Student t interval over its runs (n - 1 df;
    one run: no interval)."""
    import pandas as pd
    from scipy import stats

    rows = [{"run": Path(d["model"]).parent.name, "variant": variant_of(Path(d["model"]).parent.name),
             "split": s.removeprefix("heldout_"),
             "reach": d["reach"], "global": d["global"], "window": r["window"], "seq_len": r["seq_len"],
             "intact": r["intact"], "shuffled": r["shuffled"], "delta": r["delta"], "low": r["low"], "high": r["high"],
             "n_windows": r["n_windows"]}
            for d in docs for s, r in d["splits"].items()]
    runs = pd.DataFrame(rows)
    agg = []
    for (v, s), g in runs.groupby(["variant", "split"], sort=False):
        x = g["delta"].to_numpy()
        half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 \
            else math.nan
        agg.append({"variant": v, "split": s, "n_runs": len(x), "delta": float(x.mean()),
                    "low": float(x.mean() - half), "high": float(x.mean() + half)})
    return runs, pd.DataFrame(agg)


def draw(docs: list[dict[str, Any]], figure: str | Path, scale: str) -> None:
    """Loss against position per split (each variant's mean over its runs), W and the self layers' reach marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from yocou.results.render.common import COLORS, label, save_figure

    splits = list(docs[0]["splits"])
    fig, axes = plt.subplots(1, len(splits), figsize=(5.5 * len(splits), 4), squeeze=False)
    for ax, s in zip(axes[0], splits):
        by_variant: dict[str, list[list[float]]] = {}
        for d in docs:
            by_variant.setdefault(variant_of(Path(d["model"]).parent.name), []).append(d["splits"][s]["position_nll"])
        bins = position_bins(len(docs[0]["splits"][s]["position_nll"]))
        x = [math.sqrt(lo * hi) for lo, hi in bins]
        for v, curves in by_variant.items():
            per_run = np.array([[np.mean(c[lo - 1:hi]) for lo, hi in bins] for c in curves])
            y = per_run.mean(axis=0)
            ax.plot(x, y, "o-", color=COLORS.get(v), lw=1.2, ms=3,
                    label=f"{label(v)} ({len(curves)} run{'s' if len(curves) > 1 else ''}; band: min to max)")
            if len(curves) > 1:
                ax.fill_between(x, per_run.min(axis=0), per_run.max(axis=0), color=COLORS.get(v), alpha=0.2, lw=0)
        w = docs[0]["splits"][s]["window"]
        ax.axvline(w, color="0.4", ls="--", lw=1, label=f"W = {w}")
        ax.set_xscale("log")
        ax.set_xlabel("tokens of context (position + 1; bins doubling: 1, 2, 3-4, 5-8, ...)")
        ax.set_ylabel(f"held-out {s.removeprefix('heldout_')} loss (nats/token)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        ax.set_title(f"{s.removeprefix('heldout_')}: loss against position", fontsize=10)
    fig.suptitle(f"Context use ({scale}, CPU): held-out loss by position in the {docs[0]['splits'][splits[0]]['seq_len']}"
                 "-token window", fontsize=10)
    fig.tight_layout()
    save_figure(fig, figure, config={"scale": scale})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """``python -m yocou.evaluation.analysis.context_use {measure,summarize}``: loss against position and shuffled
    beyond W for one model; the table and figure of several."""
    from yocou.utils.guard import check_args, reads, suffixed, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.analysis.context_use", description=main.__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--model", required=True, type=reads())
    m.add_argument("--data", required=True, type=reads(), help="the token folder holding <split>.bin")
    m.add_argument("--splits", nargs="+", default=["heldout_book", "heldout_code"])
    m.add_argument("--seq-len", type=int, required=True)
    m.add_argument("--window", type=int, required=True, help="W: the scored positions keep their nearest W tokens")
    m.add_argument("--scored", type=int, default=16, help="positions scored at the end of each window")
    m.add_argument("--max-tokens", type=int, default=None)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out", required=True, type=writes())
    sm = sub.add_parser("summarize")
    sm.add_argument("--inputs", nargs="+", required=True, type=reads())
    sm.add_argument("--scale", required=True)
    sm.add_argument("--out", required=True, type=writes(paths=suffixed(".json", ".csv", ".md")))
    sm.add_argument("--figure", required=True, type=writes(paths=suffixed(".png", ".pdf")))
    sm.add_argument("--dpi", type=int, default=150)
    a = ap.parse_args(argv)
    check_args(a)
    if a.cmd == "summarize":
        return _summarize_main(a)
    for name in ("seq_len", "window", "scored"):
        if getattr(a, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')}: expected a positive integer, got {getattr(a, name)}")
    from yocou.data.tokens import TokenStream
    from yocou.training.train import load_model
    from yocou.utils.io import atomic_write_json, provenance

    model = load_model(a.model).eval()
    doc: dict[str, Any] = {"model": a.model, "variant": model.cfg.name, "reach": reach(model.cfg),
                           "global": any(st.kind != "self" or st.window is None for st in model.cfg.stages),
                           "splits": {}}
    for s in a.splits:
        doc["splits"][s] = context_use(model, TokenStream(Path(a.data) / f"{s}.bin"), a.seq_len, a.window,
                                       max_tokens=a.max_tokens, scored=a.scored, seed=a.seed)
    doc["provenance"] = provenance({k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}, None)
    atomic_write_json(a.out, doc)
    return 0


def _summarize_main(a: argparse.Namespace) -> int:
    from yocou.results.readers import read_json
    from yocou.results.render.common import configure, write_table

    docs = [read_json(p, what="a context-use result (--inputs)") for p in a.inputs]
    for d, p in zip(docs, a.inputs):
        if not isinstance(d, dict) or not isinstance(d.get("splits"), dict) or not d["splits"]:
            raise ValueError(f"{p}: not a context-use result (no 'splits')")
    runs, agg = summarize(docs)
    r0 = next(iter(docs[0]["splits"].values()))
    lines = [f"{r.variant} on {r.split}: shuffled beyond W minus intact {r.delta:+.4f} nats/token"
             + (f" [{r.low:+.4f}, {r.high:+.4f}] (t over {r.n_runs} runs)" if r.n_runs > 1 else " (one run)")
             for r in agg.itertuples()]
    notes = [f"The last {r0['scored']} positions of every full {r0['seq_len']}-token window of rule ppl's held-out "
             f"windows, scored as they are (intact) and with the tokens farther than W = {r0['window']} from every "
             "scored position shuffled (one fixed permutation per window); delta = shuffled - intact, > 0: the model "
             "uses context beyond W. low/high per run: t interval over windows. reach: tokens back the self layers see "
             "before the first global layer (layers x loops x W); global: a global layer reads the whole prefix.",
             *lines]
    write_table(runs, Path(a.out).with_suffix(""), title=f"Context use beyond the window ({a.scale}, CPU)", notes=notes,
                config={"scale": a.scale, "inputs": [str(p) for p in a.inputs]})
    configure(a.dpi)
    draw(docs, a.figure, a.scale)
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
