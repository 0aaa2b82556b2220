"""The learning-rate study's tidy rows and table (yocou.results.summarize.lr) against hand-computed values."""

import json

import pytest

from yocou.results.summarize.lr import lr_table, summarize_lr


def _run(tmp, name, lr, seed, book, code):
    d = tmp / "models" / name
    d.mkdir(parents=True)
    (d / "run_config.json").write_text(json.dumps({"train": {"lr": lr, "seed": seed}}))
    (d / "summary.json").write_text(json.dumps({"seed": seed, "steps": 1, "tokens": 1, "train_flops": 1.0}))
    split = lambda v: {"ppl": 2.718 ** v, "nll": v, "nats_per_token": v, "n_tokens": 100, "seq_len": 8,  # noqa: E731
                       "stderr_nats": 0.01, "docs": [{"id": "d"}]}
    (tmp / "ppl").mkdir(exist_ok=True)
    (tmp / "ppl" / f"{name}.json").write_text(json.dumps({"splits": {"heldout_book": split(book),
                                                                     "heldout_code": split(code)}}))
    return d


def test_best_rate_is_the_lowest_mean_loss_over_splits_and_seeds(tmp_path):
    runs = {"yoco": [_run(tmp_path, "yoco_lr0p5x", 1e-3, 0, 5.5, 5.0), _run(tmp_path, "yoco", 2e-3, 0, 5.3, 4.6),
                     _run(tmp_path, "yoco_seed1", 2e-3, 1, 5.1, 4.8), _run(tmp_path, "yoco_lr2x", 4e-3, 0, 5.1, 4.9)]}
    t = summarize_lr(runs, ppl_root=tmp_path / "ppl")
    # means over (book, code) and seeds: 1e-3: 5.25; 2e-3: (4.95 + 4.95) / 2 = 4.95; 4e-3: 5.0 -> 2e-3; then a
    # 4e-3 run at 4.9 moves the choice
    assert t[t.metric == "best_lr"]["value"].item() == pytest.approx(2e-3)
    tab = lr_table(t)
    r = tab[tab.lr == 2e-3].iloc[0]
    assert (r["book (nats)"], r["code (nats)"], r["seeds"], r["best"]) == (pytest.approx(5.2), pytest.approx(4.7), 2,
                                                                           "yes")
    runs["yoco"][-1] = _run(tmp_path, "yoco_lr2x_b", 4e-3, 0, 4.9, 4.9)
    assert summarize_lr(runs, ppl_root=tmp_path / "ppl").query("metric == 'best_lr'")["value"].item() == 4e-3


def test_seeds_at_the_best_rate_give_the_best_rate_comparison_an_interval(tmp_path):
    """Replicas at another rate (seeds.lr_rates): each role at its own best rate has 3 seeds, the same seeds on both
    sides, so the at-min comparison is paired by seed and its interval is scipy's paired one."""
    import numpy as np
    import yaml
    from scipy import stats

    from yocou.results.audit.claims import load_sources
    from yocou.results.audit.verdicts import reproduce
    from yocou.results.tidy import write_tidy

    a_best = np.array([5.10, 5.16, 5.12])             # role a is best at 4e-3, role b at 2e-3
    b_best = np.array([5.00, 5.03, 5.05])
    runs = {"a": [], "b": []}
    for k in range(3):
        sfx = f"_seed{k}" if k else ""
        runs["a"] += [_run(tmp_path, f"a{sfx}", 2e-3, k, 5.4, 5.0), _run(tmp_path, f"a_lr2x{sfx}", 4e-3, k, a_best[k], 4.5)]
        runs["b"] += [_run(tmp_path, f"b{sfx}", 2e-3, k, b_best[k], 4.5), _run(tmp_path, f"b_lr2x{sfx}", 4e-3, k, 5.6, 5.2)]
    t = summarize_lr(runs, ppl_root=tmp_path / "ppl")
    assert dict(t[t.metric == "best_lr"].set_index("role")["value"]) == {"a": 4e-3, "b": 2e-3}
    write_tidy(t.to_dict("records"), tmp_path / "res" / "tidy" / "lr")
    comps = tmp_path / "c.yaml"
    comps.write_text(yaml.safe_dump([dict(id="toy.lr", comparison="a against b at each one's best rate", study="lr",
                                          metric="loss.book", at="min", a="a", b="b", effect="difference",
                                          evidence="training", paper={"value": 1.0, "text": "x"})]))
    (v,) = reproduce(load_sources(), tmp_path / "res", "tiny", comparisons=comps)
    ci = stats.ttest_rel(a_best, b_best).confidence_interval(0.95)
    assert v.n_seeds == 3 and v.ci_method.startswith("t, paired by seed")
    assert (v.ci_low, v.ci_high) == (pytest.approx(ci.low), pytest.approx(ci.high))
