"""Wall time as a measured budget: yocou.results.timing reads the jobs' Snakemake benchmark files into
results/<scale>/timing.*; every job rule of the workflow writes one, and the rule `timing` runs last."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import workflow_copy

from yocou.results import timing
from yocou.results.timing import (
    JOB_COLUMNS,
    collect,
    main,
    read_benchmark,
    summarize,
    write_timing,
)

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z; the files' modification times are the jobs' ends


def _row(s: float, rss: str, cpu: str) -> str:
    return "\t".join([f"{s:.4f}", "0:00:00", rss, "2000.00", "900.00", "950.00", "1.00", "2.00", "95.00", cpu])


def _write(root: Path, rel: str, rows: list[str], end: float) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    os.utime(p, (end, end))
    return p


@pytest.fixture()
def bench(tmp_path: Path) -> Path:
    """Six jobs, intervals (seconds after T0): corpus [0, 50], idle to 100, train yoco [100, 600] and train yocou
    [100, 700] side by side, ppl yocou [700, 800], fig2 [800, 810], summarize_runs (two repeats, 2 + 3 s)
    [810, 815]."""
    root = tmp_path / "logs/x/bench"
    _write(root, "corpus.tsv", [_row(50, "200.00", "40.00")], T0 + 50)
    _write(root, "train/yoco.tsv", [_row(500, "900.00", "980.00")], T0 + 600)
    _write(root, "train/yocou.tsv", [_row(600, "1000.50", "1150.00")], T0 + 700)
    _write(root, "ppl/yocou.tsv", [_row(100, "NA", "NA")], T0 + 800)  # Snakemake could not sample it
    _write(root, "fig2.tsv", [_row(10, "150.00", "8.00")], T0 + 810)
    _write(root, "summarize_runs.tsv", [_row(2, "50.00", "1.00"), _row(3, "60.00", "2.00")], T0 + 815)
    return root


def test_rows_groups_and_totals_by_hand(bench: Path) -> None:
    jobs = collect(bench)
    assert [(j.rule, j.wildcards) for j in jobs] == [("train", "yoco"), ("train", "yocou"), ("ppl", "yocou"),
                                                     ("corpus", ""), ("fig2", ""), ("summarize_runs", "")]
    runs = jobs[-1]
    assert (runs.wall_s, runs.max_rss_mib, runs.cpu_s, runs.repeats) == (5.0, 60.0, 3.0, 2)
    ppl = jobs[2]
    assert ppl.max_rss_mib is None and ppl.cpu_s is None
    s = summarize(jobs)
    t = s["totals"]
    # summed wall 50 + 500 + 600 + 100 + 10 + 5 = 1265; training 1100
    assert t["jobs"] == 6 and t["sum_wall_s"] == 1265 and t["training_wall_s"] == 1100
    assert t["training_share"] == pytest.approx(1100 / 1265, abs=1e-6)  # 0.8696
    # CPU: 40 + 980 + 1150 + 8 + 3 = 2181 (ppl has none); training 2130
    assert t["cpu_jobs"] == 5 and t["sum_cpu_s"] == 2181
    assert t["training_cpu_share"] == pytest.approx(2130 / 2181, abs=1e-6)
    # elapsed T0 .. T0 + 815; busy 50 + 600 + 100 + 10 + 5 = 765 (the two trainings overlap; 50 s idle)
    assert t["elapsed_s"] == 815 and t["busy_s"] == 765 and t["idle_gaps_s"] == 50
    assert t["mean_parallel_jobs"] == pytest.approx(1265 / 765, abs=1e-4)
    groups = {g["group"]: g for g in s["groups"]}
    assert list(groups) == ["training", "evaluation", "data", "summarize/render/other"]
    assert [groups[g]["wall_s"] for g in groups] == [1100, 100, 50, 15]
    assert groups["evaluation"]["share"] == pytest.approx(100 / 1265, abs=1e-6)
    assert groups["summarize/render/other"]["share"] == pytest.approx(15 / 1265, abs=1e-6)
    assert groups["training"]["max_rss_mib"] == 1000.5 and groups["training"]["cpu_s"] == 2130
    assert groups["evaluation"]["cpu_s"] is None and groups["evaluation"]["max_rss_mib"] is None
    assert groups["summarize/render/other"]["rules"] == ["fig2", "summarize_runs"]
    assert sum(g["share"] for g in s["groups"]) == pytest.approx(1.0, abs=1e-5)


def test_the_cli_writes_csv_md_and_json_with_provenance(bench: Path, tmp_path: Path, capsys) -> None:
    stem = tmp_path / "results/x/timing"
    assert main(["--scale", "x", "--bench", str(bench), "--out", str(stem)]) == 0
    with open(f"{stem}.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == JOB_COLUMNS and len(rows) == 6
    yocou = next(r for r in rows if r["rule"] == "train" and r["wildcards"] == "yocou")
    assert (yocou["group"], float(yocou["wall_s"]), float(yocou["max_rss_mib"]), float(yocou["cpu_s"])) == \
        ("training", 600.0, 1000.5, 1150.0)
    assert yocou["start_utc"] == "2023-11-14T22:15:00+00:00" and yocou["end_utc"] == "2023-11-14T22:25:00+00:00"
    ppl = next(r for r in rows if r["rule"] == "ppl")
    assert ppl["max_rss_mib"] == "" and ppl["cpu_s"] == ""
    doc = json.loads(Path(f"{stem}.json").read_text())
    assert doc["scale"] == "x" and doc["totals"]["sum_wall_s"] == 1265
    assert {"git_commit", "versions", "created_utc"} <= set(doc["provenance"])
    md = Path(f"{stem}.md").read_text()
    assert "**87.0% of it**" in md and "0:21:05" in md  # training's share; 1265 s summed
    assert "not the pipeline's elapsed time" in md and "(5 of 6 jobs have CPU seconds)" in md


def test_no_benchmarks_yet_is_an_empty_table_and_a_cli_error(tmp_path: Path, capsys) -> None:
    """The library writes an empty table (readable markdown); the command refuses, in one line, a folder without
    benchmark files and a scale name that is not safe, writing nothing."""
    stem = tmp_path / "timing"
    write_timing(tmp_path / "none", stem, "x")
    doc = json.loads(Path(f"{stem}.json").read_text())
    assert doc["rows"] == [] and doc["totals"]["jobs"] == 0 and doc["totals"]["training_share"] is None
    assert "n/a (no job)" in Path(f"{stem}.md").read_text()
    for args, needle in ((["--scale", "x", "--bench", str(tmp_path / "none")], "no Snakemake benchmark files"),
                         (["--scale", "../x"], "not a usable scale name")):
        with pytest.raises(SystemExit) as e:
            main([*args, "--out", str(tmp_path / "o")])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("yocou.results.timing: error: ") and needle in err[-1]
    assert not list(tmp_path.glob("o.*"))


def test_a_file_snakemake_writes_is_read() -> None:
    import tempfile

    from snakemake.benchmark import BenchmarkRecord, write_benchmark_records

    with tempfile.TemporaryDirectory() as d:
        rec = BenchmarkRecord(running_time=12.5, max_rss=321.0, max_vms=400.0, max_uss=300.0, max_pss=310.0,
                              io_in=1.0, io_out=2.0, cpu_time=11.0)
        rec.data_collected = True
        p = Path(d) / "profile.tsv"
        write_benchmark_records([rec], str(p), False)
        assert p.read_text().split("\n", 1)[0].split("\t") == list(timing.SNAKEMAKE_COLUMNS)
        job = read_benchmark(p, "profile")
    assert (job.wall_s, job.max_rss_mib, job.cpu_s, job.repeats) == (12.5, 321.0, 11.0, 1)


@pytest.mark.parametrize("text, needle", [
    ("", "empty"),
    ("h:m:s\tmax_rss\n0:00:01\t3.0\n", "no column 's'"),
    (HEADER + "\n", "column 's': no data row"),
    (HEADER + "\n" + _row(5, "lots", "1.0") + "\n", "column 'max_rss' line 2: 'lots' is not a number"),
    (HEADER + "\n" + _row(5, "1.0", "-3") + "\n", "column 'cpu_time' line 2: '-3' is not a finite number"),
    (HEADER + "\nNA\t0:00:00\t1\t1\t1\t1\t1\t1\t1\t1\n", "column 's' line 2: 'NA' is not a number"),
    (HEADER + "\n5.0\t0:00:05\n", "line 2 has 2 tab-separated fields, the header 10"),
])
def test_a_malformed_benchmark_is_one_line_naming_file_and_column(tmp_path: Path, text: str, needle: str,
                                                                   capsys) -> None:
    p = tmp_path / "bench/train/yocou.tsv"
    p.parent.mkdir(parents=True)
    p.write_text(text)
    with pytest.raises(ValueError) as e:
        collect(tmp_path / "bench")
    msg = str(e.value)
    assert str(p) in msg and needle in msg and "\n" not in msg
    assert main(["--scale", "x", "--bench", str(tmp_path / "bench"), "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(p) in err


def test_groups_cover_the_heavy_rules() -> None:
    from yocou.workflow.cluster import RULES

    heavy = {"train", "ppl", "downstream", "niah", "longppl", "angular", "profile", "kv_measure"}
    assert heavy <= RULES and all(timing.group_of(r) in ("training", "evaluation") for r in heavy)
    assert timing.group_of("train") == "training" and timing.group_of("eqflops_model") == timing.OTHER
    # the ladder's and the probe's trainings are training too (their jobs were once filed under "other")
    assert {timing.group_of(r) for r in ("ladder_train_stable", "ladder_train", "probe_train")} == {"training"}
    assert {timing.group_of(r) for r in ("ladder_ppl", "ladder_baselines")} == {"evaluation"}
    assert all(r in RULES for rules in timing.GROUPS.values() for r in rules)


#: rules timed in another rule's folder: the ladder's stable segments beside its branches (one run name each)
SHARED_BENCH = {"ladder_train_stable": "ladder_train"}


def test_every_job_rule_writes_a_benchmark_and_timing_runs_last(tmp_path: Path) -> None:
    """The smoke plan: every job but reproduce_all and timing names its benchmark file under logs/smoke/bench/
    (<rule>.tsv or <rule>/<wildcards>.tsv); timing is the last job before reproduce_all (but for the HTML page of
    its own table), after the audit, whose
    inputs leave timing's outputs out (no cycle)."""
    wd = workflow_copy(tmp_path)
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", "reproduce_all", "--config",
                          "scale=smoke"], cwd=wd, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    blocks = [b for b in res.stdout.split("\nrule ")[1:]]
    jobs = [(b.split(":", 1)[0], b) for b in blocks]
    names = [n for n, _ in jobs]
    # after timing only the HTML page of timing's own table (it cannot time the job that needs its output)
    after = names[names.index("timing") + 1:]
    assert after[-1] == "reproduce_all" and set(after[:-1]) <= {"report_pages_timing"} and "audit" in names
    for name, b in jobs:
        lines = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in b.splitlines()[1:]
                 if ln.startswith("    ") and ":" in ln}
        if name in ("timing", "reproduce_all"):
            assert "benchmark" not in lines, name
            continue
        path = lines.get("benchmark", "")
        folder = SHARED_BENCH.get(name, name)
        assert path == f"logs/smoke/bench/{folder}.tsv" or path.startswith(f"logs/smoke/bench/{folder}/"), (name, path)
    audit = dict(jobs)["audit"]
    assert "results/smoke/timing." not in audit
    timing_job = dict(jobs)["timing"]
    assert "results/smoke/audit/summary.json" in timing_job.split("output:")[0]
