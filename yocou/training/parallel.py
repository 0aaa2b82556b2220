"""FSDP2 sharding, activation checkpointing and full (unsharded) training state for :mod:`yocou.training.train`.

* :func:`shard_fsdp` applies ``torch.distributed.fsdp.fully_shard`` (FSDP2, per-parameter DTensor
  sharding on dim 0) to every decoder layer and then the root (embedding, the small K̂V̂ makers, final
  norm, LM head), the layout torchtitan uses, with a ``MixedPrecisionPolicy`` (bf16 all-gathers and compute, fp32
  gradient reduction) for bf16 training and, on a 2-D mesh, HSDP (shard within a group, replicate across groups).
  A looped layer (YOCO-U's self-decoder, RINS, Loop) is one FSDP unit called T times per step; it stays gathered
  from its first call to the backward (``reshard_after_forward=False``), so it is all-gathered once per forward,
  not T times. Its gradient is the sum over the calls, exactly as without sharding.
* :func:`compile_layers` compiles each decoder layer and K̂V̂ maker (``nn.Module.compile``) before sharding, as
  torchtitan does: the plan loop of ``LM.forward`` holds FSDP's hooks, so compiling the whole model under FSDP
  would run it eagerly.
* :func:`apply_activation_checkpointing` recomputes each layer application and K̂V̂ maker in the backward pass
  (``torch.utils.checkpoint``, non-reentrant) instead of keeping its activations. Parameter names and
  state dicts do not change.
* :func:`save_sharded` and :func:`load_sharded`: the resume checkpoint of a sharded run as a
  ``torch.distributed.checkpoint`` (DCP) folder, each rank writing its own shards (no gather on rank 0), with a
  JSON file of the run's metadata; it loads on any number of processes (DCP reshards on load), one included.
* :func:`full_state` and :func:`load_full_state` move the training state in one format whatever the
  number of processes: full tensors keyed by parameter name (``torch.distributed.checkpoint.state_dict``
  with ``full_state_dict=True``). Gathering is collective; rank 0 receives the full tensors on CPU.

Without a policy (fp32 training, or unsharded) mixed precision is ``torch.autocast``: parameters, gradients and
their reduction fp32, matmuls in bf16. Sources: PyTorch FSDP2 docs (``torch.distributed.fsdp.fully_shard``,
``MixedPrecisionPolicy``), ``torch.distributed.device_mesh.init_device_mesh``,
``torch.distributed.checkpoint.state_dict``; torchtitan's ``parallelize`` functions (read, not copied).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["DCP_META", "apply_activation_checkpointing", "compile_layers", "full_state", "is_sharded",
           "load_full_state", "load_sharded", "looped_layers", "read_sharded_meta", "save_sharded", "shard_fsdp",
           "ShardedSaver", "sharded_checkpoint"]

DCP_META = "meta.json"
"""The file of a DCP checkpoint folder holding the run's metadata (step, configs, metrics rows), beside DCP's own
``.metadata`` and the ranks' ``*.distcp`` shard files."""


def is_sharded(model: nn.Module) -> bool:
    """Whether ``fully_shard`` was applied to ``model`` (its parameters are DTensors)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _layers(model: nn.Module) -> list[nn.Module]:
    """Every decoder layer of a :class:`yocou.model.lm.LM` (each stage's distinct layers, once)."""
    return [layer for stage in model.stages for layer in stage]


def looped_layers(model: nn.Module) -> list[nn.Module]:
    """The decoder layers of stages with ``n_loops > 1`` (called once per loop in a forward)."""
    return [layer for st, stage in zip(model.cfg.stages, model.stages) if st.n_loops > 1 for layer in stage]


def shard_fsdp(model: nn.Module, *, param_dtype: torch.dtype | None = None, replicate: int = 1) -> nn.Module:
    """Shard ``model`` in place with FSDP2 over the default process group (all ranks).

    Args:
        model: a :class:`yocou.model.lm.LM` on this rank's device (or CPU; shards move to the mesh's device).
        param_dtype: the dtype parameters are all-gathered and computed in (``torch.bfloat16`` for bf16 training);
            gradients are reduced in fp32 into the fp32 sharded parameters. ``None``: fp32 throughout.
        replicate: HSDP: the world splits into ``replicate`` groups of ``world / replicate`` ranks; parameters
            are sharded within a group (a node) and replicated across groups (gradients all-reduced across them).
            1: plain FSDP over every rank.

    Returns:
        ``model`` (its class becomes ``FSDP<cls>``; call it, not ``model.forward``).

    Raises:
        RuntimeError: ``torch.distributed`` is not initialised (run under ``torchrun``).
        ValueError: ``replicate`` does not divide the world size.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("shard_fsdp needs an initialised process group: launch with torchrun (WORLD_SIZE > 1)")
    world = dist.get_world_size()
    if replicate < 1 or world % replicate:
        raise ValueError(f"train.fsdp_replicate ({replicate}) must divide the world size ({world})")
    device_type = next(model.parameters()).device.type
    if device_type == "meta":
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    mesh = (init_device_mesh(device_type, (replicate, world // replicate), mesh_dim_names=("replicate", "shard"))
            if replicate > 1 else init_device_mesh(device_type, (world,), mesh_dim_names=("shard",)))
    kw: dict[str, Any] = {"mesh": mesh}
    if param_dtype is not None:
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    looped = {id(layer) for layer in looped_layers(model)}
    # The K̂V̂ makers stay in the root unit: they are small and return views of one fused matmul.
    for unit in _layers(model):
        fully_shard(unit, reshard_after_forward=id(unit) not in looped, **kw)
    fully_shard(model, **kw)
    return model


def compile_layers(model: nn.Module, *, fullgraph: bool = True) -> int:
    """``torch.compile`` each decoder layer and K̂V̂ maker in place (``nn.Module.compile``: names and state dicts
    unchanged); call after :func:`apply_activation_checkpointing` and before :func:`shard_fsdp`. Returns the number
    of modules compiled. With ``fullgraph`` a graph break is an error at the first call."""
    units = _layers(model) + list(model.kv_makers.values())
    for unit in units:
        unit.compile(fullgraph=fullgraph)
    return len(units)


def apply_activation_checkpointing(model: nn.Module) -> int:
    """Recompute each decoder layer and K̂V̂ maker in the backward pass instead of storing activations.

    Wraps each unit's ``forward`` (before :func:`shard_fsdp`, so FSDP's hooks stay outside the
    recomputed region). Numerically identical to no checkpointing. Returns the number of units wrapped.
    """
    from torch.utils.checkpoint import checkpoint

    def recomputed(forward):  # noqa: ANN001, ANN202
        # A plain function (not functools.partial over checkpoint, which Dynamo skips): a compiled layer traces it
        # and the checkpoint inside as one graph.
        @functools.wraps(forward)
        def run(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            return checkpoint(forward, *args, use_reentrant=False, **kwargs)
        return run

    units = _layers(model) + list(model.kv_makers.values())
    for unit in units:
        unit.forward = recomputed(unit.forward)
    return len(units)


def _options(**kw: Any):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kw)


def full_state(model: nn.Module, opt: torch.optim.Optimizer | None = None) -> tuple[dict, dict | None]:
    """``(model_state, optimizer_state)`` as full tensors keyed by parameter name.

    For a sharded model this is collective (every rank must call it); rank 0 receives the tensors on
    CPU, other ranks empty dicts. For an unsharded model every rank gets them. The optimizer state is
    keyed by parameter name (``torch.distributed.checkpoint`` format), not by index as
    ``Optimizer.state_dict`` is, so it loads with any number of processes through :func:`load_full_state`.
    """
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    sharded = is_sharded(model)
    opts = _options(cpu_offload=sharded)
    msd = get_model_state_dict(model, options=opts) if sharded else model.state_dict()
    osd = get_optimizer_state_dict(model, opt, options=opts) if opt is not None else None
    return msd, osd


def load_full_state(model: nn.Module, opt: torch.optim.Optimizer | None, model_state: dict,
                    opt_state: dict | None) -> None:
    """Load what :func:`full_state` returned (read by every rank) into ``model`` and ``opt``.

    A sharded model keeps only its rank's shard of each full tensor (no communication).

    Raises:
        RuntimeError: missing or unexpected keys (as ``load_state_dict``).
    """
    from torch.distributed.checkpoint.state_dict import (
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    if is_sharded(model):
        set_model_state_dict(model, model_state, options=_options())
    else:
        model.load_state_dict(model_state)
    if opt is not None and opt_state is not None:
        set_optimizer_state_dict(model, opt, opt_state, options=_options())


def _dist() -> tuple[int, bool]:
    import torch.distributed as dist

    on = dist.is_available() and dist.is_initialized()
    return (dist.get_rank() if on else 0), on


class ShardedSaver:
    """Writes :func:`save_sharded` checkpoints, asynchronously with ``asynchronous`` (``dcp.async_save``: the state is
    staged in CPU memory, then written by a background thread over a gloo group of its own while training goes on).

    An asynchronous checkpoint is swapped in for the previous one only once every rank has written it: at the next
    :meth:`save` or at :meth:`wait` (call it before the run ends). A run killed before that resumes from the
    previous checkpoint, as if the last save had not started.
    """

    def __init__(self, asynchronous: bool = False) -> None:
        import torch.distributed.checkpoint as dcp

        self.asynchronous = asynchronous and hasattr(dcp, "async_save")
        self._pending: tuple[Any, Path, dict[str, Any]] | None = None
        self._group = None

    def save(self, path: Path, model: nn.Module, opt: torch.optim.Optimizer, meta: dict[str, Any]) -> None:
        """Write the model and optimizer state to the DCP folder ``path`` (collective), with ``meta`` as
        :data:`DCP_META`; see :func:`save_sharded`."""
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        self.wait()
        rank, on = _dist()
        tmp = path.with_name(path.name + ".tmp")
        if rank == 0 and tmp.exists():
            shutil.rmtree(tmp)  # a save that did not finish
        if on:
            dist.barrier()
        msd, osd = get_state_dict(model, opt)
        if not self.asynchronous:
            dcp.save({"model": msd, "optimizer": osd}, checkpoint_id=str(tmp))
            self._finalize(path, meta)
            return
        if on and self._group is None:
            self._group = dist.new_group(backend="gloo")  # the background writes never share NCCL with training
        future = dcp.async_save({"model": msd, "optimizer": osd}, checkpoint_id=str(tmp), process_group=self._group,
                                no_dist=not on)
        self._pending = (future, path, meta)

    def wait(self) -> None:
        """Finish the asynchronous save in flight, if any, and swap it in (collective)."""
        if self._pending is not None:
            future, path, meta = self._pending
            self._pending = None
            future.result()
            self._finalize(path, meta)

    @staticmethod
    def _finalize(path: Path, meta: dict[str, Any]) -> None:
        import torch.distributed as dist

        from yocou.utils.io import atomic_write_json

        rank, on = _dist()
        if on:
            dist.barrier()  # every rank's shards are written
        tmp, old = path.with_name(path.name + ".tmp"), path.with_name(path.name + ".old")
        if rank == 0:
            atomic_write_json(tmp / DCP_META, meta)
            if path.exists():
                if old.exists():
                    shutil.rmtree(old)
                path.rename(old)
            tmp.rename(path)
            if old.exists():
                shutil.rmtree(old)
        if on:
            dist.barrier()


def save_sharded(path: Path, model: nn.Module, opt: torch.optim.Optimizer, meta: dict[str, Any]) -> None:
    """Write the model and optimizer state to the DCP folder ``path`` (collective: every rank calls it and writes
    its own shards), with ``meta`` (JSON) as :data:`DCP_META`; synchronously (:class:`ShardedSaver` for the
    asynchronous form).

    Atomic: the state goes to ``<path>.tmp``; once every rank has written, rank 0 writes the metadata there and
    swaps the folder in for ``path`` (the previous checkpoint is kept as ``<path>.old`` until the swap is done, and
    :func:`sharded_checkpoint` falls back to it). Sources: PyTorch's ``torch.distributed.checkpoint`` (``save``,
    ``async_save``, ``state_dict.get_state_dict``) docs.
    """
    ShardedSaver(False).save(path, model, opt, meta)


def sharded_checkpoint(path: Path) -> Path | None:
    """The DCP folder to resume from: ``path``, or ``<path>.old`` where a swap was cut off; ``None`` if neither.

    Raises:
        ValueError: ``path`` (or ``.old``) is a file, or a folder of shards without its :data:`DCP_META` (a folder
            this project did not finish writing, or one edited since): named, rather than silently restarting the
            run from step 0 and deleting the shards.
    """
    for p in (path, path.with_name(path.name + ".old")):
        if p.exists() and not p.is_dir():
            raise ValueError(f"sharded checkpoint {p} is a file; expected a folder written by yocou train (move it "
                             "away to start the run from step 0)")
        if (p / DCP_META).is_file():
            return p
        if p.is_dir() and any(p.iterdir()):
            raise ValueError(f"sharded checkpoint {p} has no {DCP_META} (the step, configs and metrics rows); "
                             f"remove {p} to restart the run from step 0")
    return None


def read_sharded_meta(path: Path) -> dict[str, Any]:
    """The metadata of a DCP checkpoint folder (:data:`DCP_META`).

    Raises:
        ValueError: it is missing or not a JSON object, naming the file.
    """
    import json

    f = path / DCP_META
    try:
        meta = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"sharded checkpoint {f} cannot be read ({type(e).__name__}); remove {path} to restart "
                         "the run from step 0") from None
    if not isinstance(meta, dict):
        raise ValueError(f"sharded checkpoint {f} is not a JSON object; remove {path} to restart the run")
    return meta


def load_sharded(path: Path, model: nn.Module, opt: torch.optim.Optimizer) -> None:
    """Load a :func:`save_sharded` folder into ``model`` and ``opt``, sharded or not, on this run's processes
    (collective when sharded; DCP reshards from the world size that wrote it). Sources: PyTorch's
    ``torch.distributed.checkpoint.load`` and ``state_dict.set_state_dict`` docs.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optimizer": osd}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
