"""A duplicated key in any YAML the project reads is an error naming the file, the key and both lines (PyYAML keeps
the last one silently): the scale configs, --configfile files, eval/ and the claims registry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import workflow_copy

from yocou.utils.io import load_config_file
from yocou.utils.yamlio import DuplicateKeyError, load_yaml, loads_yaml
from yocou.workflow.wfconfig import ConfigError, read_scale_file


def test_loads_like_safe_load_without_duplicates():
    text = "a: 1\nb: {c: [1, 2], d: null}\nlist:\n  - {x: 1}\n  - {x: 2}\n"
    assert loads_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize("text, key, line, first", [
    ("seed: 0\ntrain: {steps: 5}\nseed: 1\n", "seed", 3, 1),
    ("train:\n  steps: 5\n  lr: 0.1\n  steps: 6\n", "steps", 4, 2),
    ("- {a: 1, a: 2}\n", "a", 1, 1),
])
def test_a_duplicated_key_names_key_and_lines(text, key, line, first):
    assert yaml.safe_load(text) is not None  # PyYAML alone accepts it
    with pytest.raises(DuplicateKeyError, match=rf"src\.yaml: duplicate key '{key}' at line {line} \(first at line "
                                                rf"{first}\)"):
        loads_yaml(text, "src.yaml")


def test_equal_keys_in_different_mappings_are_fine():
    assert loads_yaml("a: {x: 1}\nb: {x: 2}\n") == {"a": {"x": 1}, "b": {"x": 2}}


def test_every_reader_refuses_it(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("scale: s\nseed: 0\nseed: 1\n")
    with pytest.raises(ConfigError, match=r"s\.yaml: duplicate key 'seed' at line 3"):
        read_scale_file(p)
    with pytest.raises(ValueError, match=r"duplicate key 'seed' at line 3"):
        load_config_file(p)
    with pytest.raises(DuplicateKeyError, match=str(p)):
        load_yaml(p)


def test_the_shipped_yaml_has_no_duplicated_key():
    root = Path(__file__).resolve().parents[1]
    files = [*root.glob("workflows/config/*.yaml"), *root.glob("eval/**/*.yaml"), root / "yocou/results/audit/claims.yaml",
             root / "workflows/schemas/config.schema.yaml"]
    assert len(files) > 5
    for f in files:
        load_yaml(f)


@pytest.mark.slow
def test_planning_refuses_a_scale_file_or_configfile_with_a_duplicated_key(tmp_path):
    wd = workflow_copy(tmp_path)
    cfg = wd / "workflows/config/smoke.yaml"
    cfg.write_text(cfg.read_text() + "seed: 7\n")
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "scale=smoke"],
                         cwd=wd, capture_output=True, text=True)
    assert res.returncode != 0 and "duplicate key 'seed'" in res.stdout + res.stderr
    cfg.write_text(cfg.read_text().removesuffix("seed: 7\n"))
    extra = wd / "extra.yaml"
    extra.write_text("train:\n  steps: 3\n  steps: 4\n")
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "scale=smoke",
                          "--configfile", str(extra)], cwd=wd, capture_output=True, text=True)
    assert res.returncode != 0 and "extra.yaml: duplicate key 'steps' at line 3" in res.stdout + res.stderr


def test_an_alias_bomb_is_refused_at_once_naming_the_source() -> None:
    """Nine aliases of nine aliases, eight times over: 9^9 values once expanded. Refused before any value is built
    (a walk of the expanded values, as the config checks do, would run for minutes)."""
    from yocou.utils.yamlio import MAX_VALUES, loads_yaml

    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    with pytest.raises(ValueError, match=r"bomb\.yaml: expands to more than") as e:
        loads_yaml(bomb, "bomb.yaml")
    assert f"{MAX_VALUES:,}" in str(e.value)
    assert loads_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}  # ordinary aliases still work


@pytest.mark.parametrize("depth", [150, 5000])
def test_a_runaway_nesting_is_refused_naming_the_source(depth: int) -> None:
    from yocou.utils.yamlio import MAX_DEPTH, loads_yaml

    with pytest.raises(ValueError, match=rf"deep\.yaml: nested .* a config nests at most {MAX_DEPTH}"):
        loads_yaml("a: " + "[" * depth + "]" * depth, "deep.yaml")
    assert loads_yaml("a: " + "[" * 20 + "]" * 20)["a"] is not None
