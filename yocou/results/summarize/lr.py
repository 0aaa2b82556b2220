"""The learning-rate sensitivity of the core runs: the paper trains every variant with one recipe;
``lr_sensitivity`` in the config adds runs at ``train.lr`` × each factor (:func:`yocou.workflow.wfconfig.expand_runs`), and
this study says whether a comparison holds at each variant's own best rate too.

Rows (study ``lr``), per run: ``loss.<split>`` (nats/token on the whole capped held-out split, from the run's ppl
JSON, stderr = its ``stderr_nats``), axis ``lr`` = the run's peak learning rate, role = the base run (``yoco``, ...),
seed = the run's training seed. Seed replicas are rows at their run's rate too (the base run's at the shared rate,
and, with ``seeds.lr_rates``, those at the other rates; the verdicts average them by seed and pair them by seed); ``best_lr`` (one row per role) is the rate with the lowest mean loss over both splits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from yocou.results.readers import read_json, read_ppl
from yocou.results.summarize import run_seed
from yocou.results.tidy import NO_SEED, tidy_frame

__all__ = ["summarize_lr", "lr_table"]


def _lr_of(run_dir: Path) -> float:
    rc = read_json(run_dir / "run_config.json", what="run config")
    return float(rc["train"]["lr"])


def summarize_lr(runs: Mapping[str, Sequence[str | Path]], *, ppl_root: str | Path) -> pd.DataFrame:
    """Tidy rows of study ``lr``.

    Args:
        runs: role (the base run) → its run folders at every rate, with their seed replicas; each
            folder holds ``run_config.json`` and ``summary.json``.
        ppl_root: the folder of the runs' ppl JSONs (``results/<scale>/ppl``).

    Raises:
        FileNotFoundError / ResultFileError: a run's files are missing or malformed (naming the file).
    """
    rows: list[dict[str, Any]] = []
    for role, dirs in runs.items():
        means: dict[float, list[float]] = {}
        for d in map(Path, dirs):
            lr, seed = _lr_of(d), run_seed(d)
            splits = read_ppl(Path(ppl_root) / f"{d.name}.json")["splits"]
            per_split = []
            for split, s in splits.items():
                name = split.removeprefix("heldout_")
                v = float(s.get("nats_per_token", s["nll"]))
                per_split.append(v)
                rows.append({"study": "lr", "run": d.name, "role": role, "seed": seed, "metric": f"loss.{name}",
                             "axis": "lr", "axis_value": lr, "value": v, "stderr": s.get("stderr_nats") or float("nan"),
                             "n": int(s["n_tokens"]), "unit": "nats"})
            means.setdefault(lr, []).append(sum(per_split) / len(per_split))
        best = min(means, key=lambda k: sum(means[k]) / len(means[k]))
        rows.append({"study": "lr", "run": role, "role": role, "seed": NO_SEED, "metric": "best_lr", "value": best,
                     "unit": "lr", "detail": "the rate with the lowest mean held-out loss (book and code)"})
    return tidy_frame(rows, where="tidy lr")


def lr_table(t: pd.DataFrame) -> pd.DataFrame:
    """One row per (role, rate): mean held-out loss per split over the seeds at that rate, the seeds, and whether
    it is the role's best rate (from :func:`summarize_lr`'s rows)."""
    loss = t[t["metric"].str.startswith("loss.")]
    best = t[t["metric"] == "best_lr"].set_index("role")["value"]
    out = []
    for (role, lr), g in loss.groupby(["role", "axis_value"], sort=False):
        r: dict[str, Any] = {"model": role, "lr": lr}
        for m, gg in g.groupby("metric"):
            r[m.replace("loss.", "") + " (nats)"] = gg["value"].mean()
        r["seeds"] = int(g["seed"].nunique())
        r["best"] = "yes" if float(best.get(role, float("nan"))) == lr else ""
        out.append(r)
    return pd.DataFrame(out).sort_values(["model", "lr"], kind="stable").reset_index(drop=True)
