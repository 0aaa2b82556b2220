"""Committed results as a source: when a render target may read ``results/<scale>/`` instead of recomputing it.

The pipeline has two halves. *Compute* jobs read trained runs under ``runs/<scale>/`` (or the benchmark files
under ``logs/<scale>/``) and write results under ``results/<scale>/``: the evaluations' raw results and the tidy
tables. *Render* jobs read only ``results/<scale>/`` and write the tables, figures and the audit. The results of
one full run are committed, with the resolved config that made them in ``results/<scale>/config.json``
(:func:`write_committed_config`). A fresh clone has no ``runs/``; there, a render target must not plan hours of
training to rebuild files it already has.

``mode`` in the config (schema: ``workflows/schemas/config.schema.yaml``) chooses, once, before any target is read
(the Snakefile includes the compute rules, ``workflows/rules/compute/*.smk``, only when computing):

* ``compute``: every rule is defined; Snakemake's own rules of what is stale decide what runs.
* ``render``: the compute rules are not defined at all, so ``results/<scale>/`` are plain source files of the render
  rules: any target, also with ``-f``, ``-R``, ``--forcerun`` or ``--forceall``, re-renders and never trains. If the
  config differs from the committed one in anything the results depend on, planning refuses in one line naming the
  key and printing the command that recomputes; so does a scale without committed results.
* ``auto`` (the default): ``render`` when the scale has committed results, ``runs/<scale>/`` does not exist and the
  config agrees with the committed one; ``compute`` otherwise, with one warning line naming the first keys that
  differ. ``reproduce_all`` trains everything, so in render mode it refuses, naming ``--config mode=compute``.

Keys that change no result are left out of the comparison (:data:`NO_RESULT_KEYS`): how figures are drawn
(``render``), where and how jobs run (``launch``, ``resources``, ``eval.threads``; one and two evaluation threads
give the same losses bit for bit, measured), and ``mode`` itself.

Light: standard library only (the Snakefile imports it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CONFIG_NAME",
    "NO_RESULT_KEYS",
    "CommittedState",
    "committed_state",
    "config_diff",
    "planned_jobs",
    "read_committed_config",
    "result_config",
    "write_committed_config",
]

#: Dotted keys that change no result: rendering, execution and the mode itself; and ``seeds``, whose whole effect
#: is the seed replicas it adds to ``variants`` (compared in full), so a count that adds no run changes nothing.
NO_RESULT_KEYS = ("mode", "render", "launch", "resources", "eval.threads", "seeds")
#: The file, under results/<scale>/, holding the resolved config of the committed results.
CONFIG_NAME = "config.json"


def _drop(cfg: Mapping[str, Any], dotted: str) -> dict:
    out = dict(cfg)
    head, _, rest = dotted.partition(".")
    if head in out:
        if rest:
            if isinstance(out[head], Mapping):
                out[head] = _drop(out[head], rest)
        else:
            del out[head]
    return out


def result_config(config: Mapping[str, Any]) -> dict:
    """``config`` without :data:`NO_RESULT_KEYS`, through a JSON round trip (tuples become lists, keys strings)."""
    cfg = json.loads(json.dumps(dict(config), sort_keys=True, default=str))
    for key in NO_RESULT_KEYS:
        cfg = _drop(cfg, key)
    return cfg


def config_diff(committed: Any, current: Any, prefix: str = "") -> list[str]:
    """Dotted keys where two configs differ, depth first, in sorted key order (``[]`` if equal).

    A key present on one side only counts as differing; lists are compared whole (``seeds.core``, a task list).
    """
    if isinstance(committed, Mapping) and isinstance(current, Mapping):
        out: list[str] = []
        for k in sorted(set(committed) | set(current), key=str):
            name = f"{prefix}.{k}" if prefix else str(k)
            if k not in committed or k not in current:
                out.append(name)
            else:
                out.extend(config_diff(committed[k], current[k], name))
        return out
    return [] if committed == current else [prefix or "(top level)"]


def _show(cfg: Mapping[str, Any], dotted: str) -> str:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return "absent"
        node = node[part]
    text = json.dumps(node, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


def read_committed_config(results_dir: str | os.PathLike) -> dict | None:
    """The config that made the committed ``results_dir`` (its ``config.json``, key ``config``), or None if absent.

    Raises:
        ValueError: the file exists but is not JSON or has no mapping under ``config``, naming the file.
    """
    path = Path(results_dir) / CONFIG_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not readable JSON ({e})") from None
    cfg = data.get("config") if isinstance(data, dict) else None
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: expected an object with the resolved config under 'config'")
    return cfg


def write_committed_config(config: Mapping[str, Any], out: str | os.PathLike, *, note: str | None = None) -> None:
    """Write ``out`` (``results/<scale>/config.json``): the resolved ``config`` with provenance, atomically."""
    from yocou.utils.io import atomic_write_json, provenance

    body = {"config": json.loads(json.dumps(dict(config), sort_keys=True, default=str)),
            "what": "the resolved pipeline config (schema defaults filled, runs expanded) that made results/"
                    f"{config.get('scale')}/; `snakemake` compares it with the config it runs (yocou.workflow.committed)"}
    if note:
        body["note"] = note
    body["provenance"] = provenance({"scale": config.get("scale")}, seed=config.get("seed"))
    atomic_write_json(out, body)


@dataclass(frozen=True)
class CommittedState:
    """What planning decided: ``use`` the committed results (render mode) or not, and why (one line or None)."""

    use: bool
    mode: str
    message: str | None = None


def committed_state(config: Mapping[str, Any], *, scale: str, results_dir: str | os.PathLike,
                    runs_dir: str | os.PathLike) -> CommittedState:
    """Decide whether render targets read the committed ``results_dir`` (see the module docstring).

    Args:
        config: the resolved pipeline config (``mode`` one of auto, render, compute).
        scale: the scale's name (for the messages).
        results_dir: ``results/<scale>``; runs_dir: ``runs/<scale>``.

    Raises:
        ValueError: ``mode: render`` where the scale has no committed config, or where the config differs from
            it: one line naming the first differing key and the command that recomputes.
    """
    mode = config.get("mode", "auto")
    if mode == "compute":
        return CommittedState(False, mode)
    committed = read_committed_config(results_dir)
    where = Path(results_dir) / CONFIG_NAME
    if committed is None:
        if mode == "render":
            raise ValueError(f"mode=render: {where} does not exist (no committed results at scale {scale}); "
                             f"compute them with --config mode=compute")
        return CommittedState(False, mode)
    diff = config_diff(result_config(committed), result_config(config))
    if diff:
        shown = ", ".join(f"{k} ({_show(committed, k)} committed, {_show(config, k)} now)" for k in diff[:3])
        more = f" and {len(diff) - 3} more" if len(diff) > 3 else ""
        if mode == "render":
            raise ValueError(f"mode=render: the config differs from the one that made {where} at {shown}{more}; "
                             f"recompute with: snakemake --cores all <target> --config mode=compute <your overrides>")
        return CommittedState(False, mode, f"the config differs from the one that made {where} at {shown}{more}: "
                                           f"recomputing from {runs_dir}/ what the targets need")
    if mode == "auto" and Path(runs_dir).exists():
        return CommittedState(False, mode)
    return CommittedState(True, mode)


def planned_jobs(dry_run_stdout: str) -> dict[str, int]:
    """Rule -> number of jobs from the ``Job stats`` table that ``snakemake -n`` prints (empty when it plans none)."""
    import re

    m = re.search(r"Job stats:\n.*?\n-+\s+-+\n(.*?)\ntotal", dry_run_stdout, re.S)
    return {name: int(n) for name, n in (line.split() for line in m.group(1).splitlines())} if m else {}


def main(argv: list[str] | None = None) -> int:
    """``python -m yocou.workflow.committed --config-json JSON --out results/<scale>/config.json`` (rule committed_config)."""
    import argparse

    from yocou.utils.guard import reads, writes


    ap = argparse.ArgumentParser(prog="yocou.workflow.committed", description=main.__doc__)
    ap.add_argument("--config-json", required=True, type=reads(if_exists=True), help="the resolved pipeline config as JSON text")
    ap.add_argument("--out", required=True, type=writes(), help="the file to write (results/<scale>/config.json)")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    try:
        cfg = json.loads(a.config_json)
    except json.JSONDecodeError as e:
        ap.error(f"--config-json: not JSON ({e})")
    if not isinstance(cfg, dict) or "scale" not in cfg:
        ap.error("--config-json: expected an object with a 'scale' key")
    write_committed_config(cfg, a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
