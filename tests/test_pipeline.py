"""The Snakemake pipeline: config validation, planning at every scale, and the smoke DAG end to end."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import workflow_copy

from yocou.results.audit.ladder import ID_PREFIX as LADDER_ID_PREFIX
from yocou.training.ladder import load_study as load_ladder
from yocou.training.ladder import plan as ladder_plan
from yocou.workflow.pipeline import resolve_run
from yocou.workflow.scales import SCALE_PATTERN, check_scale_name
from yocou.workflow.variants import variant_keys
from yocou.workflow.wfconfig import crossover_runs, pipeline_runs, resolve_config

ROOT = Path(__file__).resolve().parents[1]


def _workdir(tmp: Path) -> Path:
    return workflow_copy(tmp)


def _plan_edited(tmp: Path, rel: str, edit, *args: str) -> subprocess.CompletedProcess:
    """`snakemake -n --cores 1 *args` in a scratch copy of the workflow whose YAML file ``rel`` went through
    ``edit`` (a function changing the parsed document in place); not checked."""
    wd = _workdir(tmp)
    p = wd / rel
    doc = yaml.safe_load(p.read_text())
    edit(doc)
    p.write_text(yaml.safe_dump(doc))
    return _snakemake(wd, "-n", "--cores", "1", *args, check=False)


def _snakemake(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise AssertionError(res.stdout[-3000:] + res.stderr[-3000:])
    return res


@pytest.mark.slow
@pytest.mark.parametrize("scale", ["smoke", "tiny"])
def test_dry_run_plans_every_core_model(tmp_path: Path, scale: str) -> None:
    wd = _workdir(tmp_path)
    out = _snakemake(wd, "-n", "--cores", "2", "reproduce_all", "--config", f"scale={scale}").stdout
    cfg = resolve_config(yaml.safe_load((ROOT / f"workflows/config/{scale}.yaml").read_text()), root=ROOT)
    for v in cfg["core_variants"]:
        assert f"runs/{scale}/models/{v}/model.pt" in out
    for target in ("fig2.png", "heldout_ppl.md", "table10.md", "fig5.png", "fig6.png", "fig8.png", "table2.md",
                   "table3.md", "table5.md", "fig2_summary.csv"):
        assert target in out
    # every run of every study is planned, each trained once
    for study in cfg["studies"].values():
        for run in (study.values() if isinstance(study, dict) else study):
            runs = run if isinstance(run, list) else [run]
            for r in runs:
                assert f"runs/{scale}/models/{r}/model.pt" in out, r
    # and so is every seed replica and learning-rate run; the crossover runs are not (their own target)
    assert out.count("rule train:") == len(pipeline_runs(cfg)) == len(cfg["variants"]) - len(crossover_runs(cfg))
    for r in crossover_runs(cfg):
        assert f"runs/{scale}/models/{r}/model.pt" not in out, r
    # the annealed token ladder and its bracket: every run of the study's plan trained once, then fitted and drawn
    # (the horizon checks and the depth control are their own targets, `ladder_checks` and `depth_control`, and are
    # not planned here)
    plan = ladder_plan(load_ladder(scale, ROOT / "workflows/studies/ladder.yaml"))
    ladder_runs = {k: r for k, r in plan.items() if r.kind in ("bracket", "stable", "anneal")}
    assert len(ladder_runs) < len(plan)
    assert out.count("rule ladder_train:") + out.count("rule ladder_train_stable:") == len(ladder_runs) > 0
    for name in set(plan) - set(ladder_runs):
        assert name not in out, name   # neither its model nor its scores
    for f in (f"results/{scale}/ladder/ladder.json", f"results/{scale}/ladder/bracket.json",
              f"figures/{scale}/fig2_ladder.png"):
        assert f in out, f


def test_crossover_plans_its_runs_their_whole_held_out_scores_and_the_figure(tmp_path: Path) -> None:
    """`snakemake -n crossover` (the crossover study): each crossover run is trained and scored on the whole held-out
    set (rule ppl, the verdict's end point), then summarized and drawn; nothing of reproduce_all's own studies."""
    wd = _workdir(tmp_path)
    out = _snakemake(wd, "-n", "--cores", "2", "crossover", "--config", "scale=smoke").stdout
    cfg = resolve_config(yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text()), root=ROOT)
    runs = crossover_runs(cfg)
    assert len(runs) == 2 * cfg["crossover"]["seeds"] and out.count("rule train:") == len(runs)
    for r in runs:
        assert f"runs/smoke/models/{r}/model.pt" in out and f"results/smoke/ppl/{r}.json" in out, r
    assert out.count("rule ppl:") == len(runs)
    assert "figures/smoke/crossover.png" in out and "results/smoke/crossover.md" in out
    assert "table3.md" not in out


def test_ladder_trains_on_its_own_stream_and_scores_the_held_out_plays(tmp_path: Path) -> None:
    """`snakemake -n -p ladder` (computing): the ladder's streams are split once (rule ladder_tokens), every ladder run
    (bracket, segments, branches) trains on runs/<scale>/ladder/tokens/train.bin, never on the scale's stream, and
    every annealed model and bigram is scored on book, code and the held-out plays."""
    from yocou.training.ladder import load_study, plan

    wd = _workdir(tmp_path)
    shutil.copytree(ROOT / "eval", wd / "eval")  # the ladder's decision rules, an input of its fits
    out = _snakemake(wd, "-n", "-p", "--cores", "2", "ladder", "--config", "scale=smoke", "mode=compute").stdout
    runs = {n: p for n, p in plan(load_study("smoke", ROOT / "workflows/studies/ladder.yaml")).items()
            if p.kind in ("bracket", "stable", "anneal")}   # the checks and the depth control: targets of their own
    assert out.count("rule ladder_tokens:") == 1
    trains = [line for line in out.splitlines() if " train --run-config " in line]
    assert len(trains) == len(runs) and all("--data runs/smoke/ladder/tokens/train.bin" in t for t in trains), trains
    ppl = [line for line in out.splitlines() if "yocou.cli ppl" in line and "results/smoke/ladder/ppl/" in line]
    assert ppl and all("--data runs/smoke/ladder/tokens" in c and
                       "--splits heldout_book heldout_code heldout_plays" in c for c in ppl)
    base = [line for line in out.splitlines() if "yocou.cli baselines" in line]
    assert base and all("--train runs/smoke/ladder/tokens/train.bin" in c and "heldout_plays" in c for c in base)


@pytest.mark.slow
@pytest.mark.parametrize("threads", [None, 1, 8])
def test_eval_threads_set_each_evaluation_job_and_the_profile_keeps_every_core(tmp_path: Path, threads) -> None:
    """eval.threads (evaluation jobs at one thread each): every evaluation job's snakemake threads and OMP_NUM_THREADS are
    eval.threads, at most --cores (null: --cores); the profile, a timing, always takes every core."""
    wd = _workdir(tmp_path)
    cfg = ["eval={threads: null}" if threads is None else "eval={threads: %d}" % threads]  # smoke's own is 1
    out = _snakemake(wd, "-n", "-p", "--cores", "2", "reproduce_all", "--config", "scale=smoke", *cfg).stdout
    want = 2 if threads is None else min(threads, 2)
    jobs = out.split("\n\n")
    seen = set()
    for job in jobs:
        m = re.search(r"^(?:local)?rule (\w+):", job, re.M)
        if not m or m.group(1) not in ("ppl", "kv_measure", "niah", "longppl", "angular", "downstream", "profile"):
            continue
        rule = m.group(1)
        n = 2 if rule == "profile" else want
        t = re.search(r"^\s+threads: (\d+)$", job, re.M)
        got = int(t.group(1)) if t else 1  # snakemake prints no threads line for one thread
        assert got == n, (rule, got, job[:400])
        assert f"OMP_NUM_THREADS={n} " in job, (rule, job[-400:])
        seen.add(rule)
    assert seen == {"ppl", "kv_measure", "niah", "longppl", "angular", "downstream", "profile"}


@pytest.mark.parametrize("edit, said", [
    (lambda d: d["smoke"].update(budgets=[10, 21]), "workflows/studies/ladder.yaml: smoke.budgets: "),
    (lambda d: d["smoke"]["variants"].update(yocoo=1), "smoke.variants: 'yocoo' is not a variant of the smoke config"),
    (lambda d: d.update(smokee=d["smoke"]), "workflows/studies/ladder.yaml: smokee: not a configured scale"),
])
def test_a_bad_ladder_study_stops_planning_with_one_line_naming_the_field(tmp_path: Path, edit, said: str) -> None:
    res = _plan_edited(tmp_path, "workflows/studies/ladder.yaml", edit, "ladder", "--config", "scale=smoke",
                       "mode=compute")
    assert res.returncode != 0
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1 and said in errors[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr and 'File "' not in res.stderr


def test_invalid_config_is_rejected_naming_the_field(tmp_path: Path) -> None:
    wd = _workdir(tmp_path)
    p = wd / "workflows/config/smoke.yaml"
    cfg = yaml.safe_load(p.read_text())
    cfg["train"]["steps"] = "many"
    p.write_text(yaml.safe_dump(cfg))
    res = _snakemake(wd, "-n", "--cores", "1", "--config", "scale=smoke", check=False)
    assert res.returncode != 0
    assert "steps" in res.stdout + res.stderr
    # one line naming the field: no Snakemake header or traceback around it
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and "extended by additional config" not in ln]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "train.steps" in lines[0], res.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("edit, field", [
    (lambda c: c["studies"].__setitem__("table3", ["transformer", "ghost"]), "studies.table3"),
    (lambda c: c["studies"]["table2"].__setitem__("equal_flops", "yoco_eqflops"), "studies.table2"),
    (lambda c: c["variants"]["yocou_moe"].__setitem__("equal_flops_to", "ghost"), "variants.yocou_moe.equal_flops_to"),
])
def test_studies_must_name_runs_of_the_config(tmp_path: Path, edit, field: str) -> None:
    """A study naming no run, or an equal-FLOPs reference that is no variant, fails at planning, naming the field."""
    res = _plan_edited(tmp_path, "workflows/config/smoke.yaml", edit, "--config", "scale=smoke")
    assert res.returncode != 0
    assert field in res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"Error: {field}"), res.stderr[-2000:]


def test_resolve_run_records_assumptions_and_rejects_unknown_variant() -> None:
    cfg = yaml.safe_load((ROOT / "workflows/config/tiny.yaml").read_text())
    rc = resolve_run(cfg, "yocou", vocab_size=123)
    assert rc["model"]["vocab_size"] == 123
    assert rc["model"]["stages"][0]["n_loops"] == 3
    assert rc["model"]["stages"][0]["window"] == cfg["sizes"][cfg["model"]["size"]]["window"]  # the scale's own size
    assert rc["model"]["d_model"] == cfg["sizes"][cfg["model"]["size"]]["d_model"]
    assert set(rc["assumptions"]) >= {"init_std", "norm_eps", "cross_rope"}
    with pytest.raises(ValueError, match="not in the config"):
        resolve_run(cfg, "yocu")


@pytest.mark.parametrize("variant, key", [("yocou", "n_loop"), ("transformer", "window"), ("yoco", "shared_kv")])
def test_resolve_run_rejects_a_key_the_variants_preset_does_not_take(variant: str, key: str) -> None:
    """A typo, or a key of another preset, names variants.<name>.<key> and lists the keys that preset takes."""
    cfg = yaml.safe_load((ROOT / "workflows/config/tiny.yaml").read_text())
    cfg["variants"][variant][key] = 2
    with pytest.raises(ValueError, match=rf"variants\.{variant}\.{key}\b") as e:
        resolve_run(cfg, variant)
    allowed = variant_keys(cfg["variants"][variant]["preset"])
    assert key not in allowed and all(k in str(e.value) for k in allowed)


def test_schema_lists_every_variant_key() -> None:
    """The schema's variant properties are exactly the keys check_variant allows (any preset)."""
    schema = yaml.safe_load((ROOT / "workflows/schemas/config.schema.yaml").read_text())
    assert sorted(schema["properties"]["variants"]["additionalProperties"]["properties"]) == variant_keys()


def test_schema_lists_every_train_field() -> None:
    """The schema's train fields (shared by train: and variants.<name>.train:) are exactly TrainConfig's."""
    from dataclasses import fields

    from yocou.training.train import TrainConfig

    schema = yaml.safe_load((ROOT / "workflows/schemas/config.schema.yaml").read_text())
    assert sorted(schema["$defs"]["train_fields"]["properties"]) == sorted(f.name for f in fields(TrainConfig))


def test_train_tensorboard_is_off_by_default_and_reaches_every_run() -> None:
    """train.tensorboard is off unless set; set, it reaches every run, also those with a train: section of their
    own (paper.yaml's size ladder sets lr there), which a schema default would fill with false."""
    from yocou.workflow.wfconfig import resolve_config

    smoke = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())
    resolve_config(smoke)
    assert resolve_run(smoke, "yocou", vocab_size=smoke["data"]["vocab_size"])["train"]["tensorboard"] is False
    paper = yaml.safe_load((ROOT / "workflows/config/paper.yaml").read_text())
    paper["train"]["tensorboard"] = True
    resolve_config(paper)
    own = [v for v, spec in paper["variants"].items() if "train" in spec]
    assert own and all("tensorboard" not in paper["variants"][v]["train"] for v in own)
    for v in paper["variants"]:
        assert resolve_run(paper, v, vocab_size=paper["data"]["vocab_size"])["train"]["tensorboard"] is True, v


@pytest.mark.slow
@pytest.mark.parametrize("where", ["train", "variant"])
def test_train_key_typo_fails_at_planning_naming_it(tmp_path: Path, where: str) -> None:
    """`stepz:` under train: or under variants.yocou.training.train: stops `snakemake -n`, naming the key; resolving
    the run names the section too."""
    from yocou.workflow.pipeline import resolve_run

    wd = _workdir(tmp_path)
    p = wd / "workflows/config/smoke.yaml"
    cfg = yaml.safe_load(p.read_text())
    if where == "train":
        cfg["train"]["stepz"] = 3
    else:
        cfg["variants"]["yocou"]["train"] = {"stepz": 3}
    p.write_text(yaml.safe_dump(cfg))
    res = _snakemake(wd, "-n", "--cores", "1", "--config", "scale=smoke", check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "stepz" in out, out[-3000:]
    with pytest.raises(ValueError, match=r"^train( \+ variants\.yocou\.train)?: TrainConfig\.stepz: unknown key"):
        resolve_run(cfg, "yocou", vocab_size=cfg["data"]["vocab_size"])


def test_model_overrides_keys_are_checked_for_every_variant() -> None:
    """model.overrides applies to every variant: a typo, or a key one preset does not take (window for the
    Transformer), is refused naming model.overrides.<key>; a key every preset takes passes."""
    from yocou.workflow.variants import check_variants

    variants = {"transformer": {"preset": "transformer"}, "yocou": {"preset": "yocou", "n_loops": 3}}
    check_variants({"variants": variants, "model": {"overrides": {"rope_theta": 5e5, "d_model": 64}}})
    with pytest.raises(ValueError, match=r"model\.overrides\.d_modl: .*allowed keys"):
        check_variants({"variants": variants, "model": {"overrides": {"d_modl": 64}}})
    with pytest.raises(ValueError, match=r"model\.overrides\.window: .*'transformer'"):
        check_variants({"variants": variants, "model": {"overrides": {"window": 64}}})


def test_variant_key_typo_fails_at_planning_naming_it(tmp_path: Path) -> None:
    """`n_loop:` instead of `n_loops:` stops `snakemake -n`, naming variants.<name>.<key> and the allowed keys."""
    wd = _workdir(tmp_path)
    p = wd / "workflows/config/smoke.yaml"
    cfg = yaml.safe_load(p.read_text())
    cfg["variants"]["yocou"]["n_loop"] = cfg["variants"]["yocou"].pop("n_loops")
    p.write_text(yaml.safe_dump(cfg))
    res = _snakemake(wd, "-n", "--cores", "1", "--config", "scale=smoke", check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "variants.yocou.n_loop:" in out and "n_loops" in out and "allowed keys" in out, out[-3000:]



def test_a_user_added_scale_config_plans(tmp_path: Path) -> None:
    """A scale of one's own: workflows/config/<name>.yaml with `scale: <name>` plans like the shipped ones."""
    wd = _workdir(tmp_path)
    cfg = yaml.safe_load((wd / "workflows/config/smoke.yaml").read_text())
    cfg["scale"] = "my-smoke_2"
    (wd / "workflows/config/my-smoke_2.yaml").write_text(yaml.safe_dump(cfg))
    out = _snakemake(wd, "-n", "--cores", "1", "reproduce_all", "--config", "scale=my-smoke_2").stdout
    for v in cfg["core_variants"]:
        assert f"runs/my-smoke_2/models/{v}/model.pt" in out


def test_an_unsafe_scale_name_is_rejected_naming_it(tmp_path: Path) -> None:
    wd = _workdir(tmp_path)
    cfg = yaml.safe_load((wd / "workflows/config/smoke.yaml").read_text())
    cfg["scale"] = "my scale"
    (wd / "workflows/config/my scale.yaml").write_text(yaml.safe_dump(cfg))
    res = _snakemake(wd, "-n", "--cores", "1", "--config", "scale=my scale", check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "--config scale: 'my scale' is not a usable scale name" in out and SCALE_PATTERN in out, out[-3000:]


def test_schema_scale_is_the_safe_name_pattern() -> None:
    """The schema accepts any safe scale name (not a fixed list) and rejects unsafe ones, as yocou.workflow.scales does."""
    import jsonschema

    schema = yaml.safe_load((ROOT / "workflows/schemas/config.schema.yaml").read_text())
    assert schema["properties"]["scale"]["pattern"] == SCALE_PATTERN
    cfg = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())
    for name in ("mine", "paper-2", "v1.5_cpu"):
        jsonschema.validate({**cfg, "scale": name}, schema)
        assert check_scale_name(name) == name
    for name in ("../x", "a b", "-x", "x;y", ""):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**cfg, "scale": name}, schema)
        with pytest.raises(ValueError, match="scale"):
            check_scale_name(name)

@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch copy of the workflow after the whole smoke DAG ran in it, once for the tests of this module that
    need a finished run (the end-to-end checks and the report, which needs the run's metadata in .snakemake/)."""
    wd = _workdir(tmp_path_factory.mktemp("smoke_run"))
    _snakemake(wd, "--cores", "2", "reproduce_all", "depth_control", "--config", "scale=smoke")
    return wd


@pytest.mark.slow
def test_smoke_pipeline_end_to_end(smoke_run: Path) -> None:
    """The whole smoke DAG on real data: every table and figure target is produced and sane."""
    wd = smoke_run
    res = wd / "results/smoke"
    for f in ("heldout_ppl.csv", "heldout_ppl.md", "table10.csv", "table10.md", "table10_measured.md",
              "fig2_data.csv"):
        assert (res / f).is_file(), f
    for f in ("fig2.png", "fig2.pdf"):
        assert (wd / "figures/smoke" / f).stat().st_size > 1000
    ppl = json.loads((res / "heldout_ppl.json").read_text())
    vocab = json.loads((wd / "runs/smoke/models/yocou/run_config.json").read_text())["model"]["vocab_size"]
    for row in ppl["rows"]:
        # trained models beat the uniform distribution on held-out text
        assert 1 < row["heldout_book ppl"] < vocab and 1 < row["heldout_code ppl"] < vocab
    t10 = json.loads((res / "table10_cells.json").read_text())["rows"]
    assert len(t10) == 24 and all(r["match"] for r in t10)
    kv = json.loads((res / "kv_measure.json").read_text())
    assert all(r["measured_bytes"] == r["analytic_bytes"] for r in kv["rows"])
    assert "git_commit" in kv["provenance"]
    # every study rendered, with every run it names
    cfg = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())
    for f in ("fig5", "fig6", "fig8"):
        assert (wd / f"figures/smoke/{f}.png").stat().st_size > 1000, f
        assert (res / f"{f}_data.csv").is_file(), f
    # fig5_data.md counts the held-out documents scored (a regression once said 20 where smoke holds 3): those of the
    # corpus manifest up to eval.ppl.max_tokens per split, as the runs' ppl JSON lists them
    manifest = json.loads((wd / "runs/smoke/corpus/manifest.json").read_text())["splits"]
    scored = json.loads((res / "ppl/yoco.json").read_text())["splits"]
    fig5_md = (res / "fig5_data.md").read_text()
    for split in ("book", "code"):
        said = re.search(rf"{split} \((\d+) documents?", fig5_md)
        n = scored[f"heldout_{split}"]["n_docs"]
        assert said and int(said.group(1)) == n <= manifest[f"heldout_{split}"]["n_docs"], (split, fig5_md)
    # the ladder ran within reproduce_all, and the audit computed with it carries its verdicts
    assert (wd / "figures/smoke/fig2_ladder.png").stat().st_size > 1000
    verdicts = pd.read_csv(res / "audit/verdicts.csv")
    assert verdicts["id"].str.startswith(LADDER_ID_PREFIX).any()
    for t in ("table2", "table3", "table5"):
        rows = json.loads((res / f"{t}.json").read_text())["rows"]
        runs = cfg["studies"][t].values() if t == "table2" else cfg["studies"][t]
        ours = [r["model"] for r in rows if "(ours" in r["model"]]
        assert len(ours) == len(list(runs)), (t, ours)
        md = (res / f"{t}.md").read_text()
        assert "Budget of" in md and "(paper)" in md
    eq = json.loads((wd / "runs/smoke/models/yocou_moe_eqflops/summary.json").read_text())
    rc = json.loads((wd / "runs/smoke/models/yocou_moe/run_config.json").read_text())
    assert eq["steps"] == rc["equal_flops"]["step"] < rc["train"]["steps"]
    assert eq["train_flops"] <= rc["equal_flops"]["reference_train_flops"]
    # the depth control (its own target): its bracket's rate, its points paired with YOCO's and YOCO-U's seeds, one
    # decision per split at its largest budget, and its figure
    depth = json.loads((res / "ladder/depth.json").read_text())
    dpts = pd.read_csv(res / "ladder/depth_points.csv")
    assert set(dpts["variant"]) == {"yoco_deep9"} and sorted(set(dpts["steps"])) == [10, 20]
    assert set(dpts["lr"]) == {depth["bracket"]["yoco_deep9"]["lr"]}
    assert [d["split"] for d in depth["decisions"]] == ["book", "code"]
    assert {d["tokens"] for d in depth["decisions"]} == {int(dpts["tokens"].max())}
    assert (wd / "figures/smoke/ladder_depth.png").stat().st_size > 1000
    f2 = pd.read_csv(res / "fig2_summary.csv")
    assert list(f2["paper"]) == [0.62, 0.033] and f2["ours"].iloc[1] == f2["ours"].iloc[1]  # gap is a number
    # A second run has nothing to do.
    again = _snakemake(wd, "--cores", "2", "reproduce_all", "--config", "scale=smoke", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    # Re-summarizing the ladder's bracket (its code changed, or -R) re-reads the points and refits, and retrains
    # nothing: the run configs read the rates of rule ladder_rates (from the bracket runs' losses alone).
    out = _snakemake(wd, "--cores", "2", "reproduce_all", "--config", "scale=smoke", "-n", "-R", "bracket_summary").stdout
    assert "rule bracket_summary:" in out and "rule ladder_points:" in out and "rule ladder_fits:" in out
    assert "rule ladder_run_config:" not in out and "rule ladder_train" not in out
    # The short-budget runs' rate is not the ladder's (it brackets its own): changing it retrains those runs only.
    lr = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())["train"]["lr"] * 2
    out = _snakemake(wd, "--cores", "2", "reproduce_all", "--config", "scale=smoke", f"train={{lr: {lr}}}", "-n").stdout
    assert "rule train:" in out and "rule ladder_run_config:" not in out and "rule ladder_train" not in out
    # Editing the study file: another scale's section or a comment retrains nothing; a schedule setting of this
    # scale's section rewrites every ladder run's config (a param of ladder_run_config) and retrains those runs,
    # the bracket's too, but leaves the held-out plays' split (rule ladder_tokens) alone.
    study = wd / "workflows/studies/ladder.yaml"
    text = study.read_text()
    try:
        doc = yaml.safe_load(text)
        doc["tiny"]["warmup_steps"] += 1
        study.write_text("# edited\n" + yaml.safe_dump(doc))
        again = _snakemake(wd, "--cores", "2", "reproduce_all", "--config", "scale=smoke", "-n")
        assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]
        doc["smoke"]["warmup_steps"] += 1
        study.write_text(yaml.safe_dump(doc))
        out = _snakemake(wd, "--cores", "2", "reproduce_all", "--config", "scale=smoke", "-n").stdout
        n_runs = sum(p.kind in ("bracket", "stable", "anneal") for p in ladder_plan(load_ladder("smoke", study)).values())
        assert out.count("rule ladder_run_config:") == n_runs and "rule ladder_tokens:" not in out
    finally:
        study.write_text(text)


EXPECTED_NOT_RUN = {  # declared comparisons whose data the smoke config does not make, and why
    "BBH": "BBH is not in the offline task pack (eval/columns.yaml: unavailable)",
    "Humaneval": "HumanEval needs eval.downstream.code_exec: true (off by default)",
    "MMLU": "the smoke config leaves mmlu out of eval.downstream.tasks",
}


@pytest.mark.slow
def test_every_declared_comparison_evaluates_on_the_smoke_runs_tidy_tables(smoke_run: Path) -> None:
    """Renderer, tidy writer and audit cannot drift apart. Every row of eval/comparisons.yaml is evaluated
    on the tidy tables the real summarize steps wrote in the smoke run; each finds its data (only the columns in
    EXPECTED_NOT_RUN have none), every verdict at smoke is capped as decide() says, and the audit's verdicts.csv
    is the same evaluation."""
    from yocou.results.audit.claims import load_sources
    from yocou.results.audit.decision import DECIDED
    from yocou.results.audit.verdicts import (
        NOT_RUN,
        SAME_SIZE,
        load_comparisons,
        reproduce,
    )

    res = smoke_run / "results/smoke"
    got = reproduce(load_sources(), res, "smoke")
    assert [v.id for v in got] == [r["id"] for r in load_comparisons()]
    for v in got:
        expected = next((k for k in EXPECTED_NOT_RUN if v.id.endswith(f".{k}")), None)
        # the paper-shape study's rows read results/paper_shape/, which the scratch workflow does not hold (they
        # are evaluated on the committed measurement in tests/test_paper_shape.py); the GPU rows read results/gpu/,
        # made only on a GPU (they are evaluated on a synthetic GPU run in tests/test_gpu_session.py)
        if expected or v.id.startswith(("v.PS.", "v.GPU.")):
            assert v.qualifier == NOT_RUN, (v.id, v.message)
            continue
        assert v.qualifier != NOT_RUN, (v.id, v.message)
        if v.evidence != "deterministic":   # smoke checks the plumbing, not the paper: inconclusive, or not a
            assert v.verdict not in DECIDED, (v.id, v.verdict)    # decision (not comparable, censored)
    kv = next(v for v in got if v.id == "v.kv.formula")
    assert kv.verdict == SAME_SIZE, kv                             # measured cache bytes = the formula
    audit = pd.read_csv(res / "audit/verdicts.csv", keep_default_na=False)
    ladder = audit["id"].str.startswith(LADDER_ID_PREFIX)  # the ladder's rows, decided by eval/ladder.yaml
    assert ladder.any()
    audit = audit[~ladder]
    assert list(audit["id"]) == [v.id for v in got] and list(audit["verdict"]) == [v.verdict for v in got]


def _report_var(html: str, name: str):
    """A JSON value the Snakemake report page assigns in its scripts (``var <name> = <JSON>;`` on one line)."""
    import re

    m = re.search(rf"^\s*var {name} = ([{{\"].*);\s*$", html, re.M)
    assert m, f"no 'var {name}' in the report"
    return json.loads(m.group(1))


def _caption_text(page: str) -> str:
    """The text of a rendered caption (HTML), tags dropped, whitespace collapsed."""
    import html
    import re

    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())


@pytest.mark.slow
def test_smoke_report_shows_every_table_and_figure_with_its_caption(smoke_run: Path) -> None:
    """`snakemake --report` after the smoke run (.zip and self-contained .html): every table (.md), figure (.png)
    and page (.html) that reproduce_all produces (Snakemake's own --summary of the DAG) is in the report, filed
    under a part of the paper (category) and an item (subcategory), with a caption rendered for this scale that
    says what the paper claims and where its numbers stand; the workflow page describes the run."""
    import base64
    import zipfile

    wd = smoke_run
    summary = _snakemake(wd, "--cores", "1", "--summary", "reproduce_all", "--config", "scale=smoke").stdout
    made = sorted({line.split("\t")[0] for line in summary.splitlines()[1:] if line.strip()})
    # the audit's standalone page (figures inline, over a browser's data: URL limit at tiny) is not an item: the
    # report shows the audit as its HTML page, results/smoke/audit/html/report.html
    expected = [f for f in made if f.startswith(("results/smoke/", "figures/smoke/"))
                and f.endswith((".md", ".png", ".html")) and f != "results/smoke/audit/report.html"]
    for f in ("figures/smoke/fig2.png", "figures/smoke/fig8.png", "figures/smoke/niah_heatmap.png",
              "results/smoke/table2.md", "results/smoke/table10_ratios.md", "results/smoke/audit/html/report.html",
              "results/smoke/html/table2.html"):
        assert f in expected, f  # the summary lists the DAG's files as we read them
    assert len(expected) >= 40, expected  # 8 figures, 14 tables and their pages, the audit's pages (smoke, today)

    # the report is of a target's DAG: after computing, reproduce_all's (the default target there only lists them)
    _snakemake(wd, "--cores", "1", "--report", "report.zip", "reproduce_all", "--config", "scale=smoke")
    with zipfile.ZipFile(wd / "report.zip") as z:
        names = set(z.namelist())
        page = z.read("report/report.html").decode()
        results = _report_var(page, "results")
        for path, r in results.items():  # every result's file travels in the zip, byte for byte
            assert z.read(f"report/{r['data_uri']}") == (wd / path).read_bytes(), path
    assert "report/report.html" in names
    missing = sorted(set(expected) - set(results))
    assert not missing, missing
    categories = _report_var(page, "categories")
    filed = {path: (cat, sub) for cat, subs in categories.items() for sub, paths in subs.items() for path in paths}
    assert sorted(filed) == sorted(results)
    assert "Other" not in categories and all("Other" not in subs for subs in categories.values())
    assert filed["results/smoke/table4.md"] == filed["figures/smoke/niah_heatmap.png"] == ("4 Long context", "Table 4")
    assert filed["results/smoke/table2.md"] == ("2 Loss scaling and downstream tasks", "Table 2")
    assert filed["results/smoke/audit/html/report.html"][0] == "8 Audit of the reported numbers"
    assert filed["results/smoke/html/table2.html"] == filed["results/smoke/table2.md"]
    for path, r in results.items():
        text = _caption_text(r["caption"])
        assert len(text) > 200 and "The paper" in text and "smoke" in text, (path, text)
        assert "{{" not in text and "system-message" not in r["caption"], (path, r["caption"][:2000])
    for path, quote in (("figures/smoke/fig2.png", "ΔL = 0.033"), ("results/smoke/table2.md", "47.08"),
                        ("results/smoke/table4.md", "1.00 / 0.95"), ("results/smoke/table3.md", "Paradise"),
                        ("results/smoke/table2.md", "BBH is not available offline")):
        assert quote in _caption_text(results[path]["caption"]), (path, quote)
    desc = _report_var(page, "workflow_desc")
    steps = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())["train"]["steps"]
    assert "system-message" not in desc and "{{" not in desc
    assert all(s in _caption_text(desc) for s in ("Universal YOCO", "at scale smoke (workflows/config/smoke.yaml)",
                                                  f"Every run trains {steps} steps")), desc

    _snakemake(wd, "--cores", "1", "--report", "report.html", "reproduce_all", "--config", "scale=smoke")
    embedded = _report_var((wd / "report.html").read_text(encoding="utf-8"), "results")
    assert sorted(embedded) == sorted(results)
    from yocou.results.render.pages import DATA_URL_LIMIT

    for path, r in embedded.items():  # self-contained: each file inline as a data URI, within a browser's limit
        assert r["caption"] == results[path]["caption"]
        assert len(r["data_uri"]) <= DATA_URL_LIMIT, path
        head, data = r["data_uri"].split(";base64,", 1)
        assert head.startswith("data:") and base64.b64decode(data) == (wd / path).read_bytes(), path
