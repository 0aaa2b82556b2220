"""Evaluate one checkpoint on the downstream tasks with lm-eval (Tables 2, 3, 5 and Figure 3).

``python -m yocou.evaluation.lmeval.run --model runs/tiny/models/yocou/model.pt --tokenizer runs/tiny/tokenizer.json \
    --pack runs/tiny/eval/pack --downstream '<eval.downstream as JSON>' --variant yocou --out results/tiny/downstream/yocou``

Writes into ``--out``:

- ``lm_eval_results.json``: lm-eval's full output per call (results, groups, configs, versions, n-shot,
  n-samples, higher_is_better), without the per-sample logs, plus our provenance and timings;
- ``samples.jsonl.gz``: lm-eval's sample logs (every request, response and filtered answer);
- ``tidy.csv``: one row per (task, metric, filter) with ``value``, ``stderr``, ``n_items``, ``n_shots``.

Offline (``source: offline``) the pack's manifest is checked (item counts, sha256) before anything runs.
Online (``source: online``) lm-eval's own task names run instead; subsets then use lm-eval's ``limit``
(its first N items), not our seeded subsets.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

from yocou.evaluation.lmeval import pack as P
from yocou.utils.io import atomic_path, atomic_write_json, atomic_write_text, provenance

__all__ = ["evaluate_model", "tidy_rows"]


def tidy_rows(res: dict, *, variant: str) -> list[dict]:
    """Flatten lm-eval's ``results`` (tasks and groups) into rows with value, stderr, items and shots."""
    rows = []
    n_samples = res.get("n-samples", {})
    group_subtasks = res.get("group_subtasks", {})

    def n_items(task: str) -> int | None:
        if task in n_samples:
            return int(n_samples[task]["effective"])
        subs = group_subtasks.get(task)
        if subs:
            vals = [n_items(s) for s in subs]
            return sum(v for v in vals if v is not None)
        return None

    for task, metrics in {**res.get("results", {}), **res.get("groups", {})}.items():
        for key, value in metrics.items():
            if "," not in key or "_stderr" in key:
                continue
            metric, filt = key.split(",", 1)
            stderr = metrics.get(f"{metric}_stderr,{filt}")
            rows.append({"variant": variant, "task": task, "metric": metric, "filter": filt,
                         "value": None if value in (None, "N/A") else float(value),
                         "stderr": None if stderr in (None, "N/A") else float(stderr),
                         "n_items": n_items(task), "n_shots": res.get("n-shot", {}).get(task)})
    return rows


def evaluate_model(model_path: str, tokenizer: str, downstream: dict[str, Any], *, variant: str, out_dir: str,
                   pack_dir: str | None = None, device: str | None = None) -> pd.DataFrame:
    """Run every configured task on one model; write the three outputs named in the module docstring.

    Args:
        downstream: the config's ``eval.downstream`` section (its ``dtype``: :func:`yocou.utils.entry.resolve_device`).
        device: ``cpu``, ``cuda`` or ``cuda:N``; None: cuda when available, else cpu.

    Raises:
        ValueError: an unknown ``source`` or task key; a pack whose manifest does not match its files.
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    from yocou.evaluation.lmeval.model import YocouLM
    from yocou.utils.entry import resolve_device

    device, dtype = resolve_device(device, downstream.get("dtype"))

    source = downstream.get("source", "offline")
    if source not in ("offline", "online"):
        raise ValueError(f"eval.downstream.source must be 'offline' or 'online', got {source!r}")
    code_exec = bool(downstream.get("code_exec", False))
    if code_exec:
        os.environ["YOCOU_ALLOW_CODE_EXEC"] = "1"
        os.environ["HF_ALLOW_CODE_EVAL"] = "1"  # lm-eval's own humaneval (online mode)
        sb = downstream.get("sandbox", {})
        os.environ["YOCOU_EXEC_TIMEOUT_S"] = str(sb.get("timeout_s", 10))
        os.environ["YOCOU_EXEC_MEMORY_MB"] = str(sb.get("memory_mb", 1024))
    if source == "offline":
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if pack_dir is None:
            raise ValueError("source: offline needs the task pack (--pack)")
        manifest = P.check_manifest(pack_dir)
        tm = TaskManager(include_path=str(Path(pack_dir) / "tasks"), include_defaults=False)
    else:
        manifest = None
        tm = TaskManager()
    lm = YocouLM(model_path, tokenizer, batch_size=downstream.get("batch_size", 32),
                 max_length=downstream.get("max_length"), dtype=dtype, device=device)
    skipped = {}
    calls = defaultdict(list)  # (shots, limit) -> task names
    for key, spec in downstream["tasks"].items():
        spec = spec or {}
        if key == "humaneval" and not code_exec:
            skipped[key] = "not run: executing generated code is off (set eval.downstream.code_exec: true)"
            continue
        if source == "offline":
            names, limit = P.offline_task_names(key, manifest), None
        else:
            names, limit = P.online_task_names(key), spec.get("n") or spec.get("n_per_subject")
        calls[(spec.get("shots", 0), limit)].extend(names)
    if source == "online" and "bbh" in downstream.get("online_extra", []):
        calls[(3, None)].append("bbh")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    all_rows, raw, samples = [], [], []
    t_total = time.perf_counter()
    for (shots, limit), names in calls.items():
        t0 = time.perf_counter()
        res = lm_eval.simple_evaluate(model=lm, tasks=names, num_fewshot=shots, task_manager=tm, limit=limit,
                                      log_samples=True, bootstrap_iters=int(downstream.get("bootstrap_iters", 1000)),
                                      random_seed=0, numpy_random_seed=1234, torch_random_seed=1234,
                                      fewshot_random_seed=1234)
        wall = time.perf_counter() - t0
        for task, ss in (res.pop("samples", None) or {}).items():
            for s in ss:
                samples.append({"task": task, **s})
        rows = tidy_rows(res, variant=variant)
        for r in rows:
            r["source"] = source
        all_rows.extend(rows)
        raw.append({"tasks": names, "num_fewshot": shots, "limit": limit, "wall_s": wall,
                    "lm_eval": json.loads(json.dumps(res, default=str))})
    wall_total = time.perf_counter() - t_total
    df = pd.DataFrame(all_rows, columns=["variant", "task", "metric", "filter", "value", "stderr", "n_items",
                                         "n_shots", "source"])
    atomic_write_json(out / "lm_eval_results.json", {
        "variant": variant, "model": str(model_path), "source": source, "skipped": skipped,
        "unavailable_offline": (manifest or {}).get("unavailable_offline", {}), "wall_s": wall_total,
        "max_length": lm.max_length, "dtype": lm.dtype, "manifest": manifest, "calls": raw,
        "provenance": provenance({"downstream": downstream, "variant": variant, "device": device}, 1234, device)})
    with atomic_path(out / "samples.jsonl.gz") as tmp:
        with gzip.open(tmp, "wt", encoding="utf-8") as fh:
            for s in samples:
                fh.write(json.dumps(s, default=str, ensure_ascii=False) + "\n")
    atomic_write_text(out / "tidy.csv", df.to_csv(index=False))
    return df


def main(argv: list[str] | None = None) -> None:
    from yocou.utils.entry import DEVICE_HELP
    from yocou.utils.guard import reads, replaces

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.lmeval.run", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, type=reads())
    ap.add_argument("--tokenizer", required=True, type=reads())
    ap.add_argument("--pack", default=None, type=reads())
    ap.add_argument("--downstream", required=True, help="the config's eval.downstream section as JSON")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--out", required=True, type=replaces())
    ap.add_argument("--device", default=None,
                    help=DEVICE_HELP + "; eval.downstream.dtype unset: bf16 on CUDA, fp32 on CPU")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    t0 = time.perf_counter()
    try:
        downstream = json.loads(a.downstream)
    except json.JSONDecodeError as e:
        raise ValueError(f"--downstream: not JSON ({e}); expected the config's eval.downstream") from None
    if not isinstance(downstream, dict) or "tasks" not in downstream:
        raise ValueError(f"--downstream: expected the config's eval.downstream (a mapping with 'tasks'), got "
                         f"{str(downstream)[:80]!r}")
    P.check_tasks(downstream["tasks"], "--downstream tasks")
    df = evaluate_model(a.model, a.tokenizer, downstream, variant=a.variant, out_dir=a.out,
                        pack_dir=a.pack, device=a.device)
    print(df.to_string(index=False))
    print(f"downstream evaluation of {a.variant}: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
