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
    rates = {v: 3e-3 for v in study.variants}
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
