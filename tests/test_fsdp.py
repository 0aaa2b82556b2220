"""FSDP2 training (yocou.training.parallel through yocou.training.train) on 2 CPU processes (gloo) against one process:
the same loss curve and weights as an unsharded run, with activation checkpointing and gradient
accumulation, and a checkpoint written by 2 sharded processes that resumes in 1 process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from yocou.model import config as C
from yocou.training.parallel import apply_activation_checkpointing

# A looped self-decoder (one FSDP unit called twice per step) and a cross-decoder: the YOCO-U shape.
MODEL = C.yocou(n_layers=2, window=8, n_loops=2, vocab_size=300, d_model=32, n_heads=2, n_kv_heads=1,
                head_dim=16, d_ff=64)
# The tolerances of the DDP test (tests/test_train.py): the reduction order differs from one process.
LOSS_ATOL = 1e-5
WEIGHT_ATOL = 1e-5


def _run_config(path: Path, **train_kw) -> Path:
    tc = dict(seed=3, steps=8, batch_size=4, seq_len=32, lr=3e-3, warmup_steps=2, dtype="fp32", log_every=1,
              ckpt_every=4)
    tc.update(train_kw)
    path.write_text(json.dumps({"model": MODEL.to_dict(), "train": tc}))
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _train_args(rc: Path, data: Path, out: Path) -> list[str]:
    return ["train", "--run-config", str(rc), "--data", str(data), "--out", str(out), "--no-progress"]


def _torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *args]


def _losses(run: Path) -> list[float]:
    return [json.loads(l)["loss"] for l in (run / "metrics.jsonl").read_text().splitlines()]


def _assert_same_run(ref: Path, got: Path) -> None:
    l1, l2 = _losses(ref), _losses(got)
    assert len(l1) == len(l2) == 8
    for x, y in zip(l1, l2):
        assert abs(x - y) < LOSS_ATOL, (l1, l2)
    a = torch.load(ref / "model.pt", weights_only=False)["model"]
    b = torch.load(got / "model.pt", weights_only=False)["model"]
    assert a.keys() == b.keys()  # full, unsharded tensors under the plain parameter names
    for k in a:
        assert type(b[k]) is torch.Tensor, (k, type(b[k]))
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=WEIGHT_ATOL)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory, token_dir: Path) -> Path:
    """The reference: one process, no sharding."""
    root = tmp_path_factory.mktemp("fsdp_ref")
    rc = _run_config(root / "rc.json")
    subprocess.run([sys.executable, "-m", "yocou.cli", *_train_args(rc, token_dir / "train.bin", root / "run")],
                   check=True, env=_env(), capture_output=True)
    return root / "run"


@pytest.mark.slow
def test_fsdp_two_processes_equal_one_process(tmp_path: Path, token_dir: Path, one_process: Path) -> None:
    rc = _run_config(tmp_path / "rc.json", fsdp=True)
    res = subprocess.run(_torchrun("-m", "yocou.cli", *_train_args(rc, token_dir / "train.bin", tmp_path / "two")),
                         env=_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["provenance"]["world_size"] == 2
    assert summary["provenance"]["config"]["train"]["fsdp"] is True
    _assert_same_run(one_process, tmp_path / "two")


# Runs the CLI but ends every rank right after the first checkpoint is written (all ranks took part).
_DIE_AFTER_CKPT = """
import os, sys
import torch.distributed as dist
import yocou.training.train as T
real = T._save_ckpt
def save_then_die(*a, **k):
    real(*a, **k)
    if dist.is_initialized():
        dist.barrier()
    os._exit(17)
T._save_ckpt = save_then_die
from yocou.cli import main
sys.exit(main())
"""


@pytest.mark.slow
def test_fsdp_checkpoint_resumes_in_one_process(tmp_path: Path, token_dir: Path, one_process: Path) -> None:
    """2 sharded processes with activation checkpointing and 2 micro-steps write a full-tensor checkpoint
    at step 4 and stop; 1 process resumes it and ends where the unsharded run ends."""
    rc = _run_config(tmp_path / "rc.json", fsdp=True, activation_checkpointing=True, grad_accum=2)
    script = tmp_path / "die_after_ckpt.py"
    script.write_text(_DIE_AFTER_CKPT)
    out = tmp_path / "run"
    res = subprocess.run(_torchrun(str(script), *_train_args(rc, token_dir / "train.bin", out)), env=_env(),
                         capture_output=True, text=True)
    assert res.returncode != 0, "the sharded run was not stopped after its checkpoint"
    ck = torch.load(out / "ckpt.pt", weights_only=False)
    assert ck["step"] == 4 and not (out / "model.pt").exists(), res.stderr[-3000:]
    names = set(torch.load(one_process / "model.pt", weights_only=False)["model"])
    assert set(ck["model"]) == names
    assert set(ck["optimizer"]["state"]) == names  # keyed by name, so it loads with any number of processes
    res = subprocess.run([sys.executable, "-m", "yocou.cli", *_train_args(rc, token_dir / "train.bin", out)],
                         env=_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resuming from step 4" in res.stderr
    _assert_same_run(one_process, out)


def test_activation_checkpointing_keeps_names_and_gradients() -> None:
    """In one process: same state-dict keys, same loss and gradients with and without recomputation."""
    from yocou.model.lm import LM

    torch.manual_seed(0)
    a = LM(MODEL)
    b = LM(MODEL)
    b.load_state_dict(a.state_dict())
    assert apply_activation_checkpointing(b) == 3  # 1 looped self layer, 1 cross layer, 1 K̂V̂ maker
    assert a.state_dict().keys() == b.state_dict().keys()
    ids = torch.randint(0, 300, (2, 24), generator=torch.Generator().manual_seed(1))
    for m in (a, b):
        m(ids).logits_BNV.float().logsumexp(-1).mean().backward()
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-6, msg=n)


def test_fsdp_without_process_group_is_a_clear_error() -> None:
    from yocou.model.lm import LM
    from yocou.training.parallel import shard_fsdp

    with pytest.raises(RuntimeError, match="torchrun"):
        shard_fsdp(LM(MODEL))


def test_full_state_round_trip_in_one_process() -> None:
    """Unsharded (one process with fsdp=True): the name-keyed optimizer state loads into a fresh optimizer
    and the next step is identical."""
    from yocou.model.lm import LM
    from yocou.training.parallel import full_state, load_full_state

    def step(m: torch.nn.Module, opt: torch.optim.Optimizer, seed: int) -> None:
        ids = torch.randint(0, 300, (2, 16), generator=torch.Generator().manual_seed(seed))
        m(ids).logits_BNV.logsumexp(-1).mean().backward()
        opt.step()
        opt.zero_grad()

    torch.manual_seed(0)
    a = LM(MODEL)
    opt_a = torch.optim.AdamW(a.parameters(), lr=1e-2)
    step(a, opt_a, 0)
    buf = io.BytesIO()  # through bytes, as a checkpoint file (the state dicts alias live tensors)
    torch.save(full_state(a, opt_a), buf)
    buf.seek(0)
    msd, osd = torch.load(buf, weights_only=False)
    assert set(osd["state"]) == set(msd)  # keyed by parameter name
    b = LM(MODEL)
    opt_b = torch.optim.AdamW(b.parameters(), lr=1e-2)
    load_full_state(b, opt_b, msd, osd)
    step(a, opt_a, 1)
    step(b, opt_b, 1)
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=n)
