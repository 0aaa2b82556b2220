"""Committed results as a source (yocou.workflow.committed, `mode:` of the config; in render mode the Snakefile does not
include workflows/rules/compute/).

Unit tests of the config comparison against hand-written configs, then dry runs on a copy of the committed tree
(`git archive HEAD`, no runs/): every render target, driven with Snakemake's habits (-f, -R, --forcerun,
--forceall, --summary, --list-changes), plans no compute job and prints no traceback; a command with no target
(or whose target an option swallowed) plans only the listing rule; a config change that results depend on plans
the trainings again (or, with mode=render, is refused in one line naming the key), a render-only change does not;
reproduce_all refuses in render mode naming mode=compute, and computes with it.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from yocou.workflow.committed import (
    CONFIG_NAME,
    committed_state,
    config_diff,
    planned_jobs,
    read_committed_config,
    result_config,
    write_committed_config,
)

ROOT = Path(__file__).resolve().parents[1]
# Rules that read runs/ or logs/ (or train): none of them may be planned by a render target on a clone.
COMPUTE_RULES = {"corpus", "tokenizer", "tokens", "run_config", "train", "eqflops_model", "ppl", "baselines",
                 "kv_measure", "profile", "angular", "niah_prompts", "niah", "longppl", "eval_pack", "downstream",
                 "start_runs", "timing", "committed_config"}


# ----------------------------------------------------------------------------------------------- the comparison
def _cfg(**over):
    cfg = {"scale": "s", "seed": 0, "mode": "auto", "train": {"lr": 1e-3, "steps": 10},
           "eval": {"threads": 1, "ppl": {"batch": 4}}, "render": {"dpi": 150}, "launch": {"threads": 1}}
    for k, v in over.items():
        node = cfg
        *head, last = k.split("__")
        for h in head:
            node = node[h]
        node[last] = v
    return cfg


def test_config_diff_names_dotted_keys():
    assert config_diff({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": 1, "c": [1, 2]}}) == []
    assert config_diff({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": 2, "c": [1, 3]}}) == ["a.b", "a.c"]
    assert config_diff({"a": 1}, {"a": 1, "z": {"y": 0}}) == ["z"]
    assert config_diff({"a": {"b": 1}}, {"a": 5}) == ["a"]


def test_result_config_leaves_out_only_what_changes_no_result():
    a = result_config(_cfg())
    assert "render" not in a and "launch" not in a and "mode" not in a and "threads" not in a["eval"]
    assert a["eval"]["ppl"] == {"batch": 4} and a["train"]["lr"] == 1e-3
    assert config_diff(result_config(_cfg()), result_config(_cfg(render__dpi=72, eval__threads=None,
                                                                  mode="compute", launch__threads=2))) == []
    assert config_diff(result_config(_cfg()), result_config(_cfg(train__lr=3e-3))) == ["train.lr"]


def test_committed_state(tmp_path):
    res, runs = tmp_path / "results" / "s", tmp_path / "runs" / "s"
    # nothing committed: compute (auto), refused (render)
    assert not committed_state(_cfg(), scale="s", results_dir=res, runs_dir=runs).use
    with pytest.raises(ValueError, match="mode=render: .*config.json does not exist"):
        committed_state(_cfg(mode="render"), scale="s", results_dir=res, runs_dir=runs)
    write_committed_config(_cfg(), res / CONFIG_NAME)
    assert read_committed_config(res)["train"]["lr"] == 1e-3
    st = committed_state(_cfg(), scale="s", results_dir=res, runs_dir=runs)
    assert st.use and st.message is None
    # a render-only change still reads the committed results
    assert committed_state(_cfg(render__dpi=300), scale="s", results_dir=res, runs_dir=runs).use
    # a change that results depend on: auto recomputes with one line naming the key and both values
    st = committed_state(_cfg(train__lr=3e-3), scale="s", results_dir=res, runs_dir=runs)
    assert not st.use and "train.lr (0.001 committed, 0.003 now)" in st.message and "\n" not in st.message
    with pytest.raises(ValueError, match=r"mode=render: .*train\.lr .*--config mode=compute"):
        committed_state(_cfg(train__lr=3e-3, mode="render"), scale="s", results_dir=res, runs_dir=runs)
    # mode=compute never reads them; auto computes once runs/<scale>/ exists; render still does
    assert not committed_state(_cfg(mode="compute"), scale="s", results_dir=res, runs_dir=runs).use
    runs.mkdir(parents=True)
    assert not committed_state(_cfg(), scale="s", results_dir=res, runs_dir=runs).use
    assert committed_state(_cfg(mode="render"), scale="s", results_dir=res, runs_dir=runs).use


def test_unreadable_committed_config_names_the_file(tmp_path):
    (tmp_path / CONFIG_NAME).write_text("{not json")
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / CONFIG_NAME))):
        read_committed_config(tmp_path)
    (tmp_path / CONFIG_NAME).write_text(json.dumps({"config": [1]}))
    with pytest.raises(ValueError, match="under 'config'"):
        read_committed_config(tmp_path)


# ------------------------------------------------------------------------------ dry runs on the committed tree
@pytest.fixture(scope="module")
def committed_tree(tmp_path_factory) -> Path:
    """The committed tree at HEAD (`git archive`): what a fresh clone has, without runs/ and logs/."""
    head = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, capture_output=True)
    if head.returncode != 0:
        pytest.skip(f"not a git checkout: {head.stderr.decode()[:200]}")
    dest = tmp_path_factory.mktemp("clone")
    with tarfile.open(fileobj=io.BytesIO(head.stdout)) as tar:
        tar.extractall(dest, filter="data")
    if not (dest / "results" / "tiny" / CONFIG_NAME).is_file():
        pytest.skip("HEAD has no committed results/tiny/config.json")
    return dest


def _plan(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, int]]:
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", *args], cwd=cwd,
                         capture_output=True, text=True)
    return res, planned_jobs(res.stdout)


# target -> a rule it depends on (for -R / --forcerun): every render target with one of its upstream render rules
HABIT_TARGETS = {"fig2": "fig2", "table3": "table3", "table1": "summarize_efficiency", "audit": "fig4",
                 "efficiency": "summarize_efficiency_derived", "table4": "table4", "fig8": "fig8",
                 "render_all": "heldout_ppl"}


def _no_compute(res, jobs):
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert not set(jobs) & COMPUTE_RULES, jobs
    assert not any(n.startswith(("summarize_", "ladder_", "probe_")) and n not in
                   ("summarize_efficiency", "summarize_efficiency_derived", "summarize_table10",
                    "ladder_fits") for n in jobs), jobs   # ladder_fits renders the committed points (the audit reads it)


@pytest.mark.slow
@pytest.mark.parametrize("habit", ["none", "--forcerun", "-f", "-R", "--forceall"])
def test_render_targets_under_snakemakes_habits_plan_no_compute_job_on_a_clone(committed_tree, habit):
    """Every render target at once (one parse per habit), then --forcerun of their rules, -f, -R of a rule each
    depends on, --forceall: render jobs only, no traceback, every forced rule planned again; nothing under runs/
    is made. (A compute job planned for one target is planned for all of them together.)"""
    targets = sorted(HABIT_TARGETS)
    deps = sorted(set(HABIT_TARGETS.values()))
    args = {"none": [], "--forcerun": ["--forcerun", *targets], "-f": ["-f"], "-R": ["-R", *deps],
            "--forceall": ["--forceall"]}[habit]
    res, jobs = _plan(committed_tree, *targets, *args)   # targets first: --forcerun and -R take every word after
    _no_compute(res, jobs)
    forced = {"none": [], "--forcerun": targets, "-f": targets, "-R": deps, "--forceall": targets}[habit]
    assert not set(forced) - set(jobs), (habit, sorted(set(forced) - set(jobs)), res.stdout[-2000:])
    assert not (committed_tree / "runs").exists()


@pytest.mark.slow
def test_a_missing_render_output_is_rendered_and_summary_and_list_changes_work(committed_tree):
    (committed_tree / "figures/tiny/fig2.png").unlink(missing_ok=True)
    res, jobs = _plan(committed_tree, "figures/tiny/fig2.png")
    _no_compute(res, jobs)
    assert jobs == {"fig2": 1}, jobs
    for habit in (["--summary", "fig2"], ["--list-changes", "code", "fig2"], ["--list-changes", "params", "audit"]):
        res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *habit], cwd=committed_tree,
                             capture_output=True, text=True)
        assert res.returncode == 0 and "Traceback" not in res.stdout + res.stderr, (habit, res.stderr[-2000:])


@pytest.mark.slow
@pytest.mark.parametrize("args", [[], ["--forcerun", "table1", "table1"], ["-R", "fig2", "fig3"]])
def test_a_command_with_no_target_renders_or_lists_and_never_computes(committed_tree, args):
    """No target (or one an option swallowed: --forcerun and -R take every word after them): in render mode the
    default target is render_all (render jobs only, seconds); in compute mode it is the listing rule alone, which
    prints the mode and the targets."""
    res, jobs = _plan(committed_tree, *args)
    _no_compute(res, jobs)
    assert "render mode" in res.stdout + res.stderr, res.stderr[-2000:]
    res, jobs = _plan(committed_tree, *args, "--config", "mode=compute")
    assert res.returncode == 0 and "compute mode" in res.stdout + res.stderr, res.stderr[-2000:]
    if not args:
        assert jobs == {"targets": 1}, jobs
        run = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--config", "mode=compute"],
                             cwd=committed_tree, capture_output=True, text=True)
        out = run.stdout + run.stderr
        assert run.returncode == 0 and "No target was given, so nothing ran" in out, out[-2000:]
        assert not (committed_tree / "runs").exists()


@pytest.mark.slow
def test_a_change_results_depend_on_recomputes_and_render_only_does_not(committed_tree):
    res, jobs = _plan(committed_tree, "table3", "--config", "train={lr: 0.003}")
    assert res.returncode == 0, res.stderr[-2000:]
    assert jobs.get("train", 0) > 0 and jobs.get("downstream", 0) > 0, jobs
    assert re.search(r"differs from the one that made results/tiny/config\.json at train\.lr", res.stdout + res.stderr)
    res, jobs = _plan(committed_tree, "table3", "--config", "render={dpi: 100}")
    assert res.returncode == 0 and not set(jobs) & COMPUTE_RULES, jobs
    res, _ = _plan(committed_tree, "table3", "--config", "train={lr: 0.003}", "mode=render")
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "\nError: mode=render: the config differs" in out and "train.lr" in out
    assert "WorkflowError" not in out and 'File "' not in out, out[-2000:]   # one line, no traceback


@pytest.mark.slow
def test_reproduce_all_refuses_in_render_mode_and_computes_with_mode_compute(committed_tree):
    run = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "reproduce_all"], cwd=committed_tree,
                         capture_output=True, text=True)
    assert run.returncode != 0 and "--config mode=compute" in run.stderr and "Traceback" not in run.stderr, \
        run.stderr[-2000:]
    res, jobs = _plan(committed_tree, "reproduce_all", "--config", "mode=compute")
    assert res.returncode == 0, res.stderr[-2000:]
    # every training the committed results were made with (their job table, results/tiny/timing.csv) is planned
    trained = int((pd.read_csv(committed_tree / "results" / "tiny" / "timing.csv")["rule"] == "train").sum())
    assert trained > 0 and jobs.get("train", 0) >= trained and jobs.get("ppl", 0) >= trained and "audit" in jobs, jobs
    res, jobs = _plan(committed_tree, "table3", "--config", "mode=compute")
    assert res.returncode == 0 and jobs.get("train", 0) > 0 and jobs.get("downstream", 0) > 0, jobs


def test_a_seeds_count_that_adds_no_run_changes_no_result():
    """seeds is judged by the replicas it adds to variants: a per-run count at or below the study's leaves the
    expanded variants as they are (no recompute); one above it adds replicas, and variants differ."""
    import copy

    from yocou.workflow.wfconfig import expand_runs

    committed = json.loads((ROOT / "results" / "tiny" / CONFIG_NAME).read_text(encoding="utf-8"))
    committed = committed.get("config", committed)
    same = copy.deepcopy(committed)
    runs = committed["seeds"].get("runs", {})
    same["seeds"] = {**same["seeds"], "runs": {**runs, "yoco": 1}}
    assert config_diff(result_config(committed), result_config(expand_runs(same))) == []
    more = copy.deepcopy(committed)
    more["seeds"] = {**more["seeds"], "runs": {**runs, "yoco": int(committed["seeds"]["core"]) + 2}}
    diff = config_diff(result_config(committed), result_config(expand_runs(more)))
    assert diff and all(d.startswith("variants.yoco_seed") for d in diff), diff


def test_planned_jobs_reads_snakemakes_job_stats_table():
    out = "Building DAG of jobs...\nJob stats:\njob        count\n-------  -------\nfig2           1\ntable3         2\n" \
          "total          3\n\nThis was a dry-run"
    assert planned_jobs(out) == {"fig2": 1, "table3": 2}
    assert planned_jobs("Nothing to be done (all requested files are present and up to date).") == {}


@pytest.mark.slow
def test_a_forced_re_render_of_the_tables_writes_what_is_committed(tmp_path):
    """On a clone of HEAD, Tables 2, 3 and 5 re-rendered in render mode from the committed tidy tables equal the
    committed files byte for byte: their budget notes read the committed tidy runs table, and a write that differs
    only in provenance keeps the committed file, so `git status` stays clean."""
    clone = tmp_path / "clone"
    got = subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(f"not a git checkout: {got.stderr[:200]}")
    assert b"Budget of" in (clone / "results/tiny/table2.md").read_bytes()
    targets = [f"results/tiny/{t}.md" for t in ("table2", "table3", "table5")]
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *targets, "--forcerun", "table2",
                          "table3", "table5"], cwd=clone, capture_output=True, text=True)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert "rule table2" in res.stdout + res.stderr
    status = subprocess.run(["git", "status", "--porcelain", "--", "results", "figures"], cwd=clone,
                            capture_output=True, text=True).stdout
    assert status == "", status
