"""CPU seconds per job on two hosts: the same pipeline jobs, measured where each ran.

A job's CPU seconds (Snakemake's ``benchmark:`` files, ``cpu_time``: user + system) depend on the host far more
than on anything else the tiny pipeline changes; the wall time depends on the load too. This script pairs the rows
of two job tables made by ``python -m yocou.results.timing`` (``timing.csv``: one row per job, ``rule``,
``wildcards``, ``cpu_s``) by rule and wildcards, and writes, per rule and overall, the number of jobs both hosts
ran, their summed CPU seconds and the ratio (this host over the reference), with the median and range of the
per-job ratios. Jobs of under ``--min-cpu-s`` CPU seconds on the reference are left out (their start-up cost, not
their work, dominates).

Use it to state a budget measured on one host for another: the ratio of the jobs both ran, times the reference's
total, with the jobs it rests on named::

    python -m yocou.results.timing --scale tiny --bench <clone>/logs/tiny/bench --out /tmp/here_timing
    python benchmarks/host_ratio.py --here /tmp/here_timing.csv \\
        --reference results/tiny/timing.csv benchmarks/results/ladder_timing.csv \\
        --out benchmarks/results/host_ratio_tiny

Writes ``<out>.json`` (with the provenance of :func:`yocou.utils.io.provenance`, and this host's CPU family, model and
vector flags) and ``<out>.md``. A file
missing a column stops with one line naming the file and the column (exit status 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

COLUMNS = ("rule", "wildcards", "cpu_s")


def read_jobs(path: str | Path) -> pd.DataFrame:
    """One ``timing.csv``: rows ``rule``, ``wildcards`` (empty for a rule without), ``cpu_s`` (CPU seconds).

    Raises:
        ValueError: a column of :data:`COLUMNS` is missing, naming the file and the column.
    """
    try:
        df = pd.read_csv(path, dtype={"wildcards": str}, keep_default_na=False, na_values={"cpu_s": ["", "NA"]})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a CSV table ({str(e).splitlines()[0]})") from None
    for c in COLUMNS:
        if c not in df.columns:
            raise ValueError(f"{path}: no column {c!r} (expected a timing.csv of python -m yocou.results.timing)")
    cpu = pd.to_numeric(df["cpu_s"], errors="coerce")
    if bad := [v for v, n in zip(df["cpu_s"], cpu) if pd.isna(n) and not pd.isna(v)]:
        raise ValueError(f"{path}: cpu_s {bad[0]!r}: expected CPU seconds (a number, or empty/NA)")
    return df.assign(cpu_s=cpu)[list(COLUMNS)].dropna(subset=["cpu_s"])


def pair(here: pd.DataFrame, reference: pd.DataFrame, min_cpu_s: float) -> pd.DataFrame:
    """The jobs in both tables (same rule and wildcards; the reference's last row wins on a duplicate), with
    ``cpu_here``, ``cpu_ref`` and ``ratio`` = here / reference; reference jobs under ``min_cpu_s`` (or of no CPU
    time) left out."""
    ref = reference.drop_duplicates(["rule", "wildcards"], keep="last")
    df = here.merge(ref, on=["rule", "wildcards"], suffixes=("_here", "_ref"))
    df = df[(df["cpu_s_ref"] >= min_cpu_s) & (df["cpu_s_ref"] > 0)].rename(columns={"cpu_s_here": "cpu_here", "cpu_s_ref": "cpu_ref"})
    return df.assign(ratio=df["cpu_here"] / df["cpu_ref"]).sort_values(["rule", "wildcards"]).reset_index(drop=True)


def summarize(df: pd.DataFrame) -> list[dict]:
    """Per rule, then ``all``: jobs, summed CPU seconds on each host, their ratio, and the per-job ratios' median,
    minimum and maximum."""
    rows = []
    for rule, g in [*df.groupby("rule"), ("all", df)]:
        rows.append({"rule": rule, "jobs": len(g), "cpu_here": round(float(g["cpu_here"].sum()), 1),
                     "cpu_ref": round(float(g["cpu_ref"].sum()), 1),
                     "ratio": round(float(g["cpu_here"].sum() / g["cpu_ref"].sum()), 3),
                     "median": round(float(g["ratio"].median()), 3), "min": round(float(g["ratio"].min()), 3),
                     "max": round(float(g["ratio"].max()), 3)})
    return rows


def cpu_host() -> str:
    """This host's CPU as ``/proc/cpuinfo`` gives it: model name, family, model, and the vector flags that decide
    fp32 and bf16 speed (avx2, avx512f, avx512_bf16, amx_tile) it has."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                info.setdefault(k.strip(), v.strip())
    except OSError:
        return "unknown"
    flags = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in info.get("flags", "").split()]
    return (f"{info.get('model name', 'unknown')}, family {info.get('cpu family', '?')} model {info.get('model', '?')}"
            f" ({' '.join(flags) or 'no avx2'})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--here", required=True, help="timing.csv of this host's jobs")
    ap.add_argument("--reference", required=True, nargs="+", help="timing.csv file(s) of the reference host")
    ap.add_argument("--min-cpu-s", type=float, default=5.0)
    ap.add_argument("--out", required=True, help="output stem: <out>.json and <out>.md")
    a = ap.parse_args(argv)
    try:
        here = read_jobs(a.here)
        ref = pd.concat([read_jobs(p) for p in a.reference], ignore_index=True)
    except OSError as e:
        print(f"host_ratio: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"host_ratio: {e}", file=sys.stderr)
        return 2
    df = pair(here, ref, a.min_cpu_s)
    if df.empty:
        print(f"host_ratio: no job of {a.here} is in the reference with at least {a.min_cpu_s} CPU-s", file=sys.stderr)
        return 2
    from yocou.utils.io import atomic_write_json, atomic_write_text, provenance

    rows = summarize(df)
    host = cpu_host()
    doc = {"here": a.here, "reference": a.reference, "min_cpu_s": a.min_cpu_s, "host": host,
           "by_rule": rows, "jobs": df.to_dict(orient="records"), "provenance": provenance(vars(a), None)}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out.with_suffix(".json"), doc)
    lines = ["### CPU seconds per job, this host over the reference (same rule and wildcards)", "",
             f"This host: {host}. Jobs of at least {a.min_cpu_s:g} CPU-s on the reference.", "", "| rule | jobs | CPU-s here | CPU-s reference | ratio of sums | median | min | max |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['rule']} | {r['jobs']} | {r['cpu_here']:.0f} | {r['cpu_ref']:.0f} | {r['ratio']:.3f} | "
              f"{r['median']:.3f} | {r['min']:.3f} | {r['max']:.3f} |" for r in rows]
    atomic_write_text(out.with_suffix(".md"), "\n".join(lines) + "\n")
    print(f"host_ratio: {len(df)} jobs, ratio of summed CPU-s {rows[-1]['ratio']:.3f} -> {out}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
