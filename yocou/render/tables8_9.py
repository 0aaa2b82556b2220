"""Tables 8, 9 and 10 at our scale: prefill throughput, decode throughput and KV-cache bytes against
sequence length, with the paper's reported values beside ours as ratios between variants (never as
absolute numbers: ours are CPU figures at a ~10M-parameter scale, the paper's GPU figures at 1.3B).

Input: the profile JSON of :mod:`yocou.bench.profile`. Outputs (each CSV + Markdown + JSON):

* ``<out>/table8``, ``table9``, ``table10_ratios``: one row per (ratio, source), one column per length;
* ``<out>/table8_ours``, ``table9_ours``: our absolute tokens/s per variant and length (CPU).

Ratios (throughput or bytes of the first variant over the second): YOCO-U/YOCO, RINS/Transformer,
YOCO/Transformer, YOCO-U/Transformer. Paper: Tables 8-10 of arXiv 2604.01220
(``yocou/reported/table08.csv`` ... ``table10.csv``); SPEC.md section 8 expects YOCO-U/YOCO about 1/3
and RINS/Transformer 0.50 for prefill.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ..reported import load_table
from .common import label, write_table
from .fig7 import device_label, load_profile

RATIOS = (("YOCO-U / YOCO", "yocou", "yoco"), ("RINS / Transformer", "rins", "transformer"),
          ("YOCO / Transformer", "yoco", "transformer"), ("YOCO-U / Transformer", "yocou", "transformer"))
TABLES = {8: ("prefill_tokens_per_s", "Prefill throughput"), 9: ("decode_tokens_per_s", "Decode throughput"),
          10: ("kv_bytes_measured", "KV cache bytes")}


def _len_name(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def ratio_table(ours: pd.DataFrame, col: str, table: int, source_ours: str) -> pd.DataFrame:
    """Long table ``ratio, source, seq_len, value`` for ours (column ``col``) and the paper's Table ``table``."""
    paper = load_table(table)
    rows = []
    for name, a, b in RATIOS:
        for src, df, key, vcol in ((source_ours, ours, "variant", col),
                                   ("paper (GPU, 1.3B)", paper, "model", "value")):
            ka, kb = (a, b) if key == "variant" else (label(a), label(b))
            for n in sorted(set(df["seq_len"])):
                va = df[(df[key] == ka) & (df["seq_len"] == n)][vcol]
                vb = df[(df[key] == kb) & (df["seq_len"] == n)][vcol]
                if len(va) and len(vb):
                    rows.append({"ratio": name, "source": src, "seq_len": int(n),
                                 "value": float(va.iloc[0]) / float(vb.iloc[0])})
    return pd.DataFrame(rows)


def wide(long: pd.DataFrame) -> pd.DataFrame:
    """One row per (ratio, source), one column per length (``1K`` ... ``256K``)."""
    w = long.pivot_table(index=["ratio", "source"], columns="seq_len", values="value", sort=False)
    w = w[sorted(w.columns)]
    w.columns = [_len_name(c) for c in w.columns]
    w["mean"] = w.mean(axis=1)
    return w.reset_index()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", required=True, help="profile JSON (python -m yocou.bench.profile)")
    ap.add_argument("--out", required=True, help="output folder (results/<scale>)")
    ap.add_argument("--scale-name", default="")
    a = ap.parse_args(argv)
    df, prov = load_profile(a.profile)
    dev = device_label(df, prov)
    src = f"ours ({dev.split(' (')[0]}, {a.scale_name})"
    out = Path(a.out)
    loads = pd.concat([df["loadavg_1m_before"], df["loadavg_1m_after"]]).dropna()
    load_note = (f"1-minute load average during the measurements: {loads.min():.2f} to {loads.max():.2f} "
                 f"on {prov.get('device', {}).get('n_cpus')} CPUs (other jobs on the machine disturb CPU timings)."
                 if len(loads) else "load average not recorded")
    common = [f"Ours: {dev}, random-init weights at the {a.scale_name} configuration, medians of "
              f"{int(df['n_repeats'].iloc[0])} repeats after warm-up; the paper: GPU, 1.3B. Only ratios between "
              "variants are compared; absolute numbers of the two are not comparable.", load_note]
    for t, (col, what) in TABLES.items():
        long = ratio_table(df, col, t, src)
        notes = list(common)
        if t == 8:
            notes.append("SPEC.md section 8: the paper's RINS/Transformer prefill is 0.50 at every length "
                         "(2x compute) and YOCO-U/YOCO about 1/3 (T = 3).")
        if t == 9:
            notes.append("Decode tokens/s exclude the prefill. At our scale a decode step is dominated by "
                         "per-layer overhead, not by reading the cache, so ratios follow layer-application counts.")
        if t == 10:
            notes.append("KV bytes: the real cache's bytes (equal to the formula of SPEC.md section 5 at every N; "
                         f"{int(df['kv_equal'].sum())} of {len(df)} rows checked).")
        name = "table10_ratios" if t == 10 else f"table{t}"
        w = wide(long).astype(object)
        write_table(w.where(w.notna(), ""), out / name, title=f"Table {t} at our scale: {what}, ratios between variants "
                    "(ours beside the paper's)", notes=notes, config=vars(a), floatfmt=".3f")
        if t in (8, 9):
            w = df.pivot_table(index="variant", columns="seq_len", values=col, sort=False)
            w.columns = [_len_name(c) for c in w.columns]
            w.index = [label(v) for v in w.index]
            w = w.reset_index().rename(columns={"index": "model"})
            write_table(w, out / f"table{t}_ours", title=f"Table {t} at our scale: {what} (tokens/s, {dev})",
                        notes=common, config=vars(a), floatfmt=".0f")
    return 0


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
