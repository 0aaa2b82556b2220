"""The per-GPU memory planner (yocou.training.memplan) against independent counts and a measured CPU forward.

Parameter terms: the parameters of the model built on the meta device. Activation terms: the bytes of every tensor
still alive after a measured forward (storages created by an operator during the forward, deduplicated, less the
parameters, buffers and token ids), which are the tensors autograd keeps for the backward plus the logits.
"""

from __future__ import annotations

import weakref

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from yocou.model.config import preset
from yocou.model.lm import LM
from yocou.training.memplan import check_against_device, main, plan_memory
from yocou.training.parallel import apply_activation_checkpointing
from yocou.utils.memory import MemoryRefusal

SMALL = {"vocab_size": 512, "d_model": 64, "n_heads": 2, "n_kv_heads": 1, "head_dim": 32, "d_ff": 192, "n_layers": 4}
B, N = 2, 128


class _LiveStorages(TorchDispatchMode):
    """Records the storage of every operator output; :meth:`alive` sums those still referenced."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, list] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.refs.setdefault(t.untyped_storage().data_ptr(), []).append(weakref.ref(t))
        return out

    def alive(self, exclude: set[int]) -> int:
        found: dict[int, int] = {}
        for ptr, refs in self.refs.items():
            for r in refs:
                t = r()
                if t is not None and ptr not in exclude and t.untyped_storage().data_ptr() == ptr:
                    found[ptr] = t.untyped_storage().nbytes()
        return sum(found.values())


def _measure(cfg, *, ac: bool, bf16: bool) -> tuple[int, int, int, int]:
    """(bytes alive after the forward, parameters, gradient bytes, AdamW state bytes) of one fp32 training step."""
    torch.manual_seed(0)
    model = LM(cfg)
    if ac:
        apply_activation_checkpointing(model)
    x = torch.randint(0, cfg.vocab_size, (B, N))
    exclude = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers(), x]}
    mode = _LiveStorages()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        with mode:
            logits = model(x).logits_BNV
            loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size).float(), x.reshape(-1))
        kept = mode.alive(exclude)
    loss.backward()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.step()
    n_params = sum(p.numel() for p in model.parameters())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    state = sum(v.numel() * v.element_size() for s in opt.state.values() for k, v in s.items() if k != "step")
    return kept, n_params, grads, state


def _planned_kept(cfg, *, ac: bool, bf16: bool) -> int:
    pl = plan_memory(cfg, world_size=1, micro_batch=B, seq_len=N, param_dtype="fp32",
                     compute_dtype="bf16" if bf16 else "fp32", activation_checkpointing=ac)
    # after the forward: the head's output and the fp32 log-probabilities, not yet the logit gradient
    logits_kept = B * N * cfg.vocab_size * ((2 if bf16 else 4) + 4)
    return pl.activations + pl.weight_casts + logits_kept


CASES = {
    "transformer": (preset("transformer-smoke", **SMALL), 0.05),
    "yoco": (preset("yoco-smoke", window=16, **SMALL), 0.05),
    "yocou_t3": (preset("yocou-smoke", window=16, n_loops=3, **SMALL), 0.05),
    "moe": (preset("transformer-smoke", n_experts=8, top_k=2, d_expert=64, d_shared_expert=64, **SMALL), 0.05),
}


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "autocast_bf16"])
@pytest.mark.parametrize("ac", [False, True], ids=["no_ckpt", "ckpt"])
@pytest.mark.parametrize("name", list(CASES))
def test_activations_match_the_tensors_kept_by_a_measured_forward(name, ac, bf16):
    cfg, tol = CASES[name]
    kept, n_params, grads, state = _measure(cfg, ac=ac, bf16=bf16)
    planned = _planned_kept(cfg, ac=ac, bf16=bf16)
    assert abs(planned - kept) <= tol * kept, (name, planned, kept)
    pl = plan_memory(cfg, world_size=1, micro_batch=B, seq_len=N, param_dtype="fp32", activation_checkpointing=ac)
    assert pl.n_params == n_params
    assert pl.optimizer == state == 8 * n_params
    assert pl.weights == grads == 4 * n_params


def test_the_loop_factor_is_counted_in_plan_and_measurement():
    one = preset("yocou-smoke", window=16, n_loops=1, **SMALL)
    three = preset("yocou-smoke", window=16, n_loops=3, **SMALL)
    for ac in (False, True):
        m1, m3 = _measure(one, ac=ac, bf16=False)[0], _measure(three, ac=ac, bf16=False)[0]
        p1, p3 = _planned_kept(one, ac=ac, bf16=False), _planned_kept(three, ac=ac, bf16=False)
        assert m3 > m1 and p3 > p1
        # two more passes of the self-decoder: the growth agrees within 5 %
        assert abs((p3 - p1) - (m3 - m1)) <= 0.05 * (m3 - m1), (ac, p3 - p1, m3 - m1)


PAPER = {"transformer": preset("transformer-paper-1.3b"), "yoco": preset("yoco-paper-1.3b"),
         "yocou": preset("yocou-paper-1.3b"),
         "yocou_moe": preset("yocou-paper-1.3b", n_experts=64, top_k=8, d_expert=1024, d_shared_expert=1024)}


@pytest.mark.parametrize("name", list(PAPER))
def test_parameter_terms_at_paper_shapes_match_the_meta_model(name):
    cfg = PAPER[name]
    with torch.device("meta"):
        model = LM(cfg)
    P = sum(p.numel() for p in model.parameters())
    layers = [sum(p.numel() for p in layer.parameters()) for stage in model.stages for layer in stage]
    root = P - sum(layers)
    W = 8
    pl = plan_memory(cfg, world_size=W, micro_batch=1, seq_len=8192, param_dtype="bf16", reduce_dtype="fp32")
    assert pl.n_params == P
    assert pl.weights == 4 * P // W
    assert pl.optimizer == 8 * P // W
    assert pl.grads == 4 * P // W + 4 * max(layers)
    top2 = sorted(set(layers), reverse=True)[:2]
    assert pl.gathered_params == 2 * (root + sum(top2))
    synced = plan_memory(cfg, world_size=W, micro_batch=1, seq_len=8192, no_sync_accumulation=True)
    assert synced.grads == 4 * P
    whole = plan_memory(cfg, world_size=W, micro_batch=1, seq_len=8192, reshard_after_forward=False)
    assert whole.gathered_params == 2 * P
    assert pl.total == sum(v for k, v in pl.as_row().items() if k != "total")


def test_paper_yocou_activations_grow_with_the_loops_weights_do_not():
    t1, t3 = (plan_memory(preset("yocou-paper-1.3b", n_loops=t), world_size=8, micro_batch=1, seq_len=8192,
                          activation_checkpointing=False) for t in (1, 3))
    assert t3.weights == t1.weights and t3.gathered_params == t1.gathered_params
    assert t3.activations > 1.5 * t1.activations


@pytest.mark.parametrize("field, value", [("world_size", 0), ("micro_batch", 0), ("seq_len", -1),
                                          ("param_dtype", "int3"), ("optimizer", "sgd")])
def test_bad_input_names_the_field(field, value):
    args = {"world_size": 8, "micro_batch": 1, "seq_len": 128, field: value}
    with pytest.raises(ValueError, match=field) as e:
        plan_memory(CASES["transformer"][0], **args)
    assert "\n" not in str(e.value)


def test_check_against_device_refuses_in_one_line(monkeypatch):
    pl = plan_memory(PAPER["yocou"], world_size=8, micro_batch=1, seq_len=8192)
    monkeypatch.delenv("YOCOU_NO_MEMORY_CHECK", raising=False)
    monkeypatch.setattr("yocou.utils.memory.available_bytes", lambda dev: (pl.total - 2**30, "test"))
    with pytest.raises(MemoryRefusal, match="1.0 GiB short") as e:
        check_against_device(pl, "cpu")
    assert "\n" not in str(e.value)
    monkeypatch.setattr("yocou.utils.memory.available_bytes", lambda dev: (pl.total, "test"))
    check_against_device(pl, "cpu")


def test_cli_prints_one_row_per_variant(capsys):
    assert main(["--variant", "yocou", "--variant", "yoco", "--world-size", "8", "--gpu-gb", "80"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| variant |") and len(out) == 4
    assert out[2].startswith("| yocou | ") and "4 x 8192" in out[2]  # 128 / (8 x 4)


@pytest.mark.parametrize("value", ["inf", "nan", "-1"])
def test_cli_gpu_gb_must_be_finite_and_positive(value):
    with pytest.raises(ValueError, match=r"--gpu-gb must be a finite number > 0"):
        main(["--variant", "yocou", "--gpu-gb", value])


def test_cli_world_size_splits_the_global_batch(capsys):
    """--world-size 8 on the paper config (batch 128, grad_accum 4): 4 sequences per micro-step; 32: 1."""
    rows = {}
    for w in (8, 32):
        assert main(["--variant", "yocou", "--world-size", str(w)]) == 0
        rows[w] = capsys.readouterr().out.splitlines()[-1]
    assert "| 4 x 8192 |" in rows[8] and "| 1 x 8192 |" in rows[32]
