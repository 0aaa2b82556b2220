# yocou: reproduce "Universal YOCO for Efficient Depth Scaling".
#   snakemake --cores all reproduce_all                    # tiny scale (default)
#   snakemake --cores all reproduce_all --config scale=smoke
#   snakemake --cores all table10                          # one table or figure by name
# Heavy imports stay out of this file so that `snakemake -n` is fast.
import importlib.util
import json
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("9.0")

from yocou.scales import check_scale_name, configured_scales  # standard library only

# A scale is any workflows/config/<scale>.yaml with a safe name (yocou.scales.SCALE_PATTERN): add your own.
SCALE = check_scale_name(config.get("scale", "tiny"), "--config scale")
_scales = configured_scales()
if SCALE not in _scales:
    raise ValueError(f"--config scale={SCALE}: no workflows/config/{SCALE}.yaml; choose one of {_scales}")


configfile: f"workflows/config/{SCALE}.yaml"


# Variant keys first (yocou.config is light): a typo such as `n_loop:` names variants.<name>.<key> and the keys
# its preset takes, where the schema's message would not list them.
from yocou.config import check_variants

check_variants(config)
validate(config, "workflows/schemas/config.schema.yaml")

RUN = f"runs/{SCALE}"
RES = f"results/{SCALE}"
FIG = f"figures/{SCALE}"
CORE = config["core_variants"]
# The installed package's folder: render rules list their module as an input, so editing it reruns them.
PKG = importlib.util.find_spec("yocou").submodule_search_locations[0]
for _v in CORE:
    if _v not in config["variants"]:
        raise ValueError(f"core_variants names {_v!r}, which is not in 'variants' of workflows/config/{SCALE}.yaml")
_V = config["variants"]
for _v, _spec in _V.items():
    _to = _spec.get("equal_flops_to")
    if _to is not None and (_to == _v or _to not in _V):
        raise ValueError(f"variants.{_v}.equal_flops_to: {_to!r} must name another variant of "
                         f"workflows/config/{SCALE}.yaml ({sorted(set(_V) - {_v})})")
_RUNS_OK = set(_V) | {f"{v}_eqflops" for v, s in _V.items() if s.get("equal_flops_to")}
for _study, _sec in config.get("studies", {}).items():
    _names = _sec if isinstance(_sec, list) else [x for y in _sec.values() for x in (y if isinstance(y, list) else [y])]
    for _r in _names:
        if _r not in _RUNS_OK:
            raise ValueError(f"studies.{_study} names {_r!r}, which is not a run of workflows/config/{SCALE}.yaml: "
                             f"expected a key of 'variants' or <variant>_eqflops of a variant with equal_flops_to "
                             f"({sorted(_RUNS_OK)})")

# The resolved config, written only when it changes, so that its rules rerun then and only then.
_cfg_path = Path(RUN) / "config.json"
_cfg_text = json.dumps(config, indent=2, sort_keys=True)
if not _cfg_path.exists() or _cfg_path.read_text() != _cfg_text:
    _cfg_path.parent.mkdir(parents=True, exist_ok=True)
    _tmp = _cfg_path.with_suffix(".tmp")
    _tmp.write_text(_cfg_text)
    _tmp.replace(_cfg_path)
CONFIG_JSON = str(_cfg_path)


include: "workflows/rules/common.smk"
include: "workflows/rules/data.smk"
include: "workflows/rules/train.smk"
include: "workflows/rules/eval.smk"
include: "workflows/rules/render.smk"
include: "workflows/rules/longctx.smk"
include: "workflows/rules/downstream.smk"
include: "workflows/rules/efficiency.smk"
include: "workflows/rules/studies.smk"
include: "workflows/rules/fig8.smk"
include: "workflows/rules/audit.smk"


rule reproduce_all:
    default_target: True
    input:
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
        rules.efficiency.input,
        rules.audit.output,
