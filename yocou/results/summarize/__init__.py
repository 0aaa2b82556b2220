"""The summarize functions: per-run evaluation outputs → one tidy table per study
(:mod:`yocou.results.tidy`), one module per area (``downstream``, ``training``, ``efficiency``, ``niah``, ...).

Every computed number (averages, fits, interpolations, ratios, savings) is made here, never in a renderer.
"""

from pathlib import Path
from typing import Any

__all__ = ["run_seed"]


def run_seed(run_dir: str | Path, default: int = -1) -> int:
    """The training seed of the run in ``run_dir``: ``seed``, ``train.seed`` or ``provenance.seed`` of its
    ``summary.json``, else ``seed`` or ``train.seed`` of its ``run_config.json`` (the first integer present), else
    ``default`` (:data:`yocou.results.tidy.NO_SEED`, -1, unless the caller passes the config's ``seed``).

    Raises:
        ResultFileError: a file present that is not valid JSON or not an object (naming it).
    """
    from yocou.results.readers import read_json, read_summary

    d = Path(run_dir)
    sm: Any = read_summary(d / "summary.json") if (d / "summary.json").is_file() else {}
    rc: Any = read_json(d / "run_config.json", what="run config") if (d / "run_config.json").is_file() else {}
    for src, path in ((sm, ("seed",)), (sm, ("train", "seed")), (sm, ("provenance", "seed")),
                      (rc, ("seed",)), (rc, ("train", "seed"))):
        v = src
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return int(default)

