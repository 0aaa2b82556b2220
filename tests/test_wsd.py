"""The warmup-stable-decay schedule and cooldown branches (yocou.training.train: lr_at, train(init_from=, save_state=)).

A branch started from a stable-phase state of a longer run must equal a fresh run whose schedule cools down at the
same step: the rates agree before the branch point and batches depend on (seed, step) only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from yocou.model import config as C
from yocou.training.train import TrainConfig, branch_mismatch, lr_at, train
from yocou.utils.validation import FieldError

MODEL = C.yocou(n_layers=2, window=8, n_loops=2, vocab_size=300, d_model=32, n_heads=2, n_kv_heads=1,
                head_dim=16, d_ff=64)
BASE = dict(seed=5, batch_size=4, seq_len=32, lr=3e-3, warmup_steps=3, dtype="fp32", log_every=1, ckpt_every=4,
            schedule="wsd", min_lr_ratio=0.0)


def _losses(run: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "model.pt", weights_only=False)["model"]


def test_wsd_rates_by_hand() -> None:
    tc = TrainConfig(steps=20, batch_size=1, seq_len=4, lr=1.0, min_lr_ratio=0.1, warmup_steps=4, schedule="wsd",
                     cooldown_steps=5)
    assert [lr_at(k, tc) for k in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert [lr_at(k, tc) for k in range(4, 15)] == [1.0] * 11  # stable: steps 4 .. 14
    # cooldown: steps 15 .. 19 go 1 - 0.9 * k / 5 for k = 1 .. 5, the last at lr * min_lr_ratio
    assert [lr_at(k, tc) for k in range(15, 20)] == pytest.approx([0.82, 0.64, 0.46, 0.28, 0.1])
    stable = TrainConfig(steps=12, batch_size=1, seq_len=4, lr=1.0, warmup_steps=4, schedule="wsd")
    assert [lr_at(k, stable) for k in range(4, 12)] == [1.0] * 8  # no cooldown: constant after warmup


@pytest.mark.parametrize("kw, field", [
    (dict(schedule="cosine", cooldown_steps=2), "cooldown_steps"),
    (dict(schedule="wsd", cooldown_steps=9, warmup_steps=2), "cooldown_steps"),  # past steps - warmup = 8
    (dict(schedule="wsd", cooldown_steps=-1), "cooldown_steps"),
])
def test_bad_cooldown_is_refused_naming_the_field(kw: dict, field: str) -> None:
    with pytest.raises(FieldError) as e:
        TrainConfig(steps=10, batch_size=1, seq_len=4, **kw)
    assert e.value.field == f"TrainConfig.{field}"


def test_branch_equals_a_fresh_run_that_cools_down_there(tmp_path: Path, token_dir: Path) -> None:
    data = token_dir / "train.bin"
    s, d = 8, 12  # the branch point and the branch's length (cooldown 4)
    # The stable phase to step s, keeping its state; then a branch cooling down from s to d.
    train(MODEL, TrainConfig(**BASE, steps=s), data, tmp_path / "stable", progress=False, save_state=True)
    assert (tmp_path / "stable" / "state.pt").is_file()
    branch_tc = TrainConfig(**BASE, steps=d, cooldown_steps=d - s)
    train(MODEL, branch_tc, data, tmp_path / "branch", progress=False,
          init_from=tmp_path / "stable" / "state.pt")
    # The same schedule from step 0 in one run.
    train(MODEL, branch_tc, data, tmp_path / "fresh", progress=False)
    a, b = _weights(tmp_path / "branch"), _weights(tmp_path / "fresh")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)
    la, lb = _losses(tmp_path / "branch"), _losses(tmp_path / "fresh")
    assert len(la) == len(lb) == d  # the branch's log holds the stable phase's rows too
    assert la == pytest.approx(lb, rel=1e-5, abs=1e-6)
    rows = [json.loads(line) for line in (tmp_path / "branch" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["lr"] == pytest.approx(0.0) and rows[s - 1]["lr"] == pytest.approx(BASE["lr"])
    # A longer stable run passes through the same state: its first s losses are the branch's.
    train(MODEL, TrainConfig(**BASE, steps=d), data, tmp_path / "longer", progress=False)
    assert _losses(tmp_path / "longer")[:s] == pytest.approx(la[:s], rel=1e-6, abs=1e-7)


def test_branch_resumes_exactly_after_an_interruption(tmp_path: Path, token_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import yocou.training.train as T

    data = token_dir / "train.bin"
    train(MODEL, TrainConfig(**BASE, steps=4), data, tmp_path / "stable", progress=False, save_state=True)
    tc = TrainConfig(**BASE, steps=12, cooldown_steps=8)
    state = tmp_path / "stable" / "state.pt"
    train(MODEL, tc, data, tmp_path / "whole", progress=False, init_from=state)

    real = T.train_step

    def dies_at_step_10(parts, tc_, aux, step, x, y):
        if step == 10:
            raise KeyboardInterrupt
        return real(parts, tc_, aux, step, x, y)

    monkeypatch.setattr(T, "train_step", dies_at_step_10)
    with pytest.raises(KeyboardInterrupt):
        train(MODEL, tc, data, tmp_path / "cut", progress=False, init_from=state)
    assert torch.load(tmp_path / "cut" / "ckpt.pt", weights_only=False)["step"] == 8
    monkeypatch.setattr(T, "train_step", real)
    train(MODEL, tc, data, tmp_path / "cut", progress=False, init_from=state)  # resumes its own ckpt.pt
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "cut")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert _losses(tmp_path / "whole") == _losses(tmp_path / "cut")


def test_branch_mismatch_names_the_field_or_step() -> None:
    parent = TrainConfig(**BASE, steps=8)
    as_dict = {k: (list(v) if isinstance(v, tuple) else v) for k, v in parent.__dict__.items()}
    assert branch_mismatch(as_dict, TrainConfig(**BASE, steps=12, cooldown_steps=4), 8) is None
    assert "train.lr" in branch_mismatch(as_dict, TrainConfig(**{**BASE, "lr": 1e-3}, steps=12, cooldown_steps=4), 8)
    assert "train.seed" in branch_mismatch(as_dict, TrainConfig(**{**BASE, "seed": 6}, steps=12, cooldown_steps=4), 8)
    # a cooldown that starts before the state's step: the rates differ at step 6
    assert "step 6" in branch_mismatch(as_dict, TrainConfig(**BASE, steps=12, cooldown_steps=6), 8)
    assert "past" in branch_mismatch(as_dict, TrainConfig(**BASE, steps=6), 8)


def test_init_from_refuses_another_model_or_a_non_branch(tmp_path: Path, token_dir: Path) -> None:
    data = token_dir / "train.bin"
    train(MODEL, TrainConfig(**BASE, steps=4), data, tmp_path / "stable", progress=False, save_state=True)
    state = tmp_path / "stable" / "state.pt"
    with pytest.raises(ValueError, match="init_from .*learning rate at step"):
        train(MODEL, TrainConfig(**BASE, steps=6, cooldown_steps=3), data, tmp_path / "b1", progress=False,
              init_from=state)
    other = MODEL.replace(d_ff=128)
    with pytest.raises(ValueError, match="init_from .*another model config"):
        train(other, TrainConfig(**BASE, steps=8, cooldown_steps=4), data, tmp_path / "b2", progress=False,
              init_from=state)
    with pytest.raises(FileNotFoundError, match="init_from"):
        train(MODEL, TrainConfig(**BASE, steps=8, cooldown_steps=4), data, tmp_path / "b3", progress=False,
              init_from=tmp_path / "missing.pt")


def test_training_activations_past_memory_are_refused_before_any_step(tmp_path: Path, token_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose planned step (yocou.training.memplan) cannot fit is refused in one line naming the micro-batch,
    before any step; with a byte more than the plan it is not refused by the check."""
    import yocou.utils.memory as M
    from yocou.training.train import memory_plan

    tc = TrainConfig(steps=1, batch_size=256, seq_len=64, dtype="fp32")
    need = memory_plan(MODEL, tc, 1, False).total
    assert need > 256 * 64 * 8 * MODEL.vocab_size  # the logits and their gradient alone
    monkeypatch.delenv("YOCOU_NO_MEMORY_CHECK", raising=False)
    monkeypatch.setattr(M, "available_bytes", lambda device="cpu": (need - 1, "a test's limit"))
    with pytest.raises(M.MemoryRefusal, match=r"micro-batch of 256 x seq_len 64 per rank, unsharded.*1 B short"):
        train(MODEL, tc, token_dir / "train.bin", tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    assert not (tmp_path / "run" / "model.pt").exists()
