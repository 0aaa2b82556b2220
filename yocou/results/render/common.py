"""Shared writers for tables (CSV + Markdown + JSON with provenance) and figures (PNG + PDF)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from yocou.utils.io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    committed_bytes,
    provenance,
)

OUTPUT_SUFFIXES = (".csv", ".md", ".json", ".png", ".pdf")


def stem_of(path: str | Path) -> Path:
    """``results/x/table10.csv`` -> ``results/x/table10``: a Snakemake output names the stem."""
    p = Path(path)
    return p.with_suffix("") if p.suffix in OUTPUT_SUFFIXES else p


def write_table(df: pd.DataFrame, out_stem: str | Path, *, title: str, notes: Iterable[str] = (),
                config: dict[str, Any] | None = None, floatfmt: str = ".4g") -> dict[str, Path]:
    """Write ``<stem>.csv``, ``<stem>.md`` and ``<stem>.json`` (rows + provenance) atomically.

    The Markdown carries the title, the notes (data substitutes, CPU labels, units)
    and a provenance line (git commit, versions); the JSON carries the full provenance.
    """
    stem = stem_of(out_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    prov = provenance(config or {}, None)
    csv_text = df.to_csv(index=False)
    rows = json.loads(df.to_json(orient="records"))
    if _same_table(stem, csv_text, title, list(notes), rows):
        # equal content: the files (and their provenance) stay as they are, so `git status` shows only real changes
        return {"csv": stem.with_suffix(".csv"), "md": stem.with_suffix(".md"), "json": stem.with_suffix(".json")}
    atomic_write_text(stem.with_suffix(".csv"), csv_text)
    md = io.StringIO()
    md.write(f"### {title}\n\n")
    md.write(df.to_markdown(index=False, floatfmt=floatfmt))
    md.write("\n\n")
    for n in notes:
        md.write(f"- {n}\n")
    md.write(f"\n<sub>yocou {prov['versions'].get('yocou')} · commit {prov['git_commit'][:10]}"
             f"{' (dirty)' if prov.get('git_dirty') else ''} · torch {prov['versions'].get('torch')} · "
             f"{prov['device'].get('cpu_model', '')} · {prov['created_utc']}</sub>\n")
    atomic_write_text(stem.with_suffix(".md"), md.getvalue())
    atomic_write_json(stem.with_suffix(".json"), {"title": title, "notes": list(notes), "rows": rows,
                                                  "provenance": prov})
    return {"csv": stem.with_suffix(".csv"), "md": stem.with_suffix(".md"), "json": stem.with_suffix(".json")}


def _same_table(stem: Path, csv_text: str, title: str, notes: list[str], rows: list) -> bool:
    """When ``<stem>.{csv,md,json}`` are committed (git ``HEAD``) with this table's content (provenance aside),
    write the committed bytes back and return True: a re-render with equal content changes nothing ``git status``
    shows."""
    old = {ext: committed_bytes(stem.with_suffix(ext)) for ext in (".csv", ".md", ".json")}
    if any(b is None for b in old.values()):
        return False
    try:
        doc = json.loads(old[".json"].decode("utf-8"))
        same = old[".csv"].decode("utf-8") == csv_text and isinstance(doc, dict) and \
            {k: doc.get(k) for k in ("title", "notes", "rows")} == {"title": title, "notes": notes, "rows": rows}
    except (UnicodeDecodeError, ValueError):
        return False
    if same:
        for ext, data in old.items():
            atomic_write_bytes(stem.with_suffix(ext), data)
    return bool(same)


#: Resolution of the PNG figures (config ``render.dpi``; set by :func:`configure` in the pipeline's scripts).
DPI = 150


def configure(dpi: int | None = None) -> None:
    """Set how figures are drawn for this process (``render:`` of the pipeline config): ``dpi`` of the PNGs.

    Raises:
        ValueError: ``dpi`` not an integer from 10 to 1200.
    """
    global DPI
    if dpi is not None:
        if isinstance(dpi, bool) or not isinstance(dpi, int) or not 10 <= dpi <= 1200:
            raise ValueError(f"render.dpi: expected an integer from 10 to 1200, got {dpi!r}")
        DPI = dpi


def save_figure(fig: Any, out_stem: str | Path, *, config: dict[str, Any] | None = None) -> None:
    """Save ``<stem>.png`` (:data:`DPI` dpi) and ``<stem>.pdf`` atomically, plus ``<stem>.provenance.json``.

    The PDF carries no creation date, so a figure drawn again from the same data is the same file; when both are
    the committed files (git ``HEAD``), the committed provenance is written back too (``git status`` then shows only
    real changes).
    """
    stem = stem_of(out_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    changed = False
    for ext, kw in ((".png", {"dpi": DPI}), (".pdf", {"metadata": {"CreationDate": None}})):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext[1:], bbox_inches="tight", **kw)
        atomic_write_bytes(stem.with_suffix(ext), buf.getvalue())
        changed = changed or committed_bytes(stem.with_suffix(ext)) != buf.getvalue()
    prov_path = stem.with_name(stem.name + ".provenance.json")
    old_prov = None if changed else committed_bytes(prov_path)
    if old_prov is not None:  # the committed figure, drawn again: its committed provenance stays
        atomic_write_bytes(prov_path, old_prov)
    else:
        atomic_write_json(prov_path, provenance(config or {}, None))


# Paper-like colours and labels, one per variant name used in configs.
LABELS = {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS", "yocou": "YOCO-U", "loop": "Loop/Universal TRM",
          "upper_loop": "Upper Loop", "upper_loop_nokv": "Upper Loop w/o Shared KV",
          "yoco_deep": "YOCO, Deep (Instead of Wide)", "yoco_deep9": "YOCO, 9 unshared self layers", "yocou_deep": "YOCO-U, Deep (Instead of Wide)",
          "yocou_t2": "YOCO-U (T=2)", "yocou_t5": "YOCO-U (T=5)",
          "yoco_moe": "YOCO (MoE)", "yocou_moe": "YOCO-U (MoE, Equal Steps)",
          "yocou_moe_eqflops": "YOCO-U (MoE, Equal FLOPS)"}
COLORS = {"transformer": "#7f7f7f", "yoco": "#1f77b4", "rins": "#2ca02c", "yocou": "#d62728", "loop": "#9467bd",
          "yoco_deep9": "#ff7f0e"}


def label(variant: str) -> str:
    return LABELS.get(variant, variant)


def read_json(path: str | Path) -> Any:
    """A result JSON; FileNotFoundError or :class:`yocou.results.readers.ResultFileError` naming the file."""
    from yocou.results.readers import read_json as _read_json

    return _read_json(path, what="result file")


def numeric(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    """``df`` with its extra tidy columns ``cols`` (where present) as numbers: a tidy CSV leaves an empty cell of
    a column that only some rows fill as text (:func:`yocou.results.tidy.read_tidy` types the fixed columns only)."""
    df = df.copy()
    for c in cols:
        if c in df.columns:
            df[c] = pd.to_numeric(df[c].replace("", float("nan")), errors="coerce")
    return df
