"""The pipeline config as the Snakefile sees it: read, coerced, defaulted and validated in one place.

The Snakefile calls :func:`read_scale_file` before its ``configfile:`` directive (so a scale file that is not
YAML fails naming the file) and :func:`resolve_config` right after it. :func:`resolve_config`

1. turns strings that Snakemake's ``--config`` parser leaves in nested values (``--config 'train={steps: 5}'``
   arrives as ``{"steps": "5"}``) into the integer, number, boolean or null the schema asks for, by YAML rules;
2. fills every ``default:`` of ``workflows/schemas/config.schema.yaml`` that the config leaves out — the one place
   defaults live. Snakemake's own ``validate()`` fills them too, but some 9.x releases skip it inside remote
   (cluster) jobs, so the Snakefile does not rely on it; the filled config is what rules pass to their jobs
   (params), so each job's provenance records the values used;
3. validates against the schema and raises one line naming the key (no schema dump); a key that ``eval/`` defines
   (a column map, a task template's field, a protocol setting: :func:`yocou.results.evaldefs.defined_in_eval`) fails first,
   saying which file of ``eval/`` it lives in;
4. checks what the schema cannot: every ``model.size`` / ``variants.<v>.size`` is a known size, and
   ``data.corpus`` passes :func:`yocou.data.corpus.resolve_corpus_config` (e.g. a source configured without
   ``enabled``).

Light: jsonschema and PyYAML only (the Snakefile imports it, ``snakemake -n`` stays fast).
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

__all__ = ["SCHEMA", "read_scale_file", "resolve_config", "ConfigError", "required_and_defaulted", "expand_runs",
           "replicas", "seed_of", "pipeline_runs", "crossover_runs", "lr_runs", "niah_runs", "SEED_STUDIES"]

#: The schema, relative to the workflow's root.
SCHEMA = Path("workflows/schemas/config.schema.yaml")


class ConfigError(ValueError):
    """A pipeline config that does not fit the schema; the message is one line naming the key."""


def read_scale_file(path: str | os.PathLike) -> dict:
    """The mapping in a scale file ``workflows/config/<scale>.yaml``.

    Raises:
        ConfigError: the file is missing, is not YAML, names a key twice in a mapping (the key and both lines), or
            its top level is not a mapping, naming the file.
    """
    import yaml

    from yocou.utils.yamlio import DuplicateKeyError, loads_yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such scale file")
    try:
        data = loads_yaml(p.read_text(encoding="utf-8"), str(p))
    except DuplicateKeyError as e:
        raise ConfigError(str(e)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{p}: not valid YAML: {where}{problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of keys to values at the top level, got {type(data).__name__}")
    return data


def load_schema(root: str | os.PathLike = ".") -> dict:
    """The pipeline schema (``workflows/schemas/config.schema.yaml`` under ``root``) as a mapping.

    Raises:
        FileNotFoundError: ``root`` holds no schema (not the workflow's root folder).
    """
    import yaml

    return yaml.safe_load((Path(root) / SCHEMA).read_text(encoding="utf-8"))


def _resolve_ref(node: Mapping, schema: Mapping) -> Mapping:
    """``node`` with a local ``$ref`` merged in (the node's own keys win)."""
    ref = node.get("$ref")
    if not ref:
        return node
    target: Any = schema
    for part in ref.lstrip("#/").split("/"):
        target = target[part]
    return {**_resolve_ref(target, schema), **{k: v for k, v in node.items() if k != "$ref"}}


def _types(node: Mapping) -> set[str]:
    t = node.get("type", [])
    return {t} if isinstance(t, str) else set(t)


def _coerce_scalar(value: str, node: Mapping) -> Any:
    """``value`` read by YAML rules when the schema wants a non-string scalar of that type; else unchanged."""
    want = _types(node)
    if not want or "string" in want or not want & {"integer", "number", "boolean", "null"}:
        return value
    import yaml

    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    if isinstance(parsed, str) and want & {"integer", "number"}:  # PyYAML reads 2e-3 (no dot) as a string
        try:
            parsed = int(value)
        except ValueError:
            try:
                parsed = float(value)
            except ValueError:
                return value
    ok = (("integer" in want and isinstance(parsed, int) and not isinstance(parsed, bool))
          or ("number" in want and isinstance(parsed, (int, float)) and not isinstance(parsed, bool))
          or ("boolean" in want and isinstance(parsed, bool))
          or ("null" in want and parsed is None))
    return parsed if ok else value


def _child(node: Mapping, key: str, schema: Mapping) -> Mapping | None:
    """The schema of ``key`` inside object schema ``node`` (properties, patternProperties, additionalProperties)."""
    import re

    props = node.get("properties", {})
    if key in props:
        return _resolve_ref(props[key], schema)
    for pat, sub in node.get("patternProperties", {}).items():
        if re.search(pat, key):
            return _resolve_ref(sub, schema)
    extra = node.get("additionalProperties")
    return _resolve_ref(extra, schema) if isinstance(extra, Mapping) else None


def _walk(value: Any, node: Mapping, schema: Mapping) -> Any:
    """Coerce strings and fill defaults below ``value`` (in place for mappings); returns the new value."""
    node = _resolve_ref(node, schema)
    if isinstance(value, str):
        return _coerce_scalar(value, node)
    if isinstance(value, list):
        items = node.get("items")
        if isinstance(items, Mapping):
            return [_walk(v, items, schema) for v in value]
        return value
    if isinstance(value, dict):
        for key in list(value):
            sub = _child(node, key, schema)
            if sub is not None:
                value[key] = _walk(value[key], sub, schema)
        for key, sub in node.get("properties", {}).items():
            sub = _resolve_ref(sub, schema)
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
                value[key] = _walk(value[key], sub, schema)
        return value
    return value


def _dotted(path: Iterator[Any]) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _one_line(err: Any) -> str:
    """A jsonschema error as one line naming the key and, for enums, the allowed values."""
    where = _dotted(err.absolute_path)
    v = err.validator
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        keys = ", ".join(f"{where}.{k}" if where != "(top level)" else str(k) for k in extra)
        return f"{keys}: unknown key{'s' if len(extra) > 1 else ''}; allowed keys: {allowed}"
    if v == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        key = f"{where}.{missing}" if where != "(top level)" else missing
        return f"{key}: missing (required by {SCHEMA})"
    if v == "enum":
        return f"{where}: {err.instance!r} is not one of {err.validator_value}"
    if v == "type":
        got = err.instance
        if isinstance(got, str):  # --config passes nested values as text: name what the text reads as
            import yaml

            try:
                got = yaml.safe_load(got) if got.strip() else got
            except yaml.YAMLError:
                pass
            got = err.instance if isinstance(got, (str, dict, list)) or got is None else got
        return f"{where}: expected {err.validator_value}, got {got!r} ({type(got).__name__})"
    return f"{where}: {err.message}"


def resolve_config(config: dict, *, source: str = "the config", root: str | os.PathLike = ".") -> dict:
    """Coerce, default and validate a pipeline config in place (see the module docstring); returns it.

    Args:
        config: Snakemake's ``config`` (the scale file with ``--config`` / ``--configfile`` merged in).
        source: what to name in errors (the scale file and its overrides).

    Raises:
        ConfigError: one line, ``<source>: <dotted.key>: <what was expected>``.
    """
    import jsonschema

    from yocou.results.evaldefs import redefined_in_scale_config  # PyYAML only

    for dotted, where in redefined_in_scale_config(config):
        raise ConfigError(f"{source}: {dotted}: lives in {where}, shared by every scale; a scale config may not "
                          f"redefine it (remove it)")
    schema = load_schema(root)
    _walk(config, schema, schema)
    _check_finite(config, source)
    best = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if best is not None:
        raise ConfigError(f"{source}: {_one_line(best)}")
    _check_sizes(config, source)
    _check_warmup(config, source)
    expand_runs(config, source)
    from yocou.data.corpus import resolve_corpus_config  # light: no torch

    try:
        resolve_corpus_config(config["data"]["corpus"])
    except ValueError as e:
        raise ConfigError(f"{source}: data.corpus: {e}") from None
    return config


def _check_finite(value: Any, source: str, where: str = "") -> None:
    """NaN and infinity pass a JSON schema's ``minimum``/``maximum``; no config value may be one."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{source}: {where or 'the config'}: {value!r} is not a finite number")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_finite(v, source, f"{where}.{k}" if where else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite(v, source, f"{where}[{i}]")


def _check_warmup(config: Mapping, source: str) -> None:
    """train.warmup_steps (and a variant's own) must not exceed its steps: the run would never reach its rate."""
    base = config.get("train") or {}
    for where, tr in [("train", base)] + [(f"variants.{n}.train", {**base, **(v.get("train") or {})})
                                          for n, v in config["variants"].items()]:
        w, n = tr.get("warmup_steps"), tr.get("steps")
        if isinstance(w, int) and isinstance(n, int) and w > n:
            raise ConfigError(f"{source}: {where}.warmup_steps: {w} exceeds its steps ({n}); expected at most steps")


def _check_sizes(config: Mapping, source: str) -> None:
    from yocou.model.config import SIZES

    own = config.get("sizes") or {}
    if clash := sorted(set(own) & set(SIZES)):
        raise ConfigError(f"{source}: sizes.{clash[0]}: a built-in size of yocou.model.config.SIZES has that name; "
                          f"give the scale's size another name")
    known = sorted(set(SIZES) | set(own))

    def check(size: Any, where: str) -> None:
        if size not in known:
            raise ConfigError(f"{source}: {where}: unknown size {size!r}; expected a key of the config's sizes: "
                              f"or of yocou.model.config.SIZES ({known})")

    check(config["model"]["size"], "model.size")
    for name, spec in config["variants"].items():
        if "size" in spec:
            check(spec["size"], f"variants.{name}.size")


#: Studies whose runs ``seeds:`` may replicate: ``core`` is ``core_variants``, the others ``studies.<name>``.
SEED_STUDIES = ("core", "table2", "table3", "table5", "fig5", "fig6", "lr", "lr_rates")


def _study_runs(config: Mapping, study: str) -> list[str]:
    if study == "core":
        return list(config["core_variants"])
    if study == "lr":
        return list((config.get("lr_sensitivity") or {}).get("runs", []))
    sec = (config.get("studies") or {}).get(study) or []
    vals = sec.values() if isinstance(sec, Mapping) else sec
    return [r for v in vals for r in ([v] if isinstance(v, str) else v)]


def _factor_tag(f: float) -> str:
    return f"{f:g}".replace(".", "p").replace("-", "m")


def _derived(base: Mapping, train: Mapping) -> dict:
    spec = copy.deepcopy(dict(base))
    spec.pop("equal_flops_to", None)  # the equal-FLOPs snapshot (Table 2) is taken of the base run only
    spec["train"] = {**spec.get("train", {}), **train}
    return spec


def _niah_train(config: Mapping, spec: Mapping, nt: Mapping) -> dict:
    """The ``train`` overrides of a Table 4 retrieval run: ``factor`` × the steps, warm-up and held-out
    checkpoint interval of ``spec`` (else ``config["train"]``), and the needle mix at ``needle_fraction``."""
    tr = {**config["train"], **(spec.get("train") or {})}
    f = int(nt["factor"])
    out = {"steps": int(tr["steps"]) * f,
           "needle_mix": {**(tr.get("needle_mix") or {}), "fraction": float(nt["needle_fraction"])}}
    for k in ("warmup_steps", "eval_every"):
        if k in tr:
            out[k] = int(tr[k]) * f
    return out


def expand_runs(config: dict, source: str = "the config") -> dict:
    """Add the runs that ``seeds:``, ``lr_sensitivity:`` and ``crossover:`` derive from the variants to
    ``config["variants"]`` (in place; idempotent) and return the config.

    * ``lr_sensitivity: {runs, factors}``: ``<run>_lr<f>x`` (``0.5`` → ``lr0p5x``) with ``train.lr`` = the run's
      learning rate × f (study ``lr``: the base run is factor 1).
    * ``seeds: {<study>: n}`` (a study of :data:`SEED_STUDIES`): every run the study names gets ``n - 1`` replicas
      ``<run>_seed<k>``, k = 1 .. n-1, with ``train.seed = seed + k`` (init and data order change; the base run
      is seed ``seed``). A run in several studies gets the largest n. Derived runs (``<v>_eqflops``) are skipped.
      ``seeds.lr_rates: n``: every run ``lr_sensitivity`` adds at another rate (``<run>_lr<f>x``) gets n seeds
      (so a comparison at each model's own best rate has an interval); ``seeds.runs: {<run>: n}``: one run (a
      variant or a derived run) gets at least n seeds (counts only raise: the largest of a run's counts wins).
    * ``crossover: {runs, factor, seeds}``: ``<run>_x<factor>`` trained ``factor`` times the steps (the
      ``crossover`` target, outside ``reproduce_all``), and its replicas ``<run>_x<factor>_seed<k>``.
    * ``niah_train: {runs, factor, needle_fraction}``: ``<run>_niah``, Table 4's retrieval run (a labelled
      substitute protocol): ``factor`` × the steps, warm-up and ``eval_every``, with ``train.needle_mix.fraction``
      = ``needle_fraction``; part of ``reproduce_all``. ``niah_train.seeds: {run: n}`` gives ``<run>_niah`` the
      replicas ``<run>_niah_seed<k>``, k = 1 .. n-1, ``train.seed = seed + k`` (else one seed).

    Raises:
        ConfigError: a derived name is already a variant with another definition, a run named is no variant, or
            ``niah_train.seeds`` names a run that ``niah_train.runs`` does not.
    """
    V = config["variants"]
    base_seed, base_lr = int(config.get("seed", 0)), float(config["train"]["lr"]) if "lr" in config["train"] else None
    new: dict[str, dict] = {}

    def need(run: str, where: str) -> Mapping:
        if run not in V:
            raise ConfigError(f"{source}: {where}: {run!r} is not a variant ({sorted(V)})")
        return V[run]

    lr = config.get("lr_sensitivity") or {}
    at_other_rates: list[str] = []
    for run in lr.get("runs", []):
        spec = need(run, "lr_sensitivity.runs")
        rate = float((spec.get("train") or {}).get("lr", base_lr if base_lr is not None else 1e-3))
        for f in lr.get("factors", []):
            new[f"{run}_lr{_factor_tag(f)}x"] = _derived(spec, {"lr": rate * float(f)})
            at_other_rates.append(f"{run}_lr{_factor_tag(f)}x")
    counts: dict[str, int] = {}
    seeds = dict(config.get("seeds") or {})
    per_run = seeds.pop("runs", None) or {}
    for study, n in seeds.items():
        for run in (at_other_rates if study == "lr_rates" else _study_runs(config, study)):
            if run in V or run in new:
                counts[run] = max(counts.get(run, 1), int(n))
    for run, n in per_run.items():
        if run not in V and run not in new:
            raise ConfigError(f"{source}: seeds.runs: {run!r} is not a variant or a run derived by lr_sensitivity "
                              f"(one of {', '.join(sorted(n for n in {*V, *new} if '_seed' not in n))})")
        counts[run] = max(counts.get(run, 1), int(n))
    for run, n in counts.items():
        spec = V.get(run) or new[run]
        for k in range(1, n):
            new[f"{run}_seed{k}"] = _derived(spec, {"seed": base_seed + k})
    cx = config.get("crossover") or {}
    for run in cx.get("runs", []):
        spec = need(run, "crossover.runs")
        steps = int((spec.get("train") or {}).get("steps", config["train"]["steps"])) * int(cx["factor"])
        name = f"{run}_x{cx['factor']}"
        new[name] = _derived(spec, {"steps": steps})
        for k in range(1, int(cx.get("seeds", 1))):
            new[f"{name}_seed{k}"] = _derived(new[name], {"seed": base_seed + k})
    nt = config.get("niah_train") or {}
    for run in nt.get("runs", []):
        spec = need(run, "niah_train.runs")
        new[f"{run}_niah"] = _derived(spec, _niah_train(config, spec, nt))
    for run, n in (nt.get("seeds") or {}).items():
        if run not in nt.get("runs", []):
            raise ConfigError(f"{source}: niah_train.seeds: {run!r} is not one of niah_train.runs ({nt.get('runs')})")
        for k in range(1, int(n)):
            new[f"{run}_niah_seed{k}"] = _derived(new[f"{run}_niah"], {"seed": base_seed + k})
    for name, spec in new.items():
        if name in V and V[name] != spec:
            raise ConfigError(f"{source}: variants.{name}: the name of a run derived by seeds/lr_sensitivity/"
                              f"crossover; rename the variant")
        V[name] = spec
    return config


def replicas(config: Mapping, run: str) -> list[str]:
    """``run`` and its seed replicas ``run_seed1, run_seed2, ...`` present in ``config["variants"]`` (base first)."""
    V = config.get("variants") or {}
    out, k = [run], 1
    while f"{run}_seed{k}" in V:
        out.append(f"{run}_seed{k}")
        k += 1
    return out


def seed_of(config: Mapping, run: str) -> int:
    """The training seed of ``run``: its ``variants.<run>.train.seed``, else the config's ``seed``."""
    spec = (config.get("variants") or {}).get(run) or {}
    return int((spec.get("train") or {}).get("seed", config.get("seed", 0)))


def crossover_runs(config: Mapping) -> list[str]:
    """The runs of the ``crossover`` target (``<run>_x<factor>`` and replicas), trained outside ``reproduce_all``."""
    cx = config.get("crossover") or {}
    return [r for run in cx.get("runs", []) for r in replicas(config, f"{run}_x{cx['factor']}")]


def lr_runs(config: Mapping) -> dict[str, dict[float, str]]:
    """``{run: {lr factor: run name}}`` of ``lr_sensitivity`` (factor 1: the run itself)."""
    lr = config.get("lr_sensitivity") or {}
    return {run: {1.0: run, **{float(f): f"{run}_lr{_factor_tag(f)}x" for f in lr.get("factors", [])}}
            for run in lr.get("runs", [])}


def niah_runs(config: Mapping) -> list[str]:
    """The runs Table 4 evaluates: ``<run>_niah`` of ``niah_train`` when configured, else ``core_variants`` (base
    runs only; :func:`replicas` gives each one's seed replicas)."""
    nt = config.get("niah_train") or {}
    return [f"{r}_niah" for r in nt["runs"]] if nt.get("runs") else list(config["core_variants"])


def pipeline_runs(config: Mapping) -> list[str]:
    """Every variant ``reproduce_all`` trains: all of ``config["variants"]`` but the crossover runs."""
    skip = set(crossover_runs(config))
    return [v for v in config["variants"] if v not in skip]


def required_and_defaulted(schema: Mapping, node: Mapping | None = None, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every object property of the schema as ``(dotted key, "required" | "default" | "optional")`` (for tests:
    a key a rule reads must be ``required`` or ``default``)."""
    node = _resolve_ref(schema if node is None else node, schema)
    required = set(node.get("required", []))
    for key, sub in node.get("properties", {}).items():
        sub = _resolve_ref(sub, schema)
        kind = "required" if key in required else "default" if "default" in sub else "optional"
        yield f"{prefix}{key}", kind
        if "object" in _types(sub) or "properties" in sub:
            yield from required_and_defaulted(schema, sub, f"{prefix}{key}.")


def cpu_has_native_bf16(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> bool | None:
    """Whether this machine's CPU multiplies bf16 natively (the ``amx_bf16`` or ``avx512_bf16`` flag of Linux's
    ``/proc/cpuinfo``); ``None`` when that file cannot be read (another OS). Without it PyTorch emulates bf16 matmuls:
    measured on an AVX2-only AMD EPYC, 0.6 GFLOP/s in bf16 against 53 GFLOP/s in fp32 (one thread, 1024^3)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return bool({"amx_bf16", "avx512_bf16"} & set(flags))


def bf16_warning(config: Mapping, cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> str | None:
    """A one-line warning when the config asks for bf16 on the CPU (``launch.gpus`` false) and this CPU has no
    native bf16 (:func:`cpu_has_native_bf16`), naming the fields and the ``--config`` override that runs them in
    fp32; else ``None``."""
    if (config.get("launch") or {}).get("gpus") or cpu_has_native_bf16(cpuinfo) is not False:
        return None
    train = (config.get("train") or {}).get("dtype") == "bf16"
    evals = [k for k, v in (config.get("eval") or {}).items() if isinstance(v, Mapping) and v.get("dtype") == "bf16"]
    if not (train or evals):
        return None
    fields = ["train.dtype"] * train + [f"eval.{k}.dtype" for k in evals]
    over = (["'train={dtype: fp32}'"] if train else []) + (
        ["'eval={" + ", ".join(f"{k}: {{dtype: fp32}}" for k in evals) + "}'"] if evals else [])
    return (f"this CPU has no native bf16 (no amx_bf16 or avx512_bf16 flag in /proc/cpuinfo): {', '.join(fields)} = "
            f"bf16 would run emulated, about 100x slower than fp32; add --config {' '.join(over)} to run them in fp32")
