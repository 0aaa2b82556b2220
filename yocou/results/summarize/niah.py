"""Summarize step of Table 4 (S-NIAH-1, S-NIAH-2): the per-variant needle-in-a-haystack results
(:mod:`yocou.evaluation.longctx.niah`, ``results/<scale>/niah/<run>.json``) → tidy study ``table4`` (:mod:`yocou.results.tidy`).

Rows per core role and task ``t`` (``s_niah_1``, ``s_niah_2``), from the per-prompt records:

* ``t.acc`` (fraction; stderr binomial ``sqrt(p (1 - p) / n)``), ``t.logp_value``, ``t.logp_distractor`` and
  ``t.gain`` (= logp_value − logp_distractor per prompt; nats; stderr ``std / sqrt(n)`` over prompts) with
  ``n`` = prompts, at three levels: per length and depth (axis ``seq_len``, ``axis2 = "depth"``,
  ``axis2_value`` the depth as a fraction 0-1), per length over every depth (no axis2) and over everything
  (axis ``""``);
* ``t.choice_acc`` (where the records have it; fraction, binomial stderr): multiple-choice accuracy, the value's
  teacher-forced log-probability the highest of ``n_choices`` (:mod:`yocou.evaluation.longctx.niah`), at the same levels;
* ``all_tasks.acc``: the accuracy over every prompt of every task (axis ``""``); ``all_tasks.choice_acc`` and
  ``in_train_len.choice_acc`` (the prompts no longer than the training length) and ``choice_chance``
  (``1 / n_choices``) where the records have the multiple choice;
* ``train_tokens`` (tokens): ``steps × batch_size × seq_len`` of the run config, where given;
* ``train_seq_len`` (tokens): the model's training length, where the result records it;
* ``train_needle_mix.fraction`` (fraction): the share of the model's training sequences that carried a synthetic
  needle (``train.needle_mix`` of ``run_config.json``, :mod:`yocou.data.needles`; 0 when off, the paper's protocol),
  where the run config is given; ``detail`` names the substitute protocol;
* ``paper.all_tasks.acc`` (run ``paper``): the mean of the paper's Table 4 accuracies of the role's
  printed row (:data:`yocou.results.names.PAPER_ROWS`), beside ours.

Extra columns: ``haystack`` (``noise`` for S-NIAH-1, the held-out book for S-NIAH-2) and ``extrapolated``
(the length is above ``train_seq_len``). ``seed``: the run's training seed (``run_config.json``), else -1.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from yocou.results.names import NIAH_TASKS, paper_row
from yocou.results.readers import read_niah
from yocou.results.summarize import run_seed
from yocou.results.tidy import NO_SEED, role_of, tidy_frame

__all__ = ["summarize_table4", "run_seed", "HAYSTACK"]

HAYSTACK = {"s_niah_1": "noise", "s_niah_2": "book"}


def _read_json(path: str | Path) -> dict[str, Any]:
    """A run_config.json as a dict; ValueError naming the file otherwise (Table 4 must not label a run's training
    protocol from a file it cannot read)."""
    import json

    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the run config ({type(e).__name__}); rerun the run_config rule") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: the run config is not a JSON object; rerun the run_config rule")
    return d


def _has_choice(g: pd.DataFrame) -> bool:
    return "choice_correct" in g and bool(g["choice_correct"].notna().all())


def _stats(g: pd.DataFrame) -> list[tuple[str, float, float, str]]:
    """(metric suffix, value, stderr, unit) of a group of records."""
    n = len(g)
    p = float(g["correct"].mean())
    out = [("acc", p, math.sqrt(p * (1 - p) / n), "fraction")]
    if _has_choice(g):
        q = float(g["choice_correct"].mean())
        out.append(("choice_acc", q, math.sqrt(q * (1 - q) / n), "fraction"))
    gain = g["logp_value"] - g["logp_distractor"]
    for name, s in (("logp_value", g["logp_value"]), ("logp_distractor", g["logp_distractor"]), ("gain", gain)):
        se = float(s.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        out.append((name, float(s.mean()), se, "nats"))
    return out


def summarize_table4(niah: Mapping[str, str | Path], roles: Mapping[str, Any],
                     run_configs: Mapping[str, str | Path] | None = None) -> pd.DataFrame:
    """Tidy study ``table4`` (see the module's docstring).

    Args:
        niah: ``{run: niah result JSON}`` (validated by :func:`yocou.results.readers.read_niah`).
        roles: ``{role: run}`` or ``{role: [run, its seed replicas ...]}`` of the core roles (one set of rows
            per run, told apart by ``seed``).
        run_configs: ``{run: run_config.json}`` for the seed column.

    Raises:
        ValueError: a role's run has no result, or a record lacks its length or depth.
    """
    from yocou.results.reported import load_table

    paper = load_table(4)
    out: list[dict[str, Any]] = []
    for run, role in role_of(roles).items():
        if run not in niah:
            raise ValueError(f"table4: no needle-in-a-haystack result for run {run!r} (role {role!r})")
        path = niah[run]
        res = read_niah(path, NIAH_TASKS)
        recs = pd.DataFrame(res["records"])
        for k in ("length", "depth"):
            if k not in recs or recs[k].isna().any():
                raise ValueError(f"{path}: records without {k!r}; rerun the niah rule")
        rc = (run_configs or {}).get(run)
        seed = run_seed(Path(rc).parent) if rc else NO_SEED
        train_len = res.get("train_seq_len")
        base = {"study": "table4", "run": run, "role": role, "seed": seed}

        def add(metric_task: str, g: pd.DataFrame, haystack: str, length: float | None = None,
                depth: float | None = None) -> None:
            for name, v, se, unit in _stats(g):
                out.append({**base, "metric": f"{metric_task}.{name}", "axis": "" if length is None else "seq_len",
                            "axis_value": math.nan if length is None else float(length),
                            "axis2": "" if depth is None else "depth",
                            "axis2_value": math.nan if depth is None else float(depth) / 100.0,
                            "value": v, "stderr": se, "n": float(len(g)), "unit": unit, "haystack": haystack,
                            "extrapolated": bool(length is not None and train_len and length > train_len)})

        for task, gt in recs.groupby("task", sort=False):
            hay = "noise" if HAYSTACK.get(task) == "noise" else str(res.get("book") or HAYSTACK.get(task, ""))
            for (length, depth), g in gt.groupby(["length", "depth"], sort=True):
                add(task, g, hay, length, depth)
            for length, g in gt.groupby("length", sort=True):
                add(task, g, hay, length)
            add(task, gt, hay)
        p = float(recs["correct"].mean())
        out.append({**base, "metric": "all_tasks.acc", "axis": "", "value": p,
                    "stderr": math.sqrt(p * (1 - p) / len(recs)), "n": float(len(recs)), "unit": "fraction",
                    "haystack": "", "extrapolated": False})
        if _has_choice(recs):
            k = sorted({int(x) for x in recs["n_choices"]})
            if len(k) != 1:
                raise ValueError(f"{path}: records with different n_choices {k}; rerun the niah rule")
            for name, g in (("all_tasks", recs), ("in_train_len", recs[recs["length"] <= (train_len or 0)])):
                if len(g):
                    q = float(g["choice_correct"].mean())
                    out.append({**base, "metric": f"{name}.choice_acc", "axis": "", "value": q,
                                "stderr": math.sqrt(q * (1 - q) / len(g)), "n": float(len(g)), "unit": "fraction",
                                "haystack": "", "extrapolated": False})
            out.append({**base, "metric": "choice_chance", "axis": "", "value": 1.0 / k[0], "unit": "fraction",
                        "haystack": "", "extrapolated": False,
                        "detail": f"1 / n_choices: the value against {k[0] - 1} distractor numbers drawn alike"})
        tr = (_read_json(rc).get("train") or {}) if rc else {}
        if rc:
            mix = tr.get("needle_mix") or {}
            f = float(mix.get("fraction") or 0.0)
            out.append({**base, "metric": "train_needle_mix.fraction", "axis": "", "value": f, "unit": "fraction",
                        "haystack": "", "extrapolated": False,
                        "detail": (f"{f:g} of the training sequences carry a synthetic key-value needle in the "
                                   f"eval's format and, at the end, its question and value (keys disjoint from the "
                                   f"eval's); needle-to-answer distance {mix.get('min_distance', 0)} to "
                                   f"{mix.get('max_distance') or 'the most that fit in the training length, in'} "
                                   f"tokens") if f > 0 else
                                  "no synthetic needles in training (the paper's protocol)"})
        if all(isinstance(tr.get(k), int) for k in ("steps", "batch_size", "seq_len")):
            out.append({**base, "metric": "train_tokens", "axis": "", "unit": "tokens", "haystack": "",
                        "value": float(tr["steps"] * tr["batch_size"] * tr["seq_len"]), "extrapolated": False})
        if train_len:
            out.append({**base, "metric": "train_seq_len", "axis": "", "value": float(train_len), "unit": "tokens",
                        "haystack": "", "extrapolated": False})
    for role in dict.fromkeys(role_of(roles).values()):  # the paper's row once per role, whatever its seeds
        prow = paper_row("table4", role)
        pv = paper[(paper["model"] == prow) & paper["column"].isin(list(NIAH_TASKS.values()))]["value"]
        if prow and len(pv):
            out.append({"study": "table4", "run": "paper", "role": role, "seed": NO_SEED,
                        "metric": "paper.all_tasks.acc", "axis": "", "value": float(np.mean(pv)),
                        "n": float(len(pv)), "unit": "fraction", "haystack": "", "extrapolated": False,
                        "detail": f"mean of the paper's Table 4 row {prow!r} over {', '.join(NIAH_TASKS.values())}"})
    return tidy_frame(out, where="table4")
