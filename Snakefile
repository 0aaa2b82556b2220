# yocou: reproduce "Universal YOCO for Efficient Depth Scaling".
#   snakemake --cores all reproduce_all --config mode=compute   # tiny scale (default): train, evaluate, render
#   snakemake --cores all reproduce_all --config scale=smoke
#   snakemake --cores all table10                          # one table or figure by name
# Heavy imports stay out of this file so that `snakemake -n` is fast.
import importlib.util
import json
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

# `snakemake --report report.html` (or .zip) after a run, with the run's --config: this page, then every table and
# figure under the part of the paper it belongs to (workflows/rules/common.smk, REPORT_GROUPS), each captioned.
report: "workflows/report/workflow.rst"

from yocou.workflow.scales import check_scale_name, config_error, configured_scales  # standard library only


# A scale is any workflows/config/<scale>.yaml with a safe name (yocou.workflow.scales.SCALE_PATTERN): add your own.
try:
    SCALE = check_scale_name(config.get("scale", "tiny"), "--config scale")
    _scales = configured_scales()
    if SCALE not in _scales:
        raise ValueError(f"--config scale={SCALE}: no workflows/config/{SCALE}.yaml; choose one of {_scales}")
except ValueError as _e:
    config_error(_e)


from yocou.workflow.wfconfig import read_scale_file, resolve_config  # jsonschema + PyYAML only

_SCALE_FILE = f"workflows/config/{SCALE}.yaml"
try:
    read_scale_file(_SCALE_FILE)  # a file that is not YAML fails naming it, before Snakemake's own reader
    for _cf in workflow.config_settings.configfiles:  # --configfile: Snakemake keeps the last of a duplicated key
        read_scale_file(_cf)
except ValueError as _e:
    config_error(_e)


configfile: _SCALE_FILE


# Variant keys first (yocou.workflow.variants is light): a typo such as `n_loop:` names variants.<name>.<key> and the keys
# its preset takes, where the schema's message would not list them. Then the schema, in one line naming the key
# (yocou.workflow.wfconfig): strings that --config leaves in nested values are read as the numbers they are, every
# default of the schema is filled here (the one place defaults live, also inside cluster jobs), and every
# model size must be known. Parsing writes nothing: jobs get their settings through params.
from yocou.workflow.variants import check_variants

try:
    check_variants(config)
    resolve_config(config, source=f"{_SCALE_FILE} (with --config/--configfile overrides)")
except ValueError as _e:
    config_error(_e)

from yocou.workflow.wfconfig import bf16_warning  # reads /proc/cpuinfo only

if _bf16 := bf16_warning(config):
    logger.warning(f"Warning: {_bf16}")

RUN = f"runs/{SCALE}"
RES = f"results/{SCALE}"
FIG = f"figures/{SCALE}"
CORE = config["core_variants"]
# The installed package's folder: render rules list their module as an input, so editing it reruns them.
PKG = importlib.util.find_spec("yocou").submodule_search_locations[0]
for _v in CORE:
    if _v not in config["variants"]:
        config_error(f"core_variants names {_v!r}, which is not in 'variants' of workflows/config/{SCALE}.yaml")
_V = config["variants"]
for _v, _spec in _V.items():
    _to = _spec.get("equal_flops_to")
    if _to is not None and (_to == _v or _to not in _V):
        config_error(f"variants.{_v}.equal_flops_to: {_to!r} must name another variant of "
                     f"workflows/config/{SCALE}.yaml ({sorted(set(_V) - {_v})})")
_RUNS_OK = set(_V) | {f"{v}_eqflops" for v, s in _V.items() if s.get("equal_flops_to")}
for _study, _sec in config.get("studies", {}).items():
    _names = _sec if isinstance(_sec, list) else [x for y in _sec.values() for x in (y if isinstance(y, list) else [y])]
    for _r in _names:
        if _r not in _RUNS_OK:
            config_error(f"studies.{_study} names {_r!r}, which is not a run of workflows/config/{SCALE}.yaml: "
                         f"expected a key of 'variants' or <variant>_eqflops of a variant with equal_flops_to "
                         f"({sorted(_RUNS_OK)})")


include: "workflows/rules/common.smk"


logger.info(f"yocou: scale {SCALE}, {MODE_LINE}")


# The default target when computing: a list of the targets and the mode, nothing else (a command whose target an
# option swallowed, such as `--forcerun table1 table1`, lands here instead of hours of training). In render mode
# the default target is render_all: seconds, from the committed results.
rule targets:
    default_target: COMPUTE
    localrule: True
    log:
        f"logs/{SCALE}/targets.log",
    params:
        text=lambda w: targets_text(),
    conda: CONDA_ENV
    shell:
        "echo {params.text:q} | tee {log}"


# Render rules: read results/<scale>/, write tables, figures and the audit.
include: "workflows/rules/render.smk"
include: "workflows/rules/longctx.smk"
include: "workflows/rules/downstream.smk"
include: "workflows/rules/efficiency.smk"
include: "workflows/rules/paper_shape.smk"
include: "workflows/rules/studies.smk"
include: "workflows/rules/ladder.smk"
include: "workflows/rules/probe.smk"
include: "workflows/rules/fig8.smk"
include: "workflows/rules/audit.smk"

# Under a cluster executor the render rules run on the submitting host (seconds each: an sbatch job apiece would
# cost more in submission and status polling than in work): every rule defined so far is one.
workflow.localrules(*[r.name for r in workflow.rules])  # the `localrules:` directive takes names only


# Every table, figure and the audit, rendered from results/<scale>/ (target render_all; reproduce_all adds the compute
# jobs that make results/<scale>/, workflows/rules/compute/reproduce_all.smk).
RENDER_ALL = [
    rules.fig2.output,
    rules.heldout_ppl.output,
    rules.table10.output,
    rules.table4.output,
    rules.fig4.output,
    rules.table2.output,
    rules.table3.output,
    rules.table5.output,
    rules.fig3.output,
    rules.fig5.output,
    rules.fig6.output,
    rules.fig8.output,
    # the learning-rate study where the scale configures one (lr_sensitivity:; not at paper)
    rules.lr_sensitivity.output if config.get("lr_sensitivity") else [],
    rules.efficiency.input,
    # the annealed token ladder and its bracket where the scale has one (workflows/studies/ladder.yaml): computed, or
    # rendered from their committed summaries
    rules.bracket_summary.output if LADDER and (COMPUTE or os.path.exists(f"{LRES}/bracket.json")) else [],
    rules.ladder_fits.output if LADDER and (COMPUTE or os.path.exists(f"{LRES}/points.csv")) else [],
    rules.audit.output,
]

# Compute rules: read runs/<scale>/, write results/<scale>/. Defined only when computing (common.smk, COMPUTE).
if COMPUTE:

    include: "workflows/rules/compute/data.smk"
    include: "workflows/rules/compute/train.smk"
    include: "workflows/rules/compute/eval.smk"
    include: "workflows/rules/compute/render.smk"
    include: "workflows/rules/compute/longctx.smk"
    include: "workflows/rules/compute/downstream.smk"
    include: "workflows/rules/compute/efficiency.smk"
    include: "workflows/rules/compute/paper_shape.smk"
    include: "workflows/rules/compute/studies.smk"
    include: "workflows/rules/compute/ladder.smk"
    include: "workflows/rules/compute/probe.smk"
    include: "workflows/rules/compute/fig8.smk"
    include: "workflows/rules/compute/timing.smk"
    include: "workflows/rules/compute/committed.smk"
    include: "workflows/rules/compute/reproduce_all.smk"

    # the compute rules that take seconds (summaries, configs, listings) run on the submitting host too
    workflow.localrules(*quick_compute_rules())



# results/<scale>/timing.md is made by the compute rule timing; in render mode it is a committed source whose page
# the report still shows.
if not COMPUTE and os.path.exists(f"{RES}/timing.md"):
    in_report(f"{RES}/timing.md", "timing")
    RENDER_ALL.append(f"{RES}/timing.md")


rule render_all:
    default_target: not COMPUTE
    input:
        RENDER_ALL,
        pages_of(RENDER_ALL),  # the report's pages of its tables (report.smk)


if not COMPUTE:

    rule reproduce_all:
        # In render mode nothing can train: say how to compute instead of re-rendering and calling that a run.
        localrule: True
        log:
            f"logs/{SCALE}/reproduce_all.log",
        conda: CONDA_ENV
        params:
            text=f"reproduce_all trains and evaluates every model: in render mode (the committed {RES}/ are the "
                 f"sources) it cannot; run `snakemake --cores all reproduce_all --config mode=compute`",
        shell:
            "echo {params.text:q} | tee {log} >&2; exit 1"


include: "workflows/rules/report.smk"
workflow.localrules(*[r.name for r in workflow.rules if r.name.startswith("report_pages")])  # HTML pages: seconds
