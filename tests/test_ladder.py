"""The token ladder's plan (yocou.training.ladder) and bracket summary (yocou.results.summarize.ladder)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from yocou.results.summarize.ladder import bracket_best
from yocou.training.ladder import (
    LadderStudy,
    PlaysHoldout,
    heldout_plays,
    load_study,
    plan,
    run_config,
)
from yocou.training.train import branch_mismatch, train_config_from_dict
from yocou.workflow.wfconfig import read_scale_file, resolve_config

ROOT = Path(__file__).resolve().parents[1]
STUDY = {"variants": {"yoco": 2, "yocou": 1}, "budgets": [10, 20, 40], "cooldown_fraction": 0.2, "warmup_steps": 2,
         "min_lr_ratio": 0.0, "ckpt_every": 5, "bracket": {"steps": 10, "rates": [1e-3, 3e-3, 1e-2]},
         "heldout_plays": {"source": "shakespeare", "n": 1}}
DEPTH = {"variant": "deep", "model": {"preset": "yoco"}, "seeds": 2, "budgets": [10], "rates": [1e-3, 3e-3, 1e-2]}


def test_plan_chains_stable_segments_and_branches_each_from_its_own_segment() -> None:
    runs = plan(LadderStudy.model_validate(STUDY))
    assert [n for n, p in runs.items() if p.kind == "bracket"] == [
        "yoco_lr0p001", "yoco_lr0p003", "yoco_lr0p01", "yocou_lr0p001", "yocou_lr0p003", "yocou_lr0p01"]
    assert runs["yoco_seed1_s8"].init_from is None
    assert runs["yoco_seed1_s16"].init_from == "yoco_seed1_s8"
    assert runs["yoco_seed1_s32"].init_from == "yoco_seed1_s16"
    for d, s in ((10, 8), (20, 16), (40, 32)):
        b = runs[f"yoco_seed1_d{d}"]
        assert (b.steps, b.cooldown, b.init_from) == (d, d - s, f"yoco_seed1_s{s}")
    assert "yocou_seed1_d10" not in runs and "yocou_seed0_d40" in runs
    assert sum(p.kind == "anneal" for p in runs.values()) == 3 * 3


def test_every_branch_is_a_branch_of_its_segment_under_the_tiny_config() -> None:
    """The run configs the pipeline writes: each branch and segment passes branch_mismatch against its parent."""
    cfg = read_scale_file(ROOT / "workflows/config/tiny.yaml")
    resolve_config(cfg, root=ROOT)
    study = load_study("tiny", ROOT / "workflows/studies/ladder.yaml")
    runs = plan(study)
    rates = {v: 3e-3 for v in [*study.variants, study.depth_control.variant]}
    for name, p in runs.items():
        if p.init_from is None:
            continue
        child = run_config(cfg, study, name, 2048, rates)
        parent = run_config(cfg, study, p.init_from, 2048, rates)
        tc = train_config_from_dict(child["train"])
        assert branch_mismatch(parent["train"], tc, runs[p.init_from].steps) is None, name
        assert child["train"]["needle_mix"] is None and child["train"]["schedule"] == "wsd"
        assert {k: v for k, v in child["model"].items() if k != "name"} == \
            {k: v for k, v in parent["model"].items() if k != "name"}


def test_a_ladder_run_needs_the_bracketed_rate() -> None:
    cfg = read_scale_file(ROOT / "workflows/config/tiny.yaml")
    resolve_config(cfg, root=ROOT)
    study = load_study("tiny", ROOT / "workflows/studies/ladder.yaml")
    with pytest.raises(ValueError, match="--bracket"):
        run_config(cfg, study, "yoco_seed0_d500", 2048, None)
    assert run_config(cfg, study, "yoco_lr0p006", 2048, None)["train"]["lr"] == 6e-3
    with pytest.raises(ValueError, match="--run"):
        run_config(cfg, study, "yoco_seed9_d500", 2048, {"yoco": 1e-3})


@pytest.mark.parametrize("change, field", [
    ({"budgets": [20, 10]}, "budgets"),
    ({"budgets": [10, 17]}, "budgets"),          # 0.8 x 17 = 13.6: not a whole step
    ({"cooldown_fraction": 1.5}, "cooldown_fraction"),
    ({"bracket": {"steps": 10, "rates": [3e-3, 1e-3, 1e-2]}}, "bracket.rates"),
    ({"typo": 1}, "typo"),
    ({"heldout_plays": {"n": 0}}, "heldout_plays.n"),
    ({"heldout_plays": {"n": 1, "sources": "x"}}, "heldout_plays.sources"),
    ({"warmup_steps": 8, "budgets": [20, 40], "bracket": {"steps": 10, "rates": [1e-3, 3e-3, 1e-2]}}, "bracket.steps"),
    ({"checks": [{"name": "x", "variant": "rins", "budget": 10}]}, "checks"),
    ({"checks": [{"name": "x", "variant": "yoco", "budget": 10, "rate": -1}]}, "checks.0.rate"),
    ({"checks": [{"name": "x", "variant": "yoco", "budget": 10}, {"name": "x", "variant": "yoco", "budget": 20}]},
     "checks"),
    ({"variants": {"yoco": 65}}, "variants.yoco"),
    ({"depth_control": {**DEPTH, "seeds": 100000}}, "depth_control.seeds"),
    ({"depth_control": {**DEPTH, "variant": "yoco"}}, "depth_control.variant"),
    ({"depth_control": {**DEPTH, "budgets": [30]}}, "depth_control.budgets"),
    ({"depth_control": {**DEPTH, "rates": [1e-3, 1e-2]}}, "depth_control.rates"),
    ({"depth_control": {**DEPTH, "model": {"preset": "yoco", "n_self": 9}}}, "depth_control.model"),
    ({"depth_control": {**DEPTH, "model": {"preset": "yoco", "train": {"lr": 1.0}}}}, "depth_control.model"),
])
def test_bad_study_sections_are_refused_naming_the_field(tmp_path: Path, change: dict, field: str) -> None:
    p = tmp_path / "ladder.yaml"
    p.write_text(yaml.safe_dump({"tiny": {**STUDY, **change}}))
    with pytest.raises(ValueError, match=rf"{p}: tiny\.{field}"):
        load_study("tiny", p)


def test_heldout_plays_follow_the_hash_rule_and_name_their_field() -> None:
    """The plays held out: documents of the source, the excluded names left out, ordered by sha256("<seed>:<id>")
    (computed here by hand), the first n; asking for more than there are names the field."""
    import hashlib

    ids = ["milton/comus", "shakespeare/hamlet", "shakespeare/sonnets", "shakespeare/tempest", "shakespeare/lear",
           "stdlib/os.py"]
    spec = PlaysHoldout(source="shakespeare", exclude=["sonnets"], n=2, seed=7)
    by_hand = sorted(["shakespeare/hamlet", "shakespeare/tempest", "shakespeare/lear"],
                     key=lambda d: hashlib.sha256(f"7:{d}".encode()).hexdigest())[:2]
    assert heldout_plays(ids, spec) == by_hand
    with pytest.raises(ValueError, match=r"heldout_plays\.n: 4 documents asked for, but .* has 3"):
        heldout_plays(ids, spec.model_copy(update={"n": 4}))
    with pytest.raises(ValueError, match=r"heldout_plays\.exclude: 'sonets' is not a document under shakespeare/"):
        heldout_plays(ids, spec.model_copy(update={"exclude": ["sonnets", "sonets"]}))


def test_split_tokens_partitions_the_training_stream_by_document(token_dir: Path, tmp_path: Path) -> None:
    """The ladder's streams: train and heldout_plays hold the source stream's documents, each exactly once, token for
    token; the plays are the rule's; book and code are the scale's, unchanged."""
    import numpy as np

    from yocou.data.tokens import TokenStream
    from yocou.training.ladder import split_tokens

    study = LadderStudy.model_validate({**STUDY, "heldout_plays": {"source": "train", "exclude": ["0"], "n": 3}})  # ids train/<i>
    got = split_tokens(study, token_dir, tmp_path)
    src, tr, pl = (TokenStream(token_dir / "train.bin"), TokenStream(tmp_path / "train.bin"),
                   TokenStream(tmp_path / "heldout_plays.bin"))
    ids = list(src.meta["doc_ids"])
    assert got["heldout_plays"] == heldout_plays(ids, study.heldout_plays) == list(pl.meta["doc_ids"])
    assert sorted(tr.meta["doc_ids"] + pl.meta["doc_ids"]) == sorted(ids) and not set(tr.meta["doc_ids"]) & set(
        pl.meta["doc_ids"])
    for out in (tr, pl):
        for j, d in enumerate(out.meta["doc_ids"]):
            assert np.array_equal(out.document(j, include_eos=True), src.document(ids.index(d), include_eos=True)), d
    assert len(tr) + len(pl) == len(src) == got["train_tokens"] + got["heldout_plays_tokens"]
    for split in ("heldout_book", "heldout_code"):
        assert (tmp_path / f"{split}.bin").read_bytes() == (token_dir / f"{split}.bin").read_bytes()
    before = {f.name: f.read_bytes() for f in token_dir.iterdir()}
    with pytest.raises(ValueError, match=r"--out .*: is the --tokens folder"):
        split_tokens(study, token_dir, token_dir / ".." / token_dir.name)  # the same folder, spelled otherwise
    assert {f.name: f.read_bytes() for f in token_dir.iterdir()} == before  # nothing written


def test_bracket_best_is_interior_only_with_a_worse_rate_on_each_side() -> None:
    df = pd.DataFrame({"variant": ["a"] * 3 + ["b"] * 3, "lr": [1e-3, 3e-3, 1e-2] * 2,
                       "score": [5.0, 4.8, 4.9, 5.0, 4.9, 4.7]})
    best = bracket_best(df)
    assert best["a"] == {"lr": 3e-3, "score": 4.8, "interior": True, "edge": None}
    assert best["b"]["lr"] == 1e-2 and not best["b"]["interior"] and best["b"]["edge"] == "highest"


def test_check_rates_refuses_a_run_trained_at_another_rate_than_the_brackets_best(tmp_path: Path) -> None:
    """The points check every stable segment and branch against the bracket summary's best rate (the run configs
    read rates.json, rule ladder_rates), naming the first run that differs."""
    import json

    from yocou.results.summarize.ladder import check_rates

    study = LadderStudy.model_validate(STUDY)
    rates = {"yoco": 3e-3, "yocou": 1e-3}
    runs = [p for p in plan(study).values() if p.kind != "bracket"]
    for p in runs:
        (tmp_path / p.name).mkdir()
        doc = {"provenance": {"config": {"train": {"lr": rates[p.variant]}}}}
        (tmp_path / p.name / "summary.json").write_text(json.dumps(doc))
    bracket = {"best": {v: {"lr": r, "interior": True} for v, r in rates.items()}}
    check_rates(study, tmp_path, bracket)
    moved = {"best": {**bracket["best"], "yocou": {"lr": 1e-2, "interior": True}}}
    with pytest.raises(ValueError, match=r"yocou_seed0_\w+/summary.json: trained at lr 0.001, but the bracket's best "
                                         r"rate for yocou is 0.01"):
        check_rates(study, tmp_path, moved)
    # a branch beyond --up-to is not read (an interim table while the larger budgets train)
    last = max(p.steps for p in runs)
    for p in runs:
        if p.steps == last:
            (tmp_path / p.name / "summary.json").unlink()
    check_rates(study, tmp_path, bracket, up_to=sorted({p.steps for p in runs})[-2])


def test_load_study_refuses_an_unknown_scale_section_and_a_variant_the_scale_lacks(tmp_path: Path) -> None:
    """A typo'd scale section would drop the study silently, a typo'd variant fail deep in planning: both are
    refused when the file is read, naming the file and the field."""
    f = tmp_path / "ladder.yaml"
    f.write_text(yaml.safe_dump({"smoke": STUDY, "tinyy": STUDY}))
    with pytest.raises(ValueError, match=r"ladder.yaml: tinyy: not a configured scale"):
        load_study("smoke", f, scales=["paper", "smoke", "tiny"])
    assert load_study("smoke", f) is not None  # without the scales, as before
    f.write_text(yaml.safe_dump({"smoke": {**STUDY, "variants": {"yoco": 2, "yocoo": 1}}}))
    with pytest.raises(ValueError, match=r"ladder.yaml: smoke.variants: 'yocoo' is not a variant of the smoke config"):
        load_study("smoke", f, scales=["smoke"], variants={"yoco": {}, "yocou": {}})


def test_an_empty_or_broken_study_file_is_refused_with_its_position(tmp_path: Path) -> None:
    """An empty file would drop the ladder from every scale without a word; a YAML error names its line and
    column."""
    f = tmp_path / "ladder.yaml"
    f.write_text("# only a comment\n")
    with pytest.raises(ValueError, match=rf"^{f}: expected a mapping of scale names to ladder sections, got an empty file$"):
        load_study("smoke", f)
    f.write_text("smoke:\n  warmup_steps: 2\n\tbad: 1\n")
    with pytest.raises(ValueError, match=rf"^{f}: not YAML \(.*, line 3, column 1\)$"):
        load_study("smoke", f)


def test_rates_pick_each_variants_lowest_mean_held_out_loss_from_the_bracket_runs(tmp_path: Path) -> None:
    """rates.json (what the run configs read) holds, per variant, the bracket rate whose mean of book and code loss
    is lowest, computed here by hand from the ppl files it reads."""
    import json

    from yocou.results.summarize.ladder import main as summarize_main
    from yocou.training.ladder import best_rates

    f = tmp_path / "ladder.yaml"
    f.write_text(yaml.safe_dump({"smoke": STUDY}))
    study = load_study("smoke", f)
    loss = {}  # a U in log-rate for yoco (best in the middle), falling for yocou (best at the top rate)
    for p in plan(study).values():
        if p.kind == "bracket":
            i = study.bracket.rates.index(p.rate)
            book = 5.0 + (0.1 * (i - 1) ** 2 if p.variant == "yoco" else -0.1 * i)
            code = book - 0.5 + 0.01 * i
            loss[p.name] = (p.variant, p.rate, (book + code) / 2)
            splits = {"heldout_book": {"nats_per_token": book}, "heldout_code": {"nats_per_token": code}}
            (tmp_path / f"{p.name}.json").write_text(json.dumps({"splits": splits}))
    out = tmp_path / "rates.json"
    summarize_main(["rates", "--scale", "smoke", "--study", str(f), "--ppl-root", str(tmp_path), "--out", str(out)])
    by_hand = {v: min((s, r) for (vv, r, s) in loss.values() if vv == v)[1] for v in STUDY["variants"]}
    assert best_rates(json.loads(out.read_text())) == by_hand == {"yoco": 3e-3, "yocou": 1e-2}
    doc = json.loads(out.read_text())["best"]
    assert doc["yoco"]["interior"] and not doc["yocou"]["interior"] and doc["yocou"]["edge"] == "highest"


def test_a_ladder_runs_config_does_not_depend_on_the_train_keys_the_ladder_sets() -> None:
    """The pipeline leaves LADDER_TRAIN_KEYS out of what a ladder run depends on (so changing the short-budget runs'
    rate or schedule retrains no ladder run): the run config is the same with them, without them or changed."""
    from yocou.training.ladder import LADDER_TRAIN_KEYS

    cfg = resolve_config(read_scale_file(ROOT / "workflows/config/tiny.yaml"), root=ROOT)
    study = load_study("tiny", ROOT / "workflows/studies/ladder.yaml")
    stripped = {**cfg, "train": {k: v for k, v in cfg["train"].items() if k not in LADDER_TRAIN_KEYS}}
    changed = {**cfg, "train": {**cfg["train"], "lr": 9e-3, "warmup_steps": 7, "steps": 11, "schedule": "cosine"}}
    for run in ("yoco_seed1_s400", "yocou_seed2_d1000", "rins_lr0p006"):
        want = run_config(cfg, study, run, 2048, {"yoco": 1.5e-3, "yocou": 1.5e-3, "rins": 1.5e-3})
        for other in (stripped, changed):
            got = run_config(other, study, run, 2048, {"yoco": 1.5e-3, "yocou": 1.5e-3, "rins": 1.5e-3})
            assert {k: v for k, v in got.items() if k != "provenance"} == \
                   {k: v for k, v in want.items() if k != "provenance"}, run
        assert set(want["train"]) >= LADDER_TRAIN_KEYS


def test_a_check_is_one_run_from_step_0_with_its_rate_and_assumptions() -> None:
    """checks: of the tiny study: from step 0 (no parent), the ladder's cooldown fraction, its own rate or the
    bracketed one, and its assumptions over the scale's (cross_rope) with everything else of the variant's model."""
    cfg = read_scale_file(ROOT / "workflows/config/tiny.yaml")
    resolve_config(cfg, root=ROOT)
    study = load_study("tiny", ROOT / "workflows/studies/ladder.yaml")
    runs = plan(study)
    rates = {v: 1.5e-3 for v in study.variants}
    checks = {n: p for n, p in runs.items() if p.kind == "check"}
    assert len(checks) == len(study.checks) >= 6 and all(p.init_from is None for p in checks.values())
    h = run_config(cfg, study, "check_horizon_yoco_lr0p003", 2048, rates)
    assert (h["train"]["steps"], h["train"]["cooldown_steps"], h["train"]["lr"]) == (1000, 200, 3e-3)
    ladder = run_config(cfg, study, "yoco_seed0_d1000", 2048, rates)
    same = ("warmup_steps", "min_lr_ratio", "schedule", "seed", "batch_size", "seq_len")
    assert {k: h["train"][k] for k in same} == {k: ladder["train"][k] for k in same}
    rope = run_config(cfg, study, "check_crossrope_yocou", 2048, rates)
    base = run_config(cfg, study, "yocou_seed0_d2000", 2048, rates)
    assert rope["model"]["cross_rope"] is True and base["model"]["cross_rope"] is False
    assert rope["train"]["lr"] == 1.5e-3 and rope["train"]["steps"] == 2000
    assert {k: v for k, v in rope["model"].items() if k not in ("name", "cross_rope")} == \
        {k: v for k, v in base["model"].items() if k not in ("name", "cross_rope")}


def test_checks_table_judges_the_horizon_rate_and_the_sensitivity_by_hand(tmp_path: Path) -> None:
    import json

    from yocou.results.summarize.ladder import checks_table

    study = LadderStudy.model_validate({**STUDY, "checks": [
        {"name": "lo", "variant": "yoco", "budget": 20, "rate": 1e-3},
        {"name": "hi", "variant": "yoco", "budget": 20, "rate": 1e-2},
        {"name": "rope", "variant": "yocou", "budget": 40, "assumptions": {"cross_rope": True}}]})
    pts = pd.DataFrame([{"variant": v, "seed": 0, "steps": d, "tokens": d * 4096, "tokens_per_param": d / 100,
                         "lr": 3e-3, "book": 5.0, "code": 4.0, "bigram_book": 6.0, "bigram_code": 5.0}
                        for v, d in (("yoco", 20), ("yocou", 40))])
    pts.to_csv(tmp_path / "points.csv", index=False)
    losses = {"check_lo": (5.1, 4.0), "check_hi": (5.0, 4.1), "check_rope": (5.03, 3.99)}
    for name, (b, c) in losses.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({"splits": {
            "heldout_book": {"nats_per_token": b}, "heldout_code": {"nats_per_token": c}}}))
    df, lines = checks_table(study, tmp_path, tmp_path / "points.csv", {"checks": {"sensitivity_nats": 0.02}})
    got = df.set_index("check")
    assert got.loc["check_lo", "score"] == pytest.approx(4.55) and got.loc["check_hi", "ladder_score"] == 4.5
    assert got.loc["check_rope", "book_minus_ladder"] == pytest.approx(0.03)
    assert "**interior** at this budget" in lines[0] and "**sensitive**" in lines[1]   # 0.03 > 0.02
    losses["check_hi"] = (4.9, 4.0)   # a higher rate scores better: not interior
    (tmp_path / "check_hi.json").write_text(json.dumps({"splits": {
        "heldout_book": {"nats_per_token": 4.9}, "heldout_code": {"nats_per_token": 4.0}}}))
    _, lines = checks_table(study, tmp_path, tmp_path / "points.csv", {"checks": {"sensitivity_nats": 0.05}})
    assert "**not interior**" in lines[0] and "**insensitive**" in lines[1]
