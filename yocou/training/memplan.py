"""Per-GPU memory plan of a training step: weights, gathered parameters, gradients, AdamW state, activations, logits.

:func:`plan_memory` computes, from the shapes of a :class:`~yocou.model.config.ModelConfig` alone, the bytes one rank
holds at the peak of a training step under FSDP2 (:func:`yocou.training.parallel.shard_fsdp`: one unit per decoder
layer plus the root unit holding the embedding, the K̂V̂ makers, the final norm and the LM head). The activations are
counted per layer application of :func:`~yocou.model.plan.expand_plan`, so a looped stage (YOCO-U's self-decoder
applied T times) keeps T times the activations of its layers while its weights count once.
:func:`check_against_device` compares the total with the memory free on a device and refuses it in one line.

Sources: PyTorch docs of ``torch.distributed.fsdp.fully_shard`` (sharding on dim 0, ``reshard_after_forward``, the
root unit kept gathered, ``set_requires_gradient_sync``), ``torch.optim.AdamW`` (two moments per parameter),
``torch.autocast`` (the cast cache of leaf weights), ``torch.utils.checkpoint`` (non-reentrant: inputs kept, the
region recomputed in the backward) and ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels keep a
logsumexp of ``[B, H, N]``, not the ``N × N`` scores). The per-operator saved tensors are those autograd records for
this package's layers (:mod:`yocou.model.layers`, :mod:`yocou.model.attention`); ``tests/test_memplan.py`` compares
the activation terms with the tensors alive after a measured forward on CPU.

CLI: ``python -m yocou.training.memplan --variant yocou --world-size 8 --gpu-gb 80`` prints one Markdown table;
``--all`` prints one row per variant of the scale config.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

import torch

from yocou.model.accounting import dtype_bytes
from yocou.model.attention import WINDOW_BLOCKED_MIN
from yocou.model.config import ModelConfig, expand_plan
from yocou.utils import memory
from yocou.utils.memory import MemoryRefusal, format_bytes

__all__ = ["MemoryPlan", "application_activation_bytes", "check_against_device", "main", "plan_memory", "unit_params"]

#: The byte fields of :class:`MemoryPlan` that :attr:`MemoryPlan.total` sums, in table order.
TERMS = ("weights", "gathered_params", "grads", "optimizer", "activations", "recompute", "weight_casts", "logits")


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """Bytes one rank holds at the peak of a training step (see :func:`plan_memory` for each formula).

    Attributes:
        weights: the rank's shard of the master weights, ``P · b_master / world_size``.
        gathered_params: the parameters all-gathered at once, in ``param_dtype``.
        grads: sharded gradients, or the unsharded ones under ``no_sync`` accumulation, plus the unsharded gradient
            of one unit before its reduce-scatter.
        optimizer: AdamW's two fp32 moments, sharded.
        activations: tensors kept for the backward pass after the forward (layer applications, final norm, head
            input, embedding indices, RoPE tables).
        recompute: with activation checkpointing, the saved tensors of the largest layer application rebuilt in
            the backward; 0 without.
        weight_casts: autocast's copies of the weights in the compute dtype kept for the backward (0 when the
            compute dtype is the parameter dtype).
        logits: the logits, the fp32 log-probabilities the loss keeps, and the fp32 logit gradient.
        n_params: parameters counted (``P``).
        world_size, micro_batch, seq_len: the step planned.
        notes: the assumptions behind the numbers, one line each.
    """

    weights: int
    gathered_params: int
    grads: int
    optimizer: int
    activations: int
    recompute: int
    weight_casts: int
    logits: int
    n_params: int
    world_size: int
    micro_batch: int
    seq_len: int
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """Sum of the byte terms (:data:`TERMS`)."""
        return sum(getattr(self, t) for t in TERMS)

    def as_row(self) -> dict[str, int]:
        """``{term: bytes}`` for every term of :data:`TERMS` and ``total``."""
        return {**{t: getattr(self, t) for t in TERMS}, "total": self.total}

    def table(self, gpu_bytes: int | None = None) -> str:
        """A Markdown table of the terms in GiB; with ``gpu_bytes``, a last row with the headroom left."""
        rows = ["| term | GiB |", "|---|---:|"]
        rows += [f"| {k} | {v / 2**30:.2f} |" for k, v in self.as_row().items()]
        if gpu_bytes is not None:
            rows.append(f"| headroom of {gpu_bytes / 2**30:.1f} GiB | {(gpu_bytes - self.total) / 2**30:.2f} |")
        return "\n".join(rows)


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field} must be an integer >= 1, got {value!r}")
    return value


def _bytes(dtype: Any, field: str) -> int:
    try:
        return dtype_bytes(dtype)
    except (ValueError, TypeError):
        raise ValueError(f"{field}: unknown dtype {dtype!r}; expected fp32, bf16, fp16 or a torch dtype") from None


def unit_params(cfg: ModelConfig) -> tuple[list[int], int]:
    """``(layer_units, root)``: the parameters of each FSDP unit of :func:`yocou.training.parallel.shard_fsdp`, one
    entry per distinct decoder layer (a looped layer once), and of the root unit (embedding, K̂V̂ makers, final norm,
    LM head). Their sum is :func:`yocou.model.accounting.param_count`."""
    D, H, G, Dh = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    if cfg.n_experts:
        ffn = D * cfg.n_experts + cfg.n_experts * 3 * D * cfg.d_expert + 3 * D * cfg.d_shared_expert
    else:
        ffn = 3 * D * cfg.d_ff
    units: list[int] = []
    root = 2 * cfg.vocab_size * D + D
    for st in cfg.stages:
        if st.kind == "self":
            units += [2 * D + D * (H + 2 * G) * Dh + H * Dh * D + ffn] * st.n_layers
        else:
            units += [2 * D + 2 * D * H * Dh + ffn] * st.n_layers
            root += D + 2 * D * G * Dh
    return units, root


def _ffn_bytes(cfg: ModelConfig, T: int, r: int, c: int, autocast: bool) -> int:
    """Saved tensors of one FFN over ``T`` tokens whose input (the norm output) is in dtype bytes ``r``."""
    D = cfg.d_model
    if not cfg.n_experts:
        return (2 if autocast else 1) * c * T * D + 4 * c * T * cfg.d_ff  # input (casts), gate, up, silu(gate), product
    kT, E = cfg.top_k * T, cfg.n_experts
    n = (c if autocast else r) * T * D  # the router's input
    n += 4 * T * E + 12 * T * cfg.top_k  # router probabilities (fp32), top-k weights (fp32) and indices (int64)
    n += c * kT * D  # the routed rows sorted by expert, in the compute dtype (the grouped matmul's input)
    n += 4 * c * kT * cfg.d_expert + 2 * c * kT * D  # gate and up (one [kT, 2F]), silu, product; outputs sorted, unsorted
    n += 2 * 8 * kT  # the sort order and the gather index (int64)
    if cfg.d_shared_expert:
        n += (2 * c * T * D if autocast else 0) + 4 * c * T * cfg.d_shared_expert
    return n


def application_activation_bytes(cfg: ModelConfig, kind: str, window: int | None, *, micro_batch: int, seq_len: int,
                                 residual_dtype: Any = "fp32", compute_dtype: Any = None) -> int:
    """Bytes autograd keeps for the backward pass of one layer application (``kind`` ``self``, ``kv`` or
    ``cross`` of :func:`~yocou.model.plan.expand_plan`) without activation checkpointing.

    With ``T = B·N`` tokens, ``r`` the bytes of the residual stream (the parameter dtype: fp32 under autocast),
    ``c`` the bytes of the compute dtype (``c = r`` without autocast), ``a = 2`` casts of a fused two-slice matmul's
    input under autocast (each weight slice is its own matmul, :func:`yocou.model.layers.fused_linear`), else 1:

    * each RMSNorm: its input (a ``kv`` application's is the next cross layer's, counted there) and normalised input ``2·r·T·D`` (plus an fp32 copy ``4·T·D`` when ``r < 4``) and the
      fp32 reciprocal RMS ``4·T``;
    * matmul inputs: ``wqkv`` (self) ``(3 if autocast else 1)·c·T·D``, ``wkv`` (kv) ``a·c·T·D``, ``wq`` (cross)
      ``c·T·D``; ``wo``'s input is the attention output, ``w2``'s the SwiGLU product;
    * attention through a fused kernel (flash / memory-efficient SDPA): queries and output ``2·c·T·H·d_h``, keys
      and values ``2·c·T·G·d_h`` (grouped-query heads not repeated), logsumexp ``4·B·H·N``; no ``N × N`` scores.
      Sliding-window layers at ``N >= WINDOW_BLOCKED_MIN·W`` run in blocks of ``Q = min(W, N)`` queries over
      ``S = Q + W − 1`` keys (:func:`yocou.model.attention.window_attend`): the blocked keys and values
      ``2·c·B·J·S·G·d_h`` (``J = ⌈N/Q⌉``) and their additive mask ``c·B·J·Q·S`` replace the plain keys and values;
      shorter window layers keep an additive ``N × N`` mask ``c·N²``. Cross layers read the K̂V̂ counted at the
      ``kv`` application (``2·c·T·G·d_h`` there);
    * the dense SwiGLU FFN: its input casts and gate, up, ``silu(gate)`` and their product ``4·c·T·d_ff``. MoE
      (Table 6): the router input, fp32 probabilities ``4·T·E``, and for the routed tokens (``k/E`` of them per
      expert on average, ``k·T`` rows in all) the gathered rows, ``4·c·k·T·d_expert`` and the weighted outputs, plus
      the shared expert ``4·c·T·d_shared_expert``.

    Raises:
        ValueError: ``kind`` not ``self``, ``kv`` or ``cross``, or a count below 1, naming it.
    """
    B, N = _positive(micro_batch, "micro_batch"), _positive(seq_len, "seq_len")
    r = _bytes(residual_dtype, "residual_dtype")
    c = r if compute_dtype is None else _bytes(compute_dtype, "compute_dtype")
    autocast = c != r
    T, D, H, G, Dh = B * N, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    norm = 2 * r * T * D + (4 * T * D if r < 4 else 0) + 4 * T
    if kind == "kv":  # its input is also the next cross layer's (counted there)
        return norm - r * T * D + (2 if autocast else 1) * c * T * D + 2 * c * T * G * Dh
    if kind not in ("self", "cross"):
        raise ValueError(f"kind must be 'self', 'kv' or 'cross', got {kind!r}")
    n = 2 * norm + 2 * c * T * H * Dh + 4 * B * H * N  # two norms; queries, output; logsumexp
    if kind == "cross":
        n += c * T * D  # wq's input
    else:
        n += (3 if autocast else 1) * c * T * D
        if window is not None and N >= WINDOW_BLOCKED_MIN * window:
            Q = min(window, N)
            J, S = -(-N // Q), Q + window - 1
            n += 2 * c * B * J * S * G * Dh + c * B * J * Q * S
        else:
            n += 2 * c * T * G * Dh + (c * N * N if window is not None and window < N else 0)
    return n + _ffn_bytes(cfg, T, r, c, autocast)


def _weight_cast_bytes(cfg: ModelConfig, c: int, activation_checkpointing: bool) -> int:
    """Autocast's compute-dtype copies of the weights kept for the backward: one per leaf weight for the step (the
    autocast cache: ``wo``, ``w2``, ``wq``, the router, the LM head) and, without activation checkpointing, one per
    application of each slice of a fused weight (``wqkv``, ``w13``, ``wkv``: views, which autocast does not cache)."""
    D, H, G, Dh = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    if cfg.n_experts:
        # The router and the shared expert's w2 are autocast-cached leaves; the experts' stacked weights are cast
        # (both, all E) at every application by the MoE itself, like a fused slice.
        leaf_ffn = D * cfg.n_experts + D * cfg.d_shared_expert
        fused_ffn = cfg.n_experts * 3 * D * cfg.d_expert + 2 * D * cfg.d_shared_expert
    else:
        leaf_ffn, fused_ffn = D * cfg.d_ff, 2 * D * cfg.d_ff
    leaf = D * cfg.vocab_size
    for st in cfg.stages:
        leaf += st.n_layers * (H * Dh * D + leaf_ffn + (D * H * Dh if st.kind == "cross" else 0))
    per_app = 0
    if not activation_checkpointing:
        for a in expand_plan(cfg):
            per_app += {"self": D * (H + 2 * G) * Dh + fused_ffn, "cross": fused_ffn, "kv": 2 * D * G * Dh}[a.kind]
    return c * (leaf + per_app)


def plan_memory(cfg: ModelConfig, *, world_size: int, micro_batch: int, seq_len: int, param_dtype: Any = "bf16",
                reduce_dtype: Any = "fp32", master_dtype: Any = "fp32", compute_dtype: Any = None,
                optimizer: str = "adamw", activation_checkpointing: bool = True, reshard_after_forward: bool = True,
                no_sync_accumulation: bool = False, logits_dtype: Any = None) -> MemoryPlan:
    """The bytes one rank holds at the peak of a training step of ``micro_batch`` sequences of ``seq_len`` tokens.

    ``P`` parameters (:func:`unit_params`; the same as :func:`yocou.model.accounting.param_count`), ``W`` =
    ``world_size``, ``b(x)`` the bytes of dtype ``x``:

    * ``weights = P·b(master_dtype)/W``: FSDP2's shard of the master weights (fp32).
    * ``gathered_params``: all-gathered in ``param_dtype`` (2 bytes for bf16; FSDP2 ``MixedPrecisionPolicy``;
      ``fp32`` where mixed precision is ``torch.autocast`` over fp32 parameters, as :mod:`yocou.training.parallel`
      does today). With ``reshard_after_forward``: the root unit (kept gathered from forward into backward) and
      the two largest distinct layer units (the unit computing and the one prefetched); a looped layer is one unit
      and counts once however many times it is applied. Without: the root and every layer unit.
    * ``grads``: the sharded gradients ``P·b(master_dtype)/W`` plus the unsharded gradient of the largest layer unit
      in ``reduce_dtype`` before its reduce-scatter. With ``no_sync_accumulation`` (gradient sync off on all but the
      last micro-step, ``set_requires_gradient_sync(False)``) every rank holds the unsharded gradients
      ``P·b(reduce_dtype)`` (4·P for fp32) until the last micro-step instead.
    * ``optimizer``: AdamW's ``exp_avg`` and ``exp_avg_sq`` in fp32, sharded: ``8·P/W``.
    * ``activations``: without checkpointing, the sum over the layer applications of
      :func:`application_activation_bytes` (so a stage looped T times counts T times). With
      ``activation_checkpointing`` (:func:`yocou.training.parallel.apply_activation_checkpointing`), per
      application only its input ``[B, N, D]`` in the residual dtype and, for a cross stage, the K̂V̂ it reads.
      Both add the final RMSNorm, the LM head's input, the token ids and the RoPE tables.
    * ``recompute``: with checkpointing, the largest :func:`application_activation_bytes` (one layer rebuilt at a
      time in the backward).
    * ``weight_casts``: when the compute dtype differs from ``param_dtype`` (autocast), the weight copies of
      :func:`_weight_cast_bytes`.
    * ``logits = B·N·V·(b(logits_dtype) + 4 + 4)``: the head's output, the fp32 log-probabilities the cross entropy
      keeps, and the fp32 gradient in the backward (unchunked).

    Not counted: the all-gather and reduce-scatter buffers beyond one unit, the allocator's fragmentation, CUDA
    context and kernels' workspaces (about 1 GiB on a GPU), the optimizer's temporaries and the data batch.

    Args:
        cfg: the model.
        world_size: ranks sharding the model (``launch.nproc × launch.nnodes``).
        micro_batch: sequences per rank per micro-step (``batch_size / (world_size · grad_accum)``).
        seq_len: tokens per sequence N.
        param_dtype: dtype of the gathered parameters and of the residual stream.
        reduce_dtype: dtype of the unsharded gradients.
        master_dtype: dtype of the sharded master weights and gradients.
        compute_dtype: matmul dtype (autocast); ``None`` is ``param_dtype``.
        optimizer: ``"adamw"`` only.
        activation_checkpointing, reshard_after_forward, no_sync_accumulation: as above.
        logits_dtype: dtype of the head's output; ``None`` is the compute dtype.

    Returns:
        :class:`MemoryPlan`.

    Raises:
        ValueError: ``world_size``, ``micro_batch`` or ``seq_len`` below 1, an unknown dtype or optimizer, naming
            the field.
    """
    W = _positive(world_size, "world_size")
    B = _positive(micro_batch, "micro_batch")
    N = _positive(seq_len, "seq_len")
    if optimizer != "adamw":
        raise ValueError(f"optimizer must be 'adamw', got {optimizer!r}")
    p = _bytes(param_dtype, "param_dtype")
    g = _bytes(reduce_dtype, "reduce_dtype")
    m = _bytes(master_dtype, "master_dtype")
    c = p if compute_dtype is None else _bytes(compute_dtype, "compute_dtype")
    lg = c if logits_dtype is None else _bytes(logits_dtype, "logits_dtype")
    units, root = unit_params(cfg)
    P = sum(units) + root
    ranked = sorted(set(units), reverse=True)
    if reshard_after_forward:
        gathered = root + sum(ranked[:2]) if len(units) > 1 else root + sum(units)
    else:
        gathered = root + sum(units)
    notes = [f"parameters gathered in {p} bytes each "
             + ("(root unit + two largest layer units)" if reshard_after_forward else "(every unit)")]
    if no_sync_accumulation:
        grads = g * P
        notes.append(f"no_sync accumulation: unsharded gradients {g}·P per rank")
    else:
        grads = m * P // W + g * max(units)
    T, D = B * N, cfg.d_model
    plan = expand_plan(cfg)
    per_app = [application_activation_bytes(cfg, a.kind, a.window, micro_batch=B, seq_len=N,
                                            residual_dtype=param_dtype, compute_dtype=compute_dtype) for a in plan]
    head = 2 * p * T * D + (4 * T * D if p < 4 else 0) + 4 * T + c * T * D + 8 * T + 2 * c * N * cfg.head_dim
    if activation_checkpointing:
        kept = sum(p * T * D for a in plan if a.kind != "kv")
        kept += sum(2 * c * T * cfg.d_kv for a in plan if a.kind == "kv")  # K̂V̂ (its input is a cross layer's)
        activations, recompute = kept + head, max(per_app)
        notes.append("activation checkpointing: each application's input kept, one application recomputed")
    else:
        activations, recompute = sum(per_app) + head, 0
    casts = _weight_cast_bytes(cfg, c, activation_checkpointing) if c != p else 0
    n_apps = sum(1 for a in plan if a.kind != "kv")
    notes.append(f"{n_apps} layer applications (looped layers counted once per application)")
    return MemoryPlan(weights=m * P // W, gathered_params=p * gathered, grads=grads, optimizer=8 * P // W,
                      activations=activations, recompute=recompute, weight_casts=casts,
                      logits=T * cfg.vocab_size * (lg + 8), n_params=P, world_size=W, micro_batch=B, seq_len=N,
                      notes=tuple(notes))


def check_against_device(plan: MemoryPlan, device: Any = "cuda", what: str = "the training step") -> None:
    """Refuse ``plan`` when its total exceeds the memory free on ``device``: ``torch.cuda.mem_get_info``'s free
    bytes on CUDA, the available RAM on CPU (:func:`yocou.utils.memory.available_bytes`, as
    :func:`yocou.utils.memory.require`). Nothing is refused where neither can be read or with
    ``YOCOU_NO_MEMORY_CHECK=1``.

    Raises:
        yocou.utils.memory.MemoryRefusal: one line naming the largest terms, the total, the free bytes and the
            shortfall.
    """
    if os.environ.get("YOCOU_NO_MEMORY_CHECK", "") not in ("", "0"):
        return
    got = memory.available_bytes(torch.device(device) if isinstance(device, str) else device)
    if got is None:
        return
    free, source = got
    if plan.total > free:
        top = sorted(((v, k) for k, v in plan.as_row().items() if k != "total"), reverse=True)[:3]
        parts = ", ".join(f"{k} {format_bytes(v)}" for v, k in top)
        raise MemoryRefusal(f"{what} does not fit: it needs {format_bytes(plan.total)} per rank ({parts}, ...) but "
                            f"{format_bytes(free)} are free ({source}): {format_bytes(plan.total - free)} short")


# --- CLI -------------------------------------------------------------------------------------------------------------
def _paper_plans(config: dict, variants: Sequence[str], world_size: int | None, activation_checkpointing: bool,
                 param_dtype: str, reduce_dtype: str, no_sync: bool = False) -> list[tuple[str, ModelConfig, MemoryPlan]]:
    from yocou.model.config import config_from_dict
    from yocou.workflow.pipeline import resolve_run

    launch = config.get("launch", {})
    W = world_size or int(launch.get("nproc", 1)) * int(launch.get("nnodes", 1))
    out = []
    for v in variants:
        run = resolve_run(config, v, vocab_size=config.get("data", {}).get("vocab_size"))
        mc, tc = config_from_dict(run["model"]), run["train"]
        micro = max(1, tc["batch_size"] // (W * tc.get("grad_accum", 1)))  # the global batch over these ranks
        out.append((v, mc, plan_memory(mc, world_size=W, micro_batch=micro, seq_len=tc["seq_len"],
                                       param_dtype=param_dtype, reduce_dtype=reduce_dtype,
                                       activation_checkpointing=activation_checkpointing,
                                       no_sync_accumulation=no_sync)))
    return out


def markdown_rows(named: Sequence[tuple[str, ModelConfig, MemoryPlan]], gpu_bytes: int) -> str:
    """One Markdown row per plan, GiB per term, the total and whether it fits in ``gpu_bytes``."""
    head = "| variant | params | B x N | " + " | ".join(TERMS) + " | total | fits |"
    rows = [head, "|" + "---|" * 3 + "---:|" * (len(TERMS) + 1) + "---|"]
    for name, _mc, pl in named:
        vals = " | ".join(f"{getattr(pl, t) / 2**30:.2f}" for t in TERMS)
        fits = "yes" if pl.total <= gpu_bytes else f"no ({(pl.total - gpu_bytes) / 2**30:.1f} GiB over)"
        rows.append(f"| {name} | {pl.n_params / 1e9:.2f}B | {pl.micro_batch} x {pl.seq_len} | {vals} | "
                    f"{pl.total / 2**30:.2f} | {fits} |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m yocou.training.memplan``: print the plan of one variant (``--variant``) or of every variant of
    the scale config (``--all``) as a Markdown table, GiB per rank."""
    from yocou.utils.entry import int_at_least
    from yocou.utils.guard import check_args, reads
    from yocou.workflow.wfconfig import read_scale_file

    ap = argparse.ArgumentParser(prog="python -m yocou.training.memplan", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="workflows/config/paper.yaml", type=reads(),
                    help="scale config with the variants")
    ap.add_argument("--variant", action="append", help="a variant of the config (repeatable)")
    ap.add_argument("--all", action="store_true", help="every variant of the config")
    ap.add_argument("--world-size", type=int_at_least(1), default=None,
                    help="ranks sharding the model and splitting the global batch (default: launch.nproc x "
                         "launch.nnodes); the micro batch is batch_size / (world size x grad_accum)")
    ap.add_argument("--gpu-gb", type=float, default=80.0, help="GPU memory in GB (10^9 bytes) for the fits column")
    ap.add_argument("--param-dtype", default="bf16")
    ap.add_argument("--reduce-dtype", default="fp32")
    ap.add_argument("--no-activation-checkpointing", action="store_true")
    ap.add_argument("--no-sync-accumulation", action="store_true",
                    help="unsharded fp32 gradients held across the micro-steps (gradient sync on the last only)")
    a = ap.parse_args(argv)
    check_args(a)
    if not math.isfinite(a.gpu_gb) or a.gpu_gb <= 0:
        raise ValueError(f"--gpu-gb must be a finite number > 0, got {a.gpu_gb}")
    config = read_scale_file(a.config)
    names = list(config.get("variants", {})) if a.all else (a.variant or [])
    if not names:
        raise ValueError("--variant or --all is required")
    named = _paper_plans(config, names, a.world_size, not a.no_activation_checkpointing, a.param_dtype,
                         a.reduce_dtype, a.no_sync_accumulation)
    print(markdown_rows(named, int(a.gpu_gb * 1e9)))
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    sys.exit(run_main(main))
