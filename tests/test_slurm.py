"""The cluster path on a real SLURM: the project's profile drives a small DAG through sbatch, and a cancelled
training is seen, resubmitted and resumed exactly.

Needs a running cluster whose job states can be read (`python -m yocou.workflow.cluster check`), such as the one-node cluster
of `.ci/slurm/up.sh` (`.ci/run` starts it where it can: root and Debian's packages). Elsewhere every test here is
skipped, saying why, unless YOCOU_REQUIRE_SLURM=1 (set by `.ci/run` once its cluster is up): then a cluster that
cannot be reached fails the tests instead. Marked slow: each runs Snakemake through the SLURM executor plugin (minutes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import workflow_copy

pytestmark = pytest.mark.slow

SMOKE = ["--config", "mode=compute", "scale=smoke"]
# poll job states every few seconds (the profile's default waits 40 s before the first check)
FAST_POLL = ["--slurm-init-seconds-before-status-checks", "2"]


def _cluster_up() -> str | None:
    """None when a cluster's job states can be read here, else why not."""
    res = subprocess.run([sys.executable, "-m", "yocou.workflow.cluster", "check", "--timeout-s", "10"], capture_output=True,
                         text=True)
    return None if res.returncode == 0 else (res.stderr.strip() or "python -m yocou.workflow.cluster check failed")


@pytest.fixture(scope="module", autouse=True)
def _need_a_cluster() -> None:
    why = _cluster_up()
    if why and os.environ.get("YOCOU_REQUIRE_SLURM") == "1":
        pytest.fail(f"YOCOU_REQUIRE_SLURM=1 but no SLURM cluster answers: {why}")
    if why:
        pytest.skip(f"no SLURM cluster here ({why}); .ci/slurm/up.sh starts a one-node one as root")


def _run(cwd: Path, *args: str, timeout: float = 900) -> str:
    res = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    return out


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=False)["model"]


def _same_weights(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa), [k for k in wa if not torch.equal(wa[k], wb[k])][:5]


def test_the_profile_runs_a_small_dag_through_sbatch_with_the_local_outputs(tmp_path: Path) -> None:
    """Data, one training, its held-out loss and one table through `--profile workflows/profiles/slurm`, as the
    README writes it (no --cores): training and evaluation are sbatch jobs, the summary and the table local rules,
    and every output equals a local run's."""
    targets = ["results/smoke/ppl/yocou.json", "results/smoke/table10.md"]
    slurm, local = workflow_copy(tmp_path / "slurm"), workflow_copy(tmp_path / "local")
    t0 = time.time()
    out = _run(slurm, "--profile", "workflows/profiles/slurm", *targets, *SMOKE, *FAST_POLL)
    slurm_s = time.time() - t0
    for rule in ("train", "ppl", "kv_measure"):
        assert f"rule_{rule}/" in out, (rule, out[-3000:])            # its sbatch log: it went through SLURM
    for rule in ("summarize_kv", "table10"):
        assert f"localrule {rule}:" in out, rule
    t0 = time.time()
    _run(local, "--cores", "2", *targets, *SMOKE)
    print(f"small DAG: SLURM {slurm_s:.0f} s, local {time.time() - t0:.0f} s")
    _same_weights(slurm / "runs/smoke/models/yocou/model.pt", local / "runs/smoke/models/yocou/model.pt")
    a, b = (json.loads((d / targets[0]).read_text())["splits"] for d in (slurm, local))
    assert a == b
    strip = lambda p: [ln for ln in p.read_text().splitlines() if not ln.startswith("<sub>")]  # noqa: E731
    assert strip(slurm / targets[1]) == strip(local / targets[1])


def test_a_cancelled_training_is_seen_resubmitted_and_resumes_exactly(tmp_path: Path) -> None:
    """scancel of a running training job: the profile's status command sees it, `retries` resubmits it, the
    training resumes from its checkpoint, and the final weights equal an uninterrupted local run's."""
    train = ["train={steps: 250, ckpt_every: 20, eval_every: 0, log_every: 20}"]
    target = "runs/smoke/models/yocou/model.pt"
    slurm, local = workflow_copy(tmp_path / "slurm"), workflow_copy(tmp_path / "local")
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--profile", "workflows/profiles/slurm", target,
                             *SMOKE, *train, *FAST_POLL], cwd=slurm, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        ckpt = slurm / "runs/smoke/models/yocou/ckpt.pt"
        deadline = time.time() + 600
        while not ckpt.exists():
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.time() < deadline, "no checkpoint in 600 s"
            time.sleep(1)
        jobs = subprocess.run(["squeue", "-h", "-o", "%i|%k"], capture_output=True, text=True).stdout.split()
        ids = [j.split("|")[0] for j in jobs if "rule_train" in j]
        assert len(ids) == 1, jobs
        subprocess.run(["scancel", ids[0]], check=True)
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-4000:]
    assert "CANCELLED" in out, out[-3000:]
    log = (slurm / "logs/smoke/train_yocou.log").read_text()
    assert "resuming from step" in log, log[-2000:]
    _run(local, "--cores", "2", target, *SMOKE, *train)
    _same_weights(slurm / target, local / target)


def test_two_rendezvous_agents_train_as_one_process_does(tmp_path: Path) -> None:
    """The multi-node launch (yocou.workflow.cluster.train_launcher, launch.nnodes 2): srun starts one torchrun agent per
    task and they meet at a c10d rendezvous on the allocation's first node. On a one-node cluster the two agents are
    two tasks of one sbatch job (`--ntasks=2` in place of the launcher's `--nodes=2 --ntasks-per-node=1`); gloo on
    CPU. The run has world size 2 and its losses equal one process's within fp32 reduction-order tolerance."""
    from yocou.workflow import cluster
    wd = workflow_copy(tmp_path / "wf")
    run = "runs/smoke/models/yocou"
    _run(wd, "--cores", "2", f"{run}/run_config.json", "runs/smoke/tokens/train.bin", *SMOKE)
    args = (f"train --run-config {run}/run_config.json --data runs/smoke/tokens/train.bin --heldout "
            "runs/smoke/tokens/heldout_book.bin runs/smoke/tokens/heldout_code.bin --out {out}")
    one = subprocess.run([sys.executable, "-m", "yocou.cli", *args.format(out="one").split()], cwd=wd,
                         capture_output=True, text=True)
    assert one.returncode == 0, one.stderr[-3000:]
    prefix = cluster.train_launcher({"launch": {"nnodes": 2, "nproc": 1, "rdzv_port": 29517}})
    assert "--nodes=2 --ntasks-per-node=1" in prefix and "--rdzv-backend c10d" in prefix
    script = tmp_path / "two.sh"
    script.write_text(f"#!/bin/bash\ncd {wd}\n{prefix.replace('--nodes=2 --ntasks-per-node=1', '--ntasks=2')} "
                      f"{args.format(out='two')}\n")
    two = subprocess.run(["sbatch", "--wait", "--ntasks=2", "--cpus-per-task=1", "--mem=4000",
                          f"--output={tmp_path / 'two.out'}", str(script)], capture_output=True, text=True,
                         timeout=900)
    assert two.returncode == 0, two.stderr + (tmp_path / "two.out").read_text()[-3000:]
    summ = json.loads((wd / "two/summary.json").read_text())
    assert summ["provenance"]["world_size"] == 2
    losses = [[json.loads(ln)["loss"] for ln in (wd / d / "metrics.jsonl").read_text().splitlines()
               if "loss" in json.loads(ln)] for d in ("one", "two")]
    assert len(losses[0]) == len(losses[1]) > 0
    assert max(abs(a - b) for a, b in zip(*losses)) < 1e-5, losses
