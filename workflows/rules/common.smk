# Helpers shared by the rule files.

import glob
import os
import shlex

# Every rule's software (`conda:`). With --use-conda: the conda environment that environment.yml names, made once
# beside the Snakefile with `conda env create -f environment.yml`; each job runs in it. A name, not the file:
# Snakemake would copy the file to .snakemake/conda/ and create it there, where its pip lines (`-e .[dev]`,
# ./packaging/...), relative to the file's folder, no longer name the project (tests/test_lint.py checks the name).
# Without --use-conda: the file itself, which documents the software and costs nothing (a name would make Snakemake
# call `conda env export` for every job's metadata, which fails where conda is not installed).
from snakemake.settings.types import DeploymentMethod as _Deploy

CONDA_ENV_NAME = "yocou"
CONDA_ENV = (CONDA_ENV_NAME if _Deploy.CONDA in workflow.deployment_settings.deployment_method
             else os.path.join(workflow.basedir, "environment.yml"))


def job_threads(rule, kind="all"):
    """``threads:`` of ``rule``'s jobs (yocou.workflow.cluster.job_threads), read when a job is made, so commands that make
    no job (``snakemake --unlock``, ``--list-rules``) need no ``--cores``: ``all`` every core given (the profile
    and the paper-shape study time themselves and run alone), ``eval`` ``eval.threads`` (at most the cores; at 1,
    ``--cores 2`` runs two evaluations side by side, which benchmarks/eval_threads.py measured faster), ``train``
    ``launch.threads`` or every core. Under a cluster executor without ``--cores`` (Snakemake's
    ``resource_settings.cores`` is then None) "every core" is the rule's ``cpus_per_task`` of the config's
    ``resources`` section. Inside a SLURM allocation (the job's own Snakemake) its CPUs bound them
    (``SLURM_CPUS_PER_TASK``): the threads the job step asks for are those it was submitted with."""
    alloc = os.environ.get("SLURM_CPUS_PER_TASK")
    limit = int(alloc) if alloc and alloc.isdigit() else None
    return lambda wildcards: _cluster.job_threads(config, rule, workflow.resource_settings.cores, kind, limit)


# A job's settings as shell-quoted JSON text in its params: a change reruns exactly that job (Snakemake's params
# trigger), and the job reads its settings from its own command line, never from a file a later parse could rewrite.
def _shell_json(obj):
    import shlex

    return shlex.quote(json.dumps(obj, sort_keys=True, separators=(",", ":")))


def config_json(*sections):
    """``scale`` and the named top-level ``sections`` of the config, as shell-quoted JSON."""
    return _shell_json({k: config[k] for k in ("scale", *sections) if k in config})


def _run_config_doc(variant, specs=None):
    """What one run depends on: seed, model, train, its own variant entry and the one its equal_flops_to names, and
    the scale's sizes those name (a dict). ``specs``: the variant entries to read (default: the config's)."""
    specs = config["variants"] if specs is None else specs
    spec = specs[variant]
    names = [variant] + ([spec["equal_flops_to"]] if spec.get("equal_flops_to") else [])
    own = config.get("sizes") or {}
    used = {specs[n]["size"] if "size" in specs[n] else config["model"]["size"] for n in names} & set(own)
    return ({k: config[k] for k in ("scale", "seed", "model", "train")}
            | {"variants": {n: specs[n] for n in names}}
            | ({"sizes": {s: own[s] for s in sorted(used)}} if used else {}))


def run_config_json(variant):
    """_run_config_doc as shell-quoted JSON: editing another variant or any evaluation setting never retrains it."""
    return _shell_json(_run_config_doc(variant))


def ladder_config_json(variant):
    """What a ladder run depends on in the scale's config: _run_config_doc less the `train` keys the ladder sets
    itself (yocou.training.ladder.LADDER_TRAIN_KEYS: its schedule, rate, steps, seed offset, checkpoints), so that
    changing the short-budget runs' rate or schedule never retrains the ladder. The depth control's model comes from
    the study file (depth_control.model)."""
    from yocou.training.ladder import LADDER_TRAIN_KEYS

    dc = LADDER.depth_control  # the depth control's model lives in the study file, not in `variants`
    doc = _run_config_doc(variant, {**config["variants"], dc.variant: dc.model} if dc else None)
    return _shell_json(doc | {"train": {k: v for k, v in doc["train"].items() if k not in LADDER_TRAIN_KEYS}})


# Every job's Snakemake `benchmark:` file (wall and CPU seconds, peak memory), read by the rule `timing`
# (workflows/rules/timing.smk, yocou.results.timing) into results/<scale>/timing.*: <rule>.tsv for a rule without wildcards,
# <rule>/<wildcard value>.tsv for one with. Under logs/ (not committed): timing.csv carries every row of them.
BENCH = f"logs/{SCALE}/bench"


def bench(rule, wildcard=None):
    """The benchmark file of a job of ``rule`` (one wildcard, or none): where yocou.results.timing looks for it."""
    return f"{BENCH}/{rule}.tsv" if wildcard is None else f"{BENCH}/{rule}/{{{wildcard}}}.tsv"


# `snakemake --report`: each table and figure goes under the part of the paper it belongs to (category, numbered in
# the paper's order of tables and figures; the numbers are ours, not the paper's sections) and its own name
# (subcategory), with its caption workflows/report/<item>.rst (what the paper claims, our scale, the substitutes,
# where the paper's numbers stand). Caption paths are relative to this folder (workflows/rules/).
REPORT_GROUPS = {
    "table1": ("1 Method: inference complexity", "Table 1"),
    "fig2": ("2 Loss scaling and downstream tasks", "Figure 2"),
    "table2": ("2 Loss scaling and downstream tasks", "Table 2"),
    "fig3": ("2 Loss scaling and downstream tasks", "Figure 3"),
    "ladder": ("2 Loss scaling and downstream tasks", "Figure 2 from annealed models (ours: the token ladder)"),
    "bracket": ("2 Loss scaling and downstream tasks", "Learning-rate bracket of the ladder (ours)"),
    "table3": ("3 Architectures and design choices", "Table 3"),
    "table5": ("3 Architectures and design choices", "Table 5"),
    "heldout_ppl": ("3 Architectures and design choices", "Held-out perplexity (Wiki. ppl substitute)"),
    "fig4": ("4 Long context", "Figure 4"),
    "table4": ("4 Long context", "Table 4"),
    "fig5": ("5 Scaling: parameters and loops", "Figure 5"),
    "fig6": ("5 Scaling: parameters and loops", "Figure 6"),
    "fig7": ("6 Inference efficiency", "Figure 7"),
    "tables8_10": ("6 Inference efficiency", "Tables 8-10 (appendix)"),
    "paper_shape": ("6 Inference efficiency", "Figure 7 at the paper's 1.3B shape (CPU)"),
    "serving": ("6 Inference efficiency", "Decode at batch B and a fixed memory budget, 1.3B shape (modelled)"),
    "fig8": ("7 Analysis", "Figure 8"),
    "crossover": ("7 Analysis", "Crossover (ours: YOCO-U's gap at 8x the tokens)"),
    "lr_sensitivity": ("7 Analysis", "Learning-rate sensitivity (ours)"),
    "timing": ("9 Wall time", "Timing of every job"),
    "audit": ("8 Audit of the reported numbers", "Audit report"),
}


# Every table marked for the report (.md, or .csv where the table has no .md) also gets an HTML page, which the
# report shows inline (it offers .md and .csv only as downloads): REPORT_PAGES maps the page,
# <folder>/html/<stem>.html, to its table and item; the rule report_pages (report.smk) writes them all.
REPORT_PAGES = {}


def report_page(path):
    """The HTML page of the table ``path`` (``results/tiny/table2.md`` -> ``results/tiny/html/table2.html``)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, "html", os.path.splitext(name)[0] + ".html")


def is_report_page(path):
    return str(path) in REPORT_PAGES


def _caption(item):
    """The caption file of a report item (absolute: rules in workflows/rules/ and workflows/rules/compute/ mark items)."""
    return os.path.join(workflow.basedir, "workflows", "report", f"{item}.rst")


def in_report(path, item):
    """``path`` marked for `snakemake --report` under ``REPORT_GROUPS[item]``, captioned by workflows/report/<item>.rst.
    A table (.md; a .csv with no .md of the same stem) also gets its HTML page (REPORT_PAGES)."""
    category, subcategory = REPORT_GROUPS[item]
    if path.endswith((".md", ".csv")):
        page = report_page(path)
        if path.endswith(".md") or page not in REPORT_PAGES:
            REPORT_PAGES[page] = (path, item)
    return report(path, caption=_caption(item), category=category, subcategory=subcategory)


def _flat(files):
    """The paths in ``files``, nested lists flattened."""
    for f in files:
        if isinstance(f, (list, tuple)):
            yield from _flat(f)
        else:
            yield str(f)


def pages_of(files):
    """The report pages (REPORT_PAGES) of the tables among ``files`` (nested lists of paths)."""
    have = set(_flat(files))
    return [page for page, (src, _item) in REPORT_PAGES.items() if src in have]


def report_page_output(page):
    """A page of REPORT_PAGES marked for the report like its table."""
    item = REPORT_PAGES[page][1]
    category, subcategory = REPORT_GROUPS[item]
    return report(page, caption=_caption(item), category=category, subcategory=subcategory)

from yocou.workflow import cluster as _cluster  # standard library only: parsing stays fast
from yocou.results.render.labels import drawn as caption_drawn  # standard library only: what a loss figure draws


def launcher(wildcards):
    """The training command prefix (yocou.workflow.cluster.train_launcher): `yocou`; torchrun on one node over
    launch.nproc processes (DDP or FSDP2); srun + torchrun over launch.nnodes SLURM nodes; behind a GPU-slot
    lock when launch.gpu_slots > 0."""
    return _cluster.train_launcher(config)


def gpu_prefix(n=1):
    """Shell prefix for a job that uses `n` GPUs on a local multi-GPU machine (launch.gpu_slots > 0): its
    command runs with CUDA_VISIBLE_DEVICES set to `n` free slots (yocou.workflow.cluster gpu-run); else empty."""
    slots = config["launch"]["gpu_slots"]
    return f"python -m yocou.workflow.cluster gpu-run --gpus {n} --slots {slots} -- " if slots else ""


def job_device(wildcards, resources):
    """`--device` of an evaluation job (a params function): cuda when the job's resources ask for a GPU (gpu > 0 or
    a gres naming gpu: the paper config's `resources`), else cpu (yocou.workflow.cluster.job_device)."""
    return _cluster.job_device(resources)


# Compute rules that take seconds (summaries, configs, listings): local rules under a cluster executor (Snakefile).
QUICK_COMPUTE = ("committed_config", "start_runs", "run_config", "ladder_run_config", "ladder_tokens", "ladder_rates", "ladder_points",
                 "probe_summarize", "timing", "ppl_all", "reproduce_all", "eval_pack", "niah_prompts")


def quick_compute_rules():
    """The rules defined so far that :data:`QUICK_COMPUTE` names or whose name starts with ``summarize_``."""
    return [r.name for r in workflow.rules if r.name.startswith("summarize_") or r.name in QUICK_COMPUTE]


def _apply_cluster_resources():
    """config["resources"] (yocou.workflow.cluster.rule_resources) -> each rule's Snakemake resources, filled into
    the tables that --set-resources and --default-resources fill, so a SLURM profile's sbatch flags carry
    them: the public fields of Snakemake's ResourceSettings (workflow.resource_settings), set before any rule is
    defined, which is when Snakemake first reads them. --set-resources given by hand win over the config; the config's
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
    for name in _cluster.configured_rules(config):
        res = as_resources(_cluster.rule_resources(config, name))
        res.update(given.get(name, Resources()))
        given[name] = res
    rs.overwrite_resources = given
    default = Resources.default("bare") if rs.default_resources is None else Resources.from_mapping(
        rs.default_resources)
    default.update(as_resources(_cluster.default_resources(config)))
    rs.default_resources = default
    workflow.localrules(*sec.get("local_rules", []))


_apply_cluster_resources()


# The training-side summaries (workflows/scripts/summarize_training.py): their code and config bits.
TRAINING_CODE = [f"{PKG}/results/summarize/training.py", f"{PKG}/results/tidy.py", f"{PKG}/results/readers.py"]


def heldout_bins(w):
    """The held-out token streams a run scores during training (train.eval_every > 0, shared train: or the
    variant's own train: section; yocou.training.train.HeldoutEval), else none."""
    tr = {**config["train"], **(config["variants"][w.variant].get("train") or {})}
    if int(tr.get("eval_every", 0)) <= 0:
        return []
    return [f"{RUN}/tokens/heldout_book.bin", f"{RUN}/tokens/heldout_code.bin"]


def training_cfg(study):
    """The config bits a training-side summary reads: its roles (yocou.results.tidy.study_roles) and the scale."""
    sec = config.get("studies", {})
    # variants: the run names, so the summary finds each run's seed replicas <run>_seed<k> (yocou.results.summarize.training)
    return {"scale": SCALE, "core_variants": list(CORE), "studies": {study: sec[study]} if study in sec else {},
            "variants": list(config["variants"])}


def needle_template(variant):
    """With train.needle_mix on for this run: the eval/protocols.yaml niah template its needles use
    (yocou.data.needles), so that editing the template retrains exactly the runs that mix needles in; else ""."""
    own = config["variants"][variant]
    mix = {**config["train"], **(own["train"] if "train" in own else {})}.get("needle_mix")
    if not mix or not mix.get("fraction"):
        return ""
    p = _protocol("niah")
    return {k: p[k] for k in ("prefix", "needle", "needle_book", "question", "answer", "value_digits")}


from yocou.results.evaldefs import protocol as _protocol  # noqa: E402 - PyYAML only


# Seed replicas and the runs reproduce_all trains: the config expands the replicas `<run>_seed<k>`, the
# learning-rate runs and the crossover runs into config["variants"] (yocou.workflow.wfconfig.expand_runs).
from yocou.workflow.wfconfig import crossover_runs as _crossover_runs, pipeline_runs, replicas, seed_of  # noqa: E402 - light

# The crossover target's runs by role (`crossover:`): <run>_x<factor> and its replicas.
_CX = config.get("crossover") or {}
CROSSOVER_RUNS = {r: [x for x in _crossover_runs(config) if x == f"{r}_x{_CX['factor']}" or
                      x.startswith(f"{r}_x{_CX['factor']}_seed")] for r in _CX.get("runs", [])}


def crossover_files(name):
    """The crossover runs' ``name`` files; a one-line error when the scale configures no crossover."""
    if not CROSSOVER_RUNS:
        raise WorkflowError(f"crossover: workflows/config/{SCALE}.yaml has no crossover: section (runs, factor, seeds)")
    return [f"{RUN}/models/{r}/{name}" for rs in CROSSOVER_RUNS.values() for r in rs]


# The downstream studies (workflows/rules/downstream.smk): their runs and config bits.
def study_runs(name):
    """The runs a study compares, in the config's order (`studies.<name>`: a list, or a mapping of roles)."""
    s = config.get("studies", {}).get(name, CORE)
    return list(s.values()) if isinstance(s, dict) else list(s)


def _summarize_cfg(study):
    """The config bits a downstream summary reads (yocou.results.summarize.downstream): the study's roles (the core
    variants where `studies` does not set it), core_variants, seed and the task pack's source."""
    roles = config.get("studies", {}).get(study, list(CORE)) if study != "fig3" else list(CORE)
    source = config["eval"]["downstream"]["source"]
    return {"scale": SCALE, "seed": config["seed"], "core_variants": list(CORE),
            "studies": {study: roles}, "eval": {"downstream": {"source": source}}}


def _runs_tidy(wildcards):
    """{RES}/tidy/runs.csv (the run budgets of the tables' notes): made by rule summarize_runs while computing, the
    committed file in render mode; none where neither is there (the notes then go without budgets)."""
    f = f"{RES}/tidy/runs.csv"
    return [f] if rules.has("summarize_runs") or os.path.exists(f) else []


# Committed results as a source (yocou.workflow.committed; `mode:` of the config). The pipeline has two halves: compute rules
# (workflows/rules/compute/*.smk) read runs/<scale>/ (or logs/<scale>/) and write results/<scale>/; render rules
# (workflows/rules/*.smk) read only results/<scale>/ and write tables, figures and the audit. In render mode the
# compute rules are not defined at all (the Snakefile includes them only when COMPUTE), so the committed files under
# results/<scale>/ are plain sources: any target, with -f, -R, --forcerun or --forceall, re-renders in seconds and
# never plans a training. Compute mode: `--config mode=compute`, or a scale without committed results, or a
# checkout with runs/<scale>/, or a config that differs from the committed one (yocou.workflow.committed.committed_state).
from yocou.workflow.committed import committed_state as _committed_state  # noqa: E402

try:
    COMMITTED = _committed_state(config, scale=SCALE, results_dir=RES, runs_dir=RUN)
except ValueError as _e:
    config_error(_e)
if COMMITTED.message:
    logger.warning(f"Warning: {COMMITTED.message}")

#: Whether the compute rules are defined (the mode is decided from the config and the files, never from the targets).
COMPUTE = not COMMITTED.use
MODE_LINE = (f"compute mode: every rule is defined; stale results under {RES}/ are recomputed from {RUN}/"
             if COMPUTE else
             f"render mode: the committed {RES}/ are the sources, no rule trains or evaluates "
             f"(compute with --config mode=compute)")



def uncommitted(paths, target):
    """In render mode, the line a target prints when ``paths`` (a study's committed summaries) are not committed at
    this scale, naming the first missing file and the flag that computes it; None when computing or all exist. The
    target is then defined as a rule that prints it and fails (workflows/rules/ladder.smk, probe.smk)."""
    missing = [] if COMPUTE else [p for p in paths if not os.path.exists(p)]
    if not missing:
        return None
    return (f"{target}: {missing[0]} is not committed at scale {SCALE}"
            + (f" (nor {len(missing) - 1} more)" if len(missing) > 1 else "")
            + f"; compute it with `snakemake --cores all {target} --config mode=compute`")


def targets_text():
    """What the default target prints: the scale, the mode and the targets there are (it runs nothing else)."""
    tables = "table1 table2 table3 table4 table5 table10 tables8_9 heldout_ppl lr_sensitivity"
    figures = "fig2 fig3 fig4 fig5 fig6 fig7 fig8 crossover"
    return "\n".join([
        f"yocou, scale {SCALE}, {MODE_LINE}.",
        "No target was given, so nothing ran. Name one, for example `snakemake --cores 2 fig2`:",
        f"  tables:  {tables}",
        f"  figures: {figures}",
        "  all of them and the audit: render_all (from the committed results); audit; efficiency",
        "  studies of their own (reproduce_all runs ladder and bracket too): ladder, bracket, probe, efficiency_paper_shape,"
        " ladder_checks, depth_control",
        "  everything, trained and evaluated: reproduce_all --config mode=compute (hours at tiny)",
        "  the report: snakemake --report report.html"])


# runs/<scale>/started.json (made by start_runs in compute/committed.smk): the resolved config computing runs with. An
# input of the audit only, which reads its schedules from it while computing (results/<scale>/config.json, the
# committed results' config, is written after the audit).
STARTED = f"{RUN}/started.json"


# The paper-shape efficiency study (workflows/rules/paper_shape.smk): scale-independent, under results/paper_shape/.
PS_RES = "results/paper_shape"
PS_FIG = "figures/paper_shape"
PS_CONFIGS = ["workflows/config/paper.yaml", "workflows/studies/paper_shape.yaml"]
PS_BATCHED_CONFIG = "workflows/studies/paper_shape_batched.yaml"


def paper_shape_inputs(wildcards):
    """The study's two configs, or nothing once its measurement exists (a fresh clone's checkout order must not
    make Snakemake plan 50 minutes of timing): --forcerun paper_shape_measure measures again."""
    return {} if os.path.exists(f"{PS_RES}/raw.json") else {"configs": PS_CONFIGS}


def paper_shape_batched_inputs(wildcards):
    """The batched study's two configs, or nothing once its measurement exists (as paper_shape_inputs):
    --forcerun paper_shape_batched_measure measures again."""
    return {} if os.path.exists(f"{PS_RES}/batched/raw.json") else {"configs": [PS_CONFIGS[0], PS_BATCHED_CONFIG]}


GPU_SERVING = sorted(glob.glob("results/gpu/*/serving.json"))  # the prepared GPU check's results, where a GPU ran it


def measured_elsewhere(tidy_files):
    """The tidy tables ``results/<name>/tidy/<study>.csv`` of studies that do not depend on the scale whose
    measurement is present (committed): ``results/<name>/raw.json``, or for ``results/gpu`` a GPU check's
    ``serving.json``; summarizing it is cheap. Without it the audit leaves their verdicts "not run" rather than plan
    the measurement (the paper-shape study's is 50 minutes; the GPU check's needs a GPU)."""
    def measured(f):
        folder = os.path.dirname(os.path.dirname(f))
        return bool(GPU_SERVING) if folder == "results/gpu" else os.path.exists(os.path.join(folder, "raw.json"))
    return [f for f in tidy_files if measured(f)]


# The token ladder (workflows/rules/ladder.smk): its runs by name (yocou.training.ladder.plan), from workflows/studies/ladder.yaml.
from yocou.training.ladder import LADDER_SPLITS, STUDY_FILE as LADDER_STUDY, load_study as _load_ladder, plan as _ladder_plan  # pydantic + PyYAML only

try:  # one line naming the file and field, as for the scale's config (Snakefile)
    LADDER = _load_ladder(SCALE, scales=configured_scales(), variants=config["variants"])
except (ValueError, FileNotFoundError) as _e:
    config_error(_e)
LADDER_RUNS = _ladder_plan(LADDER) if LADDER else {}
LRUN = f"{RUN}/ladder"
LRES = f"{RES}/ladder"
LTOK = f"{LRUN}/tokens"  # the ladder's token streams (rule ladder_tokens)
_LADDER_RE = "|".join(sorted(LADDER_RUNS, key=len, reverse=True)) or "no_ladder_run"
_STABLE_RE = "|".join(n for n, p in LADDER_RUNS.items() if p.save_state) or "no_ladder_run"
_OTHER_RE = "|".join(n for n, p in LADDER_RUNS.items() if not p.save_state) or "no_ladder_run"


def ladder_names(kind):
    """The study's runs of one kind (bracket, stable, anneal)."""
    return [n for n, p in LADDER_RUNS.items() if p.kind == kind]


def ladder_parent_state(w):
    """The state.pt a run starts from (its stable segment or the previous one), or none."""
    parent = LADDER_RUNS[w.lrun].init_from
    return [f"{LRUN}/{parent}/state.pt"] if parent else []


def ladder_run_plan(w):
    """What a ladder run's config takes from the study file (its place in the plan and the schedule's settings), as
    a param of the rule ladder_run_config (so editing them rewrites the configs they change, and nothing else)."""
    p = LADDER_RUNS[w.lrun]
    return json.dumps({"run": [p.kind, p.variant, p.seed_index, p.steps, p.cooldown, p.rate, p.init_from],
                       "schedule": [LADDER.warmup_steps, LADDER.min_lr_ratio, LADDER.ckpt_every]})


def ladder_bracket_input(w):
    """The bracket's best rates a ladder run's learning rate comes from (none for the bracket's own runs):
    runs/<scale>/ladder/rates.json (the rule ladder_rates), made from the bracket runs' losses alone, so that
    re-summarizing the bracket (bracket.json: its code changed, or -R bracket_summary) retrains nothing. The depth
    control's runs read its own bracket's, runs/<scale>/ladder/depth_rates.json (rule depth_rates)."""
    kind = LADDER_RUNS[w.lrun].kind
    if kind in ("bracket", "depth_bracket"):
        return []
    return [f"{LRUN}/depth_rates.json"] if kind in ("depth_stable", "depth") else [f"{LRUN}/rates.json"]


# The mechanism probe (workflows/rules/probe.smk): its models by name -> `python -m yocou.evaluation.probe train` arguments.
PROBE_MODELS = {"transformer": "--variant transformer", "yoco": "--variant yoco",
                "yocou_t1": "--variant yocou --n-loops 1", "yocou_t2": "--variant yocou --n-loops 2",
                "yocou_t3": "--variant yocou --n-loops 3", "rins": "--variant rins --n-loops 3",
                "yoco_eqflops": "--variant yoco --equal-flops-to yocou:3"}
PROBE_SEEDS = 3
PROBE_SCALE = "smoke" if SCALE == "smoke" else "tiny"  # the probe's own settings (yocou.evaluation.probe.run.SCALES)
