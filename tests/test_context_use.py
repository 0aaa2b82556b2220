"""Context use beyond the window (yocou.evaluation.analysis.context_use): per-position losses against the ppl path,
and the shuffle control: exactly no change for a model whose reach is the kept span, a change for a global one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from yocou.evaluation.analysis.context_use import context_use, position_nll, reach, shuffle_beyond, windows
from yocou.evaluation.ppl import token_nll
from yocou.model import config as C
from yocou.model.lm import LM


class _Stream:
    """Two documents of random ids (what capped_documents reads)."""

    def __init__(self, lengths: list[int], vocab: int, seed: int = 0) -> None:
        g = np.random.default_rng(seed)
        self.docs = [g.integers(0, vocab, n) for n in lengths]
        self.n_docs, self.doc_ids = len(self.docs), [f"d{i}" for i in range(len(self.docs))]

    def document(self, i: int) -> np.ndarray:
        return self.docs[i]


def _model(stages: tuple[C.Stage, ...] | None = None, name: str = "transformer-smoke") -> LM:
    torch.manual_seed(0)
    cfg = C.preset(name).replace(vocab_size=64)
    return LM(cfg if stages is None else cfg.replace(stages=stages)).eval()


def test_position_losses_are_the_ppl_paths_token_losses_of_each_full_window() -> None:
    model, stream = _model(), _Stream([70, 45], 64)
    win = windows(stream, 16, None)
    assert win.shape == (4 + 2, 17)   # 70 tokens: windows at 0, 16, 32, 48; 45: at 0, 16 (32 holds no full one)
    got = position_nll(model, win, batch_size=4)
    ref = token_nll(model, stream.docs[0], 16)
    assert torch.allclose(got[1], ref[16:32], atol=1e-5)
    assert torch.allclose(got[5], token_nll(model, stream.docs[1], 16)[16:32], atol=1e-5)


def test_shuffling_keeps_the_last_scored_plus_window_tokens_and_permutes_the_rest() -> None:
    win = torch.arange(2 * 33).reshape(2, 33)
    out = shuffle_beyond(win, window=8, scored=4, seed=1)
    assert torch.equal(out[:, 20:], win[:, 20:]) and not torch.equal(out[:, :20], win[:, :20])
    assert all(sorted(out[i, :20].tolist()) == win[i, :20].tolist() for i in range(2))
    with pytest.raises(ValueError, match="--scored 16 \\+ --window 16"):
        shuffle_beyond(win, window=16, scored=16)


def test_a_model_that_sees_only_its_window_is_unchanged_and_a_global_one_is_not() -> None:
    stream = _Stream([400], 64, seed=3)
    local = _model((C.Stage(kind="self", n_layers=2, window=4),))      # reach 2 x 4 = 8 tokens
    assert reach(local.cfg) == 8 and reach(_model().cfg) is None
    assert reach(_model(name="yocou-smoke").cfg) == 2 * 3 * 16
    res = context_use(local, stream, 32, window=8, scored=4, batch_size=8)
    assert res["n_windows"] == 12 and res["delta"] == pytest.approx(0.0, abs=1e-6)
    assert len(res["position_nll"]) == 32 and res["intact"] == pytest.approx(res["shuffled"], abs=1e-6)
    full = context_use(_model(), stream, 32, window=8, scored=4, batch_size=8)
    assert abs(full["delta"]) > 1e-4 and full["low"] < full["delta"] < full["high"]


def test_the_cli_measures_a_saved_model_and_summarizes_its_runs(token_dir, tmp_path) -> None:
    import json

    from yocou.evaluation.analysis.context_use import main
    from yocou.training.train import TrainConfig, _save_model

    for k in range(2):
        torch.manual_seed(k)
        m = LM(C.preset("yoco-smoke").replace(vocab_size=300)).eval()
        run = tmp_path / f"yoco_seed{k}_d20"
        run.mkdir()
        _save_model(run / "model.pt", m.state_dict(), m.cfg, TrainConfig(steps=1, batch_size=1, seq_len=32), 1, {})
        assert main(["measure", "--model", str(run / "model.pt"), "--data", str(token_dir), "--splits", "heldout_book",
                     "--seq-len", "32", "--window", "8", "--scored", "4", "--out", str(tmp_path / f"c{k}.json")]) == 0
    doc = json.loads((tmp_path / "c0.json").read_text())
    assert doc["reach"] == 2 * 16 and doc["global"] is True and len(doc["splits"]["heldout_book"]["position_nll"]) == 32
    assert main(["summarize", "--inputs", str(tmp_path / "c0.json"), str(tmp_path / "c1.json"), "--scale", "smoke",
                 "--out", str(tmp_path / "context.csv"), "--figure", str(tmp_path / "context.png")]) == 0
    md = (tmp_path / "context.md").read_text()
    assert "yoco on book: shuffled beyond W minus intact" in md and "(t over 2 runs)" in md
    assert (tmp_path / "context.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="--window: expected a positive integer"):
        main(["measure", "--model", str(tmp_path / "yoco_seed0_d20/model.pt"), "--data", str(token_dir), "--seq-len",
              "32", "--window", "0", "--out", str(tmp_path / "x.json")])
