"""Tables 2, 3, 5 and Figure 3: lm-eval's per-run scores → the tidy studies ``table2``, ``table3``, ``table5``
and ``fig3`` (:mod:`yocou.results.tidy`).

Input: each run's ``results/<scale>/downstream/<run>/tidy.csv`` (:mod:`yocou.evaluation.lmeval.run`: columns ``variant``
(the run), ``task`` (lm-eval's task or group name), ``metric``, ``filter``, ``value``, ``stderr``, ``n_items``,
...), the column maps of ``eval/columns.yaml`` (:func:`yocou.results.evaldefs.columns`) and the config's ``studies``,
``core_variants``, ``seed`` and ``eval.downstream.source``.

Rows, per study role (:func:`yocou.results.tidy.study_roles`; ``core`` for Figure 3) × measured column: ``metric`` =
:func:`yocou.results.evaldefs.metric_id` of the column's spec, ``value``/``stderr`` as lm-eval reports them (accuracies
as fractions, unit ``fraction``; perplexities unit ``ppl``), ``n`` = items. An ``unavailable`` column, or one
lm-eval has no score for (HumanEval without ``code_exec``), has no row. Per table with an average column, one
row ``average``: the mean of the measured member columns, ``stderr`` = sqrt(sum se^2) / k, ``n`` = k (columns
covered), ``detail`` = their display names. Extra columns: ``task`` (lm-eval's task name the value came from),
``source`` (offline/online task pack), ``detail``.

Task names: the offline pack (``source: offline``) names a task key ``yocou_<key>`` (its MMLU and MATH groups
``yocou_mmlu``, ``yocou_math``: :func:`yocou.evaluation.lmeval.pack.offline_task_names`); lm-eval's own tasks
(``source: online``) are :func:`yocou.evaluation.lmeval.pack.online_task_names`, and the MATH subsets of Figure 3 lm-eval's
Minerva tasks (:data:`ONLINE_MATH_SUBSETS`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from yocou.results.evaldefs import columns, metric_id
from yocou.results.readers import read_csv
from yocou.results.summarize import run_seed
from yocou.results.tidy import study_roles, tidy_frame

__all__ = ["PPL_METRICS", "ONLINE_MATH_SUBSETS", "LMEVAL_COLUMNS", "task_names", "load_lmeval", "lookup",
           "run_seed", "summarize_table", "summarize_fig3"]

#: lm-eval metrics that are perplexities (unit ``ppl``); every other metric is a fraction in [0, 1].
PPL_METRICS = frozenset({"perplexity", "word_perplexity", "byte_perplexity"})
#: Columns of a run's lm-eval ``tidy.csv`` that the summaries read.
LMEVAL_COLUMNS = ("variant", "task", "metric", "value", "stderr", "n_items")
#: Figure 3's MATH subsets (task keys of eval/columns.yaml) → lm-eval's own task (``source: online``).
ONLINE_MATH_SUBSETS = {"math_500": "minerva_math500", "math_algebra": "minerva_math_algebra",
                       "math_counting_and_probability": "minerva_math_counting_and_prob",
                       "math_geometry": "minerva_math_geometry",
                       "math_intermediate_algebra": "minerva_math_intermediate_algebra",
                       "math_number_theory": "minerva_math_num_theory", "math_prealgebra": "minerva_math_prealgebra",
                       "math_precalculus": "minerva_math_precalc"}
_TABLES = ("table2", "table3", "table5")


def task_names(key: str, source: str = "offline") -> list[str]:
    """lm-eval's task (or group) names under which a column's task key is reported, in order of preference."""
    from yocou.evaluation.lmeval.pack import offline_task_names, online_task_names

    if source == "online":
        return [ONLINE_MATH_SUBSETS[key]] if key in ONLINE_MATH_SUBSETS else online_task_names(key)
    if source != "offline":
        raise ValueError(f"eval.downstream.source: {source!r}, expected 'offline' or 'online'")
    return offline_task_names(key, {})


def load_lmeval(paths: Iterable[str | Path]) -> pd.DataFrame:
    """The runs' lm-eval ``tidy.csv`` files in one frame (``filter`` ``none`` where a file has no such column).

    Raises:
        FileNotFoundError: a file is missing (run the downstream rule).
        ResultFileError: a file lacks one of :data:`LMEVAL_COLUMNS`.
    """
    frames = []
    for p in paths:
        if not Path(p).is_file():
            raise FileNotFoundError(f"downstream result {p} not found (run the downstream rule)")
        df = read_csv(p, what="downstream result", required=LMEVAL_COLUMNS)
        if "filter" not in df.columns:
            df["filter"] = "none"
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=[*LMEVAL_COLUMNS, "filter"])
    df = pd.concat(frames, ignore_index=True)
    df["variant"] = df["variant"].astype(str)
    df["filter"] = df["filter"].fillna("none").astype(str)
    return df


def lookup(df: pd.DataFrame, run: str, spec: Mapping[str, Any], source: str = "offline") -> dict | None:
    """lm-eval's score of ``run`` for a column spec (task, metric, filter): ``{"value", "stderr", "n", "task"}``
    (``stderr``/``n`` NaN when lm-eval gives none), or ``None`` when no finite score is there."""
    names = task_names(spec["task"], source)
    sel = df[(df["variant"] == run) & df["task"].isin(names) & (df["metric"] == spec["metric"])]
    if spec.get("filter"):
        sel = sel[sel["filter"] == spec["filter"]]
    sel = sel[pd.to_numeric(sel["value"], errors="coerce").map(lambda v: math.isfinite(v))]
    if sel.empty:
        return None
    r = sel.iloc[min(range(len(sel)), key=lambda i: names.index(sel["task"].iloc[i]))]
    se = pd.to_numeric(pd.Series([r["stderr"]]), errors="coerce").iloc[0]
    n = pd.to_numeric(pd.Series([r["n_items"]]), errors="coerce").iloc[0]
    return {"value": float(r["value"]), "stderr": float(se) if pd.notna(se) and math.isfinite(se) else math.nan,
            "n": float(n) if pd.notna(n) and n >= 1 else math.nan, "task": str(r["task"])}


def _summary_paths(summaries: Iterable[str | Path] | Mapping[str, str | Path]) -> dict[str, Path]:
    """run → summary.json: a mapping as given, or paths ``.../<run>/summary.json`` (the folder is the run)."""
    if isinstance(summaries, Mapping):
        return {str(k): Path(v) for k, v in summaries.items()}
    return {Path(p).parent.name: Path(p) for p in summaries}


def _source(config: Mapping[str, Any]) -> str:
    return str(((config.get("eval") or {}).get("downstream") or {}).get("source", "offline"))


def _cell_rows(study: str, roles: Mapping[str, Any], specs: list[tuple[str, dict]], df: pd.DataFrame,
               config: Mapping[str, Any], summaries: Mapping[str, Path]) -> tuple[list[dict], dict]:
    """One row per role × measured spec; also ``{role: {column: row}}`` of what was measured."""
    source = _source(config)
    rows, measured = [], {}
    have = set(df["variant"])
    for role, run in roles.items():
        if not isinstance(run, str):
            raise ValueError(f"studies.{study}.{role}: expected one run, got {run!r}")
        if run not in have:
            raise ValueError(f"{study}: no lm-eval results for run {run!r} (role {role!r}) among the inputs "
                             f"(they have {sorted(have)})")
        seed = run_seed(Path(summaries[run]).parent, config["seed"]) if run in summaries else int(config["seed"])
        measured[role] = {}
        for col, spec in specs:
            if "unavailable" in spec or "average" in spec:
                continue
            cell = lookup(df, run, spec, source)
            if cell is None:
                continue
            row = {"study": study, "run": run, "role": role, "seed": seed, "metric": metric_id(spec),
                   "value": cell["value"], "stderr": cell["stderr"], "n": cell["n"],
                   "unit": "ppl" if spec["metric"] in PPL_METRICS else "fraction",
                   "task": cell["task"], "source": source, "detail": ""}
            rows.append(row)
            measured[role][col] = row
    return rows, measured


def summarize_table(study: str, results_paths: Iterable[str | Path], config: Mapping[str, Any],
                    summaries: Iterable[str | Path] | Mapping[str, str | Path] = ()) -> pd.DataFrame:
    """The tidy rows of Table 2, 3 or 5 (``study``): per role of ``studies.<study>`` and measured column of
    ``eval/columns.yaml``, lm-eval's score; plus per role the ``average`` row (see the module docstring).

    Args:
        results_paths: the runs' lm-eval ``tidy.csv`` (every run of the study; others are ignored).
        config: the config (``studies``, ``core_variants``, ``seed``, ``eval.downstream.source``).
        summaries: the runs' ``summary.json`` (their seeds; a run without one gets the config's ``seed``).

    Raises:
        ValueError: an unknown study, a role whose run has no results among the inputs, an average over
            columns of different units.
    """
    if study not in _TABLES:
        raise ValueError(f"summarize_table: {study!r} is not one of {_TABLES}")
    cols = columns(study)
    specs = list(cols.items())
    roles = study_roles(config, study)
    rows, measured = _cell_rows(study, roles, specs, load_lmeval(results_paths), config,
                                _summary_paths(summaries))
    averages = [(c, s) for c, s in specs if "average" in s]
    if len(averages) > 1:
        raise ValueError(f"eval/columns.yaml {study}: more than one average column {[c for c, _ in averages]}")
    for col, spec in averages:
        for role, run in roles.items():
            members = [(c, measured[role][c]) for c in spec["average"] if c in measured[role]]
            if not members:
                continue
            units = {m["unit"] for _, m in members}
            if len(units) > 1:
                raise ValueError(f"eval/columns.yaml {study}.{col}: averages columns of units {sorted(units)}")
            k = len(members)
            ses = [m["stderr"] for _, m in members]
            se = math.sqrt(sum(s * s for s in ses)) / k if all(math.isfinite(s) for s in ses) else math.nan
            rows.append({"study": study, "run": run, "role": role, "seed": members[0][1]["seed"],
                         "metric": metric_id(spec), "value": sum(m["value"] for _, m in members) / k,
                         "stderr": se, "n": k, "unit": units.pop(), "task": "", "source": members[0][1]["source"],
                         "detail": ", ".join(c for c, _ in members)})
    return tidy_frame(rows, where=f"summarize {study}")


def summarize_fig3(results_paths: Iterable[str | Path], config: Mapping[str, Any],
                   summaries: Iterable[str | Path] | Mapping[str, str | Path] = ()) -> pd.DataFrame:
    """The tidy rows of Figure 3 (study ``fig3``): per core role (``core_variants``) and math set of
    ``eval/columns.yaml`` ``fig3`` that lm-eval scored, the accuracy (``metric_id`` of the set's spec).
    Arguments as :func:`summarize_table`."""
    specs = [(s["label"], s) for s in columns("fig3")]
    rows, _ = _cell_rows("fig3", study_roles(config, "core"), specs, load_lmeval(results_paths), config,
                         _summary_paths(summaries))
    return tidy_frame(rows, where="summarize fig3")
