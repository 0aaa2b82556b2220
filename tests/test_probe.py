"""The mechanism probe (yocou.evaluation.probe): generators checked against slow pure-Python walks of their own context,
argument errors, a tiny end-to-end run, and the summary's interval against one computed by hand."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from scipy import stats

from yocou.evaluation.probe import tasks as T
from yocou.evaluation.probe.run import (
    EVAL_SEED_BASE,
    SCALES,
    ProbeSettings,
    equal_flops_steps,
    heldout_set,
    probe_model,
    run_probe,
    self_decoder_reach,
    settings_from_dict,
)
from yocou.evaluation.probe.summarize import TIDY_COLUMNS, collect, render, t_interval
from yocou.training.train import batch_generator

SMOKE = SCALES["smoke"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _in(tok: int, rng: tuple[int, int]) -> bool:
    return rng[0] <= tok < rng[0] + rng[1]


# --- reference walks: plain Python over lists, sharing nothing with the generators ------------------------------


def _mqar_reference(ids: list[int], tgt: list[int], min_distance: int) -> int:
    """Check one MQAR row against its context; returns the number of scored answers."""
    first_seen: dict[int, int] = {}  # key -> position of its first occurrence (the context's)
    for i, tok in enumerate(ids):
        if _in(tok, T.KEYS) and tok not in first_seen:
            first_seen[tok] = i
    scored = [i for i, t in enumerate(tgt) if t != T.IGNORE]
    asked = []
    for i in scored:
        key = ids[i]
        assert _in(key, T.KEYS), f"position {i}: scored token {key} is not a key"
        j = first_seen[key]
        assert j < i, "the query key must come after its pair"
        value = ids[j + 1]
        assert _in(value, T.VALUES)
        assert tgt[i] == value, f"position {i}: target {tgt[i]} but the context pairs key {key} with {value}"
        assert ids[i + 1] == value, "the query's own value token follows its key"
        assert i - (j + 1) >= min_distance, f"distance {i - (j + 1)} < min_distance {min_distance}"
        assert ids.count(key) == 2, "a key appears once in the context and once as a query"
        asked.append(key)
    assert len(set(asked)) == len(asked), "a key is asked twice"
    return len(scored)


def _khop_reference(ids: list[int], tgt: list[int], min_distance: int) -> list[int]:
    """Check one k-hop row: every answer is the node reached by following the context's edges k times from the start,
    every edge used ends (its SEP) at least ``min_distance`` before the start node, each query walks its own chain.
    Returns the k of each scored answer."""
    edge: dict[int, tuple[int, int]] = {}  # source -> (target, position of the edge's SEP)
    for i in range(len(ids) - 2):
        a, b, sep = ids[i], ids[i + 1], ids[i + 2]
        if _in(a, T.NODES) and _in(b, T.NODES) and sep == T.SEP:
            assert a not in edge, f"node {a} has two outgoing edges"
            edge[a] = (b, i + 2)
    parent = {b: a for a, (b, _) in edge.items()}
    ks, heads = [], []
    for i, t in enumerate(tgt):
        if t == T.IGNORE:
            continue
        k = ids[i - 1] - T.HOP + 1
        assert 1 <= k <= T.MAX_HOPS, f"position {i}: no hop token before the scored start node"
        node, nearest = ids[i], -1
        for _ in range(k):
            assert node in edge, f"position {i}: the walk leaves the context at node {node}"
            node, sep_pos = edge[node]
            nearest = max(nearest, sep_pos)
        assert t == node, f"position {i}: target {t}, but {k} hops from {ids[i]} reach {node}"
        assert ids[i + 1] == node
        assert i - nearest >= min_distance, f"distance {i - nearest} < min_distance {min_distance}"
        head = ids[i]
        while head in parent:
            head = parent[head]
        heads.append(head)
        ks.append(k)
    assert len(set(heads)) == len(heads), "two queries walk the same chain"
    return ks


@pytest.mark.parametrize("pools", [{}, {"n_keys": 10, "n_values": 10, "n_filler": 1}])
def test_mqar_answers_match_a_reference_walk_of_the_context(pools: dict) -> None:
    ids, tgt = T.mqar(12, 160, n_pairs=10, n_queries=7, min_distance=60, generator=_gen(1), **pools)
    assert ids.shape == tgt.shape == (12, 160) and ids.dtype == tgt.dtype == torch.int64
    assert int(ids.min()) >= 0 and int(ids.max()) < T.VOCAB_SIZE
    for row_ids, row_t in zip(ids.tolist(), tgt.tolist()):
        assert _mqar_reference(row_ids, row_t, 60) == 7
    if pools:  # every key and value of the pools, one filler id
        assert {t for t in ids.view(-1).tolist() if _in(t, T.KEYS)} == set(range(T.KEYS[0], T.KEYS[0] + 10))
        assert {t for t in ids.view(-1).tolist() if _in(t, T.FILLER)} == {T.FILLER[0]}


@pytest.mark.parametrize("pools", [{}, {"n_nodes": 36, "n_filler": 3}])
def test_khop_answers_match_a_reference_walk_of_the_context(pools: dict) -> None:
    ids, tgt = T.khop(12, 300, n_chains=6, chain_len=5, n_queries=5, hops=(1, 2, 3, 4, 5), min_distance=90,
                      generator=_gen(2), **pools)
    assert ids.shape == tgt.shape == (12, 300)
    seen = []
    for row_ids, row_t in zip(ids.tolist(), tgt.tolist()):
        ks = _khop_reference(row_ids, row_t, 90)
        assert len(ks) == 5
        seen += ks
    assert set(seen) == {1, 2, 3, 4, 5}
    # hops_of reads the same k the reference read, at the scored positions only
    h = T.hops_of(ids, tgt)
    assert h[tgt == T.IGNORE].eq(0).all()
    assert h[tgt != T.IGNORE].tolist() == [k for k in seen]


def test_tightest_placement_meets_min_distance_exactly() -> None:
    # the shortest sequence the settings allow: no slack, so the first query sits at exactly min_distance
    n = 2 * 4 + 2 * 3 - 1 + 25
    ids, tgt = T.mqar(3, n, n_pairs=4, n_queries=3, min_distance=25, generator=_gen(0))
    for row_ids, row_t in zip(ids.tolist(), tgt.tolist()):
        _mqar_reference(row_ids, row_t, 25)
        first = next(i for i, t in enumerate(row_t) if t != T.IGNORE)
        assert first - 7 == 25  # the last context value is at position 2 * 4 - 1
    with pytest.raises(ValueError, match="seq_len"):
        T.mqar(3, n - 1, n_pairs=4, n_queries=3, min_distance=25, generator=_gen(0))


def test_training_batch_mixes_the_tasks_and_every_row_is_valid() -> None:
    tc = T.TaskConfig(seq_len=200, min_distance=40, n_pairs=6, mqar_queries=6, n_chains=4, chain_len=4,
                      khop_queries=3, mqar_fraction=0.25)
    ids, tgt = T.make_batch(tc, 8, _gen(3))
    rows = list(zip(ids.tolist(), tgt.tolist()))
    for r in rows[:2]:
        assert _mqar_reference(*r, 40) == 6
    for r in rows[2:]:
        assert len(_khop_reference(*r, 40)) == 3


def test_generators_are_deterministic_by_seed() -> None:
    tc = SMOKE.task
    a = T.make_batch(tc, 6, _gen(7))
    b = T.make_batch(tc, 6, _gen(7))
    c = T.make_batch(tc, 6, _gen(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_heldout_set_is_fixed_and_from_a_seed_stream_no_training_step_uses() -> None:
    # training streams are batch_generator(seed, step) = seed * 1_000_003 + step: below the held-out base for any
    # seed and step under a million
    assert EVAL_SEED_BASE > 10**6 * 1_000_003 + 10**6
    h1 = heldout_set(SMOKE, "mqar")
    h2 = heldout_set(SMOKE, "mqar")
    assert all(torch.equal(x1, x2) for (x1, _), (x2, _) in zip(h1, h2))
    assert sum(x.shape[0] for x, _ in h1) == SMOKE.eval_sequences
    held = {tuple(r) for x, _ in h1 + heldout_set(SMOKE, "khop") for r in x.tolist()}
    for seed in range(3):
        for step in range(20):
            x, _ = T.make_batch(SMOKE.task, SMOKE.batch_size, batch_generator(seed, step))
            assert not held & {tuple(r) for r in x.tolist()}


@pytest.mark.parametrize("call, name", [
    (lambda: T.mqar(2, 40, n_pairs=8, n_queries=8, min_distance=30, generator=_gen(0)), "seq_len"),
    (lambda: T.mqar(2, 400, n_pairs=4, n_queries=5, min_distance=30, generator=_gen(0)), "n_queries"),
    (lambda: T.mqar(2, 400, n_pairs=9, n_queries=5, min_distance=30, generator=_gen(0), n_keys=8), "n_pairs"),
    (lambda: T.mqar(2, 400, n_pairs=4, n_queries=4, min_distance=30, generator=_gen(0), n_values=65), "n_values"),
    (lambda: T.mqar(2, 400, n_pairs=4, n_queries=4, min_distance=30, generator=_gen(0), n_filler=17), "n_filler"),
    (lambda: T.khop(2, 400, n_chains=4, chain_len=4, n_queries=2, min_distance=30, generator=_gen(0), n_nodes=19),
     "n_chains"),
    (lambda: T.mqar(2, 400, n_pairs=4, n_queries=4, min_distance=0, generator=_gen(0)), "min_distance"),
    (lambda: T.khop(2, 400, n_chains=4, chain_len=3, n_queries=2, hops=(1, 4), min_distance=30,
                    generator=_gen(0)), "chain_len"),
    (lambda: T.khop(2, 400, n_chains=4, chain_len=4, n_queries=2, hops=(0, 2), min_distance=30,
                    generator=_gen(0)), "hops"),
    (lambda: T.khop(2, 400, n_chains=30, chain_len=4, n_queries=2, min_distance=30, generator=_gen(0)), "n_chains"),
    (lambda: T.khop(2, 100, n_chains=8, chain_len=4, n_queries=2, min_distance=30, generator=_gen(0)), "seq_len"),
    (lambda: T.TaskConfig(seq_len=512, min_distance=100, mqar_fraction=1.5), "mqar_fraction"),
    (lambda: T.TaskConfig(seq_len=128, min_distance=100), "seq_len"),
    (lambda: settings_from_dict({"task": {"min_distance": 8}}, SMOKE), "min_distance"),
    (lambda: settings_from_dict({"lr": 0.0}, SMOKE), "lr"),
    (lambda: settings_from_dict({"bogus": 1}, SMOKE), "bogus"),
    (lambda: probe_model("yoco", SMOKE, 2), "n_loops"),
    (lambda: probe_model("loop", SMOKE), "variant"),
])
def test_bad_arguments_raise_value_error_naming_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


def test_models_share_the_shape_and_yocou_t1_is_yoco() -> None:
    s = SCALES["tiny"]
    yoco, u1, u3 = probe_model("yoco", s), probe_model("yocou", s, 1), probe_model("yocou", s, 3)
    assert yoco.stages == u1.stages and u3.stages[0].n_loops == 3
    assert probe_model("rins", s).stages[0].n_loops == 3
    # the default task keeps every query out of reach of the deepest self-decoder (YOCO-U, T = 3)
    assert s.task.min_distance > self_decoder_reach(u3) > self_decoder_reach(yoco) > s.window
    assert self_decoder_reach(probe_model("transformer", s)) is None
    assert equal_flops_steps(yoco, u3, 100, s.task.seq_len) > 100


def test_end_to_end_run_writes_a_deterministic_result(tmp_path: Path) -> None:
    a = run_probe("yocou", SMOKE, seed=1, n_loops=2, out=tmp_path / "a.json", progress=False)
    b = run_probe("yocou", SMOKE, seed=1, n_loops=2, out=tmp_path / "b.json", progress=False)
    r = json.loads((tmp_path / "a.json").read_text())
    assert r["variant"] == "yocou_t2" and r["n_loops"] == 2 and r["seed"] == 1
    assert set(r["accuracy"]) == {"mqar", "khop"}
    assert set(r["accuracy"]["khop"]) <= {"1", "2", "3", "4"}
    assert sum(c["n"] for c in r["accuracy"]["khop"].values()) == SMOKE.eval_sequences * SMOKE.task.khop_queries
    assert r["accuracy"]["mqar"]["1"]["n"] == SMOKE.eval_sequences * SMOKE.task.mqar_queries
    assert r["train_flops"] == pytest.approx(r["tokens"] * r["train_flops_per_token"])
    assert r["tokens"] == SMOKE.steps * SMOKE.batch_size * SMOKE.task.seq_len
    assert r["model"]["vocab_size"] == T.VOCAB_SIZE
    assert a["loss_curve"] == b["loss_curve"] and a["accuracy"] == b["accuracy"]
    # YOCO-U at T = 1 is YOCO: the same seed trains it bit-identically
    y = run_probe("yoco", SMOKE, seed=1, progress=False)
    u1 = run_probe("yocou", SMOKE, seed=1, n_loops=1, progress=False)
    assert y["loss_curve"] == u1["loss_curve"] and y["accuracy"] == u1["accuracy"]
    # the equal-compute control trains for the FLOPs of its reference
    e = run_probe("yoco", SMOKE, seed=1, equal_flops_to=("yocou", 3), progress=False)
    assert e["variant"] == "yoco_eqflops_yocou_t3"
    assert e["steps"] == equal_flops_steps(probe_model("yoco", SMOKE), probe_model("yocou", SMOKE, 3),
                                           SMOKE.steps, SMOKE.task.seq_len) > SMOKE.steps


def _fake_result(path: Path, variant: str, seed: int, acc: dict[str, dict[str, float]]) -> Path:
    n = 200
    path.write_text(json.dumps({
        "variant": variant, "preset": variant.split("_")[0], "n_loops": 1, "seed": seed, "params": 1000,
        "steps": 10, "train_flops": 1e9, "chance": {"mqar": 0.125, "khop": 0.0625},
        "accuracy": {t: {k: {"accuracy": a, "correct": round(a * n), "n": n} for k, a in by.items()}
                     for t, by in acc.items()}}))
    return path


def test_summary_interval_is_the_student_t_interval_across_seeds(tmp_path: Path) -> None:
    accs = {"yoco": [0.50, 0.62, 0.71], "transformer": [0.90, 0.90, 0.90]}
    paths = []
    for v, vals in accs.items():
        for seed, a in enumerate(vals):
            paths.append(_fake_result(tmp_path / f"{v}_{seed}.json", v, seed,
                                      {"mqar": {"1": a}, "khop": {"1": a, "2": a / 2}}))
    out = render(paths, tmp_path / "out", title="test")
    tidy = pd.read_csv(out["tidy"])
    assert tuple(tidy.columns) == TIDY_COLUMNS
    assert len(tidy) == 2 * 3 * 3
    assert tidy["variant"].iloc[0] == "transformer"  # the probe's order, not the files'
    summ = pd.read_csv(out["summary"])
    row = summ[(summ["variant"] == "yoco") & (summ["task"] == "mqar")].iloc[0]
    v = accs["yoco"]
    m = sum(v) / 3
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / 2)
    half = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert row["mean"] == pytest.approx(m) and row["n_seeds"] == 3 and row["n"] == 200
    assert row["low"] == pytest.approx(m - half) and row["high"] == pytest.approx(m + half)
    assert row["chance"] == 0.125
    flat = summ[(summ["variant"] == "transformer") & (summ["task"] == "khop") & (summ["k"] == 2)].iloc[0]
    assert flat["low"] == pytest.approx(0.45) and flat["high"] == pytest.approx(0.45)  # no spread, zero width
    md = out["table"].read_text()
    assert "YOCO" in md and "k-hop chance" in md and "0.062" in md
    assert out["png"].stat().st_size > 0 and out["pdf"].stat().st_size > 0
    assert t_interval([0.3])[1] != t_interval([0.3])[1]  # one seed: NaN, no interval


def test_collect_refuses_a_file_that_is_not_a_result_and_a_repeated_seed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"variant": "yoco"}))
    with pytest.raises(ValueError, match="bad.json"):
        collect([bad])
    a = _fake_result(tmp_path / "a.json", "yoco", 0, {"mqar": {"1": 0.5}})
    b = _fake_result(tmp_path / "b.json", "yoco", 0, {"mqar": {"1": 0.6}})
    with pytest.raises(ValueError, match="seed 0 again"):
        collect([a, b])


def test_cli_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "yocou.evaluation.probe", "train", "--variant", "yocou", "--scale", "smoke",
                        "--settings", '{"task": {"n_queries": 3}}', "--out", str(tmp_path / "r.json")],
                       check=False, capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith("python -m yocou.evaluation.probe: error:") and "n_queries" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_cli_trains_and_summarizes(tmp_path: Path) -> None:
    for variant in ("transformer", "yoco"):
        subprocess.run([sys.executable, "-m", "yocou.evaluation.probe", "train", "--variant", variant, "--scale", "smoke",
                        "--seed", "0", "--no-progress", "--out", str(tmp_path / f"{variant}.json")],
                       check=True, capture_output=True, text=True)
    r = subprocess.run([sys.executable, "-m", "yocou.evaluation.probe", "summarize", "--out", str(tmp_path / "out"),
                        str(tmp_path / "transformer.json"), str(tmp_path / "yoco.json")],
                       check=True, capture_output=True, text=True)
    assert "probe: 2 results" in r.stdout
    assert (tmp_path / "out" / "probe.png").exists() and (tmp_path / "out" / "probe_table.md").exists()


def test_settings_merge_over_a_scale() -> None:
    s = settings_from_dict({"steps": 9, "task": {"n_pairs": 5, "hops": [1, 2, 3, 4]}}, SMOKE)
    assert isinstance(s, ProbeSettings) and s.steps == 9 and s.task.n_pairs == 5 and s.task.hops == (1, 2, 3, 4)
    assert s.task.seq_len == SMOKE.task.seq_len and s.d_model == SMOKE.d_model
