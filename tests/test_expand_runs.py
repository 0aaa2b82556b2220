"""Seeds, learning-rate runs, crossover runs and the scale's own sizes (yocou.workflow.wfconfig.expand_runs)."""

import copy

import pytest

from yocou.workflow.pipeline import resolve_run
from yocou.workflow.wfconfig import (
    ConfigError,
    crossover_runs,
    expand_runs,
    lr_runs,
    niah_runs,
    pipeline_runs,
    read_scale_file,
    replicas,
    resolve_config,
    seed_of,
)


def _cfg(**extra):
    return {"seed": 7, "train": {"steps": 10, "batch_size": 2, "seq_len": 8, "lr": 1e-3},
            "core_variants": ["yoco", "yocou"], "model": {"size": "smoke"},
            "variants": {"yoco": {"preset": "yoco"}, "yocou": {"preset": "yocou", "n_loops": 3},
                         "t5": {"preset": "yocou", "n_loops": 5, "train": {"lr": 5e-4}},
                         "moe": {"preset": "yocou", "equal_flops_to": "yoco"}},
            "studies": {"fig6": {"T1": "yoco", "T3": "yocou", "T5": "t5"}}, **extra}


def test_seed_replicas_take_seed_plus_k_and_the_largest_count():
    c = expand_runs(_cfg(seeds={"core": 3, "fig6": 2}))
    assert replicas(c, "yoco") == ["yoco", "yoco_seed1", "yoco_seed2"]
    assert replicas(c, "t5") == ["t5", "t5_seed1"]
    assert [seed_of(c, r) for r in replicas(c, "yocou")] == [7, 8, 9]
    # a replica is its base variant with only the seed changed (the base's own train section kept)
    assert c["variants"]["t5_seed1"] == {"preset": "yocou", "n_loops": 5, "train": {"lr": 5e-4, "seed": 8}}
    assert "moe_seed1" not in c["variants"]


def test_lr_runs_scale_each_runs_own_rate_and_crossover_multiplies_steps():
    c = expand_runs(_cfg(lr_sensitivity={"runs": ["yoco", "t5"], "factors": [0.5, 2]},
                         crossover={"runs": ["yocou"], "factor": 8, "seeds": 2}))
    assert c["variants"]["yoco_lr0p5x"]["train"]["lr"] == pytest.approx(5e-4)
    assert c["variants"]["t5_lr2x"]["train"]["lr"] == pytest.approx(1e-3)
    assert lr_runs(c)["yoco"] == {1.0: "yoco", 0.5: "yoco_lr0p5x", 2.0: "yoco_lr2x"}
    assert c["variants"]["yocou_x8"]["train"] == {"steps": 80}
    assert c["variants"]["yocou_x8_seed1"]["train"] == {"steps": 80, "seed": 8}
    assert crossover_runs(c) == ["yocou_x8", "yocou_x8_seed1"]
    assert not set(crossover_runs(c)) & set(pipeline_runs(c)) and "yoco_lr2x" in pipeline_runs(c)


def test_seeds_at_the_other_rates_and_per_run_counts():
    """seeds.lr_rates gives every run at another rate its replicas (that rate, seed + k); seeds.runs gives one run
    more seeds than its study's count; the largest count wins; an unknown run is refused naming it."""
    c = expand_runs(_cfg(lr_sensitivity={"runs": ["yoco"], "factors": [0.5, 2]},
                         seeds={"core": 2, "lr_rates": 3, "runs": {"yoco": 4, "yocou": 1, "yoco_lr2x": 2}}))
    assert replicas(c, "yoco_lr2x") == ["yoco_lr2x", "yoco_lr2x_seed1", "yoco_lr2x_seed2"]
    assert replicas(c, "yoco_lr0p5x") == ["yoco_lr0p5x", "yoco_lr0p5x_seed1", "yoco_lr0p5x_seed2"]
    assert c["variants"]["yoco_lr2x_seed2"]["train"] == {"lr": pytest.approx(2e-3), "seed": 9}
    assert replicas(c, "yoco") == ["yoco", "yoco_seed1", "yoco_seed2", "yoco_seed3"]
    assert replicas(c, "yocou") == ["yocou", "yocou_seed1"]                 # core's 2 beats runs' 1
    assert expand_runs(copy.deepcopy(c)) == c                               # idempotent
    with pytest.raises(ConfigError, match=r"seeds\.runs: 'nope' is not a variant"):
        expand_runs(_cfg(seeds={"runs": {"nope": 3}}))


def test_expansion_is_idempotent_and_a_clash_fails_naming_the_variant():
    c = expand_runs(_cfg(seeds={"core": 2}))
    before = copy.deepcopy(c)
    assert expand_runs(c) == before
    bad = _cfg(seeds={"core": 2})
    bad["variants"]["yoco_seed1"] = {"preset": "transformer"}
    with pytest.raises(ConfigError, match=r"variants\.yoco_seed1"):
        expand_runs(bad)
    with pytest.raises(ConfigError, match=r"lr_sensitivity\.runs.*'nope'"):
        expand_runs(_cfg(lr_sensitivity={"runs": ["nope"], "factors": [2]}))


def test_replica_resolves_to_the_same_model_with_another_seed():
    c = expand_runs(_cfg(seeds={"core": 2}))
    a, b = resolve_run(c, "yocou"), resolve_run(c, "yocou_seed1")
    assert a["model"] | {"name": "x"} == b["model"] | {"name": "x"}
    assert (a["train"]["seed"], b["train"]["seed"]) == (7, 8)
    assert {k: v for k, v in a["train"].items() if k != "seed"} == {k: v for k, v in b["train"].items() if k != "seed"}


def test_scale_sizes_are_used_and_may_not_shadow_builtin_ones():
    c = _cfg(sizes={"mine": {"d_model": 40, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1, "head_dim": 20,
                             "d_ff": 64, "window": 4}})
    c["variants"]["yoco"]["size"] = "mine"
    m = resolve_run(c, "yoco", vocab_size=300)["model"]
    assert (m["d_model"], m["n_heads"], m["head_dim"], m["vocab_size"]) == (40, 2, 20, 300)
    cfg = read_scale_file("workflows/config/tiny.yaml")
    cfg["sizes"]["smoke"] = dict(cfg["sizes"]["base"])
    with pytest.raises(ConfigError, match=r"sizes\.smoke: a built-in size"):
        resolve_config(cfg, source="tiny")


def test_tiny_config_expands_to_the_planned_runs():
    cfg = resolve_config(read_scale_file("workflows/config/tiny.yaml"), source="tiny")
    runs = pipeline_runs(cfg)
    # 17 variants, 2 replicas of each core run (3 seeds), 1 of Figure 6's T = 2 and T = 5, 2 learning rates x 4
    # core runs, 2 replicas of each of the three runs at 2x the rate (seeds.runs: 3), Table 4's retrieval run of
    # each core run and 2 seed replicas of YOCO's and YOCO-U's
    assert len(runs) == 17 + 4 * 2 + 2 + 8 + 3 * 2 + 4 + 2 * 2
    assert all(len(replicas(cfg, r)) == cfg["niah_train"]["seeds"].get(r[:-len("_niah")], 1) for r in niah_runs(cfg))
    assert niah_runs(cfg) == [f"{r}_niah" for r in cfg["core_variants"]] and set(niah_runs(cfg)) <= set(runs)
    f = cfg["niah_train"]["factor"]
    tr = cfg["variants"]["yocou_niah"]["train"]
    assert (tr["steps"], tr["warmup_steps"], tr["eval_every"]) == (cfg["train"]["steps"] * f,
                                                                  cfg["train"]["warmup_steps"] * f,
                                                                  cfg["train"]["eval_every"] * f)
    assert tr["needle_mix"] == {**cfg["train"]["needle_mix"], "fraction": cfg["niah_train"]["needle_fraction"]}
    assert all(len(replicas(cfg, r)) == 3 for r in cfg["core_variants"])
    assert all(len(replicas(cfg, f"{r}_lr2x")) == 3 for r in ("transformer", "yoco", "rins"))
    assert len(crossover_runs(cfg)) == 2 * cfg["crossover"]["seeds"]



def test_niah_train_runs_scale_the_schedule_and_set_the_needle_fraction():
    c = _cfg(niah_train={"runs": ["yoco", "t5"], "factor": 4, "needle_fraction": 0.5})
    c["train"].update(warmup_steps=3, eval_every=5, needle_mix={"fraction": 0.1, "min_distance": 2})
    expand_runs(c)
    assert c["variants"]["yoco_niah"] == {"preset": "yoco", "train": {
        "steps": 40, "warmup_steps": 12, "eval_every": 20, "needle_mix": {"fraction": 0.5, "min_distance": 2}}}
    # the run's own train section is kept, and its own schedule is the one scaled
    c2 = _cfg(niah_train={"runs": ["t5"], "factor": 2, "needle_fraction": 0.25})
    c2["variants"]["t5"]["train"].update(steps=6)
    t = expand_runs(c2)["variants"]["t5_niah"]["train"]
    assert (t["lr"], t["steps"], t["needle_mix"]) == (5e-4, 12, {"fraction": 0.25})
    # Table 4's runs: the retrieval runs where configured, else the core runs; both trained by reproduce_all
    assert niah_runs(c) == ["yoco_niah", "t5_niah"] and {"yoco_niah", "t5_niah"} <= set(pipeline_runs(c))
    assert niah_runs(expand_runs(_cfg())) == ["yoco", "yocou"]
    with pytest.raises(ConfigError, match=r"niah_train\.runs.*'nope'"):
        expand_runs(_cfg(niah_train={"runs": ["nope"], "factor": 2, "needle_fraction": 0.5}))
    a, b = resolve_run(c, "yoco"), resolve_run(c, "yoco_niah")
    assert a["model"] | {"name": "x"} == b["model"] | {"name": "x"} and b["train"]["steps"] == 4 * a["train"]["steps"]


def test_niah_train_seeds_replicate_only_the_named_retrieval_runs():
    c = expand_runs(_cfg(niah_train={"runs": ["yoco", "yocou"], "factor": 2, "needle_fraction": 0.5,
                                     "seeds": {"yocou": 3}}))
    assert replicas(c, "yocou_niah") == ["yocou_niah", "yocou_niah_seed1", "yocou_niah_seed2"]
    assert replicas(c, "yoco_niah") == ["yoco_niah"]
    assert [seed_of(c, r) for r in replicas(c, "yocou_niah")] == [7, 8, 9]
    # a replica is the retrieval run with only the seed changed: same steps and needle mix
    base, rep = c["variants"]["yocou_niah"], c["variants"]["yocou_niah_seed2"]
    assert rep == {**base, "train": {**base["train"], "seed": 9}}
    assert {"yocou_niah_seed1", "yocou_niah_seed2"} <= set(pipeline_runs(c))
    assert niah_runs(c) == ["yoco_niah", "yocou_niah"]  # base runs; replicas() adds the seeds
    with pytest.raises(ConfigError, match=r"niah_train\.seeds: 't5' is not one of niah_train\.runs"):
        expand_runs(_cfg(niah_train={"runs": ["yoco"], "factor": 2, "needle_fraction": 0.5, "seeds": {"t5": 2}}))
