"""Tables 8, 9 and 10 at our scale: prefill throughput, decode throughput and KV-cache bytes against
sequence length, with the paper's reported values beside ours as ratios between variants (never as
absolute numbers: ours are CPU figures at a ~10M-parameter scale, the paper's GPU figures at 1.3B).

Inputs: the tidy ``efficiency`` table (our absolute numbers) and ``efficiency_derived`` (the ratios, ours and
the paper's, and their means over lengths; :func:`yocou.results.summarize.efficiency.summarize_efficiency_derived`).
Outputs (each CSV + Markdown + JSON):

* ``<out>/table8``, ``table9``, ``table10_ratios``: one row per (ratio, source), one column per length;
* ``<out>/table8_ours``, ``table9_ours``: our absolute tokens/s per variant and length (CPU).

GPU rows: each ``serving.json`` of the prepared GPU check (``results/gpu/<device>/``,
:mod:`yocou.evaluation.bench.gpu_session`) adds its measured ratios to Tables 8 and 9 as rows of their own
(:func:`gpu_ratio_rows`), named by the device, batch and decode mode (1.3B paper shapes, random weights).

Ratios (throughput or bytes of the first variant over the second): YOCO-U/YOCO, RINS/Transformer,
YOCO/Transformer, YOCO-U/Transformer. Paper: Tables 8-10 of arXiv 2604.01220
(``yocou/results/reported/table08.csv`` ... ``table10.csv``); docs/design.md section 8 expects YOCO-U/YOCO about 1/3
and RINS/Transformer 0.50 for prefill.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from yocou.results.names import label, len_label
from yocou.results.render.common import write_table
from yocou.results.render.fig7 import device_of, efficiency_wide
from yocou.results.summarize.efficiency import RATIOS
from yocou.results.summarize.gpu import device_name
from yocou.results.tidy import read_tidy

# table -> (tidy ratio metric, efficiency metric of the absolute table, what)
TABLES = {8: ("prefill_ratio", "prefill_tokens_per_s", "Prefill throughput"),
          9: ("decode_ratio", "decode_tokens_per_s", "Decode throughput"),
          10: ("kv_ratio", "kv_bytes", "KV cache bytes")}
PAPER_SOURCE = "paper (GPU, 1.3B)"


def ratio_wide(derived: pd.DataFrame, metric: str, source_ours: str) -> pd.DataFrame:
    """One row per (ratio, source), one column per length (``1K`` ... ``256K``) and ``mean`` (the tidy
    mean over lengths), ours (``metric``) before the paper's (``paper.<metric>``) for each ratio."""
    rows = []
    for a, b in RATIOS:
        for m, src in ((metric, source_ours), (f"paper.{metric}", PAPER_SOURCE)):
            g = derived[(derived["role"] == f"{a}|{b}") & (derived["metric"] == m)]
            if g.empty:
                continue
            row = {"ratio": f"{label(a)} / {label(b)}", "source": src}
            per_n = g[g["axis"] == "seq_len"].sort_values("axis_value")
            row.update({len_label(n): v for n, v in zip(per_n["axis_value"], per_n["value"])})
            mean = g[g["axis"] == ""]["value"]
            row["mean"] = float(mean.iloc[0]) if len(mean) else None
            rows.append(row)
    w = pd.DataFrame(rows)
    lens = sorted({n for n in derived[derived["axis"] == "seq_len"]["axis_value"]
                   if len_label(n) in w.columns})
    return w[["ratio", "source"] + [len_label(n) for n in lens] + ["mean"]] if len(w) else w


def gpu_ratio_rows(serving: Sequence[str | Path], phase: str) -> pd.DataFrame:
    """The ratios of the prepared GPU check's ``serving.json`` files for ``phase`` (``prefill``/``decode``): one row
    per (ratio, device, batch, path), one column per length, ``source`` naming the GPU, the batch and the mode.

    Raises:
        ValueError: a file that is not a complete serving result of the GPU check (naming it).
    """
    rows = []
    for path in serving:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        if d.get("step") != "serving" or not isinstance(d.get("ratios"), list):
            raise ValueError(f"{path}: expected the 'serving' step of yocou.evaluation.bench.gpu_session with "
                             "'ratios' (a complete run)")
        kind, name = device_name(path)
        shape = "tiny shapes" if d.get("mode") == "cpu-smoke" else "1.3B"
        for q in d["ratios"]:
            if q["phase"] != phase:
                continue
            a, b = q["ratio"].split("/")
            rows.append({"ratio": f"{label(a)} / {label(b)}",
                         "source": f"{kind} ({name}, {shape}, B={q['batch_size']}, {q['path']} {q['mode']})",
                         "seq_len": q["seq_len"], "value": q["value"]})
    if not rows:
        return pd.DataFrame(columns=["ratio", "source"])
    w = pd.DataFrame(rows).pivot_table(index=["ratio", "source"], columns="seq_len", values="value", sort=False)
    w.columns = [len_label(c) for c in w.columns]
    w["mean"] = w.mean(axis=1)
    return w.reset_index()


def render(efficiency: str | Path, derived: str | Path, out: dict[str, str | Path], *, scale: str = "",
           gpu: Sequence[str | Path] = ()) -> None:
    """Write ``out["t8"]``, ``out["t8_ours"]``, ``out["t9"]``, ``out["t9_ours"]`` and ``out["t10"]`` (the
    KV ratios, ``table10_ratios``) from the tidy ``efficiency`` and ``efficiency_derived`` tables, with the GPU
    rows of the ``serving.json`` files in ``gpu`` (:func:`gpu_ratio_rows`) in Tables 8 and 9."""
    cfg = {"efficiency": str(efficiency), "derived": str(derived), "scale": scale}
    if gpu:
        cfg["gpu"] = [str(g) for g in gpu]
    eff = read_tidy(efficiency)
    der = read_tidy(derived)
    w = efficiency_wide(eff)
    kind, dev = device_of(w)
    src = f"ours ({kind}, {scale})"
    load_cols = [c for c in ("loadavg_1m_before", "loadavg_1m_after") if c in w]
    loads = pd.concat([w[c] for c in load_cols]).dropna() if load_cols else pd.Series(dtype=float)
    load_note = (f"1-minute load average during the measurements: {loads.min():.2f} to {loads.max():.2f} "
                 f"on {int(w['n_cpus'].iloc[0])} CPUs (other jobs on the machine disturb CPU timings)."
                 if len(loads) else "load average not recorded")
    n_rep = eff[eff["metric"] == "prefill_tokens_per_s"]["n"]
    common = [f"Ours: {dev}, random-init weights at the {scale} configuration, medians of "
              f"{int(n_rep.iloc[0]) if len(n_rep) and n_rep.notna().all() else '?'} repeats after warm-up; the "
              "paper: GPU, 1.3B. Only ratios between variants are compared; absolute numbers of the two are not "
              "comparable.", load_note]
    for t, (metric, col, what) in TABLES.items():
        notes = list(common)
        if t == 8:
            notes.append("docs/design.md section 8: the paper's RINS/Transformer prefill is 0.50 at every length "
                         "(2x compute) and YOCO-U/YOCO about 1/3 (T = 3).")
        if t == 9:
            notes.append("Decode tokens/s exclude the prefill. At our scale a decode step is dominated by "
                         "per-layer overhead, not by reading the cache, so ratios follow layer-application counts.")
        if t == 10:
            notes.append("KV bytes: the real cache's bytes (equal to the formula of docs/design.md section 5 at every "
                         f"N; {int(w['kv_equal'].astype(bool).sum())} of {len(w)} rows checked).")
        notes.append("mean: the mean of the ratio over the lengths of its row.")
        tw = ratio_wide(der, metric, src)
        if t in (8, 9) and gpu:
            notes.append("GPU rows: the prepared GPU check (python -m yocou.evaluation.bench.gpu_session) at the "
                         "paper's 1.3B shapes with random weights, bf16; prefill at B = 1, decode at each batch B.")
            tw = pd.concat([tw, gpu_ratio_rows(gpu, "prefill" if t == 8 else "decode")], ignore_index=True)
        tw = tw.astype(object)
        write_table(tw.where(tw.notna(), ""), out[f"t{t}"], title=f"Table {t} at our scale: {what}, ratios between "
                    "variants (ours beside the paper's)", notes=notes, config=cfg, floatfmt=".3f")
        if t in (8, 9):
            a = w.pivot_table(index="role", columns="seq_len", values=col, sort=False)
            a.columns = [len_label(c) for c in a.columns]
            a.index = [label(v) for v in a.index]
            a = a.reset_index().rename(columns={"index": "model"})
            write_table(a, out[f"t{t}_ours"], title=f"Table {t} at our scale: {what} (tokens/s, {dev})",
                        notes=common, config=cfg, floatfmt=".0f")
