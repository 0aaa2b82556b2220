"""Scale names: a scale is a config ``workflows/config/<scale>.yaml`` whose outputs live in ``runs/<scale>/``,
``results/<scale>/``, ``figures/<scale>/`` and ``logs/<scale>/``. Besides ``smoke``, ``tiny`` and ``paper`` a user
may add their own; its name must be safe in a path and a shell command (:data:`SCALE_PATTERN`, the same in
``workflows/schemas/config.schema.yaml``). Standard library only: the Snakefile imports it.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

__all__ = ["SCALE_PATTERN", "check_scale_name", "configured_scales", "result_scales", "check_scale", "config_error"]

#: A scale name: a letter or digit, then letters, digits, ``_``, ``-`` or ``.`` (no ``/``, spaces or shell syntax).
SCALE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
CONFIG_DIR = Path("workflows/config")
RESULTS_DIR = Path("results")
# results/ folders that are not scales: the audit's committed baseline lives in results/audit/
_NOT_SCALES = frozenset({"audit"})


def check_scale_name(name: object, where: str = "scale") -> str:
    """``name`` if it is a safe scale name.

    Raises:
        ValueError: naming ``where``, the name and the pattern it must match.
    """
    if not isinstance(name, str) or not re.fullmatch(SCALE_PATTERN, name):
        raise ValueError(f"{where}: {name!r} is not a usable scale name: expected letters, digits, '_', '-' or '.', "
                         f"starting with a letter or digit (pattern {SCALE_PATTERN}), since it names the folders "
                         f"runs/<scale>/, results/<scale>/ and figures/<scale>/")
    return name


def configured_scales(root: str | os.PathLike = ".") -> list[str]:
    """Scales with a config ``workflows/config/<scale>.yaml`` under ``root``."""
    return sorted(p.stem for p in (Path(root) / CONFIG_DIR).glob("*.yaml"))


def result_scales(root: str | os.PathLike = ".") -> list[str]:
    """Scales with a folder ``results/<scale>/`` under ``root`` (not ``results/audit``, the baseline's)."""
    d = Path(root) / RESULTS_DIR
    return sorted(p.name for p in d.iterdir() if p.is_dir() and p.name not in _NOT_SCALES) if d.is_dir() else []


def check_scale(name: object, where: str = "--scale", root: str | os.PathLike = ".") -> str:
    """``name`` if it is a safe scale name with a config or a results folder under ``root``.

    Raises:
        ValueError: an unsafe name, or one with neither ``workflows/config/<name>.yaml`` nor ``results/<name>/``,
            naming the scales there are.
    """
    check_scale_name(name, where)
    configs, results = configured_scales(root), result_scales(root)
    if name in configs or name in results:
        return str(name)
    here = Path(root).resolve()
    raise ValueError(f"{where} {name!r}: no such scale: neither {CONFIG_DIR / f'{name}.yaml'} nor "
                     f"{RESULTS_DIR / str(name)}/ exists under {here}; scales with a config: {configs or 'none'}, "
                     f"with results: {results or 'none'}")


def config_error(e: Exception | str) -> None:
    """Stop the Snakefile's planning with a bad config's one-line message (it names the field or file).

    Printed as ``Error: <message>`` on stderr, then ``SystemExit(1)``: Snakemake passes that on without its
    header and traceback, which an exception raised in a Snakefile gets.

    Raises:
        SystemExit: always, with status 1.
    """
    print(f"Error: {e}", file=sys.stderr)
    raise SystemExit(1)
