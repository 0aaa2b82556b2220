"""How should evaluation jobs use 2 cores? One two-thread job at a time, or two one-thread jobs side by side?
(Wall time as a measured budget.)

Training jobs already run one thread each, two side by side (``launch.threads: 1``; budget_study.py measured it).
The evaluation rules (``ppl``, ``longppl``, ``niah``) took every core given, so under ``--cores 2`` they ran one at
a time. This script runs each evaluation's command, exactly as its rule builds it from a scale's config, on two
trained models of a checkout, in interleaved rounds:

- ``serial``: the two jobs one after the other, ``OMP_NUM_THREADS=2`` each (what ``threads: all_cores`` ran);
- ``paired``: the two jobs at once, ``OMP_NUM_THREADS=1`` each (what ``eval.threads: 1`` runs).

and reports, per evaluation, the wall time of each mode and their ratio serial / paired (> 1: side by side is
faster) per round, with the median. The outputs are thrown away. Timings on a shared machine are noisy: the
1-minute load average is recorded before and after; run it on an otherwise idle machine.

    python benchmarks/eval_threads.py --root <checkout with runs/tiny> --models yoco_seed1 yocou_seed3 --rounds 2 \
        --out benchmarks/results/eval_threads_tiny.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yocou.results.evaldefs import niah_settings  # noqa: E402
from yocou.utils.io import atomic_write_json, provenance  # noqa: E402
from yocou.workflow.wfconfig import read_scale_file, resolve_config  # noqa: E402

EVALS = ("ppl", "longppl", "niah")


def commands(cfg: dict, run_root: Path, res_root: Path, model: str, out: Path) -> dict[str, list[str]]:
    """Each evaluation's command line for one model, as workflows/rules/{eval,longctx}.smk build it."""
    e, tok = cfg["eval"], run_root / "tokenizer.json"
    m = run_root / "models" / model / "model.pt"
    p, lp, nh = e["ppl"], e["longppl"], niah_settings(e["niah"])
    py = [sys.executable, "-m"]
    return {
        "ppl": [*py, "yocou.cli", "ppl", "--model", str(m), "--data", str(run_root / "tokens"), "--seq-len",
                str(p["seq_len"]), *(["--max-tokens", str(p["max_tokens"])] if p.get("max_tokens") else []),
                "--tokenizer", str(tok), "--dtype", p["dtype"], "--batch", str(p["batch"]),
                "--out", str(out / f"ppl_{model}.json")],
        "longppl": [*py, "yocou.evaluation.longctx.longppl", "--model", str(m), "--tokens-dir", str(run_root / "tokens"),
                    "--lengths", *[str(n) for n in lp["lengths"]], "--span", str(lp["span"]),
                    "--book-docs", str(lp["book_docs"]), "--code-docs", str(lp["code_docs"]),
                    "--chunk-size", str(lp["chunk_size"]), "--batch", str(lp["batch"]), "--dtype", lp["dtype"],
                    "--out", str(out / f"longppl_{model}.json")],
        "niah": [*py, "yocou.evaluation.longctx.niah", "eval", "--model", str(m), "--tokenizer", str(tok),
                 "--prompts", str(res_root / "niah/prompts.jsonl"), "--max-new-tokens",
                 str(nh["max_new_tokens"]), "--chunk-size", str(nh["chunk_size"]), "--batch", str(nh["batch"]),
                 "--dtype", nh["dtype"], "--out", str(out / f"niah_{model}.json")],
    }


def _child_failed(cmd: list[str], stderr: bytes) -> None:
    """One line: which evaluation failed and the last line it printed; exit status 2."""
    last = (stderr.decode(errors="replace").strip().splitlines() or ["(no output)"])[-1]
    print(f"eval_threads: error: {' '.join(cmd[2:4])} failed: {last}", file=sys.stderr)
    raise SystemExit(2)


def _run(cmds: list[list[str]], threads: int, parallel: bool, cwd: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(cwd)}
    t0 = time.perf_counter()
    if parallel:
        procs = [subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in cmds]
        for c, pr in zip(cmds, procs):
            if pr.wait() != 0:
                _child_failed(c, pr.stderr.read())
    else:
        for c in cmds:
            r = subprocess.run(c, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if r.returncode != 0:
                _child_failed(c, r.stderr)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="eval_threads", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="checkout whose runs/<scale>/models hold the trained models")
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--models", nargs=2, required=True, help="two trained runs (names under runs/<scale>/models)")
    ap.add_argument("--evals", nargs="+", default=list(EVALS), choices=EVALS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=True, help="result JSON, e.g. benchmarks/results/eval_threads_<scale>.json")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {a.rounds}")
    root = Path(a.root).resolve()
    run_root, res_root = root / "runs" / a.scale, root / "results" / a.scale
    for m in a.models:
        if not (run_root / "models" / m / "model.pt").is_file():
            ap.error(f"--models: {run_root / 'models' / m / 'model.pt'} not found (train it first)")
    try:
        cfg = resolve_config(read_scale_file(root / f"workflows/config/{a.scale}.yaml"))
    except (ValueError, OSError) as e:  # ConfigError names the file and the key
        ap.error(f"--root/--scale: {str(e).splitlines()[0]}")
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for ev in a.evals:
                cmds = [commands(cfg, run_root, res_root, m, Path(tmp))[ev] for m in a.models]
                modes = [("serial", 2, False), ("paired", 1, True)]
                if r % 2:
                    modes.reverse()  # alternate which mode goes first, so drift falls on both
                t = {name: _run(cmds, th, par, root) for name, th, par in modes}
                rows.append({"round": r, "eval": ev, "serial_s": t["serial"], "paired_s": t["paired"],
                             "serial_over_paired": t["serial"] / t["paired"], "load": os.getloadavg()[0]})
                print(f"round {r} {ev}: serial {t['serial']:.1f} s, paired {t['paired']:.1f} s, "
                      f"ratio {t['serial'] / t['paired']:.2f}", flush=True)
    summary = {ev: {"median_serial_over_paired": statistics.median(x["serial_over_paired"] for x in rows if x["eval"] == ev),
                    "median_serial_s": statistics.median(x["serial_s"] for x in rows if x["eval"] == ev),
                    "median_paired_s": statistics.median(x["paired_s"] for x in rows if x["eval"] == ev)}
               for ev in a.evals}
    atomic_write_json(a.out, {"summary": summary, "rounds": rows, "models": a.models, "scale": a.scale,
                              "load_before": load_before, "load_after": os.getloadavg()[0],
                              "provenance": provenance({"scale": a.scale, "eval": cfg["eval"]}, None)})
    print(f"{a.out}: " + "; ".join(f"{ev} serial/paired {s['median_serial_over_paired']:.2f}" for ev, s in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
