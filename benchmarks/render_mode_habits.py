"""Snakemake's habits on a fresh clone: every target, driven the way Snakemake users drive it, plans no training or
evaluation and prints no traceback.

On a copy of the committed tree (``git archive HEAD``: no ``runs/``, no ``.snakemake/``) this runs, for every
target, ``snakemake -n`` with: the target alone; ``--forcerun <its rule>``; ``-f``; ``-R <a rule it depends on>``;
``--forceall``; and, once each, ``--summary``, ``--list-changes code``, no target at all and ``--forcerun table1
table1`` (the option takes the target). Each cell: the jobs planned (``n``), how many of them are compute jobs (rules
of ``workflows/rules/compute/``, which render mode does not define), whether a Python traceback was printed, the
exit status and the wall seconds. Writes ``<out>.md`` and ``<out>.json``; exits 1 when any cell planned a compute
job or printed a traceback.

Run (a few minutes; the timings are of ``snakemake -n`` itself, on whatever load the machine has, stated)::

    python benchmarks/render_mode_habits.py --out benchmarks/results/render_mode_habits
"""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yocou.utils.io import atomic_write_json, atomic_write_text, provenance  # noqa: E402
from yocou.workflow.committed import planned_jobs  # noqa: E402

#: target -> (its rule, a rule it depends on)
TARGETS = {
    "fig2": ("fig2", "fig2"), "fig3": ("fig3", "fig3"), "fig4": ("fig4", "fig4"), "fig5": ("fig5", "fig5"),
    "fig6": ("fig6", "fig6"), "fig7": ("fig7", "summarize_efficiency"), "fig8": ("fig8", "fig8"),
    "table1": ("table1", "summarize_efficiency"), "table2": ("table2", "table2"), "table3": ("table3", "table3"),
    "table4": ("table4", "table4"), "table5": ("table5", "table5"), "table10": ("table10", "table10"),
    "tables8_9": ("tables8_9", "summarize_efficiency_derived"), "heldout_ppl": ("heldout_ppl", "heldout_ppl"),
    "lr_sensitivity": ("lr_sensitivity", "lr_sensitivity"), "crossover": ("crossover", "crossover"),
    "efficiency": ("efficiency", "summarize_table10"), "audit": ("audit", "fig2"),
    "render_all": ("render_all", "heldout_ppl"), "bracket": ("bracket", "bracket_summary"),
    "ladder": ("ladder", "ladder_fits"), "efficiency_paper_shape": ("efficiency_paper_shape", "paper_shape_render"),
}
HABITS = {"alone": [], "--forcerun rule": ["--forcerun", "{rule}"], "-f": ["-f"], "-R dep": ["-R", "{dep}"],
          "--forceall": ["--forceall"]}
ONCE = {"--summary fig2": ["--summary", "fig2"], "--list-changes code": ["--list-changes", "code"],
        "no target": [], "--forcerun table1 table1": ["--forcerun", "table1", "table1"]}


def _rules(tree: Path, *config: str) -> set[str]:
    res = subprocess.run([sys.executable, "-m", "snakemake", "--list-rules", "--config", *config], cwd=tree,
                         capture_output=True, text=True, check=True)
    return {ln.strip() for ln in res.stdout.splitlines() if re.fullmatch(r"\s*[A-Za-z_]\w*\s*", ln)}


def compute_rules(tree: Path) -> set[str]:
    """The rules defined only when computing: ``snakemake --list-rules`` with ``mode=compute`` minus render
    mode's (the rules of ``workflows/rules/compute/``)."""
    return _rules(tree, "mode=compute") - _rules(tree, "mode=render")


def is_compute(job: str, rules: set[str]) -> bool:
    return job in rules


def plan(tree: Path, args: list[str]) -> dict:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", *args], cwd=tree,
                         capture_output=True, text=True)
    sec = time.perf_counter() - t0
    jobs = planned_jobs(res.stdout)
    out = res.stdout + res.stderr
    return {"args": args, "rc": res.returncode, "jobs": jobs, "n": sum(jobs.values()),
            "traceback": "Traceback" in out, "seconds": round(sec, 1),
            "error": next((ln for ln in out.splitlines() if "Error" in ln or "Exception" in ln), "")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output stem: writes <out>.md and <out>.json")
    a = ap.parse_args(argv)
    head = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    load0 = os.getloadavg()[0]
    rows, once = [], {}
    with tempfile.TemporaryDirectory() as d:
        tree = Path(d)
        with tarfile.open(fileobj=io.BytesIO(head.stdout)) as tar:
            tar.extractall(tree, filter="data")
        crules = compute_rules(tree)
        for target, (rule, dep) in TARGETS.items():
            row = {"target": target}
            for habit, args in HABITS.items():
                args = [x.format(rule=rule, dep=dep) for x in args]
                r = plan(tree, [target, *args])  # the target first: --forcerun and -R take every word after them
                r["compute"] = sum(n for j, n in r["jobs"].items() if is_compute(j, crules))
                row[habit] = r
                print(target, habit, r["n"], r["compute"], r["rc"], r["seconds"], r["error"][:80], flush=True)
            rows.append(row)
        for habit, args in ONCE.items():
            r = plan(tree, args)
            r["compute"] = sum(n for j, n in r["jobs"].items() if is_compute(j, crules))
            once[habit] = r
        made_runs = (tree / "runs").exists()
    load1 = os.getloadavg()[0]
    bad = [(row["target"], h) for row in rows for h in HABITS if row[h]["compute"] or row[h]["traceback"]]
    bad += [("-", h) for h, r in once.items() if r["compute"] or r["traceback"] or r["rc"]]

    def cell(r: dict) -> str:
        s = f"{r['n']} jobs, {r['compute']} compute, {r['seconds']:.0f} s"
        return s + (", TRACEBACK" if r["traceback"] else "") + (f", exit {r['rc']}" if r["rc"] else "")

    md = [f"# Snakemake's habits on a fresh clone (render mode), commit {commit}", "",
          f"`python benchmarks/render_mode_habits.py --out benchmarks/results/render_mode_habits` on a copy of the "
          f"committed tree (`git archive HEAD`, no `runs/`). Each cell: jobs `snakemake -n` plans, how many of them "
          f"compute (train, evaluate or summarize runs), and its wall seconds (1-minute load {load0:.1f} at the "
          f"start, {load1:.1f} at the end; {os.cpu_count()} CPUs). `runs/` made by any of them: {made_runs}.", "",
          "| target | " + " | ".join(HABITS) + " |", "|---|" + "---|" * len(HABITS)]
    md += [f"| `{row['target']}` | " + " | ".join(cell(row[h]) for h in HABITS) + " |" for row in rows]
    md += ["", "| command | planned |", "|---|---|"]
    md += [f"| `snakemake -n {' '.join(r['args'])}` | {cell(r)}: {', '.join(sorted(r['jobs'])) or '-'} |"
           for r in once.values()]
    md += ["", f"Cells that planned a compute job or printed a traceback: {len(bad)}."]
    atomic_write_text(Path(a.out + ".md"), "\n".join(md) + "\n")
    atomic_write_json(Path(a.out + ".json"), {"rows": rows, "once": once, "bad": bad, "commit": commit,
                                             "load": [load0, load1],
                                             "provenance": provenance({"render_mode_habits": {}}, None)})
    print("\n".join(md))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
