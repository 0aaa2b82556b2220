"""Table 10: KV-cache occupancy (MiB per sequence) against sequence length.

Part A: analytic at the paper's 1.3B configuration (docs/design.md section 5; tidy ``table10``,
:func:`yocou.results.summarize.efficiency.summarize_table10`), beside the paper's reported values
(``yocou/results/reported/table10.csv``), and cell by cell (``_cells``).
Part B: measured bytes of real caches at our scale after a prefill of N tokens (tidy ``kv``,
:func:`yocou.results.summarize.efficiency.summarize_kv`), beside the formula (``_measured``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from yocou.results.names import label, len_label, paper_row
from yocou.results.render.common import stem_of, write_table
from yocou.results.reported import load_table
from yocou.results.tidy import read_tidy

MIB = 2 ** 20


def render(table10: str | Path, kv: str | Path, out: str | Path, *, scale: str = "") -> None:
    """Write ``<out>`` (``.csv/.md/.json``), ``<out>_cells`` and ``<out>_measured`` from the tidy ``table10``
    and ``kv`` tables."""
    cfg = {"table10": str(table10), "kv": str(kv), "scale": scale}
    stem = stem_of(out)
    ours = read_tidy(table10)
    ours = ours[ours["metric"] == "kv_mib_formula"]
    rep = load_table(10)
    rows = []
    for r in ours.itertuples():
        model = paper_row("table10", r.role) or label(r.role)
        paper = rep[(rep["model"] == model) & (rep["seq_len"] == r.axis_value)]["value"]
        pv = float(paper.iloc[0]) if len(paper) else float("nan")
        rows.append({"model": model, "seq_len": int(r.axis_value), "ours_MiB": r.value, "paper_MiB": pv,
                     "match": abs(r.value - pv) < 1e-9})
    df = pd.DataFrame(rows)
    printed = list(dict.fromkeys(rep["model"]))  # the paper's row order, then any role it does not print
    order = sorted(dict.fromkeys(df["model"]), key=lambda m: printed.index(m) if m in printed else len(printed))
    df = df.sort_values("model", key=lambda s: s.map({m: i for i, m in enumerate(order)}), kind="stable")
    df = df.reset_index(drop=True)
    parts = []
    for src, col in (("ours (formula)", "ours_MiB"), ("paper (reported)", "paper_MiB")):
        w = df.pivot(index="model", columns="seq_len", values=col).loc[order]
        w.columns = [len_label(c) for c in w.columns]
        w.insert(0, "source", src)
        parts.append(w.reset_index())
    wide = pd.concat(parts).sort_values(["model", "source"], key=lambda s: s.map(
        {m: i for i, m in enumerate(order)}) if s.name == "model" else s, kind="stable").reset_index(drop=True)
    n_match = int(df["match"].sum())
    write_table(wide, stem, title="Table 10 (analytic, paper 1.3B configuration): KV cache MiB per sequence",
                notes=[f"{n_match} of {len(df)} cells equal the paper's reported values exactly "
                       "(yocou/results/reported/table10.csv; the paper's 'MB' are MiB).",
                       "L=20, 4 KV heads × 128, bf16, W=512, T=3, RINS = A^3 B (40 layer applications)."],
                config=cfg, floatfmt="g")
    write_table(df, str(stem) + "_cells", title="Table 10 cell by cell: ours vs paper", config=cfg, floatfmt="g")
    k = read_tidy(kv)
    m = k[k["metric"] == "kv_bytes"].set_index(["role", "axis_value"])
    f = k[k["metric"] == "kv_bytes_formula"].set_index(["role", "axis_value"])["value"]
    mw = pd.DataFrame({"variant": [label(r) for r, _ in m.index], "seq_len": [int(n) for _, n in m.index],
                       "measured_bytes": m["value"].astype("int64").to_numpy(),
                       "analytic_bytes": f.loc[m.index].astype("int64").to_numpy(),
                       "measured_MiB": (m["value"] / MIB).to_numpy(), "equal": m["equal"].astype(bool).to_numpy()})
    dtypes = ", ".join(dict.fromkeys(m["dtype"].astype(str)))
    write_table(mw, str(stem) + "_measured",
                title=f"Table 10 at our {scale} configuration: measured vs analytic KV cache per sequence (CPU)",
                notes=[f"Measured: bytes of the real cache after prefill of N tokens; {int(mw['equal'].sum())} of "
                       f"{len(mw)} equal the formula (docs/design.md section 5) exactly.", f"dtype {dtypes}."],
                config=cfg, floatfmt=".4g")
