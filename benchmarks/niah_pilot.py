"""Table 4's retrieval recipe at tiny: which change makes the retrieval runs learn.

Table 4 at tiny evaluates the retrieval runs ``<run>_niah`` (``niah_train`` in ``workflows/config/tiny.yaml``: 4x the
core steps, half of the training sequences carrying a needle). Of the 8 committed ones only YOCO seed 0 chose the
needle's value over a distractor above chance. This script trains *arms* (changes to that recipe, each for YOCO at
the seeds that failed) and scores them, beside every retrieval and crossover model a checkout already has, on

* the Table 4 prompts (``results/tiny/niah/prompts.jsonl``): two-choice accuracy up to the training length with
  its 95% Wilson interval (chance 0.5), by prompt length, and exact match;
* the same prompts with the *training* needles' key words (``python -m yocou.evaluation.longctx.niah prompts --train-keys``):
  whether a model that fails Table 4 retrieves at all, or only fails on key words it never saw in a needle.

Arms (``ARMS``): a copy of the core run's ``run_config.json`` (``runs/tiny/models/<base>_seed<k>``) with the
steps times a factor (warm-up and held-out checkpoints scaled alike, as ``niah_train.factor`` does) and the needle
fraction set. Each arm trains into ``--work/<arm>_s<k>`` with ``yocou train`` (one thread per job,
two at a time; resumable: a rerun continues from ``ckpt.pt``); ``--no-train`` only scores what exists.

    python benchmarks/niah_pilot.py --root . [--work runs/tiny/niah_pilot] [--no-train] [--extra-models DIR ...]

Scores are kept in ``--work/scores``, keyed by the model file's SHA-256, so a retrained run is scored again.

Writes ``--out`` (default ``benchmarks/results/niah_pilot_tiny.json``) with provenance. A pilot, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yocou.utils.entry import int_at_least, run_main  # noqa: E402
from yocou.utils.io import atomic_write_json, provenance  # noqa: E402

#: name -> (core run, seeds, needle fraction, step factor over the core run's steps: 4 is the committed recipe)
ARMS: dict[str, dict[str, Any]] = {
    "yoco_f09": {"base": "yoco", "seeds": [1, 2], "needle_fraction": 0.9, "steps_factor": 4},
    "yoco_x8n": {"base": "yoco", "seeds": [1, 2], "needle_fraction": 0.5, "steps_factor": 8},
}


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval of ``k`` successes in ``n`` trials."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (c - h, c + h)


def score(path: Path) -> dict[str, Any]:
    """Two-choice accuracy up to the training length (with its Wilson interval), by length, and exact match."""
    d = json.loads(path.read_text())
    L = d["train_seq_len"]
    inside = [r for r in d["records"] if r["length"] <= L]
    if not inside:
        raise ValueError(f"{path}: no prompt up to the training length {L} (the prompts' lengths are too long)")
    k = sum(int(r["choice_correct"]) for r in inside)
    by: dict[int, list[int]] = {}
    for r in d["records"]:
        by.setdefault(int(r["length"]), []).append(int(r["choice_correct"]))
    lo, hi = wilson(k, len(inside))
    return {"choice_acc_inside": k / len(inside), "ci95_wilson": [lo, hi], "n_inside": len(inside),
            "above_chance": lo > 0.5, "chance": 0.5,
            "choice_acc_by_length": {str(n): sum(v) / len(v) for n, v in sorted(by.items())},
            "exact_inside": sum(int(r["correct"]) for r in inside) / len(inside)}


def arm_config(root: Path, base: str, seed: int, fraction: float, factor: int, name: str) -> dict[str, Any]:
    """The core run ``base`` (its seed replica ``seed``) with the steps, warm-up and held-out checkpoints times
    ``factor`` and the needle fraction ``fraction``: what ``niah_train`` builds for a retrieval run."""
    src = root / "runs/tiny/models" / (base if seed == 0 else f"{base}_seed{seed}") / "run_config.json"
    if not src.is_file():
        raise FileNotFoundError(f"{src}: the core run's config (make it first: snakemake --cores 1 {src})")
    rc = json.loads(src.read_text())
    t = rc["train"]
    for f in ("steps", "warmup_steps", "eval_every"):
        t[f] = int(t[f]) * factor
    t["needle_mix"]["fraction"] = fraction
    rc["variant"] = rc["model"]["name"] = name
    return rc


def run(cmd: list[str], log: Path, threads: int = 1) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=".", help="a checkout whose tiny run has the retrieval runs and Table 4")
    ap.add_argument("--work", default=None, help="arm runs and scores (default <root>/runs/tiny/niah_pilot)")
    ap.add_argument("--no-train", action="store_true", help="score only the arms already trained")
    ap.add_argument("--jobs", type=int_at_least(1), default=2, help="trainings at once (one thread each)")
    ap.add_argument("--extra-models", nargs="*", default=[],
                    help="more folders of run folders to score (e.g. runs moved aside), labelled <folder>/<run>")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/niah_pilot_tiny.json"))
    a = ap.parse_args(argv)
    root = Path(a.root).resolve()
    work = Path(a.work).resolve() if a.work else root / "runs/tiny/niah_pilot"
    tiny = root / "runs/tiny"
    prompts = root / "results/tiny/niah/prompts.jsonl"
    for p in (tiny / "tokenizer.json", tiny / "tokens/train.bin", prompts):
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found: run the tiny pipeline's Table 4 first (snakemake table4)")
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    load0 = os.getloadavg()

    # -- arms: configs, then training (two jobs at a time) ------------------------------------------------
    arm_dirs: dict[str, Path] = {}
    todo = []
    for name, arm in ARMS.items():
        for k in arm["seeds"]:
            d = work / f"{name}_s{k}"
            d.mkdir(exist_ok=True)
            rc = d / "run_config.json"
            want = arm_config(root, arm["base"], k, arm["needle_fraction"], arm["steps_factor"], d.name)
            if rc.is_file() and json.loads(rc.read_text()) != want:
                raise ValueError(f"{rc}: differs from arm {name}'s config (remove {d} to retrain it)")
            if not rc.is_file():
                atomic_write_json(rc, want)
            arm_dirs[d.name] = d
            if not (d / "model.pt").is_file():
                todo.append(d)
    if todo and not a.no_train:
        heldout = [str(tiny / "tokens/heldout_book.bin"), str(tiny / "tokens/heldout_code.bin")]
        for i in range(0, len(todo), a.jobs):
            procs = [(d, run([py, "-m", "yocou.cli", "train", "--run-config", str(d / "run_config.json"), "--data",
                              str(tiny / "tokens/train.bin"), "--tokenizer", str(tiny / "tokenizer.json"), "--out",
                              str(d), "--heldout", *heldout], d / "train.log")) for d in todo[i:i + a.jobs]]
            for d, p in procs:
                if p.wait():
                    raise RuntimeError(f"training {d.name} failed: see {d / 'train.log'}")
    # -- scores: the arms and every retrieval / crossover model of the checkout ------------------------------
    tk_prompts = work / "prompts_trainkeys.jsonl"
    if not tk_prompts.is_file():
        head = json.loads(prompts.open().readline())["provenance"]["config"]
        lens = [n for n in head["lengths"] if n <= 256]
        subprocess.run([py, "-m", "yocou.evaluation.longctx.niah", "prompts", "--train-keys", "--tokenizer",
                        str(tiny / "tokenizer.json"), "--book", str(tiny / "tokens/heldout_book.bin"), "--tasks",
                        *head["tasks"], "--lengths", *map(str, lens), "--n-depths", str(head["n_depths"]),
                        "--n-samples", str(head["n_samples"]), "--seed", str(head["seed"]), "--out",
                        str(tk_prompts)], check=True, cwd=root)
    models: dict[str, Path] = {}
    for folder, label in [(tiny / "models", "")] + [(Path(x).resolve(), Path(x).name + "/") for x in a.extra_models]:
        if not folder.is_dir():
            raise FileNotFoundError(f"--extra-models {folder}: not a folder")
        models.update({label + m.name: m for m in sorted(folder.iterdir())
                       if ("_niah" in m.name or "_x8" in m.name) and (m / "model.pt").is_file()})
    models.update({n: d for n, d in arm_dirs.items() if (d / "model.pt").is_file()})
    rows = []
    for name, d in models.items():
        out = {}
        digest = hashlib.sha256((d / "model.pt").read_bytes()).hexdigest()[:12]  # a retrained run is rescored
        for kind, pr in (("table4_prompts", prompts), ("train_key_prompts", tk_prompts)):
            f = work / "scores" / f"{name.replace('/', '__')}.{digest}.{kind}.json"
            if not f.is_file():
                f.parent.mkdir(exist_ok=True)
                subprocess.run([py, "-m", "yocou.evaluation.longctx.niah", "eval", "--model", str(d / "model.pt"),
                                "--tokenizer", str(tiny / "tokenizer.json"), "--prompts", str(pr), "--batch", "10",
                                "--out", str(f)], check=True, cwd=root, stdout=subprocess.DEVNULL)
            out[kind] = score(f)
        rc = json.loads((d / "run_config.json").read_text())["train"]
        summ = json.loads((d / "summary.json").read_text()) if (d / "summary.json").is_file() else {}
        rows.append({"model": name, "arm": next((n for n in ARMS if name.startswith(n + "_s")), None),
                     "seed": rc["seed"], "steps": rc["steps"], "tokens": rc["steps"] * rc["batch_size"] * rc["seq_len"],
                     "needle_fraction": rc.get("needle_mix", {}).get("fraction", 0.0), "model_sha256_12": digest,
                     "trained_at_commit": (summ.get("provenance") or {}).get("git_commit"), **out})
        t4, tk = out["table4_prompts"], out["train_key_prompts"]
        print(f"{name:22s} seed {rc['seed']} steps {rc['steps']:5d} fraction {rows[-1]['needle_fraction']:.2f}  "
              f"Table 4 choice {t4['choice_acc_inside']:.3f} [{t4['ci95_wilson'][0]:.2f}, {t4['ci95_wilson'][1]:.2f}]"
              f"  training keys {tk['choice_acc_inside']:.3f}  exact {t4['exact_inside']:.2f}")
    res = {"arms": ARMS, "models": rows, "chance": 0.5, "load_before": load0[0], "load_after": os.getloadavg()[0],
           "provenance": provenance({k: v for k, v in vars(a).items()}, None)}
    atomic_write_json(a.out, res)
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
