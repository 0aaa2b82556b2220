"""Table 2's equal-FLOPs budget, the snapshot it is read from, and the numbers read off Figures 2 and 5."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from yocou.model import config as C
from yocou.model.accounting import train_flops_per_token
from yocou.results.summarize.training import params_at_loss as param_saving
from yocou.training.train import TrainConfig, train
from yocou.workflow.pipeline import resolve_run
from yocou.workflow.studies import equal_flops_model, figure2_numbers, tokens_to_reach

ROOT = Path(__file__).resolve().parents[1]
KW = dict(vocab_size=300, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, d_ff=64)


@pytest.mark.parametrize("scale", ["smoke", "tiny"])
def test_equal_flops_step_is_the_last_step_within_the_reference_budget(scale: str) -> None:
    cfg = yaml.safe_load((ROOT / f"workflows/config/{scale}.yaml").read_text())
    rc = resolve_run(cfg, "yocou_moe", vocab_size=cfg["data"]["vocab_size"])
    size = cfg["variants"]["yoco_moe"]["size"]  # the scale's own MoE shape (its config's sizes:)
    ref = C.preset(f"yoco-{size}", sizes=cfg["sizes"], vocab_size=cfg["data"]["vocab_size"])
    new = C.preset(f"yocou-{size}", sizes=cfg["sizes"], vocab_size=cfg["data"]["vocab_size"], n_loops=3)
    t = cfg["train"]
    tokens = t["batch_size"] * t["seq_len"]
    budget = t["steps"] * tokens * train_flops_per_token(ref, t["seq_len"])
    # brute force: the last step whose cumulative FLOPs stay within YOCO's full run
    step = max(s for s in range(t["steps"] + 1) if s * tokens * train_flops_per_token(new, t["seq_len"]) <= budget)
    assert rc["equal_flops"]["step"] == step and 0 < step < t["steps"]
    assert rc["train"]["snapshot_steps"] == [step] or rc["train"]["snapshot_steps"] == (step,)
    assert rc["equal_flops"]["to"] == "yoco_moe"


def test_equal_flops_to_must_name_another_variant() -> None:
    cfg = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())
    cfg["variants"]["yocou_moe"]["equal_flops_to"] = "yoco_mo"
    with pytest.raises(ValueError, match="equal_flops_to"):
        resolve_run(cfg, "yocou_moe")


def test_snapshot_equals_a_run_stopped_at_that_step(tmp_path: Path, token_dir: Path) -> None:
    """The snapshot at step 4 of a 9-step run holds the weights of the same run stopped at step 4 (same
    schedule: stop_at_flops keeps the 9-step learning-rate schedule), and its model folder says so."""
    model = C.yocou(n_layers=2, window=8, n_loops=2, **KW)
    base = dict(steps=9, batch_size=2, seq_len=16, dtype="fp32", lr=3e-3, warmup_steps=1, log_every=1)
    f = train_flops_per_token(model, 16) * 32
    full, stopped = tmp_path / "full", tmp_path / "stopped"
    train(model, TrainConfig(**base, snapshot_steps=(4,)), token_dir / "train.bin", full, progress=False)
    train(model, TrainConfig(**base, stop_at_flops=4 * f), token_dir / "train.bin", stopped, progress=False)
    snap = torch.load(full / "model_step4.pt", weights_only=False)
    ref = torch.load(stopped / "model.pt", weights_only=False)
    assert snap["step"] == ref["step"] == 4
    for k, v in ref["model"].items():
        assert torch.equal(snap["model"][k], v), k
    # the snapshot as a model folder of its own
    rc = {"variant": "m", "model": model.to_dict(), "train": {**base, "snapshot_steps": [4]},
          "equal_flops": {"to": "r", "step": 4, "train_flops": 4 * f, "reference_train_flops": 4.2 * f}}
    (full / "run_config.json").write_text(json.dumps(rc))
    sm = equal_flops_model(full, tmp_path / "m_eqflops")
    assert sm["steps"] == 4 and sm["tokens"] == 4 * 32 and sm["train_flops"] == pytest.approx(4 * f)
    assert sm["equal_flops"]["of"] == "m"
    out = torch.load(tmp_path / "m_eqflops/model.pt", weights_only=False)
    assert out["model_config"]["name"] == "m_eqflops" and torch.equal(out["model"]["embed.weight"],
                                                                       ref["model"]["embed.weight"])
    rc.pop("equal_flops")
    (full / "run_config.json").write_text(json.dumps(rc))
    with pytest.raises(ValueError, match="equal_flops"):
        equal_flops_model(full, tmp_path / "x")


def _curve(tokens: list[float], loss: list[float], flops_per_token: float) -> pd.DataFrame:
    return pd.DataFrame({"step": range(1, len(tokens) + 1), "tokens": tokens, "loss": loss,
                         "train_flops": [t * flops_per_token for t in tokens]})


def test_token_saving_and_loss_gap_by_hand() -> None:
    # YOCO: final loss 3.0 at 210 tokens. YOCO-U: 3.5 at 60, 2.9 at 90 -> reaches 3.0 at 60 + 30·(0.5/0.6) = 85.
    ref = _curve([30, 60, 90, 120, 150, 180, 210], [5, 4.5, 4, 3.6, 3.3, 3.1, 3.0], 1.0)
    new = _curve([30, 60, 90, 120], [4.6, 3.5, 2.9, 2.8], 2.0)
    assert tokens_to_reach(new, 3.0, alpha=1) == pytest.approx(85)
    n = figure2_numbers(ref, new, alpha=1)
    assert n["token_saving"] == pytest.approx(1 - 85 / 210)
    # equal FLOPs: YOCO's 210 FLOPs are YOCO-U's 105 tokens -> loss 2.9 + (2.8-2.9)·(15/30) = 2.85
    assert n["loss_gap_at_equal_flops"] == pytest.approx(3.0 - 2.85)
    assert n["loss_gap_at"] == "reference's final FLOPs"
    never = _curve([30, 60], [4.0, 3.5], 2.0)
    n2 = figure2_numbers(ref, never, alpha=1)
    assert n2["token_saving"] is None and n2["loss_gap_at_equal_flops"] == pytest.approx(-0.5)
    assert n2["loss_gap_at"].startswith("new run's final FLOPs")


def test_param_saving_interpolates_in_log_params() -> None:
    yoco = pd.DataFrame({"params": [1e6, 4e6, 16e6], "loss": [4.0, 3.0, 2.0]})
    # loss 2.5 lies halfway between 4M and 16M in log P: 8M
    assert param_saving(yoco, 2.5) == pytest.approx(8e6)
    assert param_saving(yoco, 4.0) == pytest.approx(1e6)
    assert param_saving(yoco, 1.5) is None and param_saving(yoco, 4.5) is None
    assert math.isclose(1 - 4e6 / param_saving(yoco, 2.5), 0.5)


def test_the_tiny_preset_is_the_tiny_scale_s_base_shape() -> None:
    """``C.preset("yocou-tiny")`` builds the model the tiny scale trains (its sizes.base and vocabulary)."""
    cfg = yaml.safe_load((ROOT / "workflows/config/tiny.yaml").read_text())
    base = dict(cfg["sizes"][cfg["model"]["size"]], vocab_size=cfg["data"]["vocab_size"])
    for v in ("transformer", "yoco", "rins", "yocou"):
        spec = {k: x for k, x in cfg["variants"][v].items() if k != "preset"}
        want = C.preset(f"{cfg['variants'][v]['preset']}-base", sizes=cfg["sizes"], vocab_size=base["vocab_size"],
                        **spec)
        assert C.preset(f"{v}-tiny", **spec).replace(name=want.name) == want, v
