"""FSDP2 training (yocou.training.parallel through yocou.training.train) on 2 CPU processes (gloo) against one process:
the same loss curve and weights as an unsharded run, with activation checkpointing, gradient accumulation, per-layer
compile, HSDP and the bf16 policy, and a sharded (DCP) checkpoint written by 2 processes that resumes in 1 and in 2."""

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


def _two_ranks(tmp_path: Path, token_dir: Path, **train_kw) -> Path:
    rc = _run_config(tmp_path / "rc.json", fsdp=True, **train_kw)
    res = subprocess.run(_torchrun("-m", "yocou.cli", *_train_args(rc, token_dir / "train.bin", tmp_path / "two")),
                         env=_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return tmp_path / "two"


@pytest.mark.slow
def test_fsdp_per_layer_compile_and_hsdp_equal_one_process(tmp_path: Path, token_dir: Path,
                                                          one_process: Path) -> None:
    """2 ranks, activation checkpointing and every layer compiled (fullgraph) before sharding (the paper config's
    combination) and HSDP's 2-D mesh (2 replicas of 1 shard), equal the eager unsharded run to fp32's tolerance."""
    _assert_same_run(one_process, _two_ranks(tmp_path, token_dir, compile=True, activation_checkpointing=True,
                                             fsdp_replicate=2))


@pytest.fixture(scope="module")
def one_process_bf16(tmp_path_factory: pytest.TempPathFactory, token_dir: Path) -> Path:
    """One process, bf16 autocast over fp32 parameters."""
    root = tmp_path_factory.mktemp("fsdp_ref_bf16")
    rc = _run_config(root / "rc.json", dtype="bf16")
    subprocess.run([sys.executable, "-m", "yocou.cli", *_train_args(rc, token_dir / "train.bin", root / "run")],
                   check=True, env=_env(), capture_output=True)
    return root / "run"


# bf16 FSDP computes with bf16 parameters and a bf16 residual stream (the policy casts the inputs), one process
# with bf16 matmuls over fp32 parameters and stream: after 8 steps at lr 3e-3 the two curves agree to this (measured
# on CPU: 1.0e-3 in the loss, 5.6e-3 in the weights).
BF16_LOSS_ATOL = 5e-3
BF16_WEIGHT_ATOL = 1.5e-2


@pytest.mark.slow
def test_fsdp_bf16_policy_tracks_one_process(tmp_path: Path, token_dir: Path, one_process_bf16: Path,
                                              one_process: Path) -> None:
    """2 ranks under MixedPrecisionPolicy(bf16 params, fp32 reduce) track the one-process bf16 run within the
    stated tolerance, and learn."""
    two = _two_ranks(tmp_path, token_dir, dtype="bf16")
    l1, l2 = _losses(one_process_bf16), _losses(two)
    assert len(l1) == len(l2) == 8
    assert max(abs(x - y) for x, y in zip(l1, l2)) < BF16_LOSS_ATOL, (l1, l2)
    a = torch.load(one_process_bf16 / "model.pt", weights_only=False)["model"]
    b = torch.load(two / "model.pt", weights_only=False)["model"]
    assert all(b[k].dtype == torch.float32 for k in b)  # fp32 master weights
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert diff < BF16_WEIGHT_ATOL
    assert l2[-1] < l2[0] - 0.05, l2  # it learns


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


def _stopped_after_first_checkpoint(tmp_path: Path, token_dir: Path, rc: Path, out: Path) -> None:
    """2 sharded processes stop right after writing the step-4 checkpoint: a DCP folder, each rank's shards in it."""
    from torch.distributed.checkpoint import FileSystemReader

    script = tmp_path / "die_after_ckpt.py"
    script.write_text(_DIE_AFTER_CKPT)
    res = subprocess.run(_torchrun(str(script), *_train_args(rc, token_dir / "train.bin", out)), env=_env(),
                         capture_output=True, text=True)
    assert res.returncode != 0, "the sharded run was not stopped after its checkpoint"
    dcp_dir = out / "ckpt.dcp"
    meta = json.loads((dcp_dir / "meta.json").read_text())
    assert meta["step"] == 4 and not (out / "model.pt").exists() and not (out / "ckpt.pt").exists(), \
        res.stderr[-3000:]
    assert sorted(p.name for p in dcp_dir.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]  # one per rank
    keys = set(FileSystemReader(str(dcp_dir)).read_metadata().state_dict_metadata)
    names = {n for n, _ in _named_parameters()}
    assert {f"model.{n}" for n in names} <= keys
    assert {f"optimizer.state.{n}.exp_avg" for n in names} <= keys  # keyed by name: loads on any world size


def _named_parameters() -> list[tuple[str, torch.nn.Parameter]]:
    from yocou.model.lm import LM

    return list(LM(MODEL).named_parameters())


@pytest.mark.slow
@pytest.mark.parametrize("resume_ranks", [1, 2])
def test_fsdp_sharded_checkpoint_resumes_on_one_and_two_processes(tmp_path: Path, token_dir: Path,
                                                                  one_process: Path, resume_ranks: int) -> None:
    """2 sharded processes with activation checkpointing and 2 micro-steps write a DCP checkpoint at step 4 and
    stop; 1 process, or 2 again, resumes it and ends where the unsharded run ends."""
    rc = _run_config(tmp_path / "rc.json", fsdp=True, activation_checkpointing=True, grad_accum=2)
    out = tmp_path / "run"
    _stopped_after_first_checkpoint(tmp_path, token_dir, rc, out)
    cmd = [sys.executable, "-m", "yocou.cli"] if resume_ranks == 1 else _torchrun("-m", "yocou.cli")
    res = subprocess.run([*cmd, *_train_args(rc, token_dir / "train.bin", out)], env=_env(), capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resuming from step 4" in res.stderr
    _assert_same_run(one_process, out)
    assert not (out / "ckpt.dcp").exists()  # the finished run's resume state is removed


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


@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_every_compiled_unit_has_no_graph_break(moe: bool) -> None:
    """What :func:`compile_layers` compiles (a window self layer in blocks, a cross layer, a K̂V̂ maker; dense and
    MoE FFNs; both attention backends) traces as one graph (``torch._dynamo.explain``)."""
    from yocou.model.attention import attention_backend
    from yocou.model.layers import rope_cos_sin
    from yocou.model.lm import LM

    kw = {"n_experts": 4, "top_k": 2, "d_expert": 16, "d_shared_expert": 16} if moe else {}
    cfg = C.yocou(n_layers=2, window=8, n_loops=2, vocab_size=300, d_model=32, n_heads=2, n_kv_heads=1,
                  head_dim=16, d_ff=64, **kw)
    m = LM(cfg)
    x = torch.randn(2, 40, 32)  # 40 >= 4 · window: the blocked window path
    rope = rope_cos_sin(torch.arange(40), 16, 10000.0, x.dtype)
    for backend in ("sdpa", "flex"):
        with attention_backend(backend), torch.no_grad():
            torch._dynamo.reset()
            counts = [torch._dynamo.explain(m.stages[0][0])(x, m.plan[0], rope, None, 0).graph_break_count,
                      torch._dynamo.explain(m.kv_makers["1"])(x, None).graph_break_count]
            k, v = m.kv_makers["1"](x, None)
            counts.append(torch._dynamo.explain(m.stages[1][0])(x, None, k, v).graph_break_count)
        assert counts == [0, 0, 0], (backend, counts)


def test_bf16_policy_computes_in_bf16_and_the_looped_layer_stays_gathered(tmp_path: Path) -> None:
    """On a 1-rank gloo group: under ``param_dtype=bf16`` a layer's matmul sees bf16 weights while the stored
    (sharded) parameters stay fp32; after the forward the looped self layer is still unsharded (plain tensors,
    gathered once for both loop calls) and the cross layer is resharded (DTensors)."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from yocou.model.lm import LM
    from yocou.training.parallel import shard_fsdp

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        m = shard_fsdp(LM(MODEL), param_dtype=torch.bfloat16)
        seen = []
        m.stages[0][0].wo.register_forward_pre_hook(lambda mod, args: seen.append(mod.weight.dtype))
        out = m(torch.randint(0, 300, (2, 16)))
        assert seen == [torch.bfloat16, torch.bfloat16]  # two loop calls
        assert not isinstance(m.stages[0][0].wo.weight, DTensor)
        assert isinstance(m.stages[1][0].wo.weight, DTensor)
        out.logits_BNV.float().sum().backward()
        assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in m.parameters())
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("ac", [False, True], ids=["no_ac", "ac"])
def test_layers_compiled_before_sharding_run_compiled_under_fsdp(tmp_path: Path, ac: bool) -> None:
    """(activation checkpointing,) compile_layers, then shard_fsdp (1-rank gloo): the forward and backward run
    Dynamo graphs, one per unit kind (self layer, K̂V̂ maker, cross layer; the looped layer's two calls share one),
    not eagerly; and equal the eager unsharded model."""
    import torch.distributed as dist
    from torch._dynamo.utils import counters

    from yocou.model.lm import LM
    from yocou.training.parallel import compile_layers, shard_fsdp

    torch.manual_seed(0)
    ref = LM(MODEL)
    m = LM(MODEL)
    m.load_state_dict(ref.state_dict())
    ids = torch.randint(0, 300, (2, 40), generator=torch.Generator().manual_seed(2))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        torch._dynamo.reset()
        counters.clear()
        if ac:
            apply_activation_checkpointing(m)
        assert compile_layers(m) == 3
        shard_fsdp(m)
        got = m(ids).logits_BNV
        got.float().logsumexp(-1).mean().backward()
        assert counters["stats"]["unique_graphs"] == 3
        assert counters["aot_autograd"]["ok"] == 3
    finally:
        dist.destroy_process_group()
    torch.testing.assert_close(got, ref(ids).logits_BNV, rtol=0, atol=1e-5)


def test_shard_fsdp_names_a_replicate_count_that_does_not_divide(tmp_path: Path) -> None:
    """On a 1-rank gloo group: ``fsdp_replicate`` 2 does not divide world 1, named in one line."""
    import torch.distributed as dist
    from yocou.model.lm import LM
    from yocou.training.parallel import shard_fsdp

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match=r"train.fsdp_replicate \(2\) must divide the world size \(1\)"):
            shard_fsdp(LM(MODEL), replicate=2)
    finally:
        dist.destroy_process_group()


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


def test_sharded_checkpoint_round_trip_swap_and_bad_meta(tmp_path: Path) -> None:
    """In one process (no process group): save_sharded then load_sharded restores weights and AdamW state into a
    fresh model; a swap cut off after the old folder moved aside resumes from ``.old``; an unreadable meta.json is
    named in one line."""
    from yocou.model.lm import LM
    from yocou.training import parallel

    torch.manual_seed(0)
    a = LM(MODEL)
    opt_a = torch.optim.AdamW(a.parameters(), lr=1e-2)
    a(torch.randint(0, 300, (2, 16))).logits_BNV.float().mean().backward()
    opt_a.step()
    path = tmp_path / "ckpt.dcp"
    parallel.save_sharded(path, a, opt_a, {"step": 1})
    assert parallel.sharded_checkpoint(path) == path and not path.with_name("ckpt.dcp.tmp").exists()
    parallel.save_sharded(path, a, opt_a, {"step": 2})  # replaces the first
    assert parallel.read_sharded_meta(path) == {"step": 2} and not path.with_name("ckpt.dcp.old").exists()
    path.rename(path.with_name("ckpt.dcp.old"))  # as if cut off between the two renames
    found = parallel.sharded_checkpoint(path)
    assert found == path.with_name("ckpt.dcp.old")
    torch.manual_seed(1)
    b = LM(MODEL)
    opt_b = torch.optim.AdamW(b.parameters(), lr=1e-2)
    parallel.load_sharded(found, b, opt_b)
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), n
        assert torch.equal(opt_a.state[p]["exp_avg_sq"], opt_b.state[q]["exp_avg_sq"]), n
    (found / "meta.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"sharded checkpoint .*meta.json cannot be read \(JSONDecodeError\)"):
        parallel.read_sharded_meta(found)


@pytest.mark.parametrize("group", [False, True], ids=["no_process_group", "gloo_1_rank"])
def test_asynchronous_sharded_save_swaps_in_only_when_finished(tmp_path: Path, group: bool) -> None:
    """ShardedSaver(asynchronous): after save() the previous checkpoint is still the one to resume from; after wait()
    the new one is, and it loads the state it was given (not the state changed after save() returned)."""
    import torch.distributed as dist

    from yocou.model.lm import LM
    from yocou.training import parallel

    if group:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        a = LM(MODEL)
        opt = torch.optim.AdamW(a.parameters(), lr=1e-2)
        path = tmp_path / "ckpt.dcp"
        saver = parallel.ShardedSaver(asynchronous=True)
        assert saver.asynchronous
        saver.save(path, a, opt, {"step": 1})
        saver.wait()
        want = {k: v.clone() for k, v in a.state_dict().items()}
        saver.save(path, a, opt, {"step": 2})
        with torch.no_grad():  # training goes on while the background write runs: the staged copy is saved
            for p in a.parameters():
                p.add_(1.0)
        assert parallel.read_sharded_meta(parallel.sharded_checkpoint(path))["step"] == 1  # not swapped in yet
        saver.wait()
        assert parallel.read_sharded_meta(path) == {"step": 2}
        b = LM(MODEL)
        parallel.load_sharded(path, b, torch.optim.AdamW(b.parameters(), lr=1e-2))
        for k, v in b.state_dict().items():
            assert torch.equal(v, want[k]), k
    finally:
        if group:
            dist.destroy_process_group()


@pytest.mark.slow
def test_fsdp_asynchronous_checkpoints_keep_the_run_equal(tmp_path: Path, token_dir: Path, one_process: Path) -> None:
    """2 ranks with asynchronous DCP checkpoints (steps 4 and 8) end as the unsharded run and leave no checkpoint."""
    out = _two_ranks(tmp_path, token_dir, async_checkpoint=True)
    _assert_same_run(one_process, out)
    assert not any(out.glob("ckpt.dcp*"))


@pytest.mark.parametrize("how", ["no_meta", "a_file"])
def test_a_damaged_sharded_checkpoint_is_named_not_discarded(tmp_path: Path, how: str) -> None:
    """A ckpt.dcp folder of shards without meta.json, or a ckpt.dcp that is a file, is refused in one line naming
    it (a resume would otherwise restart from step 0 and delete the shards); the shards stay."""
    from yocou.model.lm import LM
    from yocou.training import parallel

    path = tmp_path / "ckpt.dcp"
    if how == "no_meta":
        a = LM(MODEL)
        parallel.save_sharded(path, a, torch.optim.AdamW(a.parameters()), {"step": 1})
        (path / "meta.json").unlink()
        match = r"ckpt.dcp has no meta.json .*remove .* to restart"
    else:
        path.write_text("hi")
        match = r"ckpt.dcp is a file; expected a folder"
    with pytest.raises(ValueError, match=match) as e:
        parallel.sharded_checkpoint(path)
    assert "\n" not in str(e.value) and path.exists()


def test_hsdp_and_async_fields_need_fsdp_and_a_dividing_world() -> None:
    from yocou.training.train import TrainConfig, build_model

    with pytest.raises(ValueError, match=r"TrainConfig.fsdp_replicate is for fsdp: true only, got 2"):
        TrainConfig(steps=1, batch_size=1, seq_len=8, fsdp_replicate=2)
    with pytest.raises(ValueError, match=r"TrainConfig.async_checkpoint is for fsdp: true only, got True"):
        TrainConfig(steps=1, batch_size=1, seq_len=8, async_checkpoint=True)
    tc = TrainConfig(steps=1, batch_size=1, seq_len=8, fsdp=True, fsdp_replicate=2)
    with pytest.raises(ValueError, match=r"train.fsdp_replicate \(2\) must divide the world size \(1\)"):
        build_model(MODEL, tc, torch.device("cpu"), 1)
