"""The timings the README states, measured on a fresh clone: render targets from the committed results, the tests.

    python benchmarks/readme_timings.py --out benchmarks/results/readme_timings.json [--tests]

Clones the repository's HEAD (``git clone``, so no runs/, logs/ or .snakemake/), then in the clone:

1. for each render target (Figure 2 after deleting its PNG, Table 3, the audit, then the Snakemake report):
   ``snakemake --cores 2 <target>``, its wall time, the 1-minute load average before and after, and the jobs it ran (none may be a compute rule);
2. compares every file the renders rewrote with the committed one: equal bytes, or equal after removing the
   provenance fields (``provenance``, ``git``, ``created_utc``, ``argv`` and the rendered provenance line of a
   Markdown table), which it names;
3. with ``--tests``: ``python -m pytest -q`` (the README's test command), its wall time and closing line.

Writes the JSON and a Markdown summary beside it (``.md``), with the host's CPU model and core count. Timings are
of this machine at that load: read them as such.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ((["figures/tiny/fig2.png"], "figures/tiny/fig2.png"), (["table3"], None), (["audit"], None),
           (["--report", "report.html"], None))
COMPUTE_RULES = {"corpus", "tokenizer", "tokens", "run_config", "train", "eqflops_model", "ppl", "baselines",
                 "kv_measure", "profile", "angular", "niah_prompts", "niah", "longppl", "eval_pack", "downstream",
                 "start_runs"}
PROVENANCE_KEYS = {"provenance", "git", "git_commit", "git_dirty", "created_utc", "argv"}


def _load() -> float:
    return os.getloadavg()[0]


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in PROVENANCE_KEYS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _same_but_provenance(committed: bytes, new: bytes, name: str) -> bool:
    if committed == new:
        return True
    if name.endswith(".json"):
        try:
            return _strip(json.loads(committed)) == _strip(json.loads(new))
        except ValueError:
            return False
    if name.endswith((".md", ".html")):
        drop = re.compile(rb"^<sub>yocou .*</sub>$|commit [0-9a-f]{7,40}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^ <|]*", re.M)
        return drop.sub(b"", committed) == drop.sub(b"", new)
    return False


def _run(cmd: list[str], cwd: Path, timeout: int) -> dict:
    before, t0 = _load(), time.monotonic()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - t0
    return {"cmd": " ".join(cmd), "rc": res.returncode, "wall_s": round(wall, 1), "load_before": before,
            "load_after": _load(), "stdout_tail": res.stdout[-1500:], "stderr_tail": res.stderr[-1500:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="readme_timings", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON to write (a .md summary is written beside it)")
    ap.add_argument("--tests", action="store_true", help="also time the test suite (about 15-20 min)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.suffix != ".json":
        ap.error(f"--out: expected a .json path, got {out}")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    result: dict = {"commit": head, "dirty": dirty, "host": {"cpu": _cpu(), "cores": os.cpu_count(),
                                                             "platform": platform.platform()},
                    "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "renders": [], "tests": None}
    with tempfile.TemporaryDirectory(prefix="yocou-clone-") as tmp:
        clone = Path(tmp) / "yocou"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for target, delete in TARGETS:
            if delete:
                (clone / delete).unlink()
            logs = clone / ".snakemake" / "log"
            seen = set(logs.glob("*.log")) if logs.is_dir() else set()
            r = _run([sys.executable, "-m", "snakemake", "--cores", "2", *target], clone, 600)
            new_logs = sorted(set(logs.glob("*.log")) - seen) if logs.is_dir() else []
            log = new_logs[-1].read_text() if new_logs else r["stderr_tail"] + r["stdout_tail"]
            ran = sorted(set(re.findall(r"^(?:local)?rule (\w+):", log, re.M)))
            r.update(target=" ".join(target), deleted=delete, rules_run=ran, compute_rules_run=sorted(set(ran) & COMPUTE_RULES))
            result["renders"].append(r)
        changed = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True,
                                 text=True).stdout.splitlines()
        files = []
        for line in changed:
            path = line[3:]
            if path.startswith((".snakemake", "logs/", "report.html")):
                continue
            committed = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=clone, capture_output=True).stdout
            new = (clone / path).read_bytes() if (clone / path).is_file() else b""
            files.append({"path": path, "status": line[:2].strip(),
                          "equal_but_provenance": _same_but_provenance(committed, new, path)})
        result["rewritten_files"] = files
        if a.tests:
            r = _run([sys.executable, "-m", "pytest", "-q"], clone, 5400)
            tail = [ln for ln in r["stdout_tail"].splitlines() if re.search(r"\d+ (passed|failed)", ln)]
            r["summary"] = tail[-1] if tail else None
            result["tests"] = r
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    md = [f"### README timings (fresh clone of {head[:7]}{' (dirty)' if dirty else ''}, {result['host']['cpu']}, "
          f"{result['host']['cores']} cores, {result['created_utc']})", "",
          "| command | wall s | load before | load after | compute jobs |", "|---|---|---|---|---|"]
    for r in result["renders"]:
        md.append(f"| `{r['cmd'].split(' -m ')[-1]}` | {r['wall_s']} | {r['load_before']:.2f} | "
                  f"{r['load_after']:.2f} | {', '.join(r['compute_rules_run']) or 'none'} |")
    if result["tests"]:
        t = result["tests"]
        md.append(f"| `pytest -q` ({t['summary']}) | {t['wall_s']} | {t['load_before']:.2f} | {t['load_after']:.2f}"
                  f" | (the tests) |")
    n_eq = sum(f["equal_but_provenance"] for f in files)
    md += ["", f"Files the renders rewrote: {len(files)}; {n_eq} equal to the committed ones but for provenance "
               f"(JSON keys {sorted(PROVENANCE_KEYS)}, Markdown provenance line and timestamps), "
               f"{len(files) - n_eq} otherwise different: "
               f"{', '.join(f['path'] for f in files if not f['equal_but_provenance']) or 'none'}."]
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    bad = [r["target"] for r in result["renders"] if r["rc"] != 0 or r["compute_rules_run"]]
    return 1 if bad or (result["tests"] and result["tests"]["rc"] != 0) else 0


if __name__ == "__main__":
    raise SystemExit(main())
