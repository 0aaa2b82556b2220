"""Scale-out: the paper-scale DAG, the sbatch flags the SLURM profile's jobs get, the training
launcher's shell plumbing (single node, multi-node srun + torchrun rendezvous), GPU slots on one machine."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import workflow_copy

from yocou.workflow import cluster
from yocou.workflow.pipeline import resolve_run

ROOT = Path(__file__).resolve().parents[1]
PAPER = yaml.safe_load((ROOT / "workflows/config/paper.yaml").read_text())


def _workdir(tmp: Path) -> Path:
    return workflow_copy(tmp)


def _snakemake(cwd: Path, *args: str) -> str:
    res = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout + res.stderr


def _jobs(dry_run: str) -> list[dict]:
    """Jobs of a dry run's log: rule, wildcards, resources (values as Snakemake prints them), shell."""
    jobs: list[dict] = []
    for line in dry_run.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line)
        if m:
            jobs.append({"rule": m.group(1), "wildcards": "", "resources": {}, "shell": ""})
            continue
        if not jobs:
            continue
        s = line.strip()
        if s.startswith("wildcards: "):
            jobs[-1]["wildcards"] = s[len("wildcards: "):]
        elif line.startswith("Shell command: "):
            jobs[-1]["shell"] = line[len("Shell command: "):]
        elif s.startswith("resources: "):
            for item in s[len("resources: "):].split(", "):
                k, _, v = item.partition("=")
                jobs[-1]["resources"][k] = int(v) if v.isdigit() else v
    return jobs


def _rules_planned(dry_run: str) -> set[str]:
    table = dry_run.split("Job stats:")[1].split("total")[0]
    return {l.split()[0] for l in table.splitlines()[3:] if l.strip()}


@pytest.fixture(scope="module")
def slurm_dry_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`snakemake -n reproduce_all` at paper scale through the SLURM profile (no cluster needed to plan)."""
    wd = _workdir(tmp_path_factory.mktemp("paper_slurm"))
    return _snakemake(wd, "-n", "reproduce_all", "--config", "scale=paper", "--profile", "workflows/profiles/slurm")


@pytest.mark.slow
def test_paper_dry_run_plans_the_full_dag(tmp_path: Path, slurm_dry_run: str) -> None:
    """Every rule of the smoke DAG (the one CI runs end to end) is planned at paper scale too, but the
    learning-rate study, which the paper config does not configure (no lr_sensitivity: section), and the token
    ladder, which its study file does not (no paper: section in workflows/studies/ladder.yaml)."""
    smoke = _snakemake(_workdir(tmp_path), "-n", "--cores", "2", "reproduce_all", "--config", "scale=smoke")
    assert "lr_sensitivity" not in PAPER
    lr = {"summarize_lr", "lr_sensitivity", "report_pages_lr_sensitivity"}
    assert "paper" not in yaml.safe_load((ROOT / "workflows/studies/ladder.yaml").read_text())
    ladder = {"report_pages_ladder", "report_pages_bracket"}
    for f in ("workflows/rules/ladder.smk", "workflows/rules/compute/ladder.smk"):
        ladder |= set(re.findall(r"^rule (\w+):", (ROOT / f).read_text(), re.M))
    assert "ladder_train" in ladder and "ladder_train" in _rules_planned(smoke)
    assert _rules_planned(slurm_dry_run) == _rules_planned(smoke) - lr - ladder
    assert "lr_sensitivity" in _rules_planned(smoke)
    for v in PAPER["core_variants"]:
        assert f"runs/paper/models/{v}/model.pt" in slurm_dry_run
    for target in ("fig2.png", "table10.md", "table3.md", "fig7.png", "table1.csv"):
        assert f"paper/{target}" in slurm_dry_run
    assert "localrules directive specifies rules that are not present" not in slurm_dry_run


def _fake_job(job: dict) -> SimpleNamespace:
    """What the SLURM plugin reads of a Snakemake job: name, threads, resources (attributes and .get)."""

    class Res(dict):
        __getattr__ = dict.__getitem__

    return SimpleNamespace(name=job["rule"], threads=1, resources=Res(job["resources"]), is_group=lambda: False)


def _sbatch(job: dict) -> str:
    """The sbatch line snakemake-executor-plugin-slurm builds for this job (its own builder functions)."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    fake = _fake_job(job)
    params = {"run_uuid": "RUN", "slurm_logfile": "LOG", "comment_str": f"rule_{job['rule']}", "account": "",
              "partition": "", "workdir": "/wd"}
    return get_submit_command(fake, params) + set_gres_string(fake)


def test_slurm_submissions_carry_the_configured_resources(slurm_dry_run: str) -> None:
    jobs = _jobs(slurm_dry_run)
    by_rule: dict[str, list[dict]] = {}
    for j in jobs:
        by_rule.setdefault(j["rule"], []).append(j)
    assert len(by_rule["train"]) == len(PAPER["variants"])  # every run the studies use
    for job in jobs:
        if job["rule"] in ("reproduce_all", "efficiency"):
            continue
        want = cluster.rule_resources(PAPER, job["rule"])
        got = job["resources"]
        for k, v in want.items():
            assert got.get(k) == v, (job["rule"], k, got)
        line = _sbatch(job)
        assert f"-t {want['runtime']}" in line and f"--mem {want['mem_mb']}" in line, line
        assert f"--cpus-per-task={want['cpus_per_task']}" in line, line
    # multi-node training: 4 nodes, one task each, 8 GPUs per node, torchrun launched by srun in the job
    train = _sbatch(by_rule["train"][0])
    for flag in ("--nodes=4", "--ntasks=4", "--gres=gpu:8", "-t 4320", "--mem 480000", "--cpus-per-task=64"):
        assert flag in train, train
    assert "--gpus=" not in train
    assert by_rule["train"][0]["resources"]["mpi"] == "srun"  # the job step runs the command as it is
    # evaluation and profiling: one GPU each
    for rule in ("ppl", "kv_measure", "niah", "longppl", "downstream", "profile"):
        line = _sbatch(by_rule[rule][0])
        assert "--gpus=1" in line and "--nodes" not in line, (rule, line)
    # data preparation: CPU only
    for rule in ("corpus", "tokens"):
        line = _sbatch(by_rule[rule][0])
        assert "gpu" not in line and "--ntasks=1" in line, (rule, line)


#: The rules that load a model or measure one: each runs on the device its job reserves (common.smk job_device).
EVAL_RULES = ("ppl", "longppl", "niah", "downstream", "kv_measure", "profile", "angular")


def _eval_devices(dry_run: str) -> dict[str, set[str]]:
    """rule -> the --device values its planned jobs' shell commands pass (one set per rule)."""
    out: dict[str, set[str]] = {}
    for j in _jobs(dry_run):
        if j["rule"] in EVAL_RULES:
            out.setdefault(j["rule"], set()).update(re.findall(r"--device (\S+)", j["shell"]) or ["(none)"])
    return out


def test_paper_evaluation_jobs_run_on_the_gpu_they_reserve(slurm_dry_run: str) -> None:
    assert all(PAPER["resources"]["rules"][r]["gpu"] == 1 for r in EVAL_RULES)
    assert _eval_devices(slurm_dry_run) == {r: {"cuda"} for r in EVAL_RULES}


@pytest.mark.slow
def test_smoke_evaluation_jobs_run_on_the_cpu(tmp_path: Path) -> None:
    out = _snakemake(_workdir(tmp_path), "-n", "-p", "--cores", "2", "reproduce_all", "--config", "scale=smoke")
    assert _eval_devices(out) == {r: {"cpu"} for r in EVAL_RULES}


def test_job_device_reads_the_gpu_resources() -> None:
    for res, want in [({"gpu": 1}, "cuda"), ({"gpu": "2"}, "cuda"), ({"gres": "gpu:8", "nodes": 4}, "cuda"),
                      ({"gpu": 0, "gres": ""}, "cpu"), ({"mem_mb": 8000}, "cpu"), ({}, "cpu")]:
        assert cluster.job_device(res) == want, res


def test_train_shell_command_launches_torchrun_on_every_node(slurm_dry_run: str) -> None:
    shells = [l.split("Shell command: ", 1)[-1] for l in slurm_dry_run.splitlines() if "run_config.json --data" in l]
    # the run folder's lock is checked first (yocou.utils.runlock: a second trainer refuses before srun starts)
    assert all(re.match(r"python -m yocou\.utils\.runlock (\S+) && OMP_NUM_THREADS=.* --out \1 ", l) for l in shells), shells[0]
    assert len(shells) == len(PAPER["variants"])
    assert all("srun --nodes=4 --ntasks-per-node=1" in l and "torchrun --nnodes 4 --nproc-per-node 8" in l
               for l in shells), shells[0]


def _local_rules(wd: Path, config: dict) -> tuple[set[str], set[str]]:
    """(every rule, the local ones) as Snakemake itself decides (a dry run does not print it)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        OutputSettings,
        ResourceSettings,
    )

    with SnakemakeApi(OutputSettings()) as api:
        wf = api.workflow(snakefile=wd / "Snakefile", workdir=wd, resource_settings=ResourceSettings(cores=2, nodes=4),
                          config_settings=ConfigSettings(config=config))._workflow
        # the localrules table (is_local() says True for everything when the run itself is local)
        return {r.name for r in wf.rules}, {r.name for r in wf.rules if r.name in wf._localrules}


@pytest.mark.parametrize("config", [{"scale": "paper"}, {"scale": "smoke", "mode": "compute"}])
def test_render_summaries_and_pages_are_local_rules(tmp_path: Path, config: dict) -> None:
    """Under a cluster executor only the jobs that train, evaluate, measure or prepare data are submitted: every
    render rule, every summary and report page, and the config's own local_rules run on the submitting host."""
    defined, local = _local_rules(_workdir(tmp_path), config)
    heavy = {"train", "ppl", "profile", "corpus", "tokens", "niah", "downstream"} & defined
    assert heavy and not heavy & local, heavy & local
    for name in defined:
        if name.startswith(("summarize_", "report_pages", "table", "fig")) or name == "audit":
            assert name in local, name
    if config["scale"] == "paper":
        assert set(PAPER["resources"]["local_rules"]) <= local


def test_cli_resources_override_the_config(tmp_path: Path) -> None:
    out = _snakemake(_workdir(tmp_path), "-n", "--jobs", "4", "--executor", "slurm", "runs/paper/tokens/train.bin",
                     "--config", "scale=paper", "--set-resources", "tokens:runtime=30")
    tokens = [j for j in _jobs(out) if j["rule"] == "tokens"][0]
    assert tokens["resources"]["runtime"] == 30
    assert tokens["resources"]["mem_mb"] == PAPER["resources"]["rules"]["tokens"]["mem_mb"]


# --------------------------------------------------------------------------------------------------
# config and resources


def test_every_paper_variant_resolves() -> None:
    for v in PAPER["variants"]:
        rc = resolve_run(PAPER, v, vocab_size=100277)
        assert rc["train"]["seq_len"] == 8192 and rc["train"]["fsdp"] and rc["train"]["activation_checkpointing"]
        assert rc["model"]["vocab_size"] == 100277
    moe = resolve_run(PAPER, "yocou_moe", vocab_size=100277)["model"]
    assert (moe["n_experts"], moe["top_k"], moe["d_expert"], moe["d_shared_expert"], moe["d_model"]) == \
        (64, 8, 1024, 1024, 2560)


def test_rule_resources_merge_and_errors() -> None:
    cfg = {"launch": {"nproc": 4, "nnodes": 1, "gpus": True},
           "resources": {"default": {"runtime": 10, "mem_mb": 100}, "rules": {"ppl": {"gpu": 1, "runtime": 20}}}}
    assert cluster.rule_resources(cfg, "ppl") == {"runtime": 20, "mem_mb": 100, "gpu": 1}
    assert cluster.rule_resources(cfg, "fig2") == {"runtime": 10, "mem_mb": 100}
    assert cluster.rule_resources(cfg, "train") == {"runtime": 10, "mem_mb": 100, "nodes": 1, "gpu": 4}
    assert set(cluster.configured_rules(cfg)) == {"ppl", "train"}
    with pytest.raises(ValueError, match="resources.rules.ppl.*gpus"):
        cluster.rule_resources({"resources": {"rules": {"ppl": {"gpus": 1}}}}, "ppl")
    bad = {**cfg, "resources": {"rules": {"train": {"gpu": 2}}}}
    with pytest.raises(ValueError, match="train.gpu.*launch"):
        cluster.rule_resources(bad, "train")
    assert cluster.rule_resources({}, "train") == {}  # CPU scales: no resources section, nothing changes
    for k, v in (("runtime", -5), ("mem_mb", "two"), ("nodes", 0), ("cpus_per_task", 1.5), ("gpu", True)):
        with pytest.raises(ValueError, match=rf"resources.rules.ppl.{k}: expected a positive integer, got {v!r}"):
            cluster.rule_resources({"resources": {"rules": {"ppl": {k: v}}}}, "ppl")


@pytest.mark.parametrize("edit,needle", [
    (lambda r: r.setdefault("rules", {}).update(train={"runtime": -5}), "resources.rules.train.runtime"),
    (lambda r: r.update(rulez={}), "resources.rulez"),
])
def test_cli_resources_validates_as_planning_does(tmp_path: Path, edit, needle: str) -> None:
    """`python -m yocou.workflow.cluster resources` reads the config as the pipeline does: a bad value or a misplaced
    section fails in one line naming it (it used to print them back)."""
    cfg = yaml.safe_load((ROOT / "workflows/config/paper.yaml").read_text())
    edit(cfg.setdefault("resources", {}))
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    res = subprocess.run([sys.executable, "-m", "yocou.workflow.cluster", "resources", "--config", str(p), "train"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and not res.stdout, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m yocou.workflow.cluster: error: ") and needle in lines[0], lines


@pytest.mark.parametrize("hf,ok", [
    ({}, False),                                                       # as committed: the cluster user sets it
    ({"name": "json", "data_files": "corpus.jsonl"}, True),
    ({"disk_path": "/data/corpus"}, True),
])
def test_check_config_refuses_a_paper_config_whose_corpus_is_unset(tmp_path: Path, hf: dict, ok: bool) -> None:
    """`python -m yocou.workflow.cluster check --config` refuses, in one line naming the field and before it asks
    SLURM anything, the paper config as committed (no pretraining corpus: the first sbatch job would stop at once),
    and passes it once a source is set (then SLURM is checked, which may fail here: not this test's concern)."""
    cfg = yaml.safe_load((ROOT / "workflows/config/paper.yaml").read_text())
    cfg["data"]["corpus"]["sources"]["hf"].update(hf)
    p = tmp_path / "paper.yaml"
    p.write_text(yaml.safe_dump(cfg))
    res = subprocess.run([sys.executable, "-m", "yocou.workflow.cluster", "check", "--config", str(p),
                          "--timeout-s", "5"], capture_output=True, text=True, timeout=120)
    lines = res.stderr.strip().splitlines()
    if ok:
        assert res.stdout.splitlines()[0] == "config: scale paper: the corpus sources are set", res.stdout
        assert "data.corpus" not in res.stderr
    else:
        assert res.returncode == 2 and not res.stdout and len(lines) == 1, res.stdout + res.stderr
        assert lines[0].startswith("python -m yocou.workflow.cluster check: error: data.corpus.sources.hf.name: unset")


# --------------------------------------------------------------------------------------------------
# the training launcher


def test_launcher_single_node_and_slots() -> None:
    assert cluster.train_launcher({"launch": {"nproc": 1}}) == "python -m yocou.cli"
    assert cluster.train_launcher({"launch": {"nproc": 1, "gpu_slots": 2}}) == \
        "python -m yocou.workflow.cluster gpu-run --gpus 1 --slots 2 -- python -m yocou.cli"
    two = cluster.train_launcher({"launch": {"nproc": 2}})
    assert two.startswith("bash -c ") and two.endswith(" torchrun")
    assert "exec torchrun --standalone --nproc-per-node 2 -m yocou.cli" in two
    eight = cluster.train_launcher({"launch": {"nproc": 8, "gpu_slots": 8}})
    assert eight.startswith("python -m yocou.workflow.cluster gpu-run --gpus 8 --slots 8 -- bash -c ")
    assert "exec torchrun --standalone --nproc-per-node 8 -m yocou.cli" in eight
    with pytest.raises(ValueError, match=r"launch\.dist_timeout_s: expected a whole number of seconds >= 1, got 0"):
        cluster.train_launcher({"launch": {"nproc": 2, "dist_timeout_s": 0}})


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


#: A stand-in torchrun: prints its node, the environment its workers would get and its arguments.
_TORCHRUN = ('#!/bin/bash\necho "node=${SLURM_NODEID:-0} omp=$OMP_NUM_THREADS '
             'async=${TORCH_NCCL_ASYNC_ERROR_HANDLING:-unset} debug=${NCCL_DEBUG:-unset} torchrun $*"\n')


def _launch(prefix: str, bin_: Path, args: str = "train --run-config 'a b.json' --out runs/x", *, omp: str | None,
            **env: str) -> subprocess.CompletedProcess:
    """Run ``OMP_NUM_THREADS=<omp> <prefix> <args>`` in bash as the rule's shell does, stand-ins first on PATH."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_NUM_THREADS", "SLURM_JOB_ID", "NCCL_DEBUG", "TORCH_NCCL_ASYNC_ERROR_HANDLING")}
    cmd = (f"OMP_NUM_THREADS={omp} " if omp is not None else "") + f"{prefix} {args}"
    return subprocess.run(["bash", "-c", cmd], env={**base, "PATH": f"{bin_}:{os.environ['PATH']}", **env},
                          capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("omp", "nproc", "want"), [("16", 4, "4"), ("6", 4, "1"), ("3", 2, "1"), ("9", 2, "4"),
                                                    (None, 2, "1"), ("x", 2, "1")])
def test_one_node_torchrun_shares_the_jobs_threads_among_its_processes(tmp_path: Path, omp: str | None, nproc: int,
                                                                       want: str) -> None:
    """OMP_NUM_THREADS of each torchrun worker: the rule's threads (its OMP_NUM_THREADS) over launch.nproc, at
    least 1 (unset or not a number: 1); no NCCL settings on CPU; the process group's default timeout."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _executable(bin_ / "torchrun", _TORCHRUN)
    res = _launch(cluster.train_launcher({"launch": {"nproc": nproc}}), bin_, omp=omp)
    assert res.returncode == 0, res.stderr
    want_line = (f"node=0 omp={want} async=unset debug=unset torchrun --standalone --nproc-per-node {nproc} "
                 "-m yocou.cli train --run-config a b.json --out runs/x --dist-timeout-s 1800")
    assert res.stdout.splitlines() == [want_line]


def test_one_node_gpu_training_gets_the_nccl_settings_unless_set(tmp_path: Path) -> None:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _executable(bin_ / "torchrun", _TORCHRUN)
    prefix = cluster.train_launcher({"launch": {"nproc": 8, "gpus": True, "dist_timeout_s": 600}})
    res = _launch(prefix, bin_, omp="64")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split(" torchrun ")[0] == "node=0 omp=8 async=1 debug=WARN"
    assert res.stdout.rstrip().endswith("--out runs/x --dist-timeout-s 600")
    res = _launch(prefix, bin_, omp="64", NCCL_DEBUG="INFO", TORCH_NCCL_ASYNC_ERROR_HANDLING="3")
    assert res.stdout.split(" torchrun ")[0] == "node=0 omp=8 async=3 debug=INFO"  # the user's own settings kept


def test_multi_node_launcher_runs_torchrun_per_node_with_the_rendezvous(tmp_path: Path) -> None:
    """The launcher's shell text under stand-ins for srun (two nodes), scontrol and torchrun."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _executable(bin_ / "srun", '#!/bin/bash\n# stand-in: run the command once per node, as srun does\n'
                '[ "$1" = "--nodes=2" ] || exit 3\nwhile [[ "$1" == --* ]]; do echo "srun $1" >&2; shift; done\n'
                'for n in 0 1; do SLURM_NODEID=$n SLURM_JOB_NODELIST="gpu[07-08]" "$@" || exit $?; done\n')
    _executable(bin_ / "scontrol", '#!/bin/bash\n[ "$*" = "show hostnames gpu[07-08]" ] || exit 4\n'
                'printf "gpu07\\ngpu08\\n"\n')
    _executable(bin_ / "torchrun", _TORCHRUN)
    cfg = {"launch": {"nproc": 4, "nnodes": 2, "gpus": True, "rdzv_port": 29511, "dist_timeout_s": 900},
           "resources": {"rules": {"train": {"cpus_per_task": 32}}}}
    res = _launch(cluster.train_launcher(cfg), bin_, omp="32", SLURM_JOB_ID="4242")
    assert res.returncode == 0, res.stderr
    assert "srun --cpus-per-task=32" in res.stderr and "srun --gres=gpu:4" in res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2
    for n, line in enumerate(lines):
        assert line == (f"node={n} omp=8 async=1 debug=WARN torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d "
                        "--rdzv-id 4242 --rdzv-endpoint gpu07:29511 -m yocou.cli train --run-config a b.json "
                        "--out runs/x --dist-timeout-s 900")


def test_multi_node_outside_slurm_is_refused_in_one_line(tmp_path: Path) -> None:
    """launch.nnodes > 1 under the local executor (no SLURM job): one line naming launch.nnodes, status 2, and
    neither srun nor torchrun started."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    started = tmp_path / "started"
    for name in ("srun", "torchrun"):
        _executable(bin_ / name, f'#!/bin/bash\necho {name} >> {started}\n')
    prefix = cluster.train_launcher({"launch": {"nproc": 8, "nnodes": 4, "gpus": True}})
    for env in ({}, {"SLURM_JOB_ID": ""}):
        res = _launch(prefix, bin_, omp="64", **env)
        assert res.returncode == 2 and not res.stdout, res.stdout + res.stderr
        lines = res.stderr.splitlines()
        assert len(lines) == 1, res.stderr
        assert lines[0].startswith("train: launch.nnodes is 4: expected a SLURM job")
        assert "--profile workflows/profiles/slurm" in lines[0] and "--executor slurm" in lines[0]
        assert not started.exists()
    res = _launch(prefix, bin_, omp="64", SLURM_JOB_ID="17")  # inside a job it goes on to srun
    assert res.returncode == 0 and started.read_text() == "srun\n", res.stderr


def test_train_rule_shell_text_runs_the_launcher(tmp_path: Path, slurm_dry_run: str) -> None:
    """The paper train rule's shell command as the dry run prints it, run with stand-ins: outside SLURM it stops
    at the launcher's one line, after the run-folder lock (a stand-in python), before srun."""
    shell = next(l.split("Shell command: ", 1)[-1] for l in slurm_dry_run.splitlines() if "run_config.json --data" in l)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _executable(bin_ / "python", '#!/bin/bash\necho "python $*" >> calls\n')
    _executable(bin_ / "srun", '#!/bin/bash\necho srun >> calls\n')
    (tmp_path / "logs/paper").mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    res = subprocess.run(["bash", "-c", shell], cwd=tmp_path, env={**base, "PATH": f"{bin_}:{os.environ['PATH']}"},
                         capture_output=True, text=True, check=False)
    assert res.returncode == 2
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("python -m yocou.utils.runlock runs/paper/models/"), calls
    log = next((tmp_path / "logs/paper").glob("train_*.log")).read_text().splitlines()
    assert len(log) == 1 and log[0].startswith("train: launch.nnodes is 4: expected a SLURM job"), log


def test_the_process_group_timeout_reaches_init_process_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture) -> None:
    """`yocou train --dist-timeout-s S` (the launcher's launch.dist_timeout_s) becomes the timeout of
    torch.distributed.init_process_group; a value below 1 is refused in one line naming the flag."""
    from datetime import timedelta

    import torch.distributed as dist

    from yocou import cli
    from yocou.training import train as T

    got: dict = {}
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **k: got.update(backend=backend, **k))
    monkeypatch.setattr(T, "_dist_info", lambda: (0, 1))
    monkeypatch.setenv("WORLD_SIZE", "2")
    T._init_distributed(42)
    assert got["timeout"] == timedelta(seconds=42)

    seen: dict = {}
    monkeypatch.setattr(T, "train", lambda *a, **k: seen.update(k) or {"steps": 0})
    rc = tmp_path / "run.json"
    rc.write_text(json.dumps(resolve_run(PAPER, PAPER["core_variants"][0], vocab_size=100277)))
    (tmp_path / "train.bin").write_bytes(b"")
    args = ["train", "--run-config", str(rc), "--data", str(tmp_path / "train.bin"), "--out", str(tmp_path / "out")]
    assert cli.main([*args, "--dist-timeout-s", "7"]) == 0
    assert seen["dist_timeout_s"] == 7
    assert cli.main(args) == 0
    assert seen["dist_timeout_s"] == cluster.DIST_TIMEOUT_S == 1800
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli.main([*args, "--dist-timeout-s", "0"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--dist-timeout-s" in err[-1] and "0" in err[-1], err


# --------------------------------------------------------------------------------------------------
# GPU slots on one machine (fake slots: no GPU needed)


def test_slots_are_disjoint_and_wait_when_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    a = cluster.acquire_gpu_slots(1, 3, lock_dir=tmp_path)
    b = cluster.acquire_gpu_slots(1, 3, lock_dir=tmp_path)
    assert (a.cuda_visible_devices, b.cuda_visible_devices) == ("0", "1")
    with pytest.raises(TimeoutError, match="2 of 3"):
        cluster.acquire_gpu_slots(2, 3, lock_dir=tmp_path, timeout_s=0.2, poll_s=0.05)
    c = cluster.acquire_gpu_slots(1, 3, lock_dir=tmp_path, timeout_s=0.2)  # the failed try took none
    assert c.slots == [2]
    a.release()
    d = cluster.acquire_gpu_slots(1, 3, lock_dir=tmp_path, timeout_s=0.2)
    assert d.slots == [0]
    for lease in (b, c, d):
        lease.release()
    with pytest.raises(ValueError, match="asked for 4 of 3"):
        cluster.acquire_gpu_slots(4, 3, lock_dir=tmp_path)


def test_slots_map_onto_visible_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6")
    with cluster.acquire_gpu_slots(2, 3, lock_dir=tmp_path) as lease:
        assert lease.cuda_visible_devices == "3,5"


_PRINT_AND_WAIT = "import os, sys, time; print(os.environ.get('CUDA_VISIBLE_DEVICES'), flush=True); time.sleep(60)"


def _gpu_run(lock_dir: Path, *extra_env: tuple[str, str], gpus: int = 1, slots: int = 2) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID")}
    env.update(dict(extra_env))
    return subprocess.Popen([sys.executable, "-m", "yocou.workflow.cluster", "gpu-run", "--gpus", str(gpus), "--slots",
                             str(slots), "--lock-dir", str(lock_dir), "--", sys.executable, "-c", _PRINT_AND_WAIT],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_concurrent_jobs_get_distinct_gpus_until_they_end(tmp_path: Path) -> None:
    """Two concurrent commands through `gpu-run` see different devices; a killed one frees its slot."""
    p1, p2 = _gpu_run(tmp_path), _gpu_run(tmp_path)
    try:
        seen = {p1.stdout.readline().strip(), p2.stdout.readline().strip()}
        assert seen == {"0", "1"}
        with pytest.raises(TimeoutError):
            cluster.acquire_gpu_slots(1, 2, lock_dir=tmp_path, timeout_s=0.3, poll_s=0.05)
        p1.kill()
        p1.wait()
        t0 = time.time()
        with cluster.acquire_gpu_slots(1, 2, lock_dir=tmp_path, timeout_s=10, poll_s=0.05) as lease:
            assert time.time() - t0 < 10 and len(lease.slots) == 1
    finally:
        for p in (p1, p2):
            p.kill()
            p.wait()


@pytest.mark.slow
def test_gpu_run_inside_a_slurm_job_takes_no_slot(tmp_path: Path) -> None:
    p = _gpu_run(tmp_path, ("SLURM_JOB_ID", "7"), ("CUDA_VISIBLE_DEVICES", "2"), gpus=2, slots=2)
    try:
        assert p.stdout.readline().strip() == "2"  # the allocation's devices, unchanged
        with cluster.acquire_gpu_slots(2, 2, lock_dir=tmp_path, timeout_s=1) as lease:
            assert lease.slots == [0, 1]
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("args, message", [
    (["--gpus", "-1", "--slots", "2"], "argument --gpus: expected an integer >= 1, got -1"),
    (["--gpus", "0", "--slots", "2"], "argument --gpus: expected an integer >= 1, got 0"),
    (["--gpus", "1", "--slots", "-1"], "argument --slots: expected an integer >= 0, got -1"),
])
def test_gpu_run_rejects_bad_counts_before_running(tmp_path: Path, args: list[str], message: str) -> None:
    """A GPU count below 1 (or negative slots) is an argument error: status 2, the command never runs."""
    res = subprocess.run([sys.executable, "-m", "yocou.workflow.cluster", "gpu-run", *args, "--lock-dir", str(tmp_path),
                          "--", sys.executable, "-c", "print('ran')"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr and "ran" not in res.stdout, res.stderr


def test_cli_prints_a_rules_resources(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "yocou.workflow.cluster", "resources", "--config",
                          str(ROOT / "workflows/config/paper.yaml"), "train"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == cluster.rule_resources(PAPER, "train")



def test_cli_resources_rejects_an_unknown_rule_listing_the_rules() -> None:
    res = subprocess.run([sys.executable, "-m", "yocou.workflow.cluster", "resources", "--config",
                          str(ROOT / "workflows/config/paper.yaml"), "trian"], capture_output=True, text=True)
    assert res.returncode == 2 and not res.stdout, res.stdout + res.stderr
    assert "argument RULE: invalid choice: 'trian'" in res.stderr and "'train'" in res.stderr, res.stderr
    assert all(f"'{r}'" in res.stderr for r in cluster.RULES)


def test_known_rules_are_the_workflows_rules(tmp_path: Path) -> None:
    """cluster.RULES (what `resources` accepts) is exactly the rule list of the workflow."""
    out = _snakemake(_workdir(tmp_path), "--list-rules", "--config", "scale=smoke")
    listed = {ln.strip() for ln in out.splitlines() if re.fullmatch(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*", ln)}
    assert listed == set(cluster.RULES)


# --------------------------------------------------------------------------------------------------
# the prepared GPU check (python -m yocou.evaluation.bench.gpu_check)


def test_gpu_check_skips_cleanly_without_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture) -> None:
    import torch

    from yocou.evaluation.bench import gpu_check

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path)]) == 0
    assert "skipped: no CUDA device" in capsys.readouterr().err
    assert json.loads((tmp_path / "gpu_check.json").read_text())["status"] == "skipped"


@pytest.mark.slow
def test_gpu_check_dry_on_cpu_runs_every_check_and_renders_fig7(tmp_path: Path) -> None:
    """`--device cpu --dry`: the GPU check's code paths at tiny sizes; every named check passes."""
    from yocou.evaluation.bench import gpu_check
    from yocou.model import config as C

    assert gpu_check.main(["--out", str(tmp_path), "--device", "cpu", "--dry"]) == 0
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert summary["status"] == "passed" and summary["n_failed"] == 0
    named = {(r["variant"], r["check"]) for r in summary["checks"]}
    for v in gpu_check.CHECK_VARIANTS:
        for check in ("decode_vs_full_fp32", "decode_vs_full_bf16", "bf16_vs_fp32", "kv_bytes",
                      "loss_device_vs_cpu", "grad_device_vs_cpu", "loss_bf16_autocast"):
            assert (v, f"{check}_moe" if "moe" in v and f"{check}_moe" in gpu_check.TOLERANCES else check) in named
    rows = json.loads((tmp_path / "profile.json").read_text())["rows"]
    assert {r["variant"] for r in rows} == set(C.PRESETS) | {"upper_loop_nokv"}
    assert all(r["kv_equal"] and r["dtype"] == "bf16" for r in rows)
    for name in ("fig7.png", "fig7.pdf", "fig7_data.csv"):
        assert (tmp_path / name).stat().st_size > 0


def test_gpu_check_tolerances_catch_a_wrong_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A decode step fed the wrong token fails decode_vs_full in both dtypes (the checks can fail)."""
    import torch

    from yocou.evaluation.bench import gpu_check

    real = gpu_check.decode_step

    def stale(model, token, cache):  # always token 0: the logits differ from the full forward's
        return real(model, torch.zeros_like(token), cache)

    monkeypatch.setattr(gpu_check, "decode_step", stale)
    logged: list[dict] = []
    rows = gpu_check.correctness(torch.device("cpu"), shape="dry", variants=["yocou"], log=logged.append)
    assert logged == rows  # each row is reported as it is measured, not only at the end
    failed = {r["check"] for r in rows if not r["passed"]}
    assert {"decode_vs_full_fp32", "decode_vs_full_bf16"} <= failed
    assert "kv_bytes" not in failed


@pytest.mark.parametrize("section", ["rules", "local_rules"])
def test_a_misspelt_rule_under_resources_is_refused(section: str) -> None:
    """`trian:` under resources.rules (or in local_rules) names the section, the rule and the known rules."""
    cfg = {"resources": {"rules": {"train": {"runtime": 1}}, "local_rules": ["fig2"]}}
    assert "train" in cluster.configured_rules(cfg)
    if section == "rules":
        cfg["resources"]["rules"]["trian"] = {"runtime": 1}
    else:
        cfg["resources"]["local_rules"].append("fig_2")
    with pytest.raises(ValueError, match=rf"resources\.{section}: '(trian|fig_2)' is not a rule.*'train'"):
        cluster.configured_rules(cfg)


def test_job_threads_come_from_the_config_when_no_cores_are_given() -> None:
    """Under a cluster executor without --cores (cores None) a job's threads are its rule's cpus_per_task (the
    rule's own entry, else resources.default), so no job needs --cores; with --cores the local meaning holds."""
    cfg = {**PAPER, "eval": {**PAPER["eval"], "threads": 2}, "launch": {**PAPER["launch"], "threads": None}}
    res = PAPER["resources"]
    assert cluster.job_threads(cfg, "train", None, "train") == res["rules"]["train"]["cpus_per_task"]
    assert cluster.job_threads(cfg, "profile", None) == res["rules"]["profile"]["cpus_per_task"]
    assert cluster.job_threads(cfg, "angular", None, "eval") == 2          # eval.threads, within the rule's 8
    assert cluster.job_threads(cfg, "summarize_runs", None) == res["default"]["cpus_per_task"]
    assert cluster.job_threads({"eval": {"threads": None}}, "ppl", None, "eval") == 1   # no resources: one core
    assert cluster.job_threads(cfg, "ppl", 16, "eval") == 2 and cluster.job_threads(cfg, "ppl", 1, "eval") == 1
    assert cluster.job_threads(cfg, "profile", 16) == 16
    assert cluster.job_threads({**cfg, "launch": {"threads": 3}}, "train", 16, "train") == 3
    # inside a SLURM allocation of 1 CPU the job's own Snakemake (cores = the node's) asks for 1, as submitted
    assert cluster.job_threads(cfg, "profile", 16, limit=1) == 1
    assert cluster.job_threads({**cfg, "launch": {"threads": 3}}, "train", 16, "train", limit=2) == 2
    with pytest.raises(ValueError, match=r"launch\.threads: expected an integer >= 1"):
        cluster.job_threads({"launch": {"threads": 0}}, "train", 2, "train")
    with pytest.raises(ValueError, match="kind must be all, eval or train"):
        cluster.job_threads(cfg, "train", 2, "gpu")


def test_no_rule_reads_workflow_cores_and_each_names_its_own_rule() -> None:
    """`workflow.cores` raises under a cluster executor without --cores: no rule file reads it; every
    job_threads("<rule>") sits in the rule it names (its cpus_per_task is looked up by that name)."""
    for f in sorted((ROOT / "workflows").rglob("*.smk")):
        text = f.read_text(encoding="utf-8")
        assert "workflow.cores" not in text, f
        rule = None
        for line in text.splitlines():
            if m := re.match(r"\s*rule (\w+):", line):
                rule = m.group(1)
            if m := re.search(r'job_threads\("(\w+)"', line):
                assert m.group(1) == rule, (f, line, rule)


def _fake_slurm(bin_dir: Path, sacct: str) -> dict:
    """A PATH whose sbatch, squeue and scancel succeed and whose sacct runs the shell snippet ``sacct``."""
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("sbatch", "exit 0"), ("squeue", "exit 0"), ("scancel", "exit 0"), ("sacct", sacct)):
        f = bin_dir / name
        f.write_text(f"#!/bin/sh\n{body}\n")
        f.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("sacct, ok, needle", [
    ("printf '1|COMPLETED\\n2|CANCELLED by 0\\n'", True, "sacct reads job states (2 allocations"),
    ("echo 'sacct: error: Slurm accounting storage is disabled' >&2; exit 1", False,
     "sacct cannot read job states (sacct: error: Slurm accounting storage is disabled)"),
    ("exit 1", False, "sacct cannot read job states (exit status 1)"),
    ("sleep 5", False, "gave no answer in 0.5 s"),
])
def test_cluster_check_fails_in_one_line_when_job_states_cannot_be_read(tmp_path: Path, sacct: str, ok: bool,
                                                                        needle: str) -> None:
    """The SLURM preflight runs sacct as the plugin does: without accounting the workflow would wait silently."""
    res = subprocess.run([sys.executable, "-m", "yocou.workflow.cluster", "check", "--timeout-s", "0.5"], cwd=ROOT,
                         env=_fake_slurm(tmp_path / "bin", sacct), capture_output=True, text=True)
    out = res.stdout + res.stderr
    assert res.returncode == (0 if ok else 2) and needle in out and "Traceback" not in out, out
    if not ok:
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_cluster_check_names_the_missing_commands(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}   # python, but no SLURM commands
    res = subprocess.run([sys.executable, "-m", "yocou.workflow.cluster", "check"], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    assert res.returncode == 2 and "sbatch, sacct, squeue, scancel not on PATH" in res.stderr, res.stderr
