"""Training: AdamW, warmup then decay, clipping, bf16 autocast, exact resume, DDP.

One script for one process or many: under ``torchrun`` (``WORLD_SIZE > 1``) it
initialises ``torch.distributed`` (gloo on CPU, NCCL on CUDA) and wraps the
model in DDP, or shards it with FSDP2 when ``TrainConfig.fsdp`` (:mod:`yocou.training.parallel`).
Each step's global batch is drawn from a generator seeded by
``(seed, step)`` and split across ranks, so the loss curve does not depend on
the number of processes, and a resumed run sees the same batches as an
uninterrupted one.

Outputs in ``out_dir``: ``metrics.jsonl`` (one row per logged step: step, tokens,
train_flops, loss, lr, tokens_per_s, ...; with ``TrainConfig.eval_every`` also ``heldout_loss``, the held-out
NLL per split at a fixed schedule, :class:`HeldoutEval`), ``ckpt.pt`` (resume state, written
atomically every ``ckpt_every`` steps; with ``TrainConfig.fsdp`` the sharded ``ckpt.dcp/`` instead), ``model.pt`` (final weights + config +
provenance) and ``summary.json``; with ``TrainConfig.tensorboard`` also TensorBoard event files
(``events.out.tfevents.*``) holding the same rows.

The pieces, in the manner of torchtitan and OLMo-core: :func:`build_model` and :func:`build_optimizer`;
:class:`Checkpointer` (``ckpt.pt``, ``model.pt`` and snapshots: atomic writes, resume with config checks);
:class:`MetricsLog` (``metrics.jsonl`` and its TensorBoard mirror); :func:`draw_batch` and :func:`train_step`
(one optimizer step: micro-steps of forward and backward, loss reduction, clipping, update); and
:func:`train`, which runs them in order (:func:`_run_steps` is its loop).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

import torch
import torch.distributed as dist
import torch.nn.functional as F
from pydantic import Field, Strict

from yocou.data.needles import NeedleMix
from yocou.model import accounting
from yocou.model.attention import call_sites
from yocou.model.config import ModelConfig, config_from_dict
from yocou.model.limits import new_model
from yocou.model.lm import LM
from yocou.training import parallel
from yocou.training.memplan import MemoryPlan, check_against_device, plan_memory
from yocou.utils import memory
from yocou.utils.io import atomic_path, atomic_write_json, atomic_write_text, provenance
from yocou.utils.runlock import LOCK_NAME, RunLock
from yocou.utils.validation import (
    Bool,
    Float,
    NonNegFloat,
    NonNegInt,
    PosFloat,
    PosInt,
    config_dataclass,
    from_mapping,
)


@config_dataclass
class TrainConfig:
    """Optimisation settings. [assume] fields follow the YOCO code (docs/design.md section 6).

    Attributes:
        seed: seeds the model init and the per-step data generator.
        steps: optimizer steps.
        batch_size: global batch in sequences (split evenly across ranks).
        seq_len: training sequence length N in tokens.
        lr: peak learning rate. min_lr_ratio: final lr / peak.
        warmup_steps: linear warmup from 0. schedule: decay after warmup (:func:`lr_at`): ``cosine`` or
            ``linear`` over all the steps after warmup, ``constant``, or ``wsd`` (warmup-stable-decay: the
            peak rate until the last ``cooldown_steps`` steps, then a linear cooldown to ``lr * min_lr_ratio``).
        cooldown_steps: ``wsd`` only: the length of the final linear cooldown (0: no cooldown, a stable-phase
            run whose final state a cooldown branch can start from: :func:`train`'s ``init_from``).
        weight_decay, beta1, beta2, eps: AdamW (paper: betas 0.9, 0.95).
        grad_clip: max global gradient norm (0 disables).
        dtype: ``bf16`` autocast (CPU AMX / CUDA) or ``fp32``.
        grad_accum: micro-steps per optimizer step (batch divides evenly).
        log_every, ckpt_every: in steps.
        compile: ``torch.compile`` the training forward: the whole model in one process or under DDP; under FSDP each
            decoder layer and K̂V̂ maker (:func:`yocou.training.parallel.compile_layers`, fullgraph), before sharding.
        stop_at_flops: stop early once analytic training FLOPs reach this; 0 disables.
        snapshot_steps: after each of these optimizer steps also write the weights to
            ``model_step<N>.pt`` (same format as ``model.pt``). Table 2's "equal FLOPs" YOCO-U is
            the equal-steps run's snapshot at the step where its training FLOPs reach YOCO's full
            run (:func:`yocou.workflow.pipeline.resolve_run`, ``equal_flops_to``).
        fsdp: shard parameters, gradients and optimizer state with FSDP2 over the
            ranks of ``torchrun`` (:mod:`yocou.training.parallel`) instead of DDP; the resume checkpoint is the
            sharded ``ckpt.dcp/`` (each rank writes its shards), which resumes with any number of processes. With
            ``dtype`` bf16, parameters are all-gathered and computed in bf16 and gradients reduced in fp32
            (``MixedPrecisionPolicy``).
        fsdp_replicate: HSDP with FSDP: shard within groups of ``world / fsdp_replicate`` ranks (a node) and
            replicate across the groups; 1 (the default): shard over every rank.
        activation_checkpointing: recompute each layer in the backward pass
            instead of storing its activations (less memory, about 1/3 more compute).
        async_checkpoint: with ``fsdp``, write ``ckpt.dcp/`` in the background (``dcp.async_save``: staged in CPU
            memory, written while training goes on, swapped in at the next save or the end). Changes no result.
        allow_math_attention: on CUDA, train at ``seq_len >= MATH_ATTENTION_MAX_SEQ_LEN`` even where an attention
            call site gets SDPA's math kernel (fp32 scores materialised: :func:`math_attention_refusal`). Changes
            no result.
        eval_every: every this many optimizer steps, and at the last, rank 0 computes the held-out loss
            (:class:`HeldoutEval`: mean NLL in nats/token on the first ``eval_tokens`` tokens of each held-out
            split, windows of ``seq_len``) into that step's ``metrics.jsonl`` row as ``heldout_loss``; 0: off.
            Consumes no random numbers and changes no weight.
        eval_tokens: tokens per held-out split scored at each evaluation.
        tensorboard: also write each ``metrics.jsonl`` row as TensorBoard scalars (``train/loss``,
            ``train/lr``, ``train/grad_norm``, ``train/tokens_per_s`` against the step, with the row's wall
            time) to event files in the run folder, beside ``metrics.jsonl`` (rank 0 only). Needs the optional
            ``tensorboard`` package (``pip install -e ".[tensorboard]"``), imported only when this is on.
            Changes no result: a run resumes across a change of it.
        needle_mix: a labelled substitute for Table 4 at small scale (:class:`yocou.data.needles.NeedleMix`):
            that fraction of the training sequences carry a synthetic key-value needle in the eval's format and,
            at the end, its question and value, so small models learn retrieval; null (the default) or fraction 0:
            off, every batch as without it. Needs the run's tokenizer (``train(..., tokenizer=)``,
            ``yocou train --tokenizer``).
    """

    seed: Annotated[int, Strict(), Field(ge=0, lt=2**32)] = 0
    steps: PosInt
    batch_size: PosInt
    seq_len: PosInt
    lr: PosFloat = 1e-3
    min_lr_ratio: Annotated[Float, Field(ge=0, le=1)] = 0.1
    warmup_steps: NonNegInt = 0
    schedule: Literal["cosine", "linear", "constant", "wsd"] = "cosine"
    cooldown_steps: NonNegInt = 0
    weight_decay: NonNegFloat = 0.1
    beta1: Annotated[Float, Field(ge=0, lt=1)] = 0.9
    beta2: Annotated[Float, Field(ge=0, lt=1)] = 0.95
    eps: PosFloat = 1e-8
    grad_clip: NonNegFloat = 1.0
    dtype: Literal["bf16", "fp32"] = "bf16"
    grad_accum: PosInt = 1
    log_every: PosInt = 10
    ckpt_every: PosInt = 100
    compile: Bool = False
    stop_at_flops: NonNegFloat = 0.0
    snapshot_steps: tuple[PosInt, ...] = ()
    fsdp: Bool = False
    fsdp_replicate: PosInt = 1
    activation_checkpointing: Bool = False
    allow_math_attention: Bool = False
    async_checkpoint: Bool = False
    tensorboard: Bool = False
    eval_every: NonNegInt = 0
    eval_tokens: Annotated[int, Strict(), Field(ge=2)] = 16384
    needle_mix: NeedleMix | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"TrainConfig.warmup_steps must be in [0, steps={self.steps}], got {self.warmup_steps}")
        if self.cooldown_steps and self.schedule != "wsd":
            raise ValueError(f"TrainConfig.cooldown_steps is for schedule 'wsd' only, got {self.cooldown_steps} with "
                             f"schedule {self.schedule!r}")
        if not 0 <= self.cooldown_steps <= self.steps - self.warmup_steps:
            raise ValueError(f"TrainConfig.cooldown_steps must be in [0, steps - warmup_steps = "
                             f"{self.steps - self.warmup_steps}], got {self.cooldown_steps}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"TrainConfig.batch_size ({self.batch_size}) must be a multiple of grad_accum "
                             f"({self.grad_accum})")
        for name, off in (("fsdp_replicate", self.fsdp_replicate == 1), ("async_checkpoint", not self.async_checkpoint)):
            if not off and not self.fsdp:
                raise ValueError(f"TrainConfig.{name} is for fsdp: true only, got {getattr(self, name)!r} with fsdp "
                                 "false")
        bad = [s for s in self.snapshot_steps if s > self.steps]
        if bad:
            raise ValueError(f"TrainConfig.snapshot_steps must be optimizer steps in [1, steps={self.steps}], got "
                             f"{bad[0]!r}")


#: The metrics.jsonl keys written as TensorBoard scalars (tag ``train/<key>``); a row's ``heldout_loss`` goes to
#: ``heldout/<split>``.
TB_SCALARS = ("loss", "lr", "grad_norm", "tokens_per_s")
#: TrainConfig fields that change no result: a checkpoint written with other values of them still resumes.
_NO_RESULT_FIELDS = ("tensorboard", "allow_math_attention", "async_checkpoint")
#: From this training length on, a CUDA run refuses an attention call site on SDPA's math kernel
#: (:func:`math_attention_refusal`).
MATH_ATTENTION_MAX_SEQ_LEN = 8192


class _TensorBoardLog:
    """The metrics rows as TensorBoard scalars in ``out`` (:data:`TB_SCALARS`, step on the x axis).

    Opening it removes the folder's old event files and writes ``rows`` again (the rows kept at a resumed run's
    checkpoint), so the events always hold exactly the rows of ``metrics.jsonl``.
    """

    @staticmethod
    def writer_class() -> type:
        """``torch.utils.tensorboard.SummaryWriter``; ValueError naming ``train.tensorboard`` when TensorBoard
        is not installed (a one-line error at the entry points)."""
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ValueError(f"train.tensorboard is true but TensorBoard cannot be imported ({e}); install it "
                             f"with pip install -e \".[tensorboard]\" or set train.tensorboard: false") from None
        return SummaryWriter

    def __init__(self, out: Path, rows: list[dict[str, Any]]) -> None:
        SummaryWriter = self.writer_class()
        for old in out.glob("events.out.tfevents.*"):
            old.unlink()
        self.writer = SummaryWriter(log_dir=str(out))
        for row in rows:
            self.add(row)

    def add(self, row: Mapping[str, Any]) -> None:
        for key in TB_SCALARS:
            if key in row:
                self.writer.add_scalar(f"train/{key}", row[key], global_step=row["step"], walltime=row["wall_time"])
        for split, v in (row.get("heldout_loss") or {}).items():
            self.writer.add_scalar(f"heldout/{split}", v, global_step=row["step"], walltime=row["wall_time"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class NonFiniteLossError(FloatingPointError, ValueError):
    """The training loss became NaN or infinite (a diverged run: bad input such as too high a learning rate,
    so entry points report it in one line, like any ValueError)."""


def train_config_from_dict(d: Mapping[str, Any]) -> TrainConfig:
    """Build a :class:`TrainConfig` from a mapping (YAML / JSON; ``snapshot_steps`` may be a list, ``needle_mix`` a
    mapping).

    Raises:
        yocou.utils.validation.FieldError: not a mapping, an unknown or missing key, a wrong type, a value out of
            range or a rule across fields broken, naming the field (``TrainConfig.lr``).
    """
    return from_mapping(TrainConfig, d, "train config")


def lr_at(step: int, tc: TrainConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based): linear warmup, then decay.

    ``wsd`` (warmup-stable-decay; Hägele et al. 2024, arXiv 2405.18392): the peak rate from the end of warmup to
    step ``steps - cooldown_steps``, then ``lo + (lr - lo) * (1 - k / cooldown_steps)`` at the ``k``-th cooldown
    step (k = 1 .. cooldown_steps, so the last step uses ``lo = lr * min_lr_ratio``). The rate of a step before the
    cooldown does not depend on ``steps``, so a run cooled down at step ``s`` and a longer one agree up to ``s``.
    """
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    if tc.schedule == "constant":
        return tc.lr
    if tc.schedule == "wsd":
        k = step - (tc.steps - tc.cooldown_steps) + 1
        if k <= 0:
            return tc.lr
        lo = tc.lr * tc.min_lr_ratio
        return lo + (tc.lr - lo) * (1 - min(k, tc.cooldown_steps) / tc.cooldown_steps)
    span = max(1, tc.steps - tc.warmup_steps)
    frac = min(1.0, (step - tc.warmup_steps) / span)
    lo = tc.lr * tc.min_lr_ratio
    if tc.schedule == "linear":
        return tc.lr - (tc.lr - lo) * frac
    return lo + 0.5 * (tc.lr - lo) * (1 + math.cos(math.pi * frac))


def _dist_info() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _init_distributed(timeout_s: float = 1800.0) -> tuple[int, int, torch.device]:
    """Join the process group torchrun describes (``WORLD_SIZE`` > 1; NCCL on CUDA, else gloo), whose collectives
    give up after ``timeout_s`` seconds; returns (rank, world size, this rank's device)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    rank, world = _dist_info()
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return rank, world, torch.device("cuda", local)
    return rank, world, torch.device("cpu")


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, aux_weight: float) -> tuple[torch.Tensor, torch.Tensor]:
    out = model(x)
    logits = out.logits_BNV
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
    return ce + aux_weight * out.aux_loss, ce


# --- setup ---------------------------------------------------------------------------------------------------


def _refuse_heldout(stream: Any, data_path: str | os.PathLike, allow: bool) -> None:
    """ValueError when the training stream is a held-out split (its ``.json`` names one) and ``allow`` is False."""
    split = str((getattr(stream, "meta", None) or {}).get("split") or "")
    if split.startswith("heldout") and not allow:
        raise ValueError(f"--data {data_path}: a held-out split ({split!r} in its .json): train on the training "
                         "stream (train.bin) and score this one, or pass --allow-heldout to train on it on purpose")


def _open_stream(data_path: str | os.PathLike, model_cfg: ModelConfig, tc: TrainConfig, world: int,
                 tokenizer: str | os.PathLike | None = None) -> Any:
    """The :class:`yocou.data.tokens.TokenStream` at ``data_path``, checked against the model and the ranks;
    with ``tc.needle_mix`` on, wrapped in a :class:`yocou.data.needles.NeedleMixStream` (``tokenizer``: the run's).

    Raises:
        ValueError: the stream's vocabulary exceeds ``model_cfg.vocab_size``, or the global batch does not
            divide evenly over ``world`` ranks × ``tc.grad_accum`` micro-steps; ``tc.needle_mix`` is on without a
            ``tokenizer``, or its template does not fit ``tc.seq_len``.
    """
    from yocou.data.tokens import TokenStream

    stream = TokenStream(data_path)
    if stream.vocab_size > model_cfg.vocab_size:
        raise ValueError(f"token stream {data_path} has vocab_size {stream.vocab_size} > model vocab_size "
                         f"{model_cfg.vocab_size}")
    if tc.batch_size % (world * tc.grad_accum):
        raise ValueError(f"TrainConfig.batch_size ({tc.batch_size}) must divide evenly over {world} ranks × "
                         f"grad_accum {tc.grad_accum}")
    if tc.needle_mix is not None and tc.needle_mix.active:
        from yocou.data import load_tokenizer
        from yocou.data.needles import NeedleMixer, NeedleMixStream

        if tokenizer is None:
            raise ValueError(f"train.needle_mix.fraction is {tc.needle_mix.fraction}: the needles need the run's "
                             f"tokenizer (yocou train --tokenizer tokenizer.json)")
        mixer = NeedleMixer(tc.needle_mix, load_tokenizer(tokenizer), tc.seq_len, model_cfg.vocab_size)
        return NeedleMixStream(stream, mixer)
    return stream


def build_model(model_cfg: ModelConfig, tc: TrainConfig, device: torch.device, world: int) -> LM:
    """The model initialised from ``tc.seed`` on ``device``, with activation checkpointing and, under
    ``torchrun`` with ``tc.fsdp``, FSDP2 sharding (:mod:`yocou.training.parallel`). Build the optimizer after this: it
    must hold the sharded parameters."""
    torch.manual_seed(tc.seed)
    model = new_model(model_cfg).to(device)
    if tc.activation_checkpointing:
        parallel.apply_activation_checkpointing(model)
    if tc.fsdp and world % tc.fsdp_replicate:
        raise ValueError(f"train.fsdp_replicate ({tc.fsdp_replicate}) must divide the world size ({world})")
    if tc.fsdp and world > 1:
        if tc.compile:
            parallel.compile_layers(model)
        parallel.shard_fsdp(model, param_dtype=torch.bfloat16 if tc.dtype == "bf16" else None,
                            replicate=tc.fsdp_replicate)
    return model


def build_optimizer(model: torch.nn.Module, tc: TrainConfig) -> torch.optim.AdamW:
    """Fused AdamW; weight decay on the matrices except the embedding, none on vectors (norms, biases)."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.ndim >= 2 and not n.startswith("embed") else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=tc.eps, fused=True)


def attention_kernels(model_cfg: ModelConfig, tc: TrainConfig, device: torch.device) -> dict[str, str]:
    """The kernel each attention call site of a training step gets on ``device`` (``train/global``,
    ``train/window`` where a window is shorter than ``seq_len``; :func:`yocou.model.attention.call_sites`), at the
    dtype the step computes in."""
    windows = [st.window for st in model_cfg.stages if st.window is not None]
    dtype = torch.bfloat16 if tc.dtype == "bf16" else torch.float32
    sites = call_sites(model_cfg.n_heads, model_cfg.n_kv_heads, model_cfg.head_dim, tc.seq_len,
                       min(windows) if windows else None, device=device, dtype=dtype)
    return {k: v for k, v in sites.items() if k.startswith("train/")}


def math_attention_refusal(kernels: Mapping[str, str], tc: TrainConfig) -> str | None:
    """One line refusing a training run whose attention would run on SDPA's math kernel (``[N, K]`` fp32 scores per
    head materialised, forward and backward: out of memory or many times slower than a fused kernel) at
    ``seq_len >= MATH_ATTENTION_MAX_SEQ_LEN``, unless ``tc.allow_math_attention``; ``None`` when it may run."""
    math = [site for site, kernel in kernels.items() if kernel.endswith("math")]
    if not math or tc.seq_len < MATH_ATTENTION_MAX_SEQ_LEN or tc.allow_math_attention:
        return None
    hint = "train.dtype bf16 (flash needs bf16 or fp16)"
    if any(site != "train/global" for site in math):
        hint += ", the flex backend for window layers (YOCOU_ATTENTION_BACKEND=flex)"
    return (f"train.seq_len {tc.seq_len}: attention call site {', '.join(math)} gets SDPA's math kernel on this GPU "
            f"(dtype {tc.dtype}); use {hint}, or set train.allow_math_attention: true")


def global_window_note(model_cfg: ModelConfig, seq_len: int) -> str | None:
    """A one-line note when a sliding-window stage's ``window`` (tokens) is at least ``seq_len``: then it attends to
    every earlier token of a training sequence (global attention in all but name), which is valid but is not the
    paper's set-up (YOCO's self-decoder cache stops growing at the window). None otherwise."""
    wins = [st.window for st in model_cfg.stages if st.kind == "self" and st.window is not None]
    if wins and max(wins) >= seq_len:
        return (f"{model_cfg.name}: window {max(wins)} >= seq_len {seq_len}: the sliding-window self-decoder attends "
                "to every earlier token of a training sequence (global attention), so its cache is bounded by the "
                "window only beyond that length")
    return None


def memory_plan(model_cfg: ModelConfig, tc: TrainConfig, world: int, sharded: bool) -> MemoryPlan:
    """The bytes one rank holds at the peak of a training step (:func:`yocou.training.memplan.plan_memory`): sharded
    over ``world`` ranks under FSDP (bf16 gathers with ``dtype`` bf16), a full replica otherwise, the micro-batch of
    ``batch_size / grad_accum / world`` sequences of ``seq_len``."""
    bf16 = tc.dtype == "bf16"
    return plan_memory(model_cfg, world_size=world if sharded else 1,
                       micro_batch=max(1, tc.batch_size // tc.grad_accum // world), seq_len=tc.seq_len,
                       param_dtype="bf16" if sharded and bf16 else "fp32", compute_dtype="bf16" if bf16 else "fp32",
                       activation_checkpointing=tc.activation_checkpointing)


def _data_identity(stream: Any) -> dict[str, Any] | None:
    """The training stream's identity as its ``.json`` records it (``bin_sha256``, ``split``, ``n_tokens``), kept in
    every checkpoint and ``model.pt`` and checked on resume; None for a stream without one (a synthetic stream)."""
    meta = getattr(stream, "meta", None) or getattr(getattr(stream, "stream", None), "meta", None)
    if not isinstance(meta, Mapping) or not meta.get("bin_sha256"):
        return None
    return {k: meta.get(k) for k in ("bin_sha256", "split", "n_tokens")}


def _run_provenance(model_cfg: ModelConfig, tc: TrainConfig, run_config: Mapping[str, Any] | None,
                    world: int) -> dict[str, Any]:
    """:func:`yocou.utils.io.provenance` of the run (``run_config``, or both configs) with the number of processes."""
    cfg_record = dict(run_config) if run_config is not None else {"model": model_cfg.to_dict(),
                                                                   "train": dataclasses.asdict(tc)}
    prov = provenance(cfg_record, tc.seed)
    prov["world_size"] = world
    return prov


# --- checkpoints ---------------------------------------------------------------------------------------------


class Checkpointer:
    """The run folder's weight and resume files, each written atomically by rank 0.

    * ``ckpt.pt`` (:meth:`resume`, :meth:`save`, :meth:`discard`): model and optimizer state, the step, both
      configs and the ``metrics.jsonl`` rows so far (:func:`_save_ckpt`). It holds no random-number state:
      each step's batch comes from a generator seeded by ``(seed, step)`` and the model draws no random
      numbers, so the step fixes everything that follows.
    * ``model.pt`` and ``model_step<N>.pt`` (:meth:`save_weights`): weights, configs, step and provenance
      (:func:`_save_model`).

    With ``tc.fsdp`` the resume state is ``ckpt.dcp/`` instead of ``ckpt.pt``: a ``torch.distributed.checkpoint``
    folder each rank writes its shards into (:func:`yocou.training.parallel.save_sharded`, collective), with the
    step, configs and rows in its ``meta.json``; it resumes with any number of processes. The weights files are
    gathered as full tensors keyed by name (:func:`yocou.training.parallel.full_state`, collective), so every rank
    calls :meth:`save` and :meth:`save_weights`.
    """

    def __init__(self, out: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, model_cfg: ModelConfig,
                 tc: TrainConfig, rank: int, prov: dict[str, Any]) -> None:
        self.out, self.path = out, out / "ckpt.pt"
        self.dcp_path = out / "ckpt.dcp"
        self.model, self.opt, self.model_cfg, self.tc, self.rank, self.prov = model, opt, model_cfg, tc, rank, prov
        self.sharded = parallel.is_sharded(model)
        self.saver = parallel.ShardedSaver(tc.async_checkpoint)

    def exists(self) -> bool:
        """Whether a resume checkpoint is there (``ckpt.pt``, or with ``tc.fsdp`` a ``ckpt.dcp`` folder)."""
        return self.path.exists() or (self.tc.fsdp and parallel.sharded_checkpoint(self.dcp_path) is not None)

    def resume(self, device: torch.device) -> tuple[int, list[str]]:
        """Load ``ckpt.pt`` into the model and optimizer if it exists.

        Returns:
            ``(step, rows)``: the optimizer step to continue from and the ``metrics.jsonl`` lines (JSON text)
            logged up to it; ``(0, [])`` without a checkpoint.

        Raises:
            ValueError: the file is unreadable or not a resume checkpoint (:func:`read_checkpoint`), or it was
                written with another model config or TrainConfig (fields in ``_NO_RESULT_FIELDS`` aside).
        """
        dcp_dir = parallel.sharded_checkpoint(self.dcp_path) if self.tc.fsdp else None
        if dcp_dir is not None:
            meta = parallel.read_sharded_meta(dcp_dir)
            self._check_config(meta, dcp_dir)
            parallel.load_sharded(dcp_dir, self.model, self.opt)
            step = int(meta["step"])
            if self.rank == 0:
                print(f"resuming from step {step} ({dcp_dir})", file=sys.stderr, flush=True)
            return step, (list(meta.get("metrics_rows", [])) if step else [])
        if not self.path.exists():
            return 0, []
        # FSDP: every rank maps the full-tensor file (pages shared on a node) and keeps its shards.
        ck = read_checkpoint(self.path, map_location="cpu" if self.tc.fsdp else device, mmap=self.tc.fsdp,
                             what="resume checkpoint", keys=("model", "optimizer", "step", "model_config",
                                                             "train_config"),
                             remedy=f"remove it to restart the run in {self.out} from step 0")
        self._check_config(ck, self.path)
        if self.tc.fsdp:
            parallel.load_full_state(self.model, self.opt, ck["model"], ck["optimizer"])
        else:
            self.model.load_state_dict(ck["model"])
            self.opt.load_state_dict(ck["optimizer"])
        step = ck["step"]
        if self.rank == 0:
            print(f"resuming from step {step} ({self.path})", file=sys.stderr, flush=True)
        return step, (ck.get("metrics_rows", []) if step else [])

    def start_from(self, path: Path, device: torch.device) -> tuple[int, list[str]]:
        """Load the final state of another run (its ``state.pt``, written with ``save_state``) into the model and
        optimizer: a cooldown branch of that run (:func:`branch_mismatch`).

        Returns:
            ``(step, rows)``: the state's optimizer step, to continue from, and the ``metrics.jsonl`` lines of the
            run it comes from up to that step.

        Raises:
            FileNotFoundError: no such file.
            ValueError: the file is no resume state, or it was written with another model config, or this run is
                not a branch of it (:func:`branch_mismatch` names the field or step).
        """
        ck = read_checkpoint(path, map_location="cpu" if self.tc.fsdp else device, mmap=self.tc.fsdp,
                             what="branch state (init_from)", keys=("model", "optimizer", "step", "model_config",
                                                                     "train_config"),
                             remedy="train the run it belongs to again (with save_state)")
        unnamed = {k: v for k, v in self.model_cfg.to_dict().items() if k != "name"}  # a name is a label only
        if {k: v for k, v in ck["model_config"].items() if k != "name"} != unnamed:
            raise ValueError(f"init_from {path}: written with another model config than this run's")
        if why := branch_mismatch(ck["train_config"], self.tc, int(ck["step"])):
            raise ValueError(f"init_from {path}: this run is not a cooldown branch of it: {why}")
        self._check_data(ck, path)
        if self.tc.fsdp:
            parallel.load_full_state(self.model, self.opt, ck["model"], ck["optimizer"])
        else:
            self.model.load_state_dict(ck["model"])
            self.opt.load_state_dict(ck["optimizer"])
        step = int(ck["step"])
        if self.rank == 0:
            print(f"branching from step {step} ({path})", file=sys.stderr, flush=True)
        return step, list(ck.get("metrics_rows", []))

    def save_state(self, step: int, rows: list[str]) -> None:
        """Write ``state.pt`` (the format of ``ckpt.pt``, kept after the run ends): what a branch starts from."""
        _save_ckpt(self.out / "state.pt", self.model, self.opt, step, self.model_cfg, self.tc, self.rank, rows,
                   data=self.prov.get("data"))

    def _check_config(self, ck: Mapping[str, Any], path: Path) -> None:
        """ValueError unless ``ck`` (read from ``path``) was written with this run's configs and token stream; a
        TrainConfig field added after the checkpoint was written counts as its default, fields that change no result
        may differ, and a checkpoint that records no stream (written before streams were recorded) is not checked."""
        if _config_differs(ck, self.model_cfg, self.tc):
            raise ValueError(f"{path} was written with a different config; remove {self.out} to start over")
        self._check_data(ck, path)

    def _check_data(self, ck: Mapping[str, Any], path: Path) -> None:
        theirs, ours = (ck.get("data") or {}).get("bin_sha256"), (self.prov.get("data") or {}).get("bin_sha256")
        if theirs and ours and theirs != ours:
            raise ValueError(f"{path} was trained on another token stream (bin_sha256 {theirs[:12]}, this --data "
                             f"{ours[:12]}): pass the stream it trained on, or remove {self.out} to start over")

    def save(self, step: int, rows: list[str]) -> None:
        """Write ``ckpt.pt`` (with ``tc.fsdp``: ``ckpt.dcp/``): the state after optimizer step ``step`` and the
        ``metrics.jsonl`` rows so far."""
        if self.tc.fsdp:
            _save_ckpt(self.dcp_path, self.model, self.opt, step, self.model_cfg, self.tc, self.rank, rows,
                       saver=self.saver, data=self.prov.get("data"))
        else:
            _save_ckpt(self.path, self.model, self.opt, step, self.model_cfg, self.tc, self.rank, rows,
                       data=self.prov.get("data"))
        if self.tc.fsdp and self.rank == 0 and self.path.exists():  # a full-tensor state it resumed from
            self.path.unlink()

    def save_weights(self, path: Path, step: int) -> None:
        """Write the weights after optimizer step ``step`` to ``path`` in the format of ``model.pt``."""
        state = parallel.full_state(self.model)[0] if self.sharded else self.model.state_dict()
        if self.rank == 0:
            _save_model(path, state, self.model_cfg, self.tc, step, self.prov)

    def discard(self) -> None:
        """Remove ``ckpt.pt`` and ``ckpt.dcp/`` (the run is finished; collective: an asynchronous save in flight is
        finished first)."""
        self.saver.wait()
        if self.rank != 0:
            return
        if self.path.exists():
            self.path.unlink()
        for p in (self.dcp_path, self.dcp_path.with_name("ckpt.dcp.old"), self.dcp_path.with_name("ckpt.dcp.tmp")):
            if p.is_dir():
                shutil.rmtree(p)


# --- metrics -------------------------------------------------------------------------------------------------


class MetricsLog:
    """``metrics.jsonl`` in the run folder (one JSON row per logged step) and, with ``tc.tensorboard``, the
    same rows as TensorBoard scalars (:class:`_TensorBoardLog`). Only rank 0 writes; on other ranks every
    method does nothing.

    The rows are kept in memory (:attr:`rows`, JSON text) and each new row rewrites the whole file atomically:
    opening it writes the rows a resumed run's checkpoint kept, and a file deleted or cut while the run goes on
    (a workflow manager cleaning up the outputs of a job it took for incomplete) is whole again at the next row,
    so the log always belongs to the weights and never holds a step twice.
    """

    def __init__(self, out: Path, tc: TrainConfig, rank: int, rows: list[str], flops_per_token: float) -> None:
        self.path = out / "metrics.jsonl"
        self.tc, self.active, self.flops_per_token = tc, rank == 0, flops_per_token
        self.tokens_per_step = tc.batch_size * tc.seq_len
        self.tb: _TensorBoardLog | None = None
        self.rows: list[str] = list(rows)
        if self.active:
            self._write()
            if tc.tensorboard:
                self.tb = _TensorBoardLog(out, [json.loads(r) for r in rows])
        self.start(0)

    def start(self, step: int) -> None:
        """Start the clock of ``tokens_per_s`` at optimizer step ``step``."""
        self._t_last, self._tok_last = time.perf_counter(), step * self.tokens_per_step

    def log(self, done: int, loss: float, lr: float, grad_norm: torch.Tensor,
            heldout: Mapping[str, float] | None = None, eval_s: float = 0.0) -> dict[str, Any] | None:
        """Append the row of ``done`` optimizer steps if it is due (every ``tc.log_every`` steps, the last, and
        any step with a held-out evaluation).

        Returns:
            The row (``step``, ``tokens``, ``train_flops``, ``loss``, ``lr``, ``grad_norm``, ``tokens_per_s``
            since the previous row or :meth:`start`, the ``eval_s`` seconds of evaluation excluded, ``wall_time``;
            with ``heldout`` also ``heldout_loss`` = ``{split: nats/token}`` and ``heldout_eval_s``), or None
            when none was written.
        """
        due = done % self.tc.log_every == 0 or done == self.tc.steps or heldout is not None
        if not self.active or not due:
            return None
        now = time.perf_counter()
        tokens = done * self.tokens_per_step
        row = {"step": done, "tokens": tokens, "train_flops": tokens * self.flops_per_token, "loss": loss,
               "lr": lr, "grad_norm": float(grad_norm),
               "tokens_per_s": (tokens - self._tok_last) / max(now - self._t_last - eval_s, 1e-9),
               "wall_time": time.time()}
        if heldout is not None:
            row.update(heldout_loss=dict(heldout), heldout_eval_s=eval_s)
        self._t_last, self._tok_last = now, tokens
        self.rows.append(json.dumps(row))
        self._write()
        if self.tb is not None:
            self.tb.add(row)
        return row

    def _write(self) -> None:
        atomic_write_text(self.path, "".join(r + "\n" for r in self.rows))

    def close(self) -> None:
        """Close the TensorBoard writer (``metrics.jsonl`` is closed after each row)."""
        if self.tb is not None:
            self.tb.close()


# --- held-out loss at checkpoints --------------------------------------------------------------------------


class HeldoutEval:
    """The held-out loss at a fixed schedule (``tc.eval_every`` steps and the last step).

    Each split (name → ``heldout_<name>.bin`` token stream) contributes its first ``tc.eval_tokens`` tokens (the
    stream's documents in order, each followed by its EOS, as training reads its own stream), cut into windows
    of ``tc.seq_len`` with the context reset at each window (:func:`yocou.evaluation.ppl.token_nll`); the value is the mean
    NLL in nats/token over the ``eval_tokens - 1`` predicted tokens, in fp32. The model is put in eval mode
    without gradients and back in train mode after. Only rank 0 evaluates (DDP: the bare module, no collective;
    the next step's collectives hold the other ranks), except under FSDP, where every rank runs the same
    forwards (they gather shards) and rank 0 keeps the result. It draws no random numbers, so a resumed run
    stays exact. The windows differ from ``yocou ppl``, which scores whole documents (context reset at each).
    """

    def __init__(self, paths: Mapping[str, str | os.PathLike], tc: TrainConfig, model_cfg: ModelConfig) -> None:
        import numpy as np

        self.tc = tc
        self.ids: dict[str, Any] = {}
        for name, p in paths.items():
            s = _open_stream(p, model_cfg, dataclasses.replace(tc, needle_mix=None), 1)  # the text as it is
            if len(s) < 2:
                raise ValueError(f"held-out token stream {p} has {len(s)} tokens; need at least 2")
            self.ids[name] = np.asarray(s.tokens[:tc.eval_tokens], dtype=np.int64)

    @classmethod
    def open(cls, paths: Mapping[str, str | os.PathLike] | None, tc: TrainConfig,
             model_cfg: ModelConfig) -> HeldoutEval | None:
        """The evaluator of ``tc``, or None when ``tc.eval_every`` is 0.

        Raises:
            ValueError: ``tc.eval_every > 0`` but no held-out streams are given.
        """
        for split, p in (paths or {}).items():
            if not Path(p).is_file():  # checked even when unused: a typo is found now, not when it is needed
                raise FileNotFoundError(f"--heldout {p}: held-out token file ({split}) not found")
        if tc.eval_every == 0:
            return None
        if not paths:
            raise ValueError(f"train.eval_every is {tc.eval_every} but no held-out token files were given "
                             "(yocou train --heldout heldout_book.bin heldout_code.bin)")
        return cls(paths, tc, model_cfg)

    def due(self, done: int) -> bool:
        return done % self.tc.eval_every == 0 or done == self.tc.steps

    def __call__(self, model: torch.nn.Module, rank: int, sharded: bool) -> tuple[dict[str, float] | None, float]:
        """``({split: mean NLL}, seconds)`` on rank 0 (None on the others)."""
        from yocou.evaluation.ppl import token_nll

        if rank != 0 and not sharded:
            return None, 0.0
        t0 = time.perf_counter()
        model.eval()
        try:
            out = {name: float(token_nll(model, ids, self.tc.seq_len, batch_size=self.tc.batch_size).double().mean())
                   for name, ids in self.ids.items()}
        finally:
            model.train()
        return (out if rank == 0 else None), time.perf_counter() - t0


def heldout_split_name(path: str | os.PathLike) -> str:
    """``runs/.../tokens/heldout_book.bin`` → ``book``: the key of a split in ``heldout_loss``."""
    return Path(path).stem.removeprefix("heldout_")


# --- one step ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepParts:
    """What every optimizer step uses.

    Attributes:
        model: the LM whose parameters ``opt`` holds (FSDP-sharded or not).
        fwd: what the forward pass calls: ``model``, its DDP wrapper, or either compiled.
        opt: the optimizer.
        amp: the autocast context (bf16, or disabled for fp32).
        world: number of processes.
        sharded: whether ``model`` is FSDP-sharded.
        run_dir: the run folder, named in errors.
    """

    model: torch.nn.Module
    fwd: torch.nn.Module
    opt: torch.optim.Optimizer
    amp: torch.autocast
    world: int
    sharded: bool
    run_dir: Path


@dataclass(frozen=True)
class StepResult:
    """One optimizer step's ``loss`` (cross-entropy over the global batch), ``lr`` and ``grad_norm``
    (the global gradient norm before clipping, a 0-d tensor)."""

    loss: float
    lr: float
    grad_norm: torch.Tensor


def _step_parts(model: torch.nn.Module, opt: torch.optim.Optimizer, tc: TrainConfig, world: int,
                device: torch.device, run_dir: Path) -> StepParts:
    """Wrap ``model`` for the forward pass (DDP unless sharded; ``torch.compile`` with ``tc.compile`` unless sharded,
    where :func:`build_model` compiled each layer)."""
    sharded = parallel.is_sharded(model)
    fwd = model if sharded else wrap_ddp(model, world, device)
    if tc.compile and not sharded:
        fwd = torch.compile(fwd)
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=tc.dtype == "bf16")
    return StepParts(model=model, fwd=fwd, opt=opt, amp=amp, world=world, sharded=sharded, run_dir=run_dir)


def batch_generator(seed: int, step: int) -> torch.Generator:
    """The generator step ``step``'s global batch is drawn from, seeded by ``(seed, step)``."""
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


def draw_batch(stream: Any, tc: TrainConfig, step: int, rank: int, world: int,
               device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's rows of step ``step``'s global batch, drawn from a generator seeded by ``(seed, step)``, so
    the batches depend neither on the number of processes nor on where a run was resumed."""
    local_b = tc.batch_size // world
    x, y = stream.sample_batch(tc.batch_size, tc.seq_len, batch_generator(tc.seed, step))
    rows = slice(rank * local_b, (rank + 1) * local_b)
    return x[rows].to(device), y[rows].to(device)


def _accumulate_gradients(parts: StepParts, tc: TrainConfig, aux_weight: float, x: torch.Tensor,
                          y: torch.Tensor) -> torch.Tensor:
    """Forward and backward of ``tc.grad_accum`` equal micro-batches of ``x, y``, gradients summed (each
    loss divided by ``grad_accum``). Under DDP they are all-reduced on the last micro-step only; under FSDP each
    micro-step reduce-scatters into the sharded gradients (FSDP2's default), so no rank holds unsharded gradients
    (4 bytes per parameter) across micro-steps. Returns this rank's mean cross-entropy (a 0-d tensor)."""
    micro_b = x.shape[0] // tc.grad_accum
    ce_sum = torch.zeros((), device=x.device)
    for i in range(tc.grad_accum):
        xs, ys = x[i * micro_b:(i + 1) * micro_b], y[i * micro_b:(i + 1) * micro_b]
        sync = i == tc.grad_accum - 1
        no_sync = parts.world > 1 and not sync and not parts.sharded and hasattr(parts.fwd, "no_sync")
        with parts.fwd.no_sync() if no_sync else contextlib.nullcontext():
            with parts.amp:
                loss, ce = _loss(parts.fwd, xs, ys, aux_weight)
            (loss / tc.grad_accum).backward()
        ce_sum += ce.detach() / tc.grad_accum
    return ce_sum


def train_step(parts: StepParts, tc: TrainConfig, aux_weight: float, step: int, x: torch.Tensor,
               y: torch.Tensor) -> StepResult:
    """Optimizer step ``step`` (0-based) on this rank's batch ``x, y``: set the learning rate (:func:`lr_at`),
    accumulate gradients, average the loss over ranks, clip the global gradient norm to ``tc.grad_clip``
    (0: no clipping) and update.

    Raises:
        NonFiniteLossError: the loss is NaN or infinite (before the update), naming the run folder, the step
            and the learning rate.
    """
    lr = lr_at(step, tc)
    for g in parts.opt.param_groups:
        g["lr"] = lr
    ce = _accumulate_gradients(parts, tc, aux_weight, x, y)
    if parts.world > 1:
        dist.all_reduce(ce, op=dist.ReduceOp.AVG)
    loss = float(ce)
    if not math.isfinite(loss):
        raise NonFiniteLossError(f"{parts.run_dir}: the loss is {loss} at step {step}: training diverged; lower "
                                 f"train.lr (now {tc.lr:g}) or check the data")
    gnorm = torch.nn.utils.clip_grad_norm_(parts.model.parameters(),
                                           tc.grad_clip if tc.grad_clip > 0 else float("inf"))
    if parts.sharded:
        gnorm = gnorm.full_tensor()  # a DTensor (collective)
    parts.opt.step()
    parts.opt.zero_grad(set_to_none=True)
    return StepResult(loss=loss, lr=lr, grad_norm=gnorm)


# --- the loop ------------------------------------------------------------------------------------------------


def train(model_cfg: ModelConfig, tc: TrainConfig, data_path: str | os.PathLike, out_dir: str | os.PathLike, *,
          run_config: Mapping[str, Any] | None = None, progress: bool = True,
          heldout: Mapping[str, str | os.PathLike] | None = None,
          tokenizer: str | os.PathLike | None = None, init_from: str | os.PathLike | None = None,
          save_state: bool = False, dist_timeout_s: float = 1800.0, allow_heldout: bool = False) -> dict[str, Any]:
    """Train ``model_cfg`` on a token stream; resume from ``out_dir/ckpt.pt`` if present.

    Args:
        model_cfg: the architecture.
        tc: optimisation settings.
        data_path: a ``train.bin`` token stream (:class:`yocou.data.tokens.TokenStream`).
        out_dir: run folder (created).
        run_config: the resolved config to record in provenance (defaults to both configs).
        progress: show a tqdm bar on rank 0.
        heldout: split name → held-out token stream, scored with ``tc.eval_every`` (:class:`HeldoutEval`).
        tokenizer: the run's tokenizer (``tokenizer.json``); needed only with ``tc.needle_mix`` on.
        init_from: a cooldown branch: start from this ``state.pt`` of another run (its model and optimizer state,
            step and metrics rows; :meth:`Checkpointer.start_from`) instead of step 0, unless ``out_dir`` holds a
            ``ckpt.pt`` of this run to resume. The result equals this run trained from step 0
            (:func:`branch_mismatch` checks that it would).
        save_state: also write ``state.pt`` (model and optimizer state, the format of ``ckpt.pt``) at the end,
            for branches to start from.
        dist_timeout_s: under torchrun (``WORLD_SIZE`` > 1), seconds a collective of the process group may wait
            for the other ranks before it fails (``torch.distributed.init_process_group(timeout=...)``).
        allow_heldout: train on a stream whose ``.json`` names a held-out split (refused otherwise: the split
            would no longer measure generalisation).

    Returns:
        The summary dict written to ``summary.json``.

    Raises:
        NonFiniteLossError: (a FloatingPointError and ValueError) the loss became NaN or infinite, naming the
            run folder, the step and the learning rate.
        ValueError: ``data_path`` is a held-out split (without ``allow_heldout``), before anything is written; a
            token stream's vocabulary exceeds ``model_cfg.vocab_size``; ``tc.eval_every`` without
            ``heldout``; ``out_dir`` holds the ``model.pt`` of a run with another config (without ``ckpt.pt``).
    """

    rank, world, device = _init_distributed(dist_timeout_s)
    if tc.tensorboard and rank == 0:
        _TensorBoardLog.writer_class()  # fail before any work when TensorBoard is missing
    out = Path(out_dir)
    stream = _open_stream(data_path, model_cfg, tc, world, tokenizer)  # bad input refused before out exists
    _refuse_heldout(stream, data_path, allow_heldout)
    evaluator = HeldoutEval.open(heldout, tc, model_cfg)
    created = not out.exists()
    _prepare_out_dir(out, model_cfg, tc)
    lock = RunLock(out) if rank == 0 else None
    try:
        if lock is not None:
            lock.acquire()  # RunFolderBusy: another trainer writes this folder
        return _train_locked(model_cfg, tc, stream, evaluator, out, run_config, progress, rank, world, device,
                             init_from=Path(init_from) if init_from is not None else None, save_state=save_state)
    except BaseException:
        if created and lock is not None and lock.fd is not None:
            _remove_if_only_lock(out)
        raise
    finally:
        if lock is not None:
            lock.release()


def _remove_if_only_lock(out: Path) -> None:
    """Remove a run folder this call created when a refusal left nothing in it but the lock it holds (and an empty
    metrics log: no step was trained)."""
    left = {p.name: p for p in out.iterdir()}
    if LOCK_NAME in left and all(n == LOCK_NAME or (n == "metrics.jsonl" and p.stat().st_size == 0)
                                 for n, p in left.items()):
        for p in left.values():
            p.unlink()
        out.rmdir()


def _train_locked(model_cfg: ModelConfig, tc: TrainConfig, stream: Any, evaluator: HeldoutEval | None, out: Path,
                  run_config: Mapping[str, Any] | None, progress: bool, rank: int, world: int,
                  device: torch.device, init_from: Path | None = None, save_state: bool = False) -> dict[str, Any]:
    """The body of :func:`train`, run while rank 0 holds the run folder's lock."""
    from tqdm.auto import tqdm

    prov = _run_provenance(model_cfg, tc, run_config, world)
    prov["data"] = _data_identity(stream)
    model = build_model(model_cfg, tc, device, world)
    opt = build_optimizer(model, tc)
    flops_per_token = accounting.train_flops_per_token(model_cfg, tc.seq_len)
    ckpt = Checkpointer(out, model, opt, model_cfg, tc, rank, prov)
    if device.type == "cuda":  # every rank decides alike, so every rank stops
        kernels = attention_kernels(model_cfg, tc, device)
        if rank == 0:
            print(f"attention kernels: {', '.join(f'{k} {v}' for k, v in kernels.items())}", file=sys.stderr,
                  flush=True)
        if refusal := math_attention_refusal(kernels, tc):
            raise ValueError(refusal)
    if device.type == "cuda" or rank == 0:  # each GPU its own memory; on CPU the host's, once
        sharded = parallel.is_sharded(model)
        check_against_device(memory_plan(model_cfg, tc, world, sharded), device,
                             f"training {model_cfg.name} (a micro-batch of {tc.batch_size // tc.grad_accum // world} "
                             f"x seq_len {tc.seq_len} per rank, {f'sharded over {world} ranks' if sharded else 'unsharded'})")
    if rank == 0:
        if note := global_window_note(model_cfg, tc.seq_len):
            print(f"note: {note}", file=sys.stderr, flush=True)

    resuming = ckpt.exists()
    start_step, rows = ckpt.resume(device)
    if init_from is not None and not resuming:
        start_step, rows = ckpt.start_from(init_from, device)
    log = MetricsLog(out, tc, rank, rows, flops_per_token)
    parts = _step_parts(model, opt, tc, world, device, out)
    bar = tqdm(total=tc.steps, initial=start_step, disable=not (progress and rank == 0),
               desc=f"train {model_cfg.name}", unit="step", dynamic_ncols=True)
    log.start(start_step)
    final_step, stopped_by_flops = _run_steps(parts, stream, model_cfg, tc, start_step, rank, device,
                                              ckpt, log, bar, evaluator)
    bar.close()
    log.close()
    tokens = final_step * tc.batch_size * tc.seq_len
    summary = {"name": model_cfg.name, "steps": final_step, "tokens": tokens,
               "train_flops": tokens * flops_per_token, "stopped_by_flops": stopped_by_flops,
               **accounting.summary(model_cfg, tc.seq_len), "provenance": prov}
    ckpt.save_weights(out / "model.pt", final_step)  # collective when sharded
    if save_state:
        ckpt.save_state(final_step, log.rows)  # collective when sharded
    if rank == 0:
        atomic_write_json(out / "summary.json", summary)
    ckpt.discard()
    if world > 1:
        dist.barrier()
    return summary


def _run_steps(parts: StepParts, stream: Any, model_cfg: ModelConfig, tc: TrainConfig, start_step: int,
               rank: int, device: torch.device, ckpt: Checkpointer, log: MetricsLog, bar: Any,
               evaluator: HeldoutEval | None = None) -> tuple[int, bool]:
    """Optimizer steps ``start_step, ..., tc.steps - 1``, each followed by its held-out evaluation, metrics
    row, weight snapshot and checkpoint when due.

    Returns:
        ``(steps, stopped_by_flops)``: the number of optimizer steps done and whether ``tc.stop_at_flops``
        ended the run before ``tc.steps``.
    """
    tokens_per_step = tc.batch_size * tc.seq_len
    for step in range(start_step, tc.steps):
        if tc.stop_at_flops and step * tokens_per_step * log.flops_per_token >= tc.stop_at_flops:
            return step, True
        x, y = draw_batch(stream, tc, step, rank, parts.world, device)
        res = train_step(parts, tc, model_cfg.moe_aux_weight, step, x, y)
        done = step + 1
        bar.update(1)
        held, eval_s = evaluator(parts.model, rank, parts.sharded) if evaluator and evaluator.due(done) else (None, 0.0)
        if log.log(done, res.loss, res.lr, res.grad_norm, held, eval_s) is not None:
            bar.set_postfix(loss=f"{res.loss:.3f}", lr=f"{res.lr:.2e}")
        if done in tc.snapshot_steps:
            ckpt.save_weights(ckpt.out / f"model_step{done}.pt", done)  # collective when sharded
        if done % tc.ckpt_every == 0 and done < tc.steps:
            ckpt.save(done, log.rows)
    return tc.steps, False


def _save_model(path: Path, state: dict[str, Any], mc: ModelConfig, tc: TrainConfig, step: int,
                prov: dict[str, Any]) -> None:
    """Atomically write the weights with their configs, step and provenance (the format of ``model.pt``)."""
    with atomic_path(path) as tmp:
        torch.save({"model": state, "model_config": mc.to_dict(), "train_config": dataclasses.asdict(tc),
                    "step": step, "provenance": prov}, tmp)


def wrap_ddp(model: LM, world: int, device: torch.device) -> torch.nn.Module:
    """DDP over ranks when ``world > 1``; the bare model otherwise."""
    if world == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def _save_ckpt(path: Path, model: LM, opt: torch.optim.Optimizer, step: int, mc: ModelConfig, tc: TrainConfig,
               rank: int, rows: list[str], saver: parallel.ShardedSaver | None = None,
               data: Mapping[str, Any] | None = None) -> None:
    """Atomically write the resume state, including the metrics rows logged so far (:class:`Checkpointer`).

    A ``.dcp`` path is a sharded DCP folder (``saver``'s :meth:`~yocou.training.parallel.ShardedSaver.save`, or
    :func:`yocou.training.parallel.save_sharded`; collective); otherwise one
    file, with ``tc.fsdp`` of full tensors keyed by name (:func:`yocou.training.parallel.full_state`, collective).
    """
    meta = {"step": step, "model_config": mc.to_dict(), "train_config": dataclasses.asdict(tc), "metrics_rows": rows,
            "data": dict(data) if data else None}
    if path.suffix == ".dcp":
        (saver or parallel.ShardedSaver()).save(path, model, opt, meta)
        return
    if tc.fsdp:
        msd, osd = parallel.full_state(model, opt)
    if rank != 0:
        return
    if not tc.fsdp:
        msd, osd = model.state_dict(), opt.state_dict()
    with atomic_path(path) as tmp:
        torch.save({"model": msd, "optimizer": osd, **meta}, tmp)


#: TrainConfig fields in which a cooldown branch may differ from the run it starts from: its length and cooldown,
#: and the fields that change no weight.
BRANCH_FREE_FIELDS = ("steps", "cooldown_steps", "log_every", "ckpt_every", "eval_every", "eval_tokens",
                      "snapshot_steps", "tensorboard", "stop_at_flops")


def branch_mismatch(parent: Mapping[str, Any], tc: TrainConfig, step: int) -> str | None:
    """Why a run with ``tc`` started from the state after optimizer step ``step`` of a run with the TrainConfig
    ``parent`` (a dict, as stored in checkpoints) would not equal ``tc`` trained from step 0; None when it would.

    It would when every field but :data:`BRANCH_FREE_FIELDS` is equal, ``step <= tc.steps``, and :func:`lr_at`
    gives both runs the same rate at every step before ``step`` (e.g. a ``wsd`` run whose cooldown starts at or
    after ``step``): batches depend only on ``(seed, step)`` (:func:`draw_batch`), so the states agree at ``step``.
    """
    defaults = {f.name: f.default for f in fields(TrainConfig) if f.default is not dataclasses.MISSING}
    theirs = train_config_from_dict({**defaults, **parent})
    ours_d, theirs_d = dataclasses.asdict(tc), dataclasses.asdict(theirs)
    for name in ours_d:
        if name not in BRANCH_FREE_FIELDS and ours_d[name] != theirs_d[name]:
            return f"train.{name} is {ours_d[name]!r} here and {theirs_d[name]!r} in the state's run"
    if step > tc.steps:
        return f"the state is at step {step}, past this run's train.steps = {tc.steps}"
    for k in range(step):
        if lr_at(k, tc) != lr_at(k, theirs):
            return (f"the learning rate at step {k} is {lr_at(k, tc):g} here and {lr_at(k, theirs):g} in the state's "
                    f"run (a branch must start before its cooldown)")
    return None


def _config_differs(ck: Mapping[str, Any], model_cfg: ModelConfig, tc: TrainConfig) -> str | None:
    """Which of a checkpoint's configs (``"model"`` or ``"train"``) differs from ``model_cfg`` / ``tc``, else None.
    A TrainConfig field added after the checkpoint was written counts as its default, and the fields that change
    no result (:data:`_NO_RESULT_FIELDS`) may differ. Compared as JSON values (a tuple equals its list), so a
    checkpoint whose configs went through JSON (a sharded checkpoint's ``meta.json``) compares alike."""
    def plain(x: Any) -> Any:
        return json.loads(json.dumps(x))

    if plain(ck["model_config"]) != plain(model_cfg.to_dict()):
        return "model"
    ours = plain(dataclasses.asdict(tc))
    defaults = {f.name: f.default for f in fields(TrainConfig) if f.default is not dataclasses.MISSING}
    theirs = plain({**defaults, **(ck.get("train_config") or {})})
    theirs.update({k: ours[k] for k in _NO_RESULT_FIELDS})
    return "train" if theirs != ours else None


def _prepare_out_dir(out: Path, model_cfg: ModelConfig, tc: TrainConfig) -> None:
    """Make ``out``; ValueError when it holds a finished run (``model.pt``, no ``ckpt.pt`` to resume) whose model
    config or TrainConfig differs from this one: training would replace another run's weights and metrics. The
    same configs retrain in place, as before; an unreadable ``model.pt`` is left to the run to replace."""
    out.mkdir(parents=True, exist_ok=True)
    final = out / "model.pt"
    if not final.is_file() or (out / "ckpt.pt").exists() or parallel.sharded_checkpoint(out / "ckpt.dcp"):
        return
    try:
        ck = _safe_load(final, map_location="cpu", mmap=True)
        what = _config_differs(ck, model_cfg, tc)
    except Exception:  # noqa: BLE001 - not a readable checkpoint of a run: nothing of value to protect
        return
    if what:
        raise ValueError(f"{out} holds a finished run ({final}) with another {what} config: training there would "
                         "replace it (choose another --out, or remove the folder to retrain)")


def _safe_load(path: Path, **kw: Any) -> Any:
    """``torch.load`` with ``weights_only=True`` (tensors, containers and numbers; no pickled code runs), allowing
    the one class a checkpoint written by an earlier version holds in its provenance (``TorchVersion``, a str)."""
    from torch.torch_version import TorchVersion

    with torch.serialization.safe_globals([TorchVersion]):
        return torch.load(path, weights_only=True, **kw)


def read_checkpoint(path: str | os.PathLike, *, map_location: str | torch.device = "cpu", mmap: bool = False,
                    what: str = "model checkpoint", keys: tuple[str, ...] = ("model", "model_config"),
                    remedy: str = "if yocou train wrote it, remove it and train the model again"
                    ) -> dict[str, Any]:
    """``torch.load`` of a checkpoint written by :func:`train` (``model.pt``, ``ckpt.pt``, snapshots).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file cannot be read (truncated, corrupt, not a torch file) or lacks ``keys``,
            naming the file and what to do.
    """
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"{what} {p} is a folder; expected a checkpoint file (model.pt)")
    if not p.is_file():
        raise FileNotFoundError(f"{what} {p} not found (train it first)")
    check_device(map_location)
    try:
        ck = _safe_load(p, map_location=map_location, mmap=mmap)
    except Exception as e:  # noqa: BLE001 - torch raises RuntimeError, UnpicklingError, EOFError, ...
        msg = (str(e).splitlines() or [""])[0].split(". ")[0][:160]
        raise ValueError(f"{what} {p} cannot be read: it is truncated, corrupt or not a torch checkpoint "
                         f"({type(e).__name__}: {msg}); {remedy}") from None
    missing = [k for k in keys if k not in ck] if isinstance(ck, dict) else list(keys)
    if missing:
        raise ValueError(f"{what} {p} is not a yocou checkpoint: no {missing}; {remedy}")
    return ck


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu", dtype: str = "fp32") -> LM:
    """Load a trained ``model.pt`` (weights + config) for evaluation on ``device``. ``dtype`` is the evaluation's
    ``--dtype``: ``bf16`` on CUDA stores the weights in bf16 (half the memory); on CPU the weights stay fp32 and
    ``bf16`` is autocast alone, as the evaluations apply it.

    A ``.safetensors`` file of :mod:`yocou.training.weights` (committed weights) loads the same way, its digest
    verified.

    Raises:
        FileNotFoundError: no such file.
        ValueError: unreadable, or weights that do not fit their config or (``.safetensors``) their digest.
    """
    if str(path).endswith(".safetensors"):
        from yocou.training.weights import read_weights

        if not Path(path).is_file():
            raise FileNotFoundError(f"weights {path} not found")
        state, mc = read_weights(path)
        ck = {"model": state, "model_config": mc}
    else:
        ck = read_checkpoint(path, map_location=device)
    model = new_model(config_from_dict(ck["model_config"])).to(device)
    try:
        model.load_state_dict(ck["model"])
    except RuntimeError as e:
        first = next((ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()), str(e))[:200]
        raise ValueError(f"model checkpoint {path}: its weights do not fit its model_config ({first}); it was "
                         "edited or mixes two runs") from None
    if dtype == "bf16" and torch.device(device).type == "cuda":
        model = model.to(torch.bfloat16)
    return model.eval()


def check_device(device: str | torch.device) -> None:
    """Refuse a device this machine cannot use, in one line (``cpu``, ``cuda``, ``cuda:N``, ``meta``).

    Raises:
        ValueError: an unknown device name, or CUDA where it is not available.
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device {device!r} is not a torch device ({str(e).splitlines()[0][:120]}); use cpu or "
                         "cuda") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: CUDA is not available on this machine; use cpu")
    if dev.type not in ("cpu", "cuda", "meta"):
        raise ValueError(f"device {device!r}: expected cpu or cuda")
