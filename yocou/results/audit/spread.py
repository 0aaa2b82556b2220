"""The spread across the seed replicas of the training-side metrics the audit's comparisons read:
``audit/seed_spread.*``."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from yocou.results import evaldefs
from yocou.results.tidy import NO_SEED, read_tidy

__all__ = ["load_tidy", "seed_spread", "study_dir", "SPREAD_COLUMNS"]


def study_dir(results_dir: str | Path, row: dict) -> Path:
    """The tidy folder a comparison row reads: ``results_dir/tidy``, or, for a row with ``results: <name>`` (a
    study that does not depend on the scale, such as the paper-shape efficiency study), ``<name>/tidy`` beside
    ``results_dir`` (``results/paper_shape/tidy``)."""
    return (Path(results_dir).parent / row["results"] if row.get("results") else Path(results_dir)) / "tidy"


def load_tidy(results_dir: str | Path, rows: list[dict]) -> dict[str, pd.DataFrame]:
    """The tidy tables ``<study>.csv`` the comparison ``rows`` read (from :func:`study_dir`), plus ``runs`` (those
    present).

    Raises:
        ValueError: a table present is invalid (naming the file), or one study is read from two folders.
    """
    where: dict[str, Path] = {"runs": Path(results_dir) / "tidy"}
    for r in rows:
        d = study_dir(results_dir, r)
        if where.setdefault(r["study"], d) != d:
            raise ValueError(f"eval/comparisons.yaml: study {r['study']} is read from {where[r['study']]} and {d} "
                             "(give every row of a study the same `results:`)")
    return {s: read_tidy(d / f"{s}.csv") for s, d in sorted(where.items()) if (d / f"{s}.csv").is_file()}


SPREAD_COLUMNS = ("study", "role", "metric", "axis", "axis_value", "mean", "std", "n_seeds", "seeds", "unit")


def seed_spread(tidy: dict[str, pd.DataFrame], rows: list[dict]) -> pd.DataFrame:
    """The seed spread of every training-side metric the comparison ``rows`` read: per study, role, metric and axis
    value, the mean over seeds, the standard deviation across seeds (ddof 1; NaN with one seed) and the number of
    seeds. Training-side metrics: those of ``training`` rows, and those of ``eval`` rows that have no item stderr in
    the table (they fall back to training). Rows that do not depend on a seed (``seed`` = NO_SEED) are left out.
    Columns: :data:`SPREAD_COLUMNS`."""
    want: dict[str, set[str]] = {}
    for r in rows:
        if r["evidence"] not in ("training", "eval"):
            continue
        mets = r.get("metrics") or [r.get("metric")]
        mets = list(evaldefs.column_metrics(mets).values()) if isinstance(mets, str) else mets
        want.setdefault(r["study"], set()).update((m, r["evidence"]) for m in mets if m)
    out = []
    for study, ms in sorted(want.items()):
        df = tidy.get(study)
        if df is None:
            continue
        df = df[df["seed"] != NO_SEED]
        df = df[df["axis2"] == ""] if "axis2" in df else df
        keep = {m for m, ev in ms if ev == "training" or df.loc[df["metric"] == m, "stderr"].isna().all()}
        d = df[df["metric"].isin(keep)].fillna({"axis_value": -math.inf})
        if d.empty:
            continue
        per_seed = d.groupby(["role", "metric", "axis", "axis_value", "unit", "seed"], sort=True)["value"].mean()
        for (role, metric, axis, av, unit), v in per_seed.groupby(level=[0, 1, 2, 3, 4]):
            out.append({"study": study, "role": role, "metric": metric, "axis": axis,
                        "axis_value": math.nan if av == -math.inf else av, "mean": float(v.mean()),
                        "std": float(v.std(ddof=1)) if len(v) > 1 else math.nan, "n_seeds": int(len(v)),
                        "seeds": " ".join(str(int(x)) for x in v.index.get_level_values("seed")), "unit": unit})
    return pd.DataFrame(out, columns=list(SPREAD_COLUMNS))
