"""Training: AdamW, warmup then decay, clipping, bf16 autocast, exact resume, DDP.

One script for one process or many: under ``torchrun`` (``WORLD_SIZE > 1``) it
initialises ``torch.distributed`` (gloo on CPU, NCCL on CUDA) and wraps the
model in DDP, or shards it with FSDP2 when ``TrainConfig.fsdp`` (:mod:`yocou.parallel`).
Each step's global batch is drawn from a generator seeded by
``(seed, step)`` and split across ranks, so the loss curve does not depend on
the number of processes, and a resumed run sees the same batches as an
uninterrupted one.

Outputs in ``out_dir``: ``metrics.jsonl`` (one row per logged step: step, tokens,
train_flops, loss, lr, tokens_per_s, ...), ``ckpt.pt`` (resume state, written
atomically every ``ckpt_every`` steps), ``model.pt`` (final weights + config +
provenance) and ``summary.json``; with ``TrainConfig.tensorboard`` also TensorBoard event files
(``events.out.tfevents.*``) holding the same rows.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, Mapping

import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import accounting, parallel
from .config import ModelConfig, _check_types, config_from_dict, construct
from .entry import InputTypeError
from .io import atomic_path, atomic_write_json, atomic_write_text, provenance
from .model import LM


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation settings. [assume] fields follow the YOCO code (SPEC.md section 6).

    Attributes:
        seed: seeds the model init and the per-step data generator.
        steps: optimizer steps.
        batch_size: global batch in sequences (split evenly across ranks).
        seq_len: training sequence length N in tokens.
        lr: peak learning rate. min_lr_ratio: final lr / peak.
        warmup_steps: linear warmup from 0. schedule: decay after warmup.
        weight_decay, beta1, beta2, eps: AdamW (paper: betas 0.9, 0.95).
        grad_clip: max global gradient norm (0 disables).
        dtype: ``bf16`` autocast (CPU AMX / CUDA) or ``fp32``.
        grad_accum: micro-steps per optimizer step (batch divides evenly).
        log_every, ckpt_every: in steps.
        compile: ``torch.compile`` the training forward.
        stop_at_flops: stop early once analytic training FLOPs reach this; 0 disables.
        snapshot_steps: after each of these optimizer steps also write the weights to
            ``model_step<N>.pt`` (same format as ``model.pt``). Table 2's "equal FLOPs" YOCO-U is
            the equal-steps run's snapshot at the step where its training FLOPs reach YOCO's full
            run (:func:`yocou.pipeline.resolve_run`, ``equal_flops_to``).
        fsdp: shard parameters, gradients and optimizer state with FSDP2 over the
            ranks of ``torchrun`` (:mod:`yocou.parallel`) instead of DDP; checkpoints hold
            full tensors, so a run resumes with any number of processes.
        activation_checkpointing: recompute each layer in the backward pass
            instead of storing its activations (less memory, about 1/3 more compute).
        tensorboard: also write each ``metrics.jsonl`` row as TensorBoard scalars (``train/loss``,
            ``train/lr``, ``train/grad_norm``, ``train/tokens_per_s`` against the step, with the row's wall
            time) to event files in the run folder, beside ``metrics.jsonl`` (rank 0 only). Needs the optional
            ``tensorboard`` package (``pip install -e ".[tensorboard]"``), imported only when this is on.
            Changes no result: a run resumes across a change of it.
    """

    seed: int = 0
    steps: int
    batch_size: int
    seq_len: int
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 0
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0
    dtype: Literal["bf16", "fp32"] = "bf16"
    grad_accum: int = 1
    log_every: int = 10
    ckpt_every: int = 100
    compile: bool = False
    stop_at_flops: float = 0.0
    snapshot_steps: tuple[int, ...] = ()
    fsdp: bool = False
    activation_checkpointing: bool = False
    tensorboard: bool = False

    def __post_init__(self) -> None:
        _check_types(self)
        for f in ("steps", "batch_size", "seq_len", "grad_accum", "log_every", "ckpt_every"):
            if getattr(self, f) < 1:
                raise ValueError(f"TrainConfig.{f} must be >= 1, got {getattr(self, f)}")
        if self.lr <= 0:
            raise ValueError(f"TrainConfig.lr must be > 0, got {self.lr}")
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"TrainConfig.warmup_steps must be in [0, steps={self.steps}], got {self.warmup_steps}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"TrainConfig.batch_size ({self.batch_size}) must be a multiple of grad_accum "
                             f"({self.grad_accum})")


#: The metrics.jsonl keys written as TensorBoard scalars (tag ``train/<key>``); the trainer logs no held-out loss.
TB_SCALARS = ("loss", "lr", "grad_norm", "tokens_per_s")
#: TrainConfig fields that change no result: a checkpoint written with other values of them still resumes.
_NO_RESULT_FIELDS = ("tensorboard",)


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
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class NonFiniteLossError(FloatingPointError, ValueError):
    """The training loss became NaN or infinite (a diverged run: bad input such as too high a learning rate,
    so entry points report it in one line, like any ValueError)."""


def train_config_from_dict(d: Mapping[str, Any]) -> TrainConfig:
    """Build a :class:`TrainConfig`; unknown keys raise ValueError naming them, a missing or wrongly typed field
    :class:`yocou.entry.InputTypeError` (a TypeError and a ValueError)."""
    if not isinstance(d, Mapping):
        raise InputTypeError(f"train config must be a mapping, got {type(d).__name__}")
    allowed = {f.name for f in fields(TrainConfig)}
    unknown = set(d) - allowed
    if unknown:
        raise ValueError(f"unknown TrainConfig key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    d = dict(d)
    if isinstance(d.get("snapshot_steps"), list):  # JSON / YAML give lists
        d["snapshot_steps"] = tuple(d["snapshot_steps"])
    return construct(TrainConfig, d)


def lr_at(step: int, tc: TrainConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based): linear warmup, then decay."""
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    if tc.schedule == "constant":
        return tc.lr
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


def _init_distributed() -> tuple[int, int, torch.device]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
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


def train(model_cfg: ModelConfig, tc: TrainConfig, data_path: str | os.PathLike, out_dir: str | os.PathLike, *,
          run_config: Mapping[str, Any] | None = None, progress: bool = True) -> dict[str, Any]:
    """Train ``model_cfg`` on a token stream; resume from ``out_dir/ckpt.pt`` if present.

    Args:
        model_cfg: the architecture.
        tc: optimisation settings.
        data_path: a ``train.bin`` token stream (:class:`yocou.data.tokens.TokenStream`).
        out_dir: run folder (created).
        run_config: the resolved config to record in provenance (defaults to both configs).
        progress: show a tqdm bar on rank 0.

    Returns:
        The summary dict written to ``summary.json``.

    Raises:
        NonFiniteLossError: (a FloatingPointError and ValueError) the loss became NaN or infinite, naming the
            run folder, the step and the learning rate.
        ValueError: the token stream's vocabulary exceeds ``model_cfg.vocab_size``.
    """
    from tqdm.auto import tqdm

    from .data.tokens import TokenStream

    rank, world, device = _init_distributed()
    if tc.tensorboard and rank == 0:
        _TensorBoardLog.writer_class()  # fail before any work when TensorBoard is missing
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stream = TokenStream(data_path)
    if stream.vocab_size > model_cfg.vocab_size:
        raise ValueError(f"token stream {data_path} has vocab_size {stream.vocab_size} > model vocab_size "
                         f"{model_cfg.vocab_size}")
    if tc.batch_size % (world * tc.grad_accum):
        raise ValueError(f"TrainConfig.batch_size ({tc.batch_size}) must divide evenly over {world} ranks × "
                         f"grad_accum {tc.grad_accum}")
    cfg_record = dict(run_config) if run_config is not None else {"model": model_cfg.to_dict(),
                                                                   "train": dataclasses.asdict(tc)}
    prov = provenance(cfg_record, tc.seed)
    prov["world_size"] = world

    torch.manual_seed(tc.seed)
    model = LM(model_cfg).to(device)
    if tc.activation_checkpointing:
        parallel.apply_activation_checkpointing(model)
    if tc.fsdp and world > 1:
        parallel.shard_fsdp(model)  # before the optimizer, which must hold the sharded parameters
    sharded = parallel.is_sharded(model)
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.ndim >= 2 and not n.startswith("embed") else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=tc.eps, fused=True)
    flops_per_token = accounting.train_flops_per_token(model_cfg, tc.seq_len)
    tokens_per_step = tc.batch_size * tc.seq_len

    start_step = 0
    ck: dict[str, Any] = {}
    ckpt_path = out / "ckpt.pt"
    metrics_path = out / "metrics.jsonl"
    if ckpt_path.exists():
        # FSDP: every rank maps the full-tensor file (pages shared on a node) and keeps its shards.
        ck = read_checkpoint(ckpt_path, map_location="cpu" if tc.fsdp else device, mmap=tc.fsdp,
                             what="resume checkpoint", keys=("model", "optimizer", "step", "model_config",
                                                             "train_config"),
                             remedy=f"remove it to restart the run in {out} from step 0")
        # A field added after the checkpoint was written counts as its default.
        ck_tc = {f.name: f.default for f in fields(TrainConfig) if f.default is not dataclasses.MISSING}
        same = {**ck_tc, **ck["train_config"], **{k: getattr(tc, k) for k in _NO_RESULT_FIELDS}}
        if ck["model_config"] != model_cfg.to_dict() or same != dataclasses.asdict(tc):
            raise ValueError(f"{ckpt_path} was written with a different config; remove {out} to start over")
        if tc.fsdp:
            parallel.load_full_state(model, opt, ck["model"], ck["optimizer"])
        else:
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
        start_step = ck["step"]
        if rank == 0:
            print(f"resuming from step {start_step} ({ckpt_path})", file=sys.stderr, flush=True)
    tb: _TensorBoardLog | None = None
    if rank == 0:
        # Rewrite the log as it was at the checkpoint (a workflow manager may have deleted it).
        rows = ck.get("metrics_rows", []) if start_step else []
        atomic_write_text(metrics_path, "".join(r + "\n" for r in rows))
        if tc.tensorboard:
            tb = _TensorBoardLog(out, [json.loads(r) for r in rows])

    fwd = model if sharded else wrap_ddp(model, world, device)
    if tc.compile:
        fwd = torch.compile(fwd)
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=tc.dtype == "bf16")
    local_b = tc.batch_size // world
    micro_b = local_b // tc.grad_accum
    bar = tqdm(total=tc.steps, initial=start_step, disable=not (progress and rank == 0),
               desc=f"train {model_cfg.name}", unit="step", dynamic_ncols=True)
    t_last, tok_last = time.perf_counter(), start_step * tokens_per_step
    step = start_step
    stopped_by_flops = False
    for step in range(start_step, tc.steps):
        if tc.stop_at_flops and step * tokens_per_step * flops_per_token >= tc.stop_at_flops:
            stopped_by_flops = True
            break
        lr = lr_at(step, tc)
        for g in opt.param_groups:
            g["lr"] = lr
        gen = torch.Generator().manual_seed(tc.seed * 1_000_003 + step)
        x, y = stream.sample_batch(tc.batch_size, tc.seq_len, gen)
        x, y = x[rank * local_b:(rank + 1) * local_b].to(device), y[rank * local_b:(rank + 1) * local_b].to(device)
        ce_sum = torch.zeros((), device=device)
        for i in range(tc.grad_accum):
            xs, ys = x[i * micro_b:(i + 1) * micro_b], y[i * micro_b:(i + 1) * micro_b]
            sync = i == tc.grad_accum - 1
            if sharded:
                model.set_requires_gradient_sync(sync)  # FSDP2's no_sync: reduce-scatter on the last micro-step
            ctx = fwd.no_sync() if (world > 1 and not sync and hasattr(fwd, "no_sync")) else _null()
            with ctx:
                with amp:
                    loss, ce = _loss(fwd, xs, ys, model_cfg.moe_aux_weight)
                (loss / tc.grad_accum).backward()
            ce_sum += ce.detach() / tc.grad_accum
        if world > 1:
            dist.all_reduce(ce_sum, op=dist.ReduceOp.AVG)
        loss_val = float(ce_sum)
        if not math.isfinite(loss_val):
            raise NonFiniteLossError(f"{out}: the loss is {loss_val} at step {step}: training diverged; lower "
                                     f"train.lr (now {tc.lr:g}) or check the data")
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip if tc.grad_clip > 0 else float("inf"))
        if sharded:
            gnorm = gnorm.full_tensor()  # a DTensor (collective)
        opt.step()
        opt.zero_grad(set_to_none=True)
        done = step + 1
        bar.update(1)
        if rank == 0 and (done % tc.log_every == 0 or done == tc.steps):
            now = time.perf_counter()
            tokens = done * tokens_per_step
            row = {"step": done, "tokens": tokens, "train_flops": tokens * flops_per_token, "loss": loss_val,
                   "lr": lr, "grad_norm": float(gnorm),
                   "tokens_per_s": (tokens - tok_last) / (now - t_last),
                   "wall_time": time.time()}
            t_last, tok_last = now, tokens
            with open(metrics_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            if tb is not None:
                tb.add(row)
            bar.set_postfix(loss=f"{loss_val:.3f}", lr=f"{lr:.2e}")
        if done in tc.snapshot_steps:
            snap_sd = parallel.full_state(model)[0] if sharded else model.state_dict()  # collective when sharded
            if rank == 0:
                _save_model(out / f"model_step{done}.pt", snap_sd, model_cfg, tc, done, prov)
        if done % tc.ckpt_every == 0 and done < tc.steps:
            _save_ckpt(ckpt_path, model, opt, done, model_cfg, tc, rank, metrics_path)
    bar.close()
    if tb is not None:
        tb.close()
    final_step = step if stopped_by_flops else tc.steps
    summary = {"name": model_cfg.name, "steps": final_step, "tokens": final_step * tokens_per_step,
               "train_flops": final_step * tokens_per_step * flops_per_token, "stopped_by_flops": stopped_by_flops,
               **accounting.summary(model_cfg, tc.seq_len), "provenance": prov}
    final_sd = parallel.full_state(model)[0] if sharded else model.state_dict()  # collective when sharded
    if rank == 0:
        _save_model(out / "model.pt", final_sd, model_cfg, tc, final_step, prov)
        atomic_write_json(out / "summary.json", summary)
        if ckpt_path.exists():
            ckpt_path.unlink()
    if world > 1:
        dist.barrier()
    return summary


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


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None


def _save_ckpt(path: Path, model: LM, opt: torch.optim.Optimizer, step: int, mc: ModelConfig, tc: TrainConfig,
               rank: int, metrics_path: Path) -> None:
    """Atomically write the resume state, including the metrics rows logged so far.

    With ``tc.fsdp`` the state is full tensors keyed by name (:func:`yocou.parallel.full_state`, collective).
    """
    if tc.fsdp:
        msd, osd = parallel.full_state(model, opt)
    if rank != 0:
        return
    if not tc.fsdp:
        msd, osd = model.state_dict(), opt.state_dict()
    rows = [l for l in metrics_path.read_text(encoding="utf-8").splitlines() if l.strip()] \
        if metrics_path.exists() else []
    with atomic_path(path) as tmp:
        torch.save({"model": msd, "optimizer": osd, "step": step,
                    "model_config": mc.to_dict(), "train_config": dataclasses.asdict(tc), "metrics_rows": rows}, tmp)


def read_checkpoint(path: str | os.PathLike, *, map_location: str | torch.device = "cpu", mmap: bool = False,
                    what: str = "model checkpoint", keys: tuple[str, ...] = ("model", "model_config"),
                    remedy: str = "remove it and train the model again") -> dict[str, Any]:
    """``torch.load`` of a checkpoint written by :func:`train` (``model.pt``, ``ckpt.pt``, snapshots).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file cannot be read (truncated, corrupt, not a torch file) or lacks ``keys``,
            naming the file and what to do.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what} {p} not found (train it first)")
    try:
        ck = torch.load(p, map_location=map_location, mmap=mmap, weights_only=False)
    except Exception as e:  # noqa: BLE001 - torch raises RuntimeError, UnpicklingError, EOFError, ...
        msg = (str(e).splitlines() or [""])[0].split(". ")[0][:160]
        raise ValueError(f"{what} {p} cannot be read: it is truncated, corrupt or not a torch checkpoint "
                         f"({type(e).__name__}: {msg}); {remedy}") from None
    missing = [k for k in keys if k not in ck] if isinstance(ck, dict) else list(keys)
    if missing:
        raise ValueError(f"{what} {p} is not a yocou checkpoint: no {missing}; {remedy}")
    return ck


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu") -> LM:
    """Load a trained ``model.pt`` (weights + config) for evaluation.

    Raises:
        FileNotFoundError: no such file.
    """
    ck = read_checkpoint(path, map_location=device)
    model = LM(config_from_dict(ck["model_config"])).to(device)
    model.load_state_dict(ck["model"])
    return model.eval()
