# Helpers shared by the rule files.

import os

# `snakemake --report`: each table and figure goes under the part of the paper it belongs to (category, numbered in
# the paper's order of tables and figures; the numbers are ours, not the paper's sections) and its own name
# (subcategory), with its caption workflows/report/<item>.rst (what the paper claims, our scale, the substitutes,
# where the paper's numbers stand). Caption paths are relative to this folder (workflows/rules/).
REPORT_GROUPS = {
    "table1": ("1 Method: inference complexity", "Table 1"),
    "fig2": ("2 Loss scaling and downstream tasks", "Figure 2"),
    "table2": ("2 Loss scaling and downstream tasks", "Table 2"),
    "fig3": ("2 Loss scaling and downstream tasks", "Figure 3"),
    "table3": ("3 Architectures and design choices", "Table 3"),
    "table5": ("3 Architectures and design choices", "Table 5"),
    "heldout_ppl": ("3 Architectures and design choices", "Held-out perplexity (Wiki. ppl substitute)"),
    "fig4": ("4 Long context", "Figure 4"),
    "table4": ("4 Long context", "Table 4"),
    "fig5": ("5 Scaling: parameters and loops", "Figure 5"),
    "fig6": ("5 Scaling: parameters and loops", "Figure 6"),
    "fig7": ("6 Inference efficiency", "Figure 7"),
    "tables8_10": ("6 Inference efficiency", "Tables 8-10 (appendix)"),
    "fig8": ("7 Analysis", "Figure 8"),
    "audit": ("8 Audit of the reported numbers", "Audit report"),
}


def in_report(path, item):
    """``path`` marked for `snakemake --report` under ``REPORT_GROUPS[item]``, captioned by workflows/report/<item>.rst."""
    category, subcategory = REPORT_GROUPS[item]
    return report(path, caption=f"../report/{item}.rst", category=category, subcategory=subcategory)

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


# The training-side summaries (workflows/scripts/summarize_training.py): their code and config bits.
TRAINING_CODE = [f"{PKG}/summarize/training.py", f"{PKG}/tidy.py", f"{PKG}/readers.py"]


def training_cfg(study):
    """The config bits a training-side summary reads: its roles (yocou.tidy.study_roles) and the scale."""
    sec = config.get("studies", {})
    return {"scale": SCALE, "core_variants": list(CORE), "studies": {study: sec[study]} if study in sec else {}}
