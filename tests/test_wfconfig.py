"""The pipeline config at planning time: every key a rule reads is required by the
schema or defaulted there; parsing writes nothing and a job's settings reach it on its own command line; bad
config fails in one line naming the key or file."""

from __future__ import annotations

import copy
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import workflow_copy

from yocou.workflow.wfconfig import (
    ConfigError,
    load_schema,
    read_scale_file,
    required_and_defaulted,
    resolve_config,
)

ROOT = Path(__file__).resolve().parents[1]


def _snakemake(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def _smoke() -> dict:
    return yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())


def _write_smoke(wd: Path, cfg: dict) -> None:
    (wd / "workflows/config/smoke.yaml").write_text(yaml.safe_dump(cfg))


def _defaulted_keys_present(cfg: dict) -> list[str]:
    """Dotted keys of ``cfg`` that the schema gives a default (so a config may leave them out)."""
    kinds = dict(required_and_defaulted(load_schema(ROOT)))
    out = []
    for key, kind in kinds.items():
        node = cfg
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            if kind == "default":
                out.append(key)
    return out


def _delete(cfg: dict, dotted: str) -> None:
    *parents, last = dotted.split(".")
    node = cfg
    for p in parents:
        node = node.get(p)
        if not isinstance(node, dict):
            return  # a parent already left out
    node.pop(last, None)


# --- keys the rules read --------------------------------------------------------------------------------------

#: config reads in the rules: config["a"]["b"] chains, DS["x"] (DS = config["eval"]["downstream"]) and the
#: {params.p[x]} fields of the shell commands whose params.p is a config section.
_CHAIN = re.compile(r'config((?:\[\s*["\'][A-Za-z_]+["\']\s*\])+)(?!\s*\.get)')
_KEY = re.compile(r'\[\s*["\']([A-Za-z_]+)["\']\s*\]')


def _keys_the_rules_read() -> set[str]:
    keys: set[str] = set()
    for f in [ROOT / "Snakefile", *sorted((ROOT / "workflows/rules").rglob("*.smk"))]:
        text = f.read_text()
        for m in _CHAIN.finditer(text):
            keys.add(".".join(_KEY.findall(m.group(1))))
        for m in re.finditer(r'DS\[\s*["\']([A-Za-z_]+)["\']\s*\]', text):
            keys.add(f"eval.downstream.{m.group(1)}")
        # p=config["eval"]["ppl"] in a rule's params, then {params.p[dtype]} in its shell command
        for rule in re.split(r"\nrule |\n    rule:", text):
            for name, chain in re.findall(r'\b([a-z_]+)=config((?:\[\s*["\'][A-Za-z_]+["\']\s*\])+)', rule):
                base = ".".join(_KEY.findall(chain))
                keys |= {f"{base}.{k}" for k in re.findall(rf"\{{params\.{name}\[([A-Za-z_]+)\]\}}", rule)}
    return keys


@pytest.mark.parametrize("where", ["train", "variants.yoco.train"])
def test_warmup_longer_than_the_run_is_refused_naming_the_field(where: str) -> None:
    cfg = read_scale_file(ROOT / "workflows/config/tiny.yaml")
    steps = cfg["train"]["steps"]
    if where == "train":
        cfg["train"]["warmup_steps"] = steps + 1
    else:
        cfg["variants"]["yoco"]["train"] = {"warmup_steps": steps + 1}
    with pytest.raises(ConfigError, match=rf"{re.escape(where)}.warmup_steps: {steps + 1} exceeds its steps \({steps}\)"):
        resolve_config(cfg)
    cfg2 = read_scale_file(ROOT / "workflows/config/tiny.yaml")
    cfg2["train"]["warmup_steps"] = steps  # equal is allowed
    resolve_config(cfg2)


def test_every_key_a_rule_reads_is_required_or_has_a_schema_default() -> None:
    kinds = dict(required_and_defaulted(load_schema(ROOT)))
    read = _keys_the_rules_read()
    assert {"eval.ppl.dtype", "eval.ppl.batch", "eval.profile", "eval.downstream", "eval.downstream.seed",
            "eval.profile.fit"} <= read
    loose = sorted(k for k in read if kinds.get(k, "optional") == "optional" and k not in ("studies", "resources"))
    assert not loose, f"read by a rule, neither required nor defaulted in the schema: {loose}"


def test_rules_read_no_defaults_of_their_own() -> None:
    """Defaults live in the schema alone: no rule falls back with config[...].get(key, default)."""
    for f in [ROOT / "Snakefile", *sorted((ROOT / "workflows/rules").rglob("*.smk"))]:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if re.search(r'config\[[^\n]*\]\.get\(\s*["\'][A-Za-z_]+["\']\s*,', line) and "studies" not in line:
                pytest.fail(f"{f.name}:{n}: a default outside the schema: {line.strip()}")


def _schema_default(schema: dict, dotted: str):
    node = schema
    for part in dotted.split("."):
        node = node["properties"][part]
        if "$ref" in node:
            node = {**schema["$defs"][node["$ref"].split("/")[-1]], **node}
    return node["default"]


def test_resolve_config_fills_every_schema_default() -> None:
    cfg = _smoke()
    schema = load_schema(ROOT)
    present = _defaulted_keys_present(cfg)
    assert {"eval.ppl.dtype", "eval.ppl.batch", "eval.angular.batch", "launch.gpu_slots"} <= set(present) | {
        "launch.gpu_slots"}
    for key in present + ["launch.gpu_slots", "launch.nnodes"]:
        bare = copy.deepcopy(cfg)
        _delete(bare, key)
        resolve_config(bare, root=ROOT)
        node = bare
        for part in key.split("."):
            node = node[part]
        want = _schema_default(schema, key)
        if want == {}:  # an object default: its own keys' defaults filled inside it
            sub = schema
            for part in key.split("."):
                sub = sub["properties"][part]
            want = {k: v["default"] for k, v in sub.get("properties", {}).items() if "default" in v}
        assert node == want, key


def test_a_config_without_any_defaulted_key_plans_with_the_defaults(tmp_path: Path) -> None:
    """Leaving out eval.ppl.dtype / batch (and every other key with a schema default) still plans, and the jobs
    get the schema's values on their command lines (was: NameError 'dtype' inside rule ppl)."""
    wd = workflow_copy(tmp_path)
    cfg = _smoke()
    for key in _defaulted_keys_present(cfg):
        _delete(cfg, key)
    assert "dtype" not in cfg["eval"]["ppl"] and "batch" not in cfg["eval"]["ppl"]
    _write_smoke(wd, cfg)
    res = _snakemake(wd, "-n", "-p", "--cores", "1", "reproduce_all", "--config", "scale=smoke")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    ppl_cmd = next(ln for ln in out.splitlines() if "yocou.cli ppl" in ln)
    assert "--dtype fp32" in ppl_cmd and "--batch 8" in ppl_cmd  # the schema's defaults


@pytest.mark.slow
@pytest.mark.parametrize("section", ["profile", "downstream"])
def test_a_missing_eval_section_names_it(tmp_path: Path, section: str) -> None:
    wd = workflow_copy(tmp_path)
    cfg = _smoke()
    del cfg["eval"][section]
    _write_smoke(wd, cfg)
    res = _snakemake(wd, "-n", "--cores", "1", "reproduce_all", "--config", "scale=smoke")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and f"eval.{section}: missing" in out, out[-3000:]
    assert "KeyError" not in out


# --- parsing has no side effects --------------------------------------------------------------------------------

def _tree_state(root: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_dry_run_with_a_changed_config_leaves_runs_untouched(tmp_path: Path) -> None:
    wd = workflow_copy(tmp_path)
    runs = wd / "runs/smoke"
    (runs / "models/yoco").mkdir(parents=True)
    (runs / "config.json").write_text('{"seed": 0}')  # what an older checkout left
    (runs / "models/yoco/run_config.json").write_text('{"train": {"seed": 0}}')
    before = _tree_state(wd / "runs")
    res = _snakemake(wd, "-n", "--cores", "1", "reproduce_all", "--config", "scale=smoke", "seed=5")
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert _tree_state(wd / "runs") == before


def test_a_jobs_settings_are_on_its_command_line(tmp_path: Path) -> None:
    """corpus, tokenizer and run_config get the config as inline JSON in their params (so a later parse cannot
    change what a scheduled job reads); a run's JSON holds only what that run depends on."""
    wd = workflow_copy(tmp_path)
    res = _snakemake(wd, "-n", "-p", "--cores", "1", "runs/smoke/models/yoco/run_config.json",
                     "--config", "scale=smoke", "seed=5", "train={steps: 7}")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    cmd = next(ln for ln in out.splitlines() if "yocou.workflow.pipeline" in ln)
    assert '"seed":5' in cmd and '"steps":7' in cmd and '"yoco":' in cmd
    assert '"yocou":' not in cmd and '"eval"' not in cmd  # another run's entry, evaluation settings
    corpus_cmd = next(ln for ln in out.splitlines() if "yocou.cli corpus" in ln)
    assert '"corpus":' in corpus_cmd and "config.json" not in corpus_cmd


# --- config silently ignored or misreported ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("override, needle", [
    ("model={size: nope}", "model.size: unknown size 'nope'"),
    ("train={stepz: 5}", "train.stepz: unknown key"),
    ("train={schedule: linearr}", "train.schedule: 'linearr' is not one of ['cosine', 'linear', 'constant', 'wsd']"),
    ("data={corpus: {sources: {hf: {name: json}}}}", "sources.hf.enabled: true"),
])
def test_bad_config_fails_at_planning_in_one_line(tmp_path: Path, override: str, needle: str) -> None:
    wd = workflow_copy(tmp_path)
    res = _snakemake(wd, "-n", "--cores", "1", "reproduce_all", "--config", "scale=smoke", override)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and needle in out, out[-3000:]
    assert "$schema" not in out and "additionalProperties" not in out  # no schema dump
    assert len(out.splitlines()) < 25, out


def test_nested_override_from_the_command_line_is_read_as_numbers(tmp_path: Path) -> None:
    """--config 'train={steps: 5, lr: 2e-3}' (Snakemake leaves nested values as strings) plans, and the other
    train keys of the scale file stay."""
    cfg = _smoke()
    over = copy.deepcopy(cfg)
    over["train"].update({"steps": "5", "lr": "2e-3", "compile": "false"})
    over["eval"]["ppl"]["max_tokens"] = "null"
    resolve_config(over, root=ROOT)
    assert over["train"]["steps"] == 5 and over["train"]["lr"] == 2e-3 and over["train"]["compile"] is False
    assert over["eval"]["ppl"]["max_tokens"] is None
    assert over["train"]["batch_size"] == cfg["train"]["batch_size"]
    bad = copy.deepcopy(cfg)
    bad["train"]["steps"] = "many"
    with pytest.raises(ConfigError, match=r"train\.steps: expected integer, got 'many' \(str\)$"):
        resolve_config(bad, root=ROOT)
    # text that reads as a number or a bool of the wrong type is named as what it reads as, not as text
    for key, text, said in (("steps", "2.5", "2.5 (float)"), ("compile", "1", "1 (int)")):
        bad = copy.deepcopy(cfg)
        bad["train"][key] = text
        with pytest.raises(ConfigError, match=rf"train\.{key}: expected \w+, got {re.escape(said)}$"):
            resolve_config(bad, root=ROOT)


def test_a_scale_file_that_is_not_yaml_is_named(tmp_path: Path) -> None:
    wd = workflow_copy(tmp_path)
    (wd / "workflows/config/broken.yaml").write_text("seed: [1\n")
    res = _snakemake(wd, "-n", "--cores", "1", "--config", "scale=broken")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "workflows/config/broken.yaml: not valid YAML: line 2" in out, out[-3000:]
    with pytest.raises(ConfigError, match="broken.yaml: not valid YAML"):
        read_scale_file(wd / "workflows/config/broken.yaml")


@pytest.mark.parametrize("field, value, allowed", [("schedule", "linearr", "['cosine', 'linear', 'constant', 'wsd']"),
                                                   ("dtype", "fp8", "['bf16', 'fp32']")])
def test_train_config_literal_names_the_allowed_values(field: str, value: str, allowed: str) -> None:
    from yocou.training.train import train_config_from_dict
    from yocou.utils.validation import FieldError

    with pytest.raises(FieldError) as e:
        train_config_from_dict({"steps": 1, "batch_size": 1, "seq_len": 8, field: value})
    assert e.value.field == f"TrainConfig.{field}" and all(v in str(e.value) for v in eval(allowed))


@pytest.mark.slow
def test_a_diverging_run_is_a_one_line_error(tmp_path: Path, token_dir: Path) -> None:
    """lr=1e6 makes the loss infinite: `yocou train` says so in one line naming train.lr, status 2 (was a
    FloatingPointError traceback)."""
    import json

    rc = {"model": {"name": "t", "vocab_size": 300, "d_model": 32, "n_heads": 2, "n_kv_heads": 1,
                    "head_dim": 16, "d_ff": 64,
                    "stages": [{"kind": "self", "n_layers": 2, "n_loops": 1, "window": None}]},
          "train": {"steps": 30, "batch_size": 2, "seq_len": 16, "lr": 1e6, "warmup_steps": 0, "dtype": "fp32",
                    "grad_clip": 0.0, "schedule": "constant"}}
    (tmp_path / "rc.json").write_text(json.dumps(rc))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("YOCOU_TRACEBACK", None)
    res = subprocess.run([sys.executable, "-m", "yocou.cli", "train", "--run-config", str(tmp_path / "rc.json"),
                          "--data", str(token_dir / "train.bin"), "--out", str(tmp_path / "run"), "--no-progress"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    last = [ln for ln in res.stderr.splitlines() if ln.strip()][-1]
    assert last.startswith("yocou train: error: ") and "train.lr" in last and "diverged" in last


def test_kv_measure_seq_lens_must_be_positive() -> None:
    res = subprocess.run([sys.executable, "-m", "yocou.cli", "kv-measure", "--run-configs", "x.json", "--seq-lens",
                          "0", "--out", "y.json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "argument --seq-lens: expected an integer >= 1, got 0" in res.stderr


def test_train_fields_carry_no_schema_defaults() -> None:
    """train: and variants.<name>.train: share $defs/train_fields, and a variant's train section overrides the
    shared one key by key: a schema default there would be filled into every variant's section and silently win
    over train: (TrainConfig's own defaults apply instead)."""
    fields = load_schema(ROOT)["$defs"]["train_fields"]["properties"]
    assert not [k for k, v in fields.items() if "default" in v]
    cfg = _smoke()
    cfg["train"]["lr"] = 0.005
    cfg["variants"]["yocou"]["train"] = {"steps": 3}
    resolve_config(cfg, root=ROOT)
    assert cfg["variants"]["yocou"]["train"] == {"steps": 3}


def test_bf16_on_a_cpu_without_native_bf16_is_warned_naming_the_fields_and_the_override(tmp_path) -> None:
    """bf16 without amx_bf16/avx512_bf16 runs emulated (0.6 against 53 GFLOP/s in fp32 on an AVX2 EPYC): the
    planning warns, naming the fields; the override it prints, given to --config, turns every one to fp32."""
    from yocou.workflow.wfconfig import (
        bf16_warning,
        cpu_has_native_bf16,
        read_scale_file,
        resolve_config,
    )

    avx2, amx = tmp_path / "avx2", tmp_path / "amx"
    avx2.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n")
    amx.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n")
    assert cpu_has_native_bf16(avx2) is False and cpu_has_native_bf16(amx) is True
    assert cpu_has_native_bf16(tmp_path / "missing") is None
    cfg = resolve_config(read_scale_file(ROOT / "workflows/config/tiny.yaml"))
    assert bf16_warning(cfg, avx2) is None  # tiny trains and profiles in fp32
    cfg["train"]["dtype"] = cfg["eval"]["profile"]["dtype"] = cfg["eval"]["kv_measure"]["dtype"] = "bf16"
    w = bf16_warning(cfg, avx2)
    assert w and "\n" not in w and "train.dtype" in w and "eval.profile.dtype" in w
    assert bf16_warning(cfg, amx) is None and bf16_warning(cfg, tmp_path / "missing") is None
    assert bf16_warning({**cfg, "launch": {**cfg["launch"], "gpus": True}}, avx2) is None
    # the printed override, merged as Snakemake merges --config, leaves no bf16 field
    import yaml

    over = [yaml.safe_load("{" + part.strip("'").replace("=", ": ", 1) + "}")
            for part in w.split("--config ")[1].split(" to run")[0].split("' '")]
    merged = copy.deepcopy(cfg)
    for o in over:
        for k, v in o.items():
            for kk, vv in v.items():
                merged[k][kk] = {**merged[k][kk], **vv} if isinstance(vv, dict) else vv
    assert bf16_warning(merged, avx2) is None


@pytest.mark.parametrize("where", ["seed", "train.seed"])
def test_a_seed_past_2_to_the_32_is_refused_when_planning(where: str) -> None:
    """It used to plan, then fail in training ("Overflow when unpacking long long")."""
    cfg = read_scale_file(ROOT / "workflows/config/tiny.yaml")
    if where == "seed":
        cfg["seed"] = 2**70
    else:
        cfg["train"]["seed"] = 2**70
    with pytest.raises(ConfigError, match=rf"{re.escape(where)}"):
        resolve_config(cfg)


def test_train_config_refuses_a_seed_the_batch_generator_cannot_take() -> None:
    from yocou.training.train import TrainConfig

    with pytest.raises(ValueError, match=r"TrainConfig\.seed"):
        TrainConfig(steps=1, batch_size=1, seq_len=2, seed=2**32)
    TrainConfig(steps=1, batch_size=1, seq_len=2, seed=2**32 - 1)


def test_model_overrides_from_the_command_line_are_read_as_numbers() -> None:
    """--config 'model={overrides: {d_model: 48}}' arrives as the string '48'."""
    cfg = read_scale_file(ROOT / "workflows/config/tiny.yaml")
    cfg["model"]["overrides"] = {"d_model": "48", "cross_rope": "true"}
    resolve_config(cfg)
    assert cfg["model"]["overrides"] == {"d_model": 48, "cross_rope": True}
    cfg["model"]["overrides"] = {"d_model": "wide"}
    with pytest.raises(ConfigError, match=r"model\.overrides\.d_model"):
        resolve_config(cfg)


def test_a_non_positive_rope_theta_override_is_refused_when_planning() -> None:
    """rope_theta 0 planned a full retrain that diverged at step 0 with a message blaming the learning rate."""
    from yocou.workflow.wfconfig import ConfigError, read_scale_file, resolve_config

    for key in ("rope_theta", "norm_eps", "init_std"):
        cfg = read_scale_file(ROOT / "workflows/config/smoke.yaml")
        cfg["model"]["overrides"] = {key: 0}
        with pytest.raises(ConfigError, match=rf"model\.overrides\.{key}"):
            resolve_config(cfg, source="smoke.yaml")
