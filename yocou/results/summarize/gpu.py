"""Summarize step of the prepared GPU check (:mod:`yocou.evaluation.bench.gpu_session`): its ``serving.json``
-> the tidy study ``efficiency_gpu`` (:mod:`yocou.results.tidy`), which the audit reads as GPU rows beside the CPU ones
(``results: gpu`` in ``eval/comparisons.yaml``).

Rows (run = role = the variant; seed -1; axis ``seq_len`` = N; ``detail`` names the batch and the decode path):

* ``prefill_tokens_per_s``: chunked prefill at B = 1 (the paper's Table 8);
* ``decode_tokens_per_s``: decode at the largest batch that every variant measured at that N on the static path
  (Table 9's batched regime; the batch is in ``detail``), else B = 1 on the dynamic path;
* ``decode_tokens_per_s.b1``: decode at B = 1 on the dynamic path.

Extra columns: ``device_label`` (``GPU (<name>, bf16)``), ``dtype``, ``detail``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from yocou.results.tidy import NO_SEED, tidy_frame

__all__ = ["STUDY", "VARIANTS", "device_name", "summarize_gpu"]

STUDY = "efficiency_gpu"
VARIANTS = ("transformer", "yoco", "rins", "yocou")


def _read(path: Path) -> dict[str, Any]:
    d = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(d, dict) or d.get("step") != "serving" or d.get("complete") is not True \
            or not isinstance(d.get("rows"), list):
        raise ValueError(f"{path}: expected the complete 'serving' step of yocou.evaluation.bench.gpu_session")
    for r in d["rows"]:
        if "skipped" in r:
            continue
        tps = r.get("tokens_per_s")
        if r.get("variant") not in VARIANTS or not isinstance(tps, (int, float)) or not math.isfinite(tps) or tps <= 0:
            raise ValueError(f"{path}: a row with an unknown variant or a tokens_per_s that is not a positive "
                             f"number: {r}")
    return d


def device_name(serving: str | Path) -> tuple[str, str]:
    """``("GPU", <name>)`` from the ``env.json`` the check wrote beside ``serving`` (its device's name), or
    ``("CPU", <folder>)`` for a ``--cpu-smoke`` run; the folder's name where ``env.json`` is absent."""
    path = Path(serving)
    env_file = path.parent / "env.json"
    env = json.loads(env_file.read_text(encoding="utf-8")).get("env", {}) if env_file.exists() else {}
    return ("CPU" if env.get("device") == "cpu" else "GPU"), str(env.get("name") or path.parent.name)


def summarize_gpu(serving: Sequence[str | Path]) -> pd.DataFrame:
    """The tidy rows of one GPU's ``serving.json`` (the module docstring lists them).

    Args:
        serving: the ``results/gpu/<device>/serving.json`` files; the audit judges one GPU, so all must come from
            the same device (one file, as the check writes).

    Raises:
        ValueError: no file, files from more than one device, or a file that is not a complete serving result
            (naming it).
    """
    paths = [Path(p) for p in serving]
    if not paths:
        raise ValueError("summarize_gpu: no serving.json (run benchmarks/gpu_session.sh on a GPU first)")
    if len(paths) > 1:
        raise ValueError(f"summarize_gpu: the audit judges one GPU, got {len(paths)} serving.json files "
                         f"({', '.join(map(str, paths))}); keep one results/gpu/<device>/ beside the CPU results")
    path = paths[0]
    d = _read(path)
    dtype = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}.get(d.get("dtype", ""), d.get("dtype", "bf16"))
    kind, name = device_name(path)
    extra = {"device_label": f"{kind} ({name}, {dtype})", "dtype": dtype}
    rows = [r for r in d["rows"] if "skipped" not in r]
    out: list[dict[str, Any]] = []

    def add(r: dict[str, Any], metric: str) -> None:
        out.append({"study": STUDY, "run": r["variant"], "role": r["variant"], "seed": NO_SEED, "metric": metric,
                    "axis": "seq_len", "axis_value": float(r["seq_len"]), "value": float(r["tokens_per_s"]),
                    "unit": "tokens/s", **extra,
                    "detail": f"B={r['batch_size']}, {r['path']} {r.get('mode') or 'eager'}"})

    for r in rows:
        if r["phase"] == "prefill" and r["batch_size"] == 1:
            add(r, "prefill_tokens_per_s")
        if r["phase"] == "decode" and r["batch_size"] == 1 and r["path"] == "dynamic":
            add(r, "decode_tokens_per_s.b1")
    for n in sorted({r["seq_len"] for r in rows}):
        static = [r for r in rows if r["phase"] == "decode" and r["path"] == "static" and r["seq_len"] == n]
        shared = set.intersection(*[{r["batch_size"] for r in static if r["variant"] == v} for v in VARIANTS]) \
            if static else set()
        if shared:
            b = max(shared)
            pick = [r for r in static if r["batch_size"] == b]
        else:
            pick = [r for r in rows if r["phase"] == "decode" and r["path"] == "dynamic" and r["batch_size"] == 1
                    and r["seq_len"] == n]
        for r in pick:
            add(r, "decode_tokens_per_s")
    return tidy_frame(out, where=str(path))
