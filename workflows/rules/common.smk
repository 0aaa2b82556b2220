# Helpers shared by the rule files.

import os

from yocou import cluster as _cluster  # standard library only: parsing stays fast


def launcher(wildcards):
    """The training command prefix (yocou.cluster.train_launcher): `yocou`; torchrun on one node over
    launch.nproc processes (DDP or FSDP2); srun + torchrun over launch.nnodes SLURM nodes; behind a GPU-slot
    lock when launch.gpu_slots > 0."""
    return _cluster.train_launcher(config)


def gpu_prefix(n=1):
    """Shell prefix for a rule that uses `n` GPUs on a local multi-GPU machine (launch.gpu_slots > 0): its
    command runs with CUDA_VISIBLE_DEVICES set to `n` free slots (yocou.cluster gpu-run); else empty."""
    slots = config["launch"]["gpu_slots"]
    return f"python -m yocou.cluster gpu-run --gpus {n} --slots {slots} -- " if slots else ""


def _apply_cluster_resources():
    """config["resources"] (yocou.cluster.rule_resources) -> each rule's Snakemake resources, filled into
    the tables that --set-resources and --default-resources fill, so a SLURM profile's sbatch flags carry
    them. Runs before any rule is defined. --set-resources given by hand win over the config; the config's
    `default` wins over --default-resources (it is per scale). Plotting and tables (`local_rules`) run on the
    submitting host."""
    sec = config.get("resources")
    if not sec:
        return
    from snakemake.resources import Resource, Resources

    def as_resources(mapping):
        return Resources({k: v if isinstance(v, Resource) else Resource(k, v) for k, v in dict(mapping).items()})

    rs = workflow.resource_settings
    given = {rule: as_resources(res) for rule, res in dict(rs.overwrite_resources).items()}
    for rule in _cluster.configured_rules(config):
        res = as_resources(_cluster.rule_resources(config, rule))
        res.update(given.get(rule, Resources()))
        given[rule] = res
    rs.overwrite_resources = given
    default = Resources.default("bare") if rs.default_resources is None else Resources.from_mapping(
        rs.default_resources)
    default.update(as_resources(_cluster.default_resources(config)))
    rs.default_resources = default
    for parsed in ("_parsed_overwrite_resources", "_parsed_default_resources"):  # cached from the old tables
        vars(rs).pop(parsed, None)
    workflow.localrules(*sec.get("local_rules", []))


_apply_cluster_resources()
