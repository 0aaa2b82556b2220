"""Shared writers for tables (CSV + Markdown + JSON with provenance) and figures (PNG + PDF)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ..io import atomic_path, atomic_write_json, atomic_write_text, provenance


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
    atomic_write_text(stem.with_suffix(".csv"), df.to_csv(index=False))
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
    atomic_write_json(stem.with_suffix(".json"), {"title": title, "notes": list(notes),
                                                  "rows": json.loads(df.to_json(orient="records")),
                                                  "provenance": prov})
    return {"csv": stem.with_suffix(".csv"), "md": stem.with_suffix(".md"), "json": stem.with_suffix(".json")}


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

    The PDF carries no creation date, so a figure drawn again from the same data is the same file.
    """
    stem = stem_of(out_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    for ext, kw in ((".png", {"dpi": DPI}), (".pdf", {"metadata": {"CreationDate": None}})):
        with atomic_path(stem.with_suffix(ext)) as tmp:
            fig.savefig(tmp, format=ext[1:], bbox_inches="tight", **kw)
    atomic_write_json(stem.with_name(stem.name + ".provenance.json"), provenance(config or {}, None))


# Paper-like colours and labels, one per variant name used in configs.
LABELS = {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS", "yocou": "YOCO-U", "loop": "Loop/Universal TRM",
          "upper_loop": "Upper Loop", "upper_loop_nokv": "Upper Loop w/o Shared KV",
          "yoco_deep": "YOCO, Deep (Instead of Wide)", "yocou_deep": "YOCO-U, Deep (Instead of Wide)",
          "yocou_t2": "YOCO-U (T=2)", "yocou_t5": "YOCO-U (T=5)",
          "yoco_moe": "YOCO (MoE)", "yocou_moe": "YOCO-U (MoE, Equal Steps)",
          "yocou_moe_eqflops": "YOCO-U (MoE, Equal FLOPS)"}
COLORS = {"transformer": "#7f7f7f", "yoco": "#1f77b4", "rins": "#2ca02c", "yocou": "#d62728", "loop": "#9467bd"}


def label(variant: str) -> str:
    return LABELS.get(variant, variant)


def read_json(path: str | Path) -> Any:
    """A result JSON; FileNotFoundError or :class:`yocou.readers.ResultFileError` naming the file."""
    from ..readers import read_json as _read_json

    return _read_json(path, what="result file")


def numeric(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    """``df`` with its extra tidy columns ``cols`` (where present) as numbers: a tidy CSV leaves an empty cell of
    a column that only some rows fill as text (:func:`yocou.tidy.read_tidy` types the fixed columns only)."""
    df = df.copy()
    for c in cols:
        if c in df.columns:
            df[c] = pd.to_numeric(df[c].replace("", float("nan")), errors="coerce")
    return df
