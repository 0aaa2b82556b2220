"""train.needle_mix (yocou.data.needles): Table 4's labelled substitute protocol. The fraction of needle rows, their
placement, the eval's text format with keys disjoint from the eval's, fraction 0 changing nothing, determinism from
(seed, step), config checks, and a short training run through the path."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from yocou.data import load_tokenizer
from yocou.data.needles import (
    ANSWER,
    NEEDLE,
    NEEDLE_BOOK,
    PREFIX,
    QUESTION,
    TRAIN_KEY_ADJECTIVES,
    TRAIN_KEY_NOUNS,
    NeedleMix,
    NeedleMixer,
    NeedleMixStream,
    needle_mix_from_dict,
)
from yocou.data.tokens import TokenStream
from yocou.model import config as C
from yocou.results.evaldefs import protocol
from yocou.training.train import (
    TrainConfig,
    _open_stream,
    draw_batch,
    train,
    train_config_from_dict,
)
from yocou.utils.validation import FieldError

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tok(token_dir: Path):
    return load_tokenizer(token_dir.parent / "tokenizer.json")


@pytest.fixture(scope="module")
def seq_len(tok) -> int:
    """A training length with about 200 haystack tokens beside the template (vocabulary 300: long templates)."""
    k, v = f"{max(TRAIN_KEY_ADJECTIVES, key=len)}-{max(TRAIN_KEY_NOUNS, key=len)}", "9999999"
    n = sum(len(tok.encode(s)) for s in (PREFIX, NEEDLE_BOOK.format(key=k, value=v), QUESTION.format(key=k),
                                         ANSWER.format(value=v)))
    return n + 200


def _model(vocab: int) -> C.ModelConfig:
    return C.yocou(n_layers=2, window=8, n_loops=2, vocab_size=vocab, d_model=32, n_heads=2, n_kv_heads=1,
                   head_dim=16, d_ff=64)


def _tc(seq_len: int, mix: dict | None, **kw) -> TrainConfig:
    d = dict(seed=5, steps=2, batch_size=16, seq_len=seq_len, dtype="fp32", log_every=1, ckpt_every=10,
             needle_mix=mix)
    d.update(kw)
    return train_config_from_dict(d)


def _template_regex(fmt: str) -> re.Pattern:
    """The eval template with {key} -> an adjective-noun pair and {value} -> 7 digits."""
    esc = re.escape(fmt).replace(re.escape("{key}"), r"(?P<key>[a-z]+-[a-z]+)", 1)
    esc = esc.replace(re.escape("{key}"), r"(?P=key)").replace(re.escape("{value}"), r"(?P<value>\d{7})")
    return re.compile(esc)


_MIXERS: dict = {}


def _base_and_mixed(token_dir: Path, tok, tc: TrainConfig, step: int):
    """(plain batch, needle batch, infos) of step ``step``, drawn as draw_batch draws them."""
    stream = TokenStream(token_dir / "train.bin")
    gen = torch.Generator().manual_seed(tc.seed * 1_000_003 + step)
    x, y = stream.sample_batch(tc.batch_size, tc.seq_len, gen)
    key = (tc.needle_mix, tc.seq_len)
    if key not in _MIXERS:  # building a mixer encodes every training key: once per setting
        _MIXERS[key] = NeedleMixer(tc.needle_mix, tok, tc.seq_len)
    mixer = _MIXERS[key]
    xm, ym, infos = mixer.apply(x, y, tc.seed * 1_000_003 + step)
    return (x, y), (xm, ym), infos


def test_fraction_of_needle_rows_matches_the_config(token_dir: Path, tok, seq_len: int) -> None:
    """Over 60 steps × 16 rows the share of needle rows is f within 4 binomial standard deviations; each needle row
    is the one draw_batch returns (the training path), the others are the stream's rows token for token."""
    f = 0.2
    tc = _tc(seq_len, {"fraction": f})
    stream = _open_stream(token_dir / "train.bin", _model(tok.vocab_size), tc, 1, token_dir.parent / "tokenizer.json")
    assert isinstance(stream, NeedleMixStream)
    n_rows = n_needles = 0
    for step in range(60):
        (x, y), (xm, ym), infos = _base_and_mixed(token_dir, tok, tc, step)
        xd, yd = draw_batch(stream, tc, step, 0, 1, CPU)
        assert torch.equal(xd, xm) and torch.equal(yd, ym)
        assert torch.equal(xm[:, 1:], ym[:, :-1])  # y is x shifted by one
        picked = {i["row"] for i in infos}
        for r in range(tc.batch_size):
            assert torch.equal(xm[r], x[r]) == (r not in picked)
        n_rows += tc.batch_size
        n_needles += len(infos)
    sd = math.sqrt(n_rows * f * (1 - f))
    assert abs(n_needles - n_rows * f) <= 4 * sd, (n_needles, n_rows * f, sd)


@pytest.mark.parametrize("rng", [(0, None), (240, 320)])  # vocabulary 300: needle + question ~200 tokens
def test_placement_and_the_eval_text_format(token_dir: Path, tok, seq_len: int, rng) -> None:
    """The needle, question and answer decode to the eval template (eval/protocols.yaml niah) at the recorded
    positions, the answer ends the row, the prefix starts it, and the needle-to-answer distance lies in the
    configured range (and spreads over it); the keys are training keys, disjoint from the eval's key words."""
    lo, hi = rng
    tc = _tc(seq_len, {"fraction": 0.5, "min_distance": lo, "max_distance": hi})
    p = protocol("niah")
    eval_words = set(p["key_adjectives"]) | set(p["key_nouns"])
    needle_re = {"needle": _template_regex(NEEDLE), "needle_book": _template_regex(NEEDLE_BOOK)}
    question_re = _template_regex(QUESTION)
    prefix = tok.encode(PREFIX)
    dists, formats = [], set()
    for step in range(12):
        _, (xm, ym), infos = _base_and_mixed(token_dir, tok, tc, step)
        row_all = torch.cat([xm, ym[:, -1:]], 1)
        for info in infos:
            row = row_all[info["row"]].tolist()
            ns, nl, qs, a0 = info["needle_start"], info["needle_len"], info["question_start"], info["answer_start"]
            assert row[:len(prefix)] == prefix and ns >= len(prefix)
            m = needle_re[info["format"]].fullmatch(tok.decode(row[ns:ns + nl]))
            assert m and m["key"] == info["key"] and m["value"] == info["value"]
            q = question_re.fullmatch(tok.decode(row[qs:a0]))
            assert q and q["key"] == info["key"]
            assert tok.decode(row[a0:]) == ANSWER.format(value=info["value"]) and a0 + info["answer_len"] == len(row)
            assert ns + nl <= qs  # the haystack gap between needle and question is never negative
            d = info["distance"]
            assert d == a0 - ns and d >= max(lo, nl + (a0 - qs)) and (hi is None or d <= hi)
            adj, noun = info["key"].split("-")
            assert adj in TRAIN_KEY_ADJECTIVES and noun in TRAIN_KEY_NOUNS and not {adj, noun} & eval_words
            assert len(info["value"]) == int(p["value_digits"])
            dists.append(d)
            formats.add(info["format"])
    assert formats == {"needle", "needle_book"}
    assert len(dists) > 40
    if hi is not None:  # a uniform draw over [lo, hi]: spread over it, the mean near the middle
        assert max(dists) - min(dists) >= 0.6 * (hi - lo)
        assert abs(np.mean(dists) - (lo + hi) / 2) < 0.15 * (hi - lo)
    else:  # the whole feasible range: from needle + question up to a needle at the haystack's start
        assert min(dists) < seq_len / 2 < max(dists)


def test_training_keys_are_disjoint_from_the_eval_keys() -> None:
    p = protocol("niah")
    train_pairs = {f"{a}-{n}" for a in TRAIN_KEY_ADJECTIVES for n in TRAIN_KEY_NOUNS}
    eval_pairs = {f"{a}-{n}" for a in p["key_adjectives"] for n in p["key_nouns"]}
    assert not train_pairs & eval_pairs
    assert not (set(TRAIN_KEY_ADJECTIVES) | set(TRAIN_KEY_NOUNS)) & (set(p["key_adjectives"]) | set(p["key_nouns"]))


@pytest.mark.parametrize("mix", [None, {"fraction": 0.0}, {"fraction": 0, "min_distance": 5, "prefix": False}])
def test_fraction_zero_changes_no_batch(token_dir: Path, tok, seq_len: int, mix) -> None:
    """needle_mix null or fraction 0: the plain stream, and every batch equal token for token to the run without
    the option."""
    plain_tc = _tc(seq_len, None)
    tc = _tc(seq_len, mix)
    plain = TokenStream(token_dir / "train.bin")
    s = _open_stream(token_dir / "train.bin", _model(tok.vocab_size), tc, 1, None)
    assert isinstance(s, TokenStream)
    for step in range(5):
        a, b = draw_batch(plain, plain_tc, step, 0, 1, CPU), draw_batch(s, tc, step, 0, 1, CPU)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_same_seed_and_step_give_the_same_batch(token_dir: Path, tok, seq_len: int) -> None:
    """Two streams opened apart (a resumed run) give step s the same batch; another step or seed another one; a
    rank's rows are its slice of the global batch."""
    tc = _tc(seq_len, {"fraction": 0.5})
    open_ = lambda t: _open_stream(token_dir / "train.bin", _model(tok.vocab_size), t, 1,  # noqa: E731
                                   token_dir.parent / "tokenizer.json")
    s1, s2 = open_(tc), open_(tc)
    for step in (0, 7, 123):
        a, b = draw_batch(s1, tc, step, 0, 1, CPU), draw_batch(s2, tc, step, 0, 1, CPU)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        half = draw_batch(s2, tc, step, 1, 2, CPU)
        assert torch.equal(half[0], a[0][8:])
    assert not torch.equal(draw_batch(s1, tc, 1, 0, 1, CPU)[0], draw_batch(s1, tc, 2, 0, 1, CPU)[0])
    tc2 = _tc(seq_len, {"fraction": 0.5}, seed=6)
    assert not torch.equal(draw_batch(s1, tc, 1, 0, 1, CPU)[0], draw_batch(open_(tc2), tc2, 1, 0, 1, CPU)[0])


@pytest.mark.parametrize("bad, field", [({"fraction": 1.0}, "fraction"), ({"fraction": -0.1}, "fraction"),
                                        ({"fraction": 0.1, "min_distance": -1}, "min_distance"),
                                        ({"fraction": 0.1, "min_distance": 9, "max_distance": 3}, "max_distance"),
                                        ({"fraction": 0.1, "prefix": "yes"}, "prefix"),
                                        ({"fractoin": 0.1}, "fractoin")])
def test_bad_values_fail_in_one_line_naming_the_field(bad: dict, field: str) -> None:
    with pytest.raises(FieldError) as e:
        needle_mix_from_dict(bad)
    assert e.value.field.endswith(f"needle_mix.{field}") and "\n" not in str(e.value)


def test_schema_checks_the_field_and_scales_set_it() -> None:
    """The schema refuses a fraction of 1 naming train.needle_mix.fraction; tiny mixes needles in, paper does not
    (smoke: the template does not fit its 64-token rows)."""
    from yocou.workflow.pipeline import resolve_run
    from yocou.workflow.wfconfig import ConfigError, resolve_config

    cfgs = {s: yaml.safe_load((ROOT / f"workflows/config/{s}.yaml").read_text()) for s in ("tiny", "smoke", "paper")}
    for c in cfgs.values():
        resolve_config(c)
    mix = {s: resolve_run(c, "yocou", vocab_size=c["data"]["vocab_size"])["train"]["needle_mix"]
           for s, c in cfgs.items()}
    assert 0.1 <= mix["tiny"]["fraction"] <= 0.2 and mix["paper"] is None and mix["smoke"] is None
    tiny = cfgs["tiny"]
    assert min(tiny["eval"]["niah"]["lengths"]) <= tiny["train"]["seq_len"] < max(tiny["eval"]["niah"]["lengths"])
    bad = yaml.safe_load((ROOT / "workflows/config/tiny.yaml").read_text())
    bad["train"]["needle_mix"]["fraction"] = 1
    with pytest.raises(ConfigError, match=r"train\.needle_mix\.fraction"):
        resolve_config(bad)


def test_template_that_does_not_fit_and_missing_tokenizer_are_refused(token_dir: Path, tok) -> None:
    with pytest.raises(ValueError, match=r"train\.needle_mix: the needle template takes up to \d+ tokens"):
        NeedleMixer(NeedleMix(fraction=0.1), tok, 64)
    with pytest.raises(ValueError, match=r"needle_mix.*no needle-to-answer distance"):
        NeedleMixer(NeedleMix(fraction=0.1, max_distance=10), tok, 2048)
    tc = _tc(2048, {"fraction": 0.1})
    with pytest.raises(ValueError, match=r"train\.needle_mix\.fraction is 0\.1: the needles need the run's tokenizer"):
        _open_stream(token_dir / "train.bin", _model(tok.vocab_size), tc, 1, None)


def test_training_runs_with_needles(token_dir: Path, tok, seq_len: int, tmp_path: Path) -> None:
    """Two steps of training through the needle path; the run's configs record needle_mix."""
    tc = _tc(seq_len, {"fraction": 0.25}, batch_size=4)
    s = train(_model(tok.vocab_size), tc, token_dir / "train.bin", tmp_path / "run", progress=False,
              tokenizer=token_dir.parent / "tokenizer.json")
    assert s["steps"] == 2
    ck = torch.load(tmp_path / "run" / "model.pt", weights_only=False)
    assert ck["train_config"]["needle_mix"] == {"fraction": 0.25, "min_distance": 0, "max_distance": None,
                                                "prefix": True}


@pytest.mark.parametrize("fraction", [0.15, None])
def test_table4_says_when_the_models_were_trained_with_needles(tmp_path: Path, monkeypatch, fraction) -> None:
    """summarize -> render: with needle_mix on, the tidy rows carry the fraction and Table 4's title and notes say
    the protocol differs from the paper's; off, nothing claims a substitute."""
    import json

    from yocou.evaluation.longctx.niah import summarise
    from yocou.results.render import table4
    from yocou.results.summarize.niah import summarize_table4
    from yocou.results.tidy import one, write_tidy

    core = {v: v for v in ("transformer", "yoco", "rins", "yocou")}
    recs = [{"task": t, "length": 64, "depth": d, "sample": i, "correct": i % 2, "logp_value": -1.0,
             "logp_distractor": -3.0} for t in ("s_niah_1", "s_niah_2") for d in (0.0, 100.0) for i in range(2)]
    niah, rcs = {}, {}
    for v in core:
        niah[v] = tmp_path / f"{v}.json"
        niah[v].write_text(json.dumps({"train_seq_len": 64, "book": "paradise_lost", "records": recs,
                                       "cells": summarise(recs)}))
        rcs[v] = tmp_path / v / "run_config.json"
        rcs[v].parent.mkdir()
        mix = None if fraction is None else {"fraction": fraction, "min_distance": 0, "max_distance": None,
                                             "prefix": True}
        rcs[v].write_text(json.dumps({"variant": v, "model": C.preset(f"{v}-smoke").to_dict(),
                                      "train": {"seed": 1, "needle_mix": mix}}))
    df = summarize_table4(niah, core, rcs)
    assert one(df, role="yocou", metric="train_needle_mix.fraction")["value"] == (fraction or 0.0)
    write_tidy(df, tmp_path / "tidy/table4")
    monkeypatch.setattr(table4, "save_figure", lambda fig, *a, **k: None)
    table4.render(tmp_path / "tidy/table4.csv", tmp_path / "table4.csv", tmp_path / "h.png", scale="t", seed=0)
    md = (tmp_path / "table4.md").read_text()
    cells = (tmp_path / "table4_cells.md").read_text()
    if fraction:
        assert "PROTOCOL DIFFERS FROM THE PAPER'S: every model trained with a synthetic needle mix at fraction 0.15" in md
        assert "substitute protocol: trained with a synthetic needle mix at fraction 0.15" in md
        assert "PROTOCOL DIFFERS" in cells
    else:
        assert "needle mix" not in md and "PROTOCOL DIFFERS" not in md


def _niah_run(tmp_path: Path, run: str, variant: str, recs: list, train: dict) -> tuple[Path, Path]:
    """(niah result JSON, run_config.json) of a fixture run with these per-prompt records and train section."""
    import json

    from yocou.evaluation.longctx.niah import summarise

    res = tmp_path / f"{run}.json"
    res.write_text(json.dumps({"train_seq_len": 64, "book": "b", "records": recs, "cells": summarise(recs)}))
    rc = tmp_path / run / "run_config.json"
    rc.parent.mkdir()
    rc.write_text(json.dumps({"variant": run, "model": C.preset(f"{variant}-smoke").to_dict(), "train": train}))
    return res, rc


def test_table4_decides_choice_accuracy_against_chance_per_model_and_length(tmp_path: Path, monkeypatch) -> None:
    """A retriever (the value chosen in 70 of 80 prompts up to the training length) is above chance and a coin is
    not; the by-length table pools both tasks and is computed here from the records independently."""
    import pandas as pd

    from yocou.results.render import table4
    from yocou.results.summarize.niah import summarize_table4
    from yocou.results.tidy import write_tidy

    rng = np.random.default_rng(3)
    core = {v: f"{v}_niah" for v in ("transformer", "yoco", "rins", "yocou")}
    p_right = {"transformer": 0.5, "yoco": 0.9, "rins": 0.5, "yocou": 0.5}
    niah, rcs, all_recs = {}, {}, {}
    for v, run in core.items():
        recs = []
        for t in ("s_niah_1", "s_niah_2"):
            for length in (64, 128):
                for i in range(20):
                    lv = -1.0
                    # inside the training length (64) the retriever is right 90% of the time; beyond it, a coin
                    right = rng.random() < (p_right[v] if length == 64 else 0.5)
                    lc = [lv - 1.0] if right else [lv + 1.0]
                    recs.append({"task": t, "length": length, "depth": 50.0, "sample": i, "correct": 0,
                                 "logp_value": lv, "logp_distractor": lc[0], "logp_choices": lc, "n_choices": 2,
                                 "choice_correct": int(right)})
        all_recs[v] = recs
        niah[run], rcs[run] = _niah_run(tmp_path, run, v, recs, {"seed": 0, "steps": 40, "batch_size": 2,
                                                                 "seq_len": 64, "needle_mix": {"fraction": 0.5}})
    write_tidy(summarize_table4(niah, core, rcs), tmp_path / "tidy/table4")
    monkeypatch.setattr(table4, "save_figure", lambda fig, *a, **k: None)
    table4.render(tmp_path / "tidy/table4.csv", tmp_path / "table4.csv", tmp_path / "h.png", scale="t", seed=0)
    top = pd.read_csv(tmp_path / "table4.csv").set_index("variant")
    k_in = sum(r["choice_correct"] for r in all_recs["yoco"] if r["length"] == 64)
    assert top.loc["yoco_niah", "above chance ≤ train len"] == "yes" and k_in >= 30
    assert top.loc["yoco_niah", "choice acc ≤ train len [95% CI]"].startswith(f"{k_in / 40:.2f} [")
    assert top.loc["yoco_niah", "chance"] == 0.5 and top.loc["yoco_niah", "train tokens (M)"] == pytest.approx(40 * 128 / 1e6)
    bl = pd.read_csv(tmp_path / "table4_by_length.csv")
    assert len(bl) == 8 and set(bl["n"]) == {40}
    for r in bl.to_dict("records"):
        v = r["variant"].removesuffix("_niah")
        want = np.mean([x["choice_correct"] for x in all_recs[v] if x["length"] == r["length"]])
        assert r["choice acc"] == pytest.approx(want)
    # the coins are never above chance here; the retriever beyond the training length is a coin as well
    assert set(bl[bl["variant"] != "yoco_niah"]["above chance"]) == {"no"}
    assert bl[(bl["variant"] == "yoco_niah") & (bl["length"] == 64)]["above chance"].item() == "yes"
    md = (tmp_path / "table4.md").read_text()
    assert "choice acc (ours, graded; not the paper's metric)" in md and "Chance 0.50" in md
    assert "YOCO = yoco_niah" in md


def test_table4_takes_seed_replicas_as_one_models_seeds_with_a_t_interval(tmp_path: Path, monkeypatch) -> None:
    """niah_train.seeds: three training seeds of YOCO that retrieve (36, 34, 38 of 40 prompts up to the training
    length) are above chance across seeds and three of YOCO-U at 20, 18, 22 are not; the mean and 95% t interval
    are computed here with scipy; one-seed models say so; the paper's row is written once per model."""
    import pandas as pd
    from scipy import stats

    from yocou.results.render import table4
    from yocou.results.summarize.niah import summarize_table4
    from yocou.results.tidy import write_tidy

    k_in = {"yoco": [36, 34, 38], "yocou": [20, 18, 22], "transformer": [20], "rins": [21]}
    roles, niah, rcs = {}, {}, {}
    for v, ks in k_in.items():
        roles[v] = [f"{v}_niah"] + [f"{v}_niah_seed{s}" for s in range(1, len(ks))]
        for seed, (run, k) in enumerate(zip(roles[v], ks)):
            recs = [{"task": t, "length": length, "depth": 50.0, "sample": i, "correct": 0, "logp_value": -1.0,
                     "logp_distractor": -2.0 if right else 0.0, "logp_choices": [-2.0 if right else 0.0],
                     "n_choices": 2, "choice_correct": int(right)}
                    for length in (64, 128) for j, t in enumerate(("s_niah_1", "s_niah_2")) for i in range(20)
                    for right in [(j * 20 + i < k) if length == 64 else (i % 2 == 0)]]
            niah[run], rcs[run] = _niah_run(tmp_path, run, v, recs, {"seed": seed, "needle_mix": {"fraction": 0.5}})
    df = summarize_table4(niah, roles, rcs)
    assert len(df[df["metric"] == "paper.all_tasks.acc"]) == 4
    assert sorted(df[(df["role"] == "yoco") & (df["metric"] == "in_train_len.choice_acc")]["seed"]) == [0, 1, 2]
    write_tidy(df, tmp_path / "tidy/table4")
    monkeypatch.setattr(table4, "save_figure", lambda fig, *a, **k: None)
    table4.render(tmp_path / "tidy/table4.csv", tmp_path / "table4.csv", tmp_path / "h.png", scale="t", seed=0)
    top = pd.read_csv(tmp_path / "table4.csv").set_index("variant")
    assert len(top) == 8 and top.loc["yoco_niah_seed2", "model"] == "YOCO (seed 2)"
    assert top.loc["yoco_niah_seed1", "choice acc ≤ train len [95% CI]"].startswith("0.85 [")
    sd = pd.read_csv(tmp_path / "table4_seeds.csv").set_index("model")
    for v, name in (("yoco", "YOCO"), ("yocou", "YOCO-U")):
        x = np.array(k_in[v]) / 40
        half = stats.t.ppf(0.975, 2) * x.std(ddof=1) / np.sqrt(3)
        assert sd.loc[name, "mean ≤ train len"] == pytest.approx(x.mean())
        assert sd.loc[name, "95% t CI ≤ train len"] == f"[{x.mean() - half:.2f}, {x.mean() + half:.2f}]"
        assert sd.loc[name, "choice acc ≤ train len by seed"] == " ".join(f"{y:.2f}" for y in x)
    assert sd.loc["YOCO", "above chance across seeds (≤ train len)"] == "yes"
    assert sd.loc["YOCO-U", "above chance across seeds (≤ train len)"] == "no"
    assert sd.loc["Transformer", "above chance across seeds (≤ train len)"] == "one seed"
    assert "training seeds: YOCO 3, YOCO-U 3, Transformer 1, RINS 1" in (tmp_path / "table4.md").read_text()
