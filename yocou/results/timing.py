"""Wall time as a measured budget: the pipeline's Snakemake ``benchmark:`` files ->
``results/<scale>/timing.{csv,md,json}``.

Every rule of the workflow that runs a job writes Snakemake's benchmark TSV (``benchmark:`` directive) under
``logs/<scale>/bench/``: ``<rule>.tsv`` for a rule without wildcards, ``<rule>/<wildcard value>.tsv`` for one
with (``train/yocou.tsv``). Snakemake's columns, as it writes them (snakemake.benchmark.BenchmarkRecord):
``s`` (wall seconds), ``h:m:s``, ``max_rss``, ``max_vms``, ``max_uss``, ``max_pss`` (MiB), ``io_in``, ``io_out``
(MiB), ``mean_load`` (percent of one core), ``cpu_time`` (CPU seconds, user + system); ``NA`` where it could not
sample the process (a job shorter than its first sample). One line per repeat (``repeat(...)``): the repeats'
seconds are summed, their peak memory is the largest.

This module reads every benchmark file present (a subset of the targets is fine: jobs that have not run have
no file) and writes one row per job (:data:`JOB_COLUMNS`), totals per rule group (:data:`GROUPS`: training,
evaluation, data, summarize/render/other), the summed job time, the share of it spent training, and the
pipeline's elapsed time as far as the files tell it. The TSV has no start time: a job's end is its benchmark
file's modification time (Snakemake writes the file when the job's command ends) and its start is the end
minus ``s``. The elapsed span runs from the earliest start to the latest end; ``busy_s`` is the time at least
one job ran (the union of the jobs' intervals), so idle gaps (a run resumed later, a second session) are not
counted as pipeline time; ``sum_s / busy_s`` is the mean number of jobs running at once. Copying the files
(a fresh clone) resets the modification times: the elapsed figures hold for the tree the jobs ran in, which is
where the rule ``timing`` runs.

    python -m yocou.results.timing --scale tiny    # logs/tiny/bench/ -> results/tiny/timing.{csv,md,json}
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import io
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yocou.utils.io import atomic_write_json, atomic_write_text, provenance
from yocou.workflow.scales import check_scale_name

__all__ = [
    "GROUPS",
    "JOB_COLUMNS",
    "Job",
    "collect",
    "group_of",
    "main",
    "read_benchmark",
    "summarize",
    "write_timing",
]

#: Snakemake's benchmark columns (snakemake.benchmark.BenchmarkRecord.get_header, the short format).
SNAKEMAKE_COLUMNS = ("s", "h:m:s", "max_rss", "max_vms", "max_uss", "max_pss", "io_in", "io_out", "mean_load",
                     "cpu_time")
#: The columns read: ``s`` is required; ``max_rss`` and ``cpu_time`` are reported when present (``NA`` -> empty).
REQUIRED = ("s",)
OPTIONAL = ("max_rss", "cpu_time")
MISSING = ("NA", "-", "")

#: Rule groups in report order; a rule not named here is "summarize/render/other".
GROUPS: dict[str, frozenset[str]] = {
    "training": frozenset({"train", "ladder_train_stable", "ladder_train", "probe_train"}),
    "evaluation": frozenset({"ppl", "downstream", "eval_pack", "niah_prompts", "niah", "longppl", "angular",
                             "profile", "kv_measure", "ladder_ppl", "ladder_baselines"}),
    "data": frozenset({"corpus", "tokenizer", "tokens"}),
}
OTHER = "summarize/render/other"
GROUP_ORDER = (*GROUPS, OTHER)

#: timing.csv: one row per job.
JOB_COLUMNS = ("group", "rule", "wildcards", "wall_s", "max_rss_mib", "cpu_s", "repeats", "start_utc", "end_utc",
               "benchmark")


def group_of(rule: str) -> str:
    """The rule's group (:data:`GROUPS`), else :data:`OTHER`."""
    for name, rules in GROUPS.items():
        if rule in rules:
            return name
    return OTHER


@dataclass(frozen=True)
class Job:
    rule: str
    wildcards: str
    wall_s: float
    max_rss_mib: float | None
    cpu_s: float | None
    repeats: int
    end: float  # POSIX seconds: the benchmark file's modification time
    path: str

    @property
    def group(self) -> str:
        return group_of(self.rule)

    @property
    def start(self) -> float:
        return self.end - self.wall_s


def _number(path: Path, column: str, line: int, text: str, *, optional: bool) -> float | None:
    text = text.strip()
    if optional and text in MISSING:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path}: column {column!r} line {line}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{path}: column {column!r} line {line}: {text!r} is not a finite number >= 0")
    return value


def read_benchmark(path: str | Path, rule: str, wildcards: str = "") -> Job:
    """One Snakemake benchmark TSV -> :class:`Job` (repeats summed; peak memory the largest).

    Raises:
        ValueError: one line naming the file and the column (or line) that is wrong: no header, no ``s``
            column, a row with another number of fields than the header, a value that is not a number >= 0
            (``max_rss``/``cpu_time`` may be ``NA``), no data row.
    """
    path = Path(path)
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if not lines:
        raise ValueError(f"{path}: empty, expected Snakemake's benchmark header ({chr(9).join(SNAKEMAKE_COLUMNS)})")
    header = lines[0].split("\t")
    for col in REQUIRED:
        if col not in header:
            raise ValueError(f"{path}: no column {col!r} in the header {header} (Snakemake's benchmark columns: "
                             f"{list(SNAKEMAKE_COLUMNS)})")
    if len(lines) < 2:
        raise ValueError(f"{path}: column 's': no data row under the header")
    walls, rss, cpus = [], [], []
    for i, ln in enumerate(lines[1:], start=2):
        fields = ln.split("\t")
        if len(fields) != len(header):
            raise ValueError(f"{path}: line {i} has {len(fields)} tab-separated fields, the header {len(header)}")
        row = dict(zip(header, fields))
        walls.append(_number(path, "s", i, row["s"], optional=False))
        if "max_rss" in row:
            rss.append(_number(path, "max_rss", i, row["max_rss"], optional=True))
        if "cpu_time" in row:
            cpus.append(_number(path, "cpu_time", i, row["cpu_time"], optional=True))
    rss_known = [v for v in rss if v is not None]
    # CPU seconds only when every repeat has them (a partial sum would understate)
    cpu = sum(cpus) if cpus and all(v is not None for v in cpus) else None
    return Job(rule=rule, wildcards=wildcards, wall_s=float(sum(walls)), max_rss_mib=max(rss_known, default=None),
               cpu_s=cpu, repeats=len(walls), end=path.stat().st_mtime, path=str(path))


def collect(bench_dir: str | Path) -> list[Job]:
    """Every benchmark file under ``bench_dir``: ``<rule>.tsv`` (no wildcards) and ``<rule>/<wildcards>.tsv``.
    A missing folder is no jobs. Sorted by group (:data:`GROUP_ORDER`), rule, wildcards."""
    root = Path(bench_dir)
    jobs = []
    if root.is_dir():
        for p in sorted(root.rglob("*.tsv")):
            rel = p.relative_to(root)
            if len(rel.parts) == 1:
                jobs.append(read_benchmark(p, rel.stem))
            elif len(rel.parts) == 2:
                jobs.append(read_benchmark(p, rel.parts[0], rel.stem))
            else:
                raise ValueError(f"{p}: expected {root}/<rule>.tsv or {root}/<rule>/<wildcards>.tsv")
    return sorted(jobs, key=lambda j: (GROUP_ORDER.index(j.group), j.rule, j.wildcards))


def _union_length(intervals: Iterable[tuple[float, float]]) -> float:
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


def _utc(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="seconds")


def summarize(jobs: Sequence[Job]) -> dict[str, Any]:
    """Rows, per-group totals and the pipeline totals of ``jobs`` (JSON-able).

    ``totals``: ``jobs``, ``sum_wall_s`` (the jobs' wall seconds summed: not the elapsed time, since jobs run
    side by side), ``training_wall_s``, ``training_share`` (of ``sum_wall_s``), ``sum_cpu_s`` and
    ``training_cpu_share`` (over the ``cpu_jobs`` jobs with CPU seconds; None when none has them),
    ``elapsed_s`` (earliest start to latest end), ``busy_s`` (time at least one job ran), ``idle_gaps_s``
    (``elapsed_s - busy_s``), ``mean_parallel_jobs`` (``sum_wall_s / busy_s``), ``first_start_utc``, ``last_end_utc``.
    """
    rows = [{"group": j.group, "rule": j.rule, "wildcards": j.wildcards, "wall_s": round(j.wall_s, 4),
             "max_rss_mib": None if j.max_rss_mib is None else round(j.max_rss_mib, 2),
             "cpu_s": None if j.cpu_s is None else round(j.cpu_s, 4), "repeats": j.repeats,
             "start_utc": _utc(j.start), "end_utc": _utc(j.end), "benchmark": j.path} for j in jobs]
    total = sum(j.wall_s for j in jobs)
    cpu_jobs = [j for j in jobs if j.cpu_s is not None]
    total_cpu = sum(j.cpu_s for j in cpu_jobs) if cpu_jobs else None
    groups = []
    for g in GROUP_ORDER:
        mine = [j for j in jobs if j.group == g]
        if not mine:
            continue
        wall = sum(j.wall_s for j in mine)
        cpu = [j.cpu_s for j in mine if j.cpu_s is not None]
        groups.append({"group": g, "jobs": len(mine), "rules": sorted({j.rule for j in mine}), "wall_s": round(wall, 4),
                       "share": round(wall / total, 6) if total > 0 else None,
                       "cpu_s": round(sum(cpu), 4) if cpu else None,
                       "max_rss_mib": max((j.max_rss_mib for j in mine if j.max_rss_mib is not None), default=None)})
    training = sum(j.wall_s for j in jobs if j.group == "training")
    training_cpu = sum(j.cpu_s for j in cpu_jobs if j.group == "training")
    busy = _union_length((j.start, j.end) for j in jobs)
    elapsed = (max(j.end for j in jobs) - min(j.start for j in jobs)) if jobs else 0.0
    totals = {
        "jobs": len(jobs),
        "sum_wall_s": round(total, 4),
        "training_wall_s": round(training, 4),
        "training_share": round(training / total, 6) if total > 0 else None,
        "sum_cpu_s": None if total_cpu is None else round(total_cpu, 4),
        "cpu_jobs": len(cpu_jobs),
        "training_cpu_share": round(training_cpu / total_cpu, 6) if total_cpu else None,
        "elapsed_s": round(elapsed, 4),
        "busy_s": round(busy, 4),
        "idle_gaps_s": round(elapsed - busy, 4),
        "mean_parallel_jobs": round(total / busy, 4) if busy > 0 else None,
        "first_start_utc": _utc(min(j.start for j in jobs)) if jobs else None,
        "last_end_utc": _utc(max(j.end for j in jobs)) if jobs else None,
    }
    return {"rows": rows, "groups": groups, "totals": totals}


def _hms(s: float | None) -> str:
    if s is None:
        return ""
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return ""
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


NOTES = (
    "Wall and CPU seconds and peak RSS (MiB) are Snakemake's `benchmark:` measurements of each job "
    "(columns `s`, `cpu_time`, `max_rss` of logs/<scale>/bench/<rule>[/<wildcards>].tsv); an empty cell is "
    "Snakemake's `NA` (a job that ended before its first sample).",
    "The sum of job times is not the pipeline's elapsed time: with --cores 2 jobs run side by side. The benchmark "
    "files carry no start time; a job's end is its file's modification time and its start that minus its wall "
    "time. Elapsed runs from the first start to the last end; busy is the time at least one job ran (idle gaps, "
    "e.g. a run resumed in a later session, left out). Snakemake's own start-up before the first job is in "
    "neither.",
    "Training's share is of the summed job time (and of the summed CPU time); a job that ran before benchmarks "
    "were recorded, or has not run, has no file and is not counted.",
    "A job stopped and started again is measured on its last attempt only: a training that resumed from its "
    "checkpoint (its log says `resuming from step N`) is counted from step N, and an attempt stopped before its "
    "first checkpoint is not counted.",
)


def render_markdown(summary: dict[str, Any], scale: str, prov: dict[str, Any]) -> str:
    t = summary["totals"]
    out = io.StringIO()
    out.write(f"### Wall time of the pipeline's jobs ({scale})\n\n")
    share = "n/a (no job)" if t["training_share"] is None else f"{100 * t['training_share']:.1f}%"
    out.write(f"- jobs measured: {t['jobs']}\n")
    out.write(f"- summed job wall time: {t['sum_wall_s']:.1f} s ({_hms(t['sum_wall_s'])}); training "
              f"{t['training_wall_s']:.1f} s ({_hms(t['training_wall_s'])}), **{share} of it**\n")
    if t["sum_cpu_s"] is not None:
        cshare = "" if t["training_cpu_share"] is None else f", training {100 * t['training_cpu_share']:.1f}%"
        out.write(f"- summed CPU time: {t['sum_cpu_s']:.1f} s ({_hms(t['sum_cpu_s'])}, "
                  f"{t['sum_cpu_s'] / 3600:.2f} CPU-hours){cshare} "
                  f"({t['cpu_jobs']} of {t['jobs']} jobs have CPU seconds)\n")
    out.write(f"- elapsed, first job start to last job end: {t['elapsed_s']:.1f} s ({_hms(t['elapsed_s'])}); busy "
              f"(at least one job running) {t['busy_s']:.1f} s ({_hms(t['busy_s'])}); idle gaps "
              f"{t['idle_gaps_s']:.1f} s; mean jobs at once {_fmt(t['mean_parallel_jobs'], 2)}\n\n")
    out.write("| group | jobs | wall s | h:m:s | share of summed wall | CPU s | max RSS MiB |\n"
              "|---|---|---|---|---|---|---|\n")
    for g in summary["groups"]:
        sh = "" if g["share"] is None else f"{100 * g['share']:.1f}%"
        out.write(f"| {g['group']} | {g['jobs']} | {g['wall_s']:.1f} | {_hms(g['wall_s'])} | {sh} | "
                  f"{_fmt(g['cpu_s'])} | {_fmt(g['max_rss_mib'])} |\n")
    out.write(f"| **total** | {t['jobs']} | {t['sum_wall_s']:.1f} | {_hms(t['sum_wall_s'])} | 100% | "
              f"{_fmt(t['sum_cpu_s'])} | |\n\n")
    out.write("| group | rule | wildcards | wall s | h:m:s | CPU s | max RSS MiB | end (UTC) |\n"
              "|---|---|---|---|---|---|---|---|\n")
    for r in summary["rows"]:
        out.write(f"| {r['group']} | {r['rule']} | {r['wildcards']} | {r['wall_s']:.1f} | {_hms(r['wall_s'])} | "
                  f"{_fmt(r['cpu_s'])} | {_fmt(r['max_rss_mib'])} | {r['end_utc']} |\n")
    out.write("\n")
    for n in NOTES:
        out.write(f"- {n}\n")
    out.write(f"\n<sub>yocou {prov['versions'].get('yocou')} · commit {str(prov['git_commit'])[:10]}"
              f"{' (dirty)' if prov.get('git_dirty') else ''} · {prov['device'].get('cpu_model', '')} · "
              f"{prov['created_utc']}</sub>\n")
    return out.getvalue()


def write_timing(bench_dir: str | Path, out_stem: str | Path, scale: str) -> dict[str, Any]:
    """Read ``bench_dir`` (:func:`collect`), write ``<out_stem>.csv`` (:data:`JOB_COLUMNS`), ``.md`` and ``.json``
    (``scale``, ``bench_dir``, ``rows``, ``groups``, ``totals``, ``notes``, ``provenance``). Returns the summary."""
    summary = summarize(collect(bench_dir))
    stem = Path(out_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    prov = provenance({"scale": scale, "bench_dir": str(bench_dir)}, None)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=JOB_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in summary["rows"]:
        w.writerow({k: ("" if r[k] is None else r[k]) for k in JOB_COLUMNS})
    atomic_write_text(stem.with_name(stem.name + ".csv"), buf.getvalue())
    atomic_write_text(stem.with_name(stem.name + ".md"), render_markdown(summary, scale, prov))
    atomic_write_json(stem.with_name(stem.name + ".json"), {"scale": scale, "bench_dir": str(bench_dir), **summary,
                                                            "notes": list(NOTES), "provenance": prov})
    return summary


def main(argv: list[str] | None = None) -> int:
    from yocou.utils.guard import reads, suffixed, writes

    ap = argparse.ArgumentParser(prog="yocou.results.timing", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", required=True, help="the scale (names the default folders)")
    ap.add_argument("--bench", type=reads(), help="benchmark folder (default logs/<scale>/bench)")
    ap.add_argument("--out", type=writes(paths=suffixed(".csv", ".md", ".json", replace=False)), help="output stem (default results/<scale>/timing -> timing.{csv,md,json})")
    a = ap.parse_args(argv)
    from yocou.utils.guard import IOPaths, check_args

    if a.out and (a.out.endswith(("/", os.sep)) or os.path.isdir(a.out)):
        ap.error(f"--out {a.out}: is a folder; expected an output stem such as results/<scale>/timing (it writes "
                 "<stem>.csv, <stem>.md and <stem>.json)")
    default_out = IOPaths(outputs={"--out": [f"results/{a.scale}/timing.{x}" for x in ("csv", "md", "json")]})
    check_args(a, None if a.out else default_out)
    try:
        check_scale_name(a.scale, "--scale")
    except ValueError as e:
        ap.error(str(e))
    bench = a.bench or f"logs/{a.scale}/bench"
    out = a.out or f"results/{a.scale}/timing"
    if not any(Path(bench).rglob("*.tsv")):
        ap.error(f"--bench {bench}: no Snakemake benchmark files (*.tsv) there: run the scale's pipeline (or some "
                 f"of its targets) first")
    try:
        summary = write_timing(bench, out, a.scale)
    except ValueError as e:
        print(f"yocou.results.timing: error: {e}", file=sys.stderr)
        return 2
    t = summary["totals"]
    print(f"{t['jobs']} jobs, summed wall {t['sum_wall_s']:.1f} s, training share {t['training_share']}, "
          f"elapsed {t['elapsed_s']:.1f} s -> {out}.{{csv,md,json}}")
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
