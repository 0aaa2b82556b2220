"""Held-out loss at checkpoints (TrainConfig.eval_every, yocou.training.train.HeldoutEval): the scheduled steps, the values
against an independent computation on the saved weights, and a run that evaluates equal to one that does not."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from yocou.data.tokens import TokenStream
from yocou.evaluation.ppl import token_nll
from yocou.model import config as C
from yocou.training.train import TrainConfig, heldout_split_name, load_model, train
from yocou.utils.validation import FieldError

MODEL = C.yocou(n_layers=2, window=8, n_loops=2, vocab_size=300, d_model=32, n_heads=2, n_kv_heads=1,
                head_dim=16, d_ff=64)
TIMING = ("tokens_per_s", "wall_time", "heldout_eval_s")


def _tc(**kw) -> TrainConfig:
    base = dict(seed=5, steps=10, batch_size=4, seq_len=16, lr=3e-3, warmup_steps=1, dtype="fp32", log_every=3,
                ckpt_every=4, eval_every=4, eval_tokens=100, snapshot_steps=(4, 8))
    return TrainConfig(**{**base, **kw})


def _heldout(token_dir: Path) -> dict[str, Path]:
    paths = [token_dir / "heldout_book.bin", token_dir / "heldout_code.bin"]
    return {heldout_split_name(p): p for p in paths}


def _rows(run: Path) -> list[dict]:
    return [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]


def _by_hand(model_path: Path, stream: Path, n: int, seq_len: int) -> float:
    """Mean NLL of the first ``n`` tokens of ``stream``, windows of ``seq_len``, from the saved weights."""
    ids = np.asarray(TokenStream(stream).tokens[:n], dtype=np.int64)
    return float(token_nll(load_model(model_path), ids, seq_len).double().mean())


def test_heldout_loss_at_the_scheduled_steps_equals_the_saved_weights(tmp_path: Path, token_dir: Path) -> None:
    """Rows at every log_every step plus every eval_every step and the last; heldout_loss exactly at steps 4, 8
    and 10 (the last), equal to token_nll on the snapshots model_step4.pt, model_step8.pt and on model.pt."""
    tc = _tc()
    train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False, heldout=_heldout(token_dir))
    rows = _rows(tmp_path)
    assert [r["step"] for r in rows] == [3, 4, 6, 8, 9, 10]
    assert [r["step"] for r in rows if "heldout_loss" in r] == [4, 8, 10]
    for r in rows:
        assert "loss" in r and math_finite(r["loss"])
        if "heldout_loss" in r:
            assert sorted(r["heldout_loss"]) == ["book", "code"] and r["heldout_eval_s"] >= 0
    for step, weights in ((4, "model_step4.pt"), (8, "model_step8.pt"), (10, "model.pt")):
        row = next(r for r in rows if r["step"] == step)
        for split in ("book", "code"):
            want = _by_hand(tmp_path / weights, token_dir / f"heldout_{split}.bin", tc.eval_tokens, tc.seq_len)
            assert row["heldout_loss"][split] == pytest.approx(want, rel=1e-6, abs=1e-7), (step, split)
    # the model trains: later held-out losses are lower than at step 4 (a sanity check on the values)
    assert rows[-1]["heldout_loss"]["book"] < rows[1]["heldout_loss"]["book"]


def math_finite(x: float) -> bool:
    return isinstance(x, float) and np.isfinite(x)


def test_evaluation_changes_nothing_and_resume_stays_exact(tmp_path: Path, token_dir: Path) -> None:
    """The weights and training-loss rows of a run with held-out evaluation equal those of a run without it (no
    random number consumed, the model back in train mode); a run resumed from its step-4 checkpoint writes the
    uninterrupted run's rows (held-out losses included, timings aside) and weights."""
    import yocou.training.train as T

    tc = _tc()
    off, full, resumed = tmp_path / "off", tmp_path / "full", tmp_path / "resumed"
    train(MODEL, dataclasses.replace(tc, eval_every=0), token_dir / "train.bin", off, progress=False)
    ckpts: dict[int, bytes] = {}
    real_save = T._save_ckpt

    def keep(path, model, opt, step, *a, **k):
        real_save(path, model, opt, step, *a, **k)
        if path.parent == full:
            ckpts[step] = path.read_bytes()

    mp = pytest.MonkeyPatch()
    mp.setattr(T, "_save_ckpt", keep)
    try:
        train(MODEL, tc, token_dir / "train.bin", full, progress=False, heldout=_heldout(token_dir))
    finally:
        mp.undo()
    w_off, w_full = (torch.load(d / "model.pt", weights_only=False)["model"] for d in (off, full))
    assert all(torch.equal(w_off[k], w_full[k]) for k in w_off)
    a_off = {r["step"]: r for r in _rows(off)}
    for r in _rows(full):
        if r["step"] in a_off:
            assert (r["loss"], r["grad_norm"], r["lr"]) == (a_off[r["step"]]["loss"], a_off[r["step"]]["grad_norm"],
                                                          a_off[r["step"]]["lr"])
    resumed.mkdir()
    (resumed / "ckpt.pt").write_bytes(ckpts[4])
    train(MODEL, tc, token_dir / "train.bin", resumed, progress=False, heldout=_heldout(token_dir))
    a, b = _rows(full), _rows(resumed)
    assert a[:2] == b[:2]  # the checkpoint's rows (steps 3 and 4, with step 4's held-out loss) verbatim
    assert [{k: v for k, v in x.items() if k not in TIMING} for x in a] == \
        [{k: v for k, v in y.items() if k not in TIMING} for y in b]
    w_res = torch.load(resumed / "model.pt", weights_only=False)["model"]
    assert all(torch.equal(w_full[k], w_res[k]) for k in w_full)


def test_eval_every_needs_heldout_streams_and_valid_fields(tmp_path: Path, token_dir: Path) -> None:
    with pytest.raises(ValueError, match="eval_every is 4 but no held-out token files"):
        train(MODEL, _tc(), token_dir / "train.bin", tmp_path, progress=False)
    for field, value in (("eval_every", -1), ("eval_tokens", 1)):
        with pytest.raises(FieldError) as e:
            _tc(**{field: value})
        assert e.value.field == f"TrainConfig.{field}"
    assert heldout_split_name("runs/tiny/tokens/heldout_code.bin") == "code"
    assert (TrainConfig(steps=1, batch_size=1, seq_len=2).eval_every,
            TrainConfig(steps=1, batch_size=1, seq_len=2).eval_tokens) == (0, 16384)


def test_heldout_eval_scores_the_plain_text_when_training_mixes_needles(token_dir: Path) -> None:
    """train.needle_mix changes the training stream only: the held-out tokens scored are the files' own tokens
    (found by a run with the mix on, whose held-out streams were once opened through the needle mixer)."""
    from yocou.data.needles import NeedleMix
    from yocou.training.train import HeldoutEval

    tc = _tc(needle_mix=NeedleMix(fraction=0.5), seq_len=256, eval_tokens=300)
    ev = HeldoutEval(_heldout(token_dir), tc, MODEL)
    for split in ("book", "code"):
        want = np.asarray(TokenStream(token_dir / f"heldout_{split}.bin").tokens[:300], dtype=np.int64)
        assert np.array_equal(ev.ids[split], want)
