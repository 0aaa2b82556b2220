"""Table 10: KV-cache occupancy (MiB per sequence) against sequence length.

Part A: analytic at the paper's 1.3B configuration (SPEC.md section 5), beside
the paper's reported values (``yocou/reported/table10.csv``).
Part B: measured bytes of real caches at our scale after a prefill of N tokens
(``yocou kv-measure``), beside the formula.
"""

from __future__ import annotations

import argparse

import pandas as pd

from ..cli import KV_TABLE_LENGTHS, MIB, kv_table
from ..reported import load_table
from ..readers import read_kv_measure
from .common import label, stem_of, write_table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--measured", required=True, help="kv-measure JSON")
    ap.add_argument("--out", required=True, help="stem of part A (paper config); part B gets '_measured'")
    ap.add_argument("--scale-name", default="")
    a = ap.parse_args(argv)
    a.out = str(stem_of(a.out))
    ours = pd.DataFrame(kv_table("paper-1.3b", "bf16"))
    rep = load_table(10)
    rows = []
    for _, r in ours.iterrows():
        for n in KV_TABLE_LENGTHS:
            paper = rep[(rep["model"] == r["model"]) & (rep["seq_len"] == n)]["value"]
            pv = float(paper.iloc[0]) if len(paper) else float("nan")
            rows.append({"model": r["model"], "seq_len": n, "ours_MiB": r[str(n)], "paper_MiB": pv,
                         "match": abs(r[str(n)] - pv) < 1e-9})
    df = pd.DataFrame(rows)
    order = ["Transformer", "RINS", "YOCO", "YOCO-U"]
    parts = []
    for src, col in (("ours (formula)", "ours_MiB"), ("paper (reported)", "paper_MiB")):
        w = df.pivot(index="model", columns="seq_len", values=col).loc[order]
        w.columns = [f"{c // 1024}K" for c in w.columns]
        w.insert(0, "source", src)
        parts.append(w.reset_index())
    wide = pd.concat(parts).sort_values(["model", "source"], key=lambda s: s.map(
        {m: i for i, m in enumerate(order)}) if s.name == "model" else s, kind="stable").reset_index(drop=True)
    n_match = int(df["match"].sum())
    write_table(wide, a.out, title="Table 10 (analytic, paper 1.3B configuration): KV cache MiB per sequence",
                notes=[f"{n_match} of {len(df)} cells equal the paper's reported values exactly "
                       "(yocou/reported/table10.csv; the paper's 'MB' are MiB).",
                       "L=20, 4 KV heads × 128, bf16, W=512, T=3, RINS = A^3 B (40 layer applications)."],
                config=vars(a), floatfmt="g")
    write_table(df, str(a.out) + "_cells", title="Table 10 cell by cell: ours vs paper", config=vars(a), floatfmt="g")
    m = pd.DataFrame(read_kv_measure(a.measured))
    m["variant"] = m["variant"].map(label)
    m["measured_MiB"] = m["measured_bytes"] / MIB
    m["analytic_MiB"] = m["analytic_bytes"] / MIB
    mw = m[["variant", "seq_len", "measured_bytes", "analytic_bytes", "measured_MiB", "equal"]]
    write_table(mw, str(a.out) + "_measured",
                title=f"Table 10 at our {a.scale_name} configuration: measured vs analytic KV cache per sequence (CPU)",
                notes=[f"Measured: bytes of the real cache after prefill of N tokens; {int(m['equal'].sum())} of "
                       f"{len(m)} equal the formula exactly.", f"dtype {m['dtype'].iloc[0]}."],
                config=vars(a), floatfmt=".4g")
    print(wide.to_string(index=False))
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
