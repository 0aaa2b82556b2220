"""Scale-out helpers for the pipeline: per-rule cluster resources, the training launcher, GPU slots.

* :func:`rule_resources` resolves the ``resources`` section of a scale's config
  (``workflows/config/paper.yaml``) into the Snakemake resources of one rule: ``default`` under
  ``rules[<rule>]``, and for ``train`` the node and GPU counts of ``launch``. ``workflows/rules/common.smk``
  hands them to Snakemake as ``--set-resources`` would, so the SLURM executor plugin
  (``snakemake-executor-plugin-slurm``, profile ``workflows/profiles/slurm``) turns them into sbatch flags:
  ``runtime`` (minutes) -> ``-t``, ``mem_mb`` (MB per node) -> ``--mem``, ``cpus_per_task`` ->
  ``--cpus-per-task``, ``gpu`` -> ``--gpus`` (whole job), ``gres`` -> ``--gres`` (per node), ``nodes`` ->
  ``--nodes``, ``tasks`` -> ``--ntasks``, ``slurm_partition`` -> ``-p``, ``slurm_account`` -> ``-A``,
  ``slurm_extra`` verbatim.
* :func:`train_launcher` is the command prefix of a training run: ``yocou`` (one process),
  ``torchrun --standalone`` (one node, ``launch.nproc`` processes) or, for ``launch.nnodes > 1``,
  ``srun`` starting one ``torchrun`` per node of the SLURM allocation with a c10d rendezvous on its first
  node (the ``mpi`` resource tells the plugin's job step not to wrap the command in ``srun`` itself); under
  torchrun each worker gets its share of the job's threads (``OMP_NUM_THREADS``), the NCCL error handling and
  the process group's timeout (``launch.dist_timeout_s``).
* GPU slots (:func:`acquire_gpu_slots`, CLI ``python -m yocou.workflow.cluster gpu-run``): on one machine with
  several GPUs, concurrent jobs each take free slots by ``flock`` on one lock file per slot and run with
  ``CUDA_VISIBLE_DEVICES`` set to theirs; a lock is released when its process ends, however it ends.
  Inside a SLURM job (``SLURM_JOB_ID`` set) the scheduler has already isolated the GPUs: no slots are taken.

Sources: Snakemake's resource docs and ``snakemake-executor-plugin-slurm`` 2.8.0 (``submit_string.py``);
PyTorch's torchrun docs (``--rdzv-backend c10d``, multi-node with ``srun``).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DIST_TIMEOUT_S",
    "RULES",
    "GpuLease",
    "acquire_gpu_slots",
    "configured_rules",
    "default_lock_dir",
    "default_resources",
    "job_device",
    "job_threads",
    "main",
    "rule_resources",
    "train_launcher",
]

#: Keys a rule's resources may carry (Snakemake's own and the SLURM plugin's); others are a typo.
RESOURCE_KEYS = frozenset({
    "runtime", "mem_mb", "mem_mb_per_cpu", "disk_mb", "cpus_per_task", "cpus_per_gpu", "gpu", "gpu_model",
    "gres", "nodes", "tasks", "tasks_per_node", "tasks_per_gpu", "mpi", "constraint", "qos",
    "slurm_partition", "slurm_account", "slurm_extra", "tmpdir",
})

#: The workflow's rules (`snakemake --list-rules`; tests/test_scaleout.py keeps this in step): what
#: ``python -m yocou.workflow.cluster resources`` accepts.
RULES = frozenset({
    "angular", "audit", "corpus", "downstream", "efficiency", "eqflops_model", "eval_pack", "fig2", "fig3", "fig4",
    "fig5", "fig6", "fig7", "fig8", "heldout_ppl", "kv_measure", "longppl", "niah", "niah_prompts", "ppl",
    "profile", "render_all", "reproduce_all", "run_config", "table1", "table10", "table2", "table3", "table4", "table5",
    "tables8_9", "targets", "timing", "tokenizer", "tokens", "train",
    # summarize steps (raw results -> results/<scale>/tidy/<study>.{csv,json})
    "summarize_efficiency", "summarize_efficiency_derived", "summarize_kv", "summarize_table10", "summarize_table4",
    "committed_config", "start_runs",
    # the report's HTML pages of the tables (workflows/rules/report.smk), one rule per report item
    "report_pages", "report_pages_audit", "report_pages_fig2", "report_pages_fig3", "report_pages_fig4",
    "report_pages_fig5", "report_pages_fig6", "report_pages_fig7", "report_pages_fig8", "report_pages_heldout_ppl",
    "report_pages_lr_sensitivity", "report_pages_table1", "report_pages_table2", "report_pages_table3",
    "report_pages_table4", "report_pages_table5", "report_pages_tables8_10", "report_pages_timing",
    "summarize_table2", "summarize_table3", "summarize_table5", "summarize_fig3", "summarize_runs", "summarize_fig2",
    "summarize_fig4", "summarize_fig5", "summarize_fig6", "summarize_fig8", "summarize_heldout_ppl",
    # the n-gram references, every run's held-out loss, the learning-rate study, the crossover target
    "baselines", "ppl_all", "summarize_lr", "lr_sensitivity", "summarize_crossover", "crossover",
    # the paper-shape efficiency study (scale-independent, results/paper_shape/)
    "paper_shape_measure", "paper_shape_summarize", "paper_shape_render", "efficiency_paper_shape",
    "paper_shape_serving", "paper_shape_batched_measure", "paper_shape_batched", "paper_shape_batched_summarize",
    "report_pages_serving",
    # the token ladder and its learning-rate bracket (workflows/rules/ladder.smk), the mechanism probe (probe.smk)
    "ladder_run_config", "ladder_tokens", "ladder_rates", "depth_rates", "ladder_train_stable", "ladder_train", "ladder_ppl",
    "ladder_baselines", "bracket_summary", "report_pages_ladder", "report_pages_bracket",
    "ladder_points", "ladder_fits", "ladder_checks_summary", "ladder_checks", "depth_points", "depth_summary", "depth_control", "ladder_context", "context_summary", "ladder_weights", "gpu_summarize", "bracket", "ladder", "probe_train", "probe_summarize", "probe",
})


#: Resources that are counts or sizes (runtime in minutes, memory and disk in MB): a positive integer.
COUNT_KEYS = frozenset({"runtime", "mem_mb", "mem_mb_per_cpu", "disk_mb", "cpus_per_task", "cpus_per_gpu", "gpu",
                        "nodes", "tasks", "tasks_per_node", "tasks_per_gpu"})


def _check_keys(res: Mapping[str, Any], where: str) -> None:
    unknown = set(res) - RESOURCE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown resource key(s) {sorted(unknown)}; allowed: {sorted(RESOURCE_KEYS)}")
    for k in sorted(COUNT_KEYS & set(res)):
        v = res[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{where}.{k}: expected a positive integer, got {v!r}")


def configured_rules(cfg: Mapping[str, Any]) -> list[str]:
    """Rules named under ``resources.rules`` (``train`` too when the config trains on several GPUs).

    Raises:
        ValueError: ``resources.rules`` or ``resources.local_rules`` names a rule that the workflow does not
            have (:data:`RULES`), naming it and listing the rules.
    """
    sec = cfg.get("resources") or {}
    names = list(sec.get("rules") or {})
    for where, given in (("resources.rules", names), ("resources.local_rules", list(sec.get("local_rules") or []))):
        for name in given:
            if name not in RULES:
                raise ValueError(f"{where}: {name!r} is not a rule of the workflow; rules: {sorted(RULES)}")
    if "train" not in names and _train_defaults(cfg):
        names.append("train")
    return names


def _train_defaults(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Node and GPU requests implied by ``launch`` for the ``train`` rule (GPU scales only)."""
    launch = cfg.get("launch") or {}
    if not launch.get("gpus", False):
        return {}
    nproc, nnodes = int(launch.get("nproc", 1)), int(launch.get("nnodes", 1))
    if nnodes > 1:
        # gres counts per node; one task per node starts torchrun; the job step must not wrap it in srun
        return {"nodes": nnodes, "tasks": nnodes, "gres": f"gpu:{nproc}", "mpi": "srun"}
    return {"nodes": 1, "gpu": nproc}


def default_resources(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``resources.default`` of ``cfg``: what every rule gets unless it says otherwise.

    Raises:
        ValueError: an unknown resource key.
    """
    default = dict((cfg.get("resources") or {}).get("default") or {})
    _check_keys(default, "resources.default")
    return default


def rule_resources(cfg: Mapping[str, Any], rule: str) -> dict[str, Any]:
    """The cluster resources of ``rule`` under pipeline config ``cfg``.

    ``resources.default`` under ``resources.rules[rule]``; for ``train`` also the requests that
    ``launch`` implies (``launch.gpus``: ``gpu = nproc`` on one node; on ``nnodes > 1`` nodes
    ``gres = gpu:<nproc>`` per node, ``nodes``, ``tasks`` and ``mpi``), below what the config states.
    Units: ``runtime`` minutes, ``mem_mb`` megabytes (per node), counts otherwise.

    Returns:
        A dict of Snakemake resources (empty when the config has no ``resources`` section).

    Raises:
        ValueError: an unknown resource key (naming it and where), or ``train`` resources that ask for a
            GPU count or node count different from ``launch``.
    """
    sec = cfg.get("resources") or {}
    default = dict(sec.get("default") or {})
    own = dict((sec.get("rules") or {}).get(rule) or {})
    _check_keys(default, "resources.default")
    _check_keys(own, f"resources.rules.{rule}")
    out = {**default}
    if rule == "train":
        implied = _train_defaults(cfg)
        for k in ("gpu", "gres", "nodes"):
            if k in own and k in implied and own[k] != implied[k]:
                raise ValueError(f"resources.rules.train.{k} = {own[k]!r} disagrees with launch "
                                 f"(nproc/nnodes imply {implied[k]!r}); set launch instead")
        out.update(implied)
    out.update(own)
    return out


def job_device(resources: Mapping[str, Any]) -> str:
    """``--device`` of an evaluation job from its Snakemake resources: ``cuda`` when they ask for a GPU (``gpu`` > 0,
    or a ``gres`` naming gpu), else ``cpu``."""
    gpu, gres = str(resources.get("gpu") or 0), str(resources.get("gres") or "")
    return "cuda" if (gpu.isdigit() and int(gpu) > 0) or "gpu" in gres else "cpu"


def job_threads(cfg: Mapping[str, Any], rule: str, cores: int | None, kind: str = "all",
                limit: int | None = None) -> int:
    """``threads:`` of one job of ``rule``.

    ``kind``: ``all`` (every core given: the profile and the paper-shape study, which time themselves), ``eval``
    (``eval.threads`` when set, at most the cores) or ``train`` (``launch.threads`` when set, else every core).
    ``cores``: ``--cores`` as given, None under a cluster executor run without it; then "every core" is the
    rule's ``cpus_per_task`` from :func:`rule_resources` (the job's own allocation), else 1, so no rule needs
    ``--cores`` to be submitted. ``limit``: the CPUs of the SLURM allocation the job runs in
    (``SLURM_CPUS_PER_TASK``), which bounds the result, so the job's step asks for no more than was submitted.

    Raises:
        ValueError: ``kind`` is not one of all, eval, train; or ``eval.threads`` / ``launch.threads`` is not
            an integer >= 1 (naming it).
    """
    if kind not in ("all", "eval", "train"):
        raise ValueError(f"job_threads: kind must be all, eval or train, got {kind!r}")
    if cores is None:
        cores = int(rule_resources(cfg, rule).get("cpus_per_task") or 1)
    if limit is not None:
        cores = min(cores, limit)
    key = {"eval": ("eval", "threads"), "train": ("launch", "threads")}.get(kind)
    n = (cfg.get(key[0]) or {}).get(key[1]) if key else None
    if n is None:
        return cores
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{key[0]}.{key[1]}: expected an integer >= 1 or null, got {n!r}")
    return min(n, cores) if kind == "eval" else (n if limit is None else min(n, limit))


#: Default of ``launch.dist_timeout_s``: seconds a collective may wait before the process group gives up.
DIST_TIMEOUT_S = 1800


def _worker_env(nproc: int, gpus: bool) -> str:
    """Shell text run before ``torchrun``: the environment its ``nproc`` workers inherit.

    ``OMP_NUM_THREADS``: the job's threads (the rule's shell sets ``OMP_NUM_THREADS={threads}`` before the launcher)
    divided among the ``nproc`` processes of the node, at least 1 (unset or not a whole number: 1). torchrun would
    otherwise keep the job's count for every worker, or set 1 and warn when it is unset. With ``gpus``:
    ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` (a failed or timed-out collective tears the process down, so the job ends
    instead of hanging) and ``NCCL_DEBUG=WARN``, each only where not already set.
    """
    env = ('t=${OMP_NUM_THREADS:-1}; case $t in ""|*[!0-9]*) t=1;; esac; '
           f'export OMP_NUM_THREADS=$(( t / {nproc} > 1 ? t / {nproc} : 1 ))')
    if gpus:
        env += ("; export TORCH_NCCL_ASYNC_ERROR_HANDLING=${TORCH_NCCL_ASYNC_ERROR_HANDLING:-1} "
                "NCCL_DEBUG=${NCCL_DEBUG:-WARN}")
    return env


def train_launcher(cfg: Mapping[str, Any], *, module: str = "yocou.cli") -> str:
    """Command prefix of a training run; ``train --run-config ...`` follows it.

    * ``launch.nproc == 1`` and ``nnodes == 1``: ``python -m yocou.cli`` (one process; with ``launch.gpu_slots``
      it takes one GPU slot). Always ``python -m``, never the ``yocou`` console script, so that every job of a
      run imports the same checkout's code (the one Snakemake runs in) as the other rules do.
    * ``nnodes == 1``: ``bash -c '<env>; exec torchrun --standalone --nproc-per-node <nproc> -m yocou.cli "$@"
      --dist-timeout-s <s>' torchrun`` (behind ``python -m yocou.workflow.cluster gpu-run --gpus <nproc>`` when
      ``launch.gpu_slots`` > 0).
    * ``nnodes > 1`` (SLURM): outside a SLURM job (``SLURM_JOB_ID`` unset, as under Snakemake's local executor) it
      exits with status 2 and one line on stderr naming ``launch.nnodes``; inside one, ``srun`` over the
      allocation's nodes, one task each, starting ``torchrun --nnodes <nnodes> --nproc-per-node <nproc>
      --rdzv-backend c10d --rdzv-id $SLURM_JOB_ID --rdzv-endpoint <first node>:<rdzv_port>``; the first node is
      read inside the task (``scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1``).

    Under torchrun ``<env>`` (:func:`_worker_env`) sets each worker's ``OMP_NUM_THREADS`` to the job's
    ``OMP_NUM_THREADS`` (the rule's threads) divided by ``nproc`` (at least 1), and with ``launch.gpus`` the NCCL
    settings ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` and ``NCCL_DEBUG=WARN`` unless set; ``--dist-timeout-s``
    (``launch.dist_timeout_s``, default 1800 s) is the process group's timeout (``yocou train``). These are read
    when the command runs, so the prefix (a rule param, a rerun trigger) does not change with ``--cores``.

    Raises:
        ValueError: ``nproc``, ``nnodes`` or ``dist_timeout_s`` below 1.
    """
    launch = cfg.get("launch") or {}
    nproc, nnodes = int(launch.get("nproc", 1)), int(launch.get("nnodes", 1))
    if nproc < 1 or nnodes < 1:
        raise ValueError(f"launch.nproc ({nproc}) and launch.nnodes ({nnodes}) must be >= 1")
    timeout = launch.get("dist_timeout_s", DIST_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise ValueError(f"launch.dist_timeout_s: expected a whole number of seconds >= 1, got {timeout!r}")
    slots = int(launch.get("gpu_slots", 0))
    env = _worker_env(nproc, bool(launch.get("gpus", False)))
    tail = f'-m {module} "$@" --dist-timeout-s {timeout}'
    if nnodes > 1:
        res = rule_resources(cfg, "train")
        cpus = res.get("cpus_per_task")
        port = int(launch.get("rdzv_port", 29500))
        srun = ["srun", f"--nodes={nnodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
        if launch.get("gpus", False):
            srun.append(f"--gres=gpu:{nproc}")  # the GPUs each node's step uses
        if cpus:
            srun.append(f"--cpus-per-task={cpus}")
        # Inside each task: SLURM sets SLURM_JOB_NODELIST; "$@" carries the arguments that follow this prefix.
        inner = (f"{env}; exec torchrun --nnodes {nnodes} --nproc-per-node {nproc} --rdzv-backend c10d "
                 f"--rdzv-id $SLURM_JOB_ID "
                 f"--rdzv-endpoint $(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1):{port} {tail}")
        refuse = (f"train: launch.nnodes is {nnodes}: expected a SLURM job (several nodes need the SLURM executor: "
                  "snakemake --profile workflows/profiles/slurm, or --executor slurm); SLURM_JOB_ID is unset here")
        outer = (f'if [ -z "${{SLURM_JOB_ID:-}}" ]; then echo {shlex.quote(refuse)} >&2; exit 2; fi; '
                 f'exec {" ".join(srun)} bash -c {shlex.quote(inner)} torchrun "$@"')
        return f"bash -c {shlex.quote(outer)} train-launcher"
    if nproc == 1:
        cmd = f"python -m {module}"
    else:
        inner = f"{env}; exec torchrun --standalone --nproc-per-node {nproc} {tail}"
        cmd = f"bash -c {shlex.quote(inner)} torchrun"
    if slots > 0:
        return f"python -m yocou.workflow.cluster gpu-run --gpus {nproc} --slots {slots} -- {cmd}"
    return cmd


# ---------------------------------------------------------------------------
# GPU slots on one machine
# ---------------------------------------------------------------------------
def default_lock_dir() -> Path:
    """``$YOCOU_GPU_LOCK_DIR``, else ``<tmp>/yocou-gpu-slots-<uid>`` (one per user and machine)."""
    env = os.environ.get("YOCOU_GPU_LOCK_DIR")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"yocou-gpu-slots-{os.getuid()}"


@dataclass
class GpuLease:
    """GPU slots held by this process until :meth:`release` or exit.

    Attributes:
        slots: slot indices taken (0-based, into ``devices``).
        devices: the device ids of all slots (``CUDA_VISIBLE_DEVICES`` entries or ``0..n_slots-1``).
        cuda_visible_devices: the value to export for the job.
    """

    slots: list[int]
    devices: list[str]
    _fds: list[int] = field(default_factory=list, repr=False)

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(self.devices[i] for i in self.slots)

    def release(self) -> None:
        """Unlock and close the slot files (idempotent)."""
        for fd in self._fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._fds = []

    def __enter__(self) -> GpuLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _devices(n_slots: int) -> list[str]:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis:
        ids = [d.strip() for d in vis.split(",") if d.strip()]
        return ids[:n_slots]
    return [str(i) for i in range(n_slots)]


def acquire_gpu_slots(n: int, n_slots: int, *, lock_dir: str | os.PathLike | None = None, timeout_s: float = 86400.0,
                      poll_s: float = 0.5) -> GpuLease:
    """Take ``n`` free slots out of ``n_slots``, all or none, waiting until they are free.

    A slot is free when no process holds ``flock`` on ``<lock_dir>/gpu<slot>.lock``. Slots are taken all
    at once or not at all, so two jobs waiting for several slots cannot deadlock each other.

    Args:
        n: slots (GPUs) the job needs.
        n_slots: slots on this machine (GPUs shared by the pipeline's jobs). With ``CUDA_VISIBLE_DEVICES``
            set, slot ``i`` is its ``i``-th entry.
        lock_dir: folder of the lock files (default :func:`default_lock_dir`), shared by all jobs.
        timeout_s: seconds to wait for free slots.
        poll_s: seconds between tries.

    Returns:
        A :class:`GpuLease` (lowest free slot numbers first).

    Raises:
        ValueError: ``n`` < 1 or more than the slots there are.
        TimeoutError: the slots were not free within ``timeout_s``.
    """
    devices = _devices(n_slots)
    if n < 1 or n > len(devices):
        raise ValueError(f"gpu slots: asked for {n} of {len(devices)} slot(s) ({n_slots} configured, "
                         f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    d = Path(lock_dir) if lock_dir is not None else default_lock_dir()
    d.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    while True:
        taken: list[int] = []
        fds: list[int] = []
        for i in range(len(devices)):
            fd = os.open(d / f"gpu{i}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            taken.append(i)
            fds.append(fd)
            if len(taken) == n:
                return GpuLease(taken, devices, fds)
        GpuLease(taken, devices, fds).release()  # not enough: give back what was taken, then wait
        if time.monotonic() >= deadline:
            raise TimeoutError(f"gpu slots: {n} of {len(devices)} not free within {timeout_s:g} s (locks in {d})")
        time.sleep(poll_s)


def _count(minimum: int) -> Any:
    """argparse type: an integer >= ``minimum`` (:func:`yocou.utils.entry.int_at_least`)."""
    from yocou.utils.entry import int_at_least

    return int_at_least(minimum)


def _gpu_run(a: argparse.Namespace) -> int:
    cmd = a.command
    env = dict(os.environ)
    if a.slots > 0 and not env.get("SLURM_JOB_ID"):
        lease = acquire_gpu_slots(a.gpus, a.slots, lock_dir=a.lock_dir, timeout_s=a.timeout_s)
        for fd in lease._fds:
            os.set_inheritable(fd, True)  # the locks live as long as the command (exec keeps the fds)
        env["CUDA_VISIBLE_DEVICES"] = lease.cuda_visible_devices
        env["YOCOU_GPU_SLOTS"] = ",".join(map(str, lease.slots))
        print(f"gpu-run: slot(s) {lease.slots} -> CUDA_VISIBLE_DEVICES={lease.cuda_visible_devices}",
              file=sys.stderr, flush=True)
    os.execvpe(cmd[0], cmd, env)
    return 0  # not reached


#: The SLURM commands the executor plugin runs: submit, read job states (accounting), cancel.
SLURM_COMMANDS = ("sbatch", "sacct", "squeue", "scancel")


def slurm_check(timeout_s: float = 30.0) -> str:
    """Preflight of the SLURM profile: the plugin's commands are on PATH and ``sacct`` reads job states.

    snakemake-executor-plugin-slurm reads every job's state with ``sacct``; without SLURM accounting (slurmdbd, or
    ``AccountingStorageType=accounting_storage/none``) it logs the failure only at debug level and the workflow
    waits forever with no message. This runs ``sacct`` once, as the plugin does, and refuses in one line.

    Returns:
        One line saying what was checked.

    Raises:
        RuntimeError: a command is missing, or ``sacct`` fails or says accounting is disabled (its message quoted).
    """
    import shutil
    import subprocess

    missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
    if missing:
        raise RuntimeError(f"SLURM: {', '.join(missing)} not on PATH (the executor plugin runs "
                           f"{', '.join(SLURM_COMMANDS)}): run on a submit host of the cluster")
    cmd = ["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobIdRaw,State",
           "--starttime", "now-1hours"]
    try:
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"SLURM: `{' '.join(cmd)}` gave no answer in {timeout_s:g} s: the accounting daemon "
                           "(slurmdbd) is not answering, and the plugin could not read job states") from None
    said = " ".join((got.stderr or got.stdout).split())[:300]
    if got.returncode != 0 or "disabled" in (got.stderr + got.stdout).lower():
        raise RuntimeError(f"SLURM: sacct cannot read job states ({said or f'exit status {got.returncode}'}): the "
                           "executor plugin reads them with sacct, so the workflow would wait forever; enable "
                           "accounting (slurmdbd, AccountingStorageType=accounting_storage/slurmdbd; docs/usage.md)")
    return f"SLURM: {', '.join(SLURM_COMMANDS)} found; sacct reads job states ({len(got.stdout.splitlines())} " \
           "allocations in the last hour)"


def config_check(cfg: Mapping[str, Any]) -> str:
    """Preflight of a resolved scale config for a cluster run: what the first job would otherwise stop on.

    The check: with ``data.corpus.sources.hf.enabled``, one of ``name`` and ``disk_path`` is set (the paper
    scale's config leaves both unset for the cluster's user to fill; the ``corpus`` job would stop at once).

    Returns:
        One line saying what was checked.

    Raises:
        ValueError: naming the field and what to set.
    """
    hf = ((cfg.get("data") or {}).get("corpus") or {}).get("sources", {}).get("hf") or {}
    if hf.get("enabled") and not (hf.get("name") or hf.get("disk_path")):
        raise ValueError("data.corpus.sources.hf.name: unset, and so is disk_path: set the pretraining corpus (a "
                         "dataset name, a builder such as json with data_files, or a save_to_disk folder; "
                         "docs/usage.md), or the corpus job stops at once")
    return f"config: scale {cfg.get('scale')}: the corpus sources are set"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m yocou.workflow.cluster gpu-run --gpus N --slots K [--lock-dir D] -- COMMAND ...``

    Runs COMMAND (replacing this process) with ``CUDA_VISIBLE_DEVICES`` set to N (>= 1) free GPU slots of K,
    held until COMMAND ends. In a SLURM job, or with K of 0, COMMAND runs unchanged.
    ``python -m yocou.workflow.cluster resources --config CFG.yaml RULE`` prints a rule's resources as JSON (RULE: a rule
    of the workflow, :data:`RULES`).
    ``python -m yocou.workflow.cluster check [--config CFG.yaml]`` is the SLURM profile's preflight (:func:`slurm_check`):
    run it first on the submit host; it fails in one line when the executor plugin could not read job states, or,
    with ``--config``, when the config would stop its first job (:func:`config_check`).
    """
    import json

    from yocou.utils.guard import reads


    ap = argparse.ArgumentParser(prog="python -m yocou.workflow.cluster", description=main.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gpu-run", help="run a command on free GPU slots")
    g.add_argument("--gpus", type=_count(1), required=True, help="GPUs the command needs (>= 1)")
    g.add_argument("--slots", type=_count(0), required=True, help="GPU slots on this machine (0: no slot logic)")
    g.add_argument("--lock-dir", default=None, help="lock-file folder shared by all jobs")
    g.add_argument("--timeout-s", type=float, default=86400.0, help="seconds to wait for free slots")
    g.add_argument("command", nargs=argparse.REMAINDER)
    r = sub.add_parser("resources", help="print one rule's cluster resources")
    r.add_argument("--config", required=True, type=reads(if_exists=True), help="workflows/config/<scale>.yaml")
    r.add_argument("rule", metavar="RULE", choices=sorted(RULES), help="a rule of the workflow (yocou.workflow.cluster.RULES)")
    c = sub.add_parser("check", help="preflight of the SLURM profile: its commands on PATH, sacct reads job states")
    c.add_argument("--timeout-s", type=float, default=30.0, help="seconds to wait for sacct")
    c.add_argument("--config", type=reads(if_exists=True), default=None,
                   help="also check this scale config (workflows/config/paper.yaml): the corpus source is set")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    if a.cmd == "check":
        try:
            if a.config:
                from yocou.workflow.wfconfig import read_scale_file, resolve_config

                print(config_check(resolve_config(read_scale_file(a.config))))
            print(slurm_check(a.timeout_s))
        except (RuntimeError, ValueError) as e:
            print(f"python -m yocou.workflow.cluster check: error: {e}", file=sys.stderr)
            return 2
        return 0
    if a.cmd == "gpu-run":
        a.command = a.command[1:] if a.command[:1] == ["--"] else list(a.command)
        if not a.command:
            g.error("give the command to run after --")
        return _gpu_run(a)
    from yocou.workflow.wfconfig import read_scale_file, resolve_config

    # validated as the pipeline validates it (the schema: types, ranges, unknown keys), so this prints what a
    # run would ask for or fails as planning would
    print(json.dumps(rule_resources(resolve_config(read_scale_file(a.config)), a.rule), indent=2))
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
