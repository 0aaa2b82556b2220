"""The learning-rate study's tidy rows and table (yocou.summarize.lr) against hand-computed values."""

import json

import pytest

from yocou.summarize.lr import lr_table, summarize_lr


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
