"""The evaluations' batch from the memory planner (yocou.model.limits.plan_eval_batch): the largest batch up to the
configured cap whose rows fit the memory free on the model's device; the cap where the memory cannot be read; the
held-out loss the same at the planned batch as at the cap. Free memory is mocked, never exhausted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import yocou.model.limits as L
from yocou.model import config as C
from yocou.model.accounting import kv_cache_bytes
from yocou.model.lm import LM


def _free(monkeypatch: pytest.MonkeyPatch, nbytes: int | None) -> None:
    monkeypatch.setattr(L, "available_bytes", lambda device="cpu": None if nbytes is None else (nbytes, "mocked"))


@pytest.mark.parametrize("chunk_size", [None, 8])
def test_the_batch_is_what_fits_up_to_the_cap(monkeypatch: pytest.MonkeyPatch, chunk_size: int | None) -> None:
    monkeypatch.delenv("YOCOU_NO_MEMORY_CHECK", raising=False)
    model = LM(C.preset("yocou-smoke"))
    row = L.eval_row_bytes(model.cfg, 64, dtype="fp32", chunk_size=chunk_size)
    # a row holds at least its fp32 logits (full forward) or its KV cache (cached prefill), computed apart
    floor = kv_cache_bytes(model.cfg, 64) if chunk_size else 4 * 64 * model.cfg.vocab_size
    assert row > floor
    lines: list[str] = []

    def plan(cap: int) -> int:
        return L.plan_eval_batch(model, cap, seq_len=64, dtype="fp32", chunk_size=chunk_size, log=lines.append)

    _free(monkeypatch, int((3 * row + row // 2) / 0.9))
    assert plan(8) == 3 and plan(2) == 2
    assert len(lines) == 1 and "batch 3 (not 8)" in lines[0] and "mocked" in lines[0]
    _free(monkeypatch, row // 4)
    assert plan(8) == 1   # one row is tried: the cache's own check or the allocator refuses it
    _free(monkeypatch, None)
    assert plan(8) == 8   # memory that cannot be read limits nothing
    _free(monkeypatch, 1)
    monkeypatch.setenv("YOCOU_NO_MEMORY_CHECK", "1")
    assert plan(8) == 8
    with pytest.raises(ValueError, match="batch cap"):
        L.plan_eval_batch(model, 0, seq_len=64, dtype="fp32")


def test_bf16_rows_need_less_than_fp32_rows() -> None:
    cfg = C.preset("yocou-smoke")
    for chunk in (None, 8):
        assert L.eval_row_bytes(cfg, 256, dtype="bf16", chunk_size=chunk) < L.eval_row_bytes(cfg, 256, dtype="fp32",
                                                                                             chunk_size=chunk)


def test_ppl_at_the_planned_batch_equals_the_cap_and_is_recorded(token_dir: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from yocou import cli

    monkeypatch.delenv("YOCOU_NO_MEMORY_CHECK", raising=False)
    torch.manual_seed(0)
    cfg = C.preset("yocou-smoke").replace(vocab_size=300)
    torch.save({"model": LM(cfg).state_dict(), "model_config": cfg.to_dict()}, tmp_path / "model.pt")
    argv = ["ppl", "--model", str(tmp_path / "model.pt"), "--data", str(token_dir), "--splits", "heldout_book",
            "--seq-len", "16", "--max-tokens", "160", "--batch", "8", "--device", "cpu"]
    assert cli.main(argv + ["--out", str(tmp_path / "cap.json")]) == 0
    row = L.eval_row_bytes(cfg, 16, dtype="fp32")
    _free(monkeypatch, int(2.5 * row / 0.9))
    assert cli.main(argv + ["--out", str(tmp_path / "planned.json")]) == 0
    cap, planned = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("cap", "planned"))
    assert cap["provenance"]["config"]["batch_used"] == 8 and planned["provenance"]["config"]["batch_used"] == 2
    a, b = cap["splits"]["heldout_book"], planned["splits"]["heldout_book"]
    assert a["n_tokens"] == b["n_tokens"] and b["nats_per_token"] == pytest.approx(a["nats_per_token"], abs=1e-6)
