"""Train one model of the mechanism probe on freshly generated MQAR and k-hop batches, score it on a fixed held-out
set, write one JSON result.

One run is ``(variant, n_loops, seed)`` at a probe scale (:data:`SCALES`): the model is a :mod:`yocou.model.config`
preset at the scale's shape with the probe's vocabulary (:data:`yocou.evaluation.probe.tasks.VOCAB_SIZE`); training is AdamW
(:func:`yocou.training.train.build_optimizer`, the schedule :func:`yocou.training.train.lr_at` of a :class:`yocou.training.train.TrainConfig`,
fp32, gradient clipping) on batches drawn from :func:`yocou.training.train.batch_generator` ``(seed, step)``, the loss the
cross-entropy over the scored answer tokens only. The held-out set is :data:`EVAL_SEED_BASE` ``+ eval_seed``'s
stream: the same sequences for every model and seed, from a seed range that no training step uses. With the same
seed and one thread a run is bit-for-bit deterministic.

The equal-compute control (``equal_flops_to``): a run trained for ``round(steps * F_ref / F)`` steps, ``F`` the
analytic training FLOPs per token (:func:`yocou.model.accounting.train_flops_per_token`) of its own model and ``F_ref`` of
the reference (YOCO trained for the FLOPs of YOCO-U at T = 3); warm-up scales alike.

The result (:func:`run_probe`): accuracy per task and per k (``{"mqar": {"1": {...}}, "khop": {"1": ..., "4":
...}}``, each ``accuracy``, ``correct``, ``n``), the chance levels, the model config, parameters, training steps,
tokens and FLOPs, the loss curve, CPU and wall seconds, the seed and provenance.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from yocou.evaluation.probe.tasks import (
    IGNORE,
    TASKS,
    VOCAB_SIZE,
    TaskConfig,
    chance_level,
    hops_of,
    make_batch,
)
from yocou.model import accounting
from yocou.model.config import ModelConfig, preset, swiglu_hidden
from yocou.model.limits import new_model
from yocou.training.train import TrainConfig, batch_generator, build_optimizer, lr_at
from yocou.utils.io import atomic_write_json, provenance
from yocou.utils.validation import (
    FieldError,
    NonNegFloat,
    NonNegInt,
    PosFloat,
    PosInt,
    config_dataclass,
    from_mapping,
)

__all__ = [
    "EVAL_SEED_BASE",
    "SCALES",
    "VARIANTS",
    "ProbeSettings",
    "equal_flops_steps",
    "evaluate",
    "heldout_set",
    "probe_model",
    "run_probe",
    "self_decoder_reach",
    "settings_from_dict",
]

#: The held-out set's generator seed is ``EVAL_SEED_BASE + eval_seed``: far above every training stream's
#: ``seed * 1_000_003 + step`` (:func:`yocou.training.train.batch_generator`) for seeds and steps below a million.
EVAL_SEED_BASE = 1 << 62
#: The presets a probe run may use (:data:`yocou.model.config.PRESETS`); ``n_loops`` applies to ``yocou`` and ``rins``.
VARIANTS = ("transformer", "yoco", "yocou", "rins")
_LOOPED = ("yocou", "rins")


@config_dataclass
class ProbeSettings:
    """Everything of a probe run but the variant, its loops and the seed.

    Attributes:
        d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff, window: the model shape every variant shares (so
            every variant has the same parameters: a loop reuses weights); ``window`` W is the sliding window of
            the YOCO self-decoder.
        init_std: std of the normal init of every weight matrix (:class:`yocou.model.config.ModelConfig`). The
            project's 0.02 (GPT-2's, for D = 768) is small at D = 64: in a pilot (a copy task, 32 random tokens
            repeated after 64 filler tokens at a random offset, N = 128, batch 16, lr 3e-3) a 4-layer Transformer at
            0.02 was still at the uniform loss (4.1 nats) after 800 steps and at 0.07 nats at 0.1.
        task: the tasks (:class:`yocou.evaluation.probe.tasks.TaskConfig`); ``task.min_distance`` must exceed ``window``.
        steps: optimizer steps. batch_size: sequences per step.
        lr: peak learning rate; warmup_steps: linear warm-up; then cosine to 0.1 x lr (:func:`yocou.training.train.lr_at`).
        weight_decay, grad_clip: AdamW's decoupled weight decay and the gradient-norm clip.
        eval_sequences: held-out sequences per task. eval_batch_size: sequences per evaluation forward.
        eval_seed: selects the held-out set (:data:`EVAL_SEED_BASE` + it); keep it fixed across models and seeds.
        log_every: steps between the loss-curve points kept in the result.
    """

    d_model: PosInt
    n_layers: PosInt
    n_heads: PosInt
    n_kv_heads: PosInt
    head_dim: PosInt
    d_ff: PosInt
    window: PosInt
    task: TaskConfig
    init_std: PosFloat = 0.1
    steps: PosInt
    batch_size: PosInt
    lr: PosFloat = 3e-3
    warmup_steps: NonNegInt = 0
    weight_decay: NonNegFloat = 0.1
    grad_clip: NonNegFloat = 1.0
    eval_sequences: PosInt = 256
    eval_batch_size: PosInt = 32
    eval_seed: NonNegInt = 0
    log_every: PosInt = 25

    def __post_init__(self) -> None:
        if self.warmup_steps > self.steps:
            raise ValueError(f"ProbeSettings.warmup_steps must be in [0, steps={self.steps}], got {self.warmup_steps}")
        if self.task.min_distance <= self.window:
            raise ValueError(f"ProbeSettings.task.min_distance ({self.task.min_distance}) must exceed window ({self.window}): "
                             f"the probe asks for retrieval beyond the sliding window")

    def size(self) -> dict[str, Any]:
        """The model shape as a :func:`yocou.model.config.preset` size (with the probe's vocabulary)."""
        return {"vocab_size": VOCAB_SIZE, "d_model": self.d_model, "n_layers": self.n_layers,
                "n_heads": self.n_heads, "n_kv_heads": self.n_kv_heads, "head_dim": self.head_dim,
                "d_ff": self.d_ff, "window": self.window, "init_std": self.init_std}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def settings_from_dict(d: Mapping[str, Any], base: ProbeSettings | None = None) -> ProbeSettings:
    """:class:`ProbeSettings` from a mapping (JSON / YAML), its keys replacing those of ``base`` (``task`` merged
    key by key).

    Raises:
        yocou.utils.validation.FieldError: not a mapping, an unknown or missing key, a wrong type, a value out of
            range or an impossible setting, naming the field (``ProbeSettings.task.seq_len``).
    """
    if not isinstance(d, Mapping):
        raise FieldError(f"probe settings: expected a mapping, got {type(d).__name__} ({d!r})", "probe settings")
    d = dict(d)
    merged = base.to_dict() if base is not None else {}
    task = d.pop("task", None) or {}
    if not isinstance(task, Mapping):
        raise FieldError(f"ProbeSettings.task: expected a mapping, got {type(task).__name__} ({task!r})",
                         "ProbeSettings.task")
    task = {**merged.get("task", {}), **task}
    merged.update(d)
    if task:
        merged["task"] = task
    return from_mapping(ProbeSettings, merged, "probe settings")


def _scale(d_model: int, n_layers: int, n_heads: int, window: int, task: TaskConfig, **kw: Any) -> ProbeSettings:
    return ProbeSettings(d_model=d_model, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_heads,
                         head_dim=d_model // n_heads, d_ff=swiglu_hidden(d_model), window=window, task=task, **kw)


#: Named probe scales. ``tiny``: the probe's default, sized to about 1.5 CPU-hours for the 7 models x 3 seeds at one
#: thread (pilot numbers: the report that proposed it); ``min_distance`` 192 is beyond the reach of YOCO-U's
#: self-decoder at T = 3 (3 x 2 x 31 = 186 tokens). ``smoke``: seconds, for the tests.
SCALES: dict[str, ProbeSettings] = {
    "tiny": _scale(64, 4, 2, 32, TaskConfig(seq_len=512, min_distance=192, n_pairs=16, mqar_queries=8, n_chains=8,
                                            chain_len=4, khop_queries=8),
                   steps=1000, batch_size=8, lr=3e-3, warmup_steps=50),
    "smoke": _scale(32, 2, 2, 8, TaskConfig(seq_len=96, min_distance=20, n_pairs=4, mqar_queries=4, n_chains=3,
                                            chain_len=4, khop_queries=3), steps=4, batch_size=4, lr=3e-3,
                    eval_sequences=8, eval_batch_size=8, log_every=2),
}


def probe_model(variant: str, settings: ProbeSettings, n_loops: int | None = None) -> ModelConfig:
    """The :class:`yocou.model.config.ModelConfig` of ``variant`` (a key of :data:`VARIANTS`) at the settings' shape.

    ``n_loops``: T of ``yocou`` (``yocou`` at T = 1 is YOCO's architecture under YOCO-U's name, so at the same
    seed it trains bit-identically), r of ``rins``; None takes the preset's default (3 for both); it must be None
    for ``transformer`` and ``yoco``.

    Raises:
        ValueError: an unknown variant, or ``n_loops`` given to a variant without loops or below 1 (naming it).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    kw: dict[str, Any] = {}
    if n_loops is not None:
        if variant not in _LOOPED:
            raise ValueError(f"n_loops applies to {list(_LOOPED)} only, not {variant!r}")
        if isinstance(n_loops, bool) or not isinstance(n_loops, int) or n_loops < 1:
            raise ValueError(f"n_loops must be an integer >= 1, got {n_loops!r}")
        kw["n_loops"] = n_loops
    return preset(f"{variant}-probe", sizes={"probe": settings.size()}, **kw)


def loops_of(cfg: ModelConfig) -> int:
    """The loop count of a probe model: the largest ``n_loops`` of its stages (1 for Transformer and YOCO)."""
    return max(s.n_loops for s in cfg.stages)


def self_decoder_reach(cfg: ModelConfig) -> int | None:
    """How far back (tokens) information can travel through the model's sliding-window layers alone: the sum of
    ``window - 1`` over every windowed self-attention application (T loops x L/2 layers for YOCO-U). None when the
    model has a global self-attention layer (Transformer, RINS), whose reach is the whole sequence."""
    reach = 0
    for st in cfg.stages:
        if st.kind != "self":
            continue
        if st.window is None:
            return None
        reach += st.n_loops * st.n_layers * (st.window - 1)
    return reach


def equal_flops_steps(cfg: ModelConfig, ref: ModelConfig, steps: int, seq_len: int) -> int:
    """Steps at which ``cfg`` spends the training FLOPs of ``ref`` trained ``steps`` steps (same batch and
    ``seq_len``): ``round(steps * F_ref / F)``, ``F`` from :func:`yocou.model.accounting.train_flops_per_token`."""
    f, f_ref = (accounting.train_flops_per_token(c, seq_len) for c in (cfg, ref))
    return max(1, round(steps * f_ref / f))


def heldout_set(settings: ProbeSettings, task: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed held-out sequences of ``task``: batches ``(input_ids, targets)`` of ``[b, N]`` (``b`` up to
    ``eval_batch_size``; ``eval_sequences`` in all) from the generator seeded ``EVAL_SEED_BASE + eval_seed``, one
    stream per task. The same for every model and training seed.

    Raises:
        ValueError: an unknown task.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
    g = torch.Generator().manual_seed(EVAL_SEED_BASE + settings.eval_seed + TASKS.index(task))
    out, left = [], settings.eval_sequences
    while left:
        b = min(left, settings.eval_batch_size)
        out.append(settings.task.batch(task, b, g))
        left -= b
    return out


@torch.no_grad()
def evaluate(model: torch.nn.Module, settings: ProbeSettings) -> dict[str, dict[str, dict[str, float | int]]]:
    """Greedy accuracy on the held-out set (:func:`heldout_set`): an answer is right when the argmax over the whole
    vocabulary is the target. ``{task: {k: {"accuracy", "correct", "n"}}}`` with ``k`` as a string; MQAR's single
    retrieval is ``"1"``; k-hop has one entry per k of ``task.hops``."""
    was = model.training
    model.eval()
    counts: dict[str, dict[int, list[int]]] = {t: {} for t in TASKS}
    try:
        for task in TASKS:
            for x, y in heldout_set(settings, task):
                pred = model(x).logits_BNV.argmax(-1)
                scored = y != IGNORE
                ks = hops_of(x, y) if task == "khop" else scored.long()
                right = (pred == y) & scored
                for k in ks[scored].unique().tolist():
                    sel = scored & (ks == k)
                    c = counts[task].setdefault(int(k), [0, 0])
                    c[0] += int(right[sel].sum())
                    c[1] += int(sel.sum())
    finally:
        model.train(was)
    return {t: {str(k): {"accuracy": c / n, "correct": c, "n": n} for k, (c, n) in sorted(by.items())}
            for t, by in counts.items()}


def _train_config(settings: ProbeSettings, seed: int, steps: int, warmup: int) -> TrainConfig:
    return TrainConfig(seed=seed, steps=steps, batch_size=settings.batch_size, seq_len=settings.task.seq_len,
                       lr=settings.lr, warmup_steps=warmup, schedule="cosine", weight_decay=settings.weight_decay,
                       grad_clip=settings.grad_clip, dtype="fp32", log_every=settings.log_every)


def run_probe(variant: str, settings: ProbeSettings, *, seed: int, out: str | os.PathLike | None = None,
              n_loops: int | None = None, equal_flops_to: tuple[str, int | None] | None = None,
              name: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Train ``variant`` (``n_loops``: :func:`probe_model`) with ``seed``, evaluate it, write the result to ``out``
    (atomically; skipped when None) and return it.

    Args:
        variant, n_loops: the model (:func:`probe_model`).
        settings: shape, tasks, training and evaluation (:class:`ProbeSettings`).
        seed: seeds the init and the training batches (:func:`yocou.training.train.batch_generator`), not the held-out set.
        out: the result JSON's path.
        equal_flops_to: ``(variant, n_loops)`` of a reference: train for its FLOPs (:func:`equal_flops_steps`)
            instead of ``settings.steps``.
        name: the run's label in results (default ``variant``, ``yocou_t<T>``, ``rins_r<r>``, and
            ``<that>_eqflops_<ref>`` with ``equal_flops_to``).
        progress: a tqdm bar.

    Returns:
        The result dict (module docstring).

    Raises:
        ValueError: a bad variant, ``n_loops`` or seed (naming it); the loss became NaN or infinite.
    """
    from tqdm.auto import tqdm

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    cfg = probe_model(variant, settings, n_loops)
    T = loops_of(cfg)
    steps, warmup, ref = settings.steps, settings.warmup_steps, None
    if equal_flops_to is not None:
        ref = probe_model(equal_flops_to[0], settings, equal_flops_to[1])
        steps = equal_flops_steps(cfg, ref, settings.steps, settings.task.seq_len)
        warmup = min(steps, round(settings.warmup_steps * steps / settings.steps))
    if name is None:
        name = variant + (f"_t{T}" if variant == "yocou" else f"_r{T}" if variant == "rins" else "")
        if ref is not None:
            name += f"_eqflops_{ref.name}" + (f"_t{loops_of(ref)}" if ref.name in _LOOPED else "")
    tc = _train_config(settings, seed, steps, warmup)
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    torch.manual_seed(seed)
    model = new_model(cfg)
    opt = build_optimizer(model, tc)
    curve: list[dict[str, float]] = []
    bar = tqdm(total=steps, disable=not progress, desc=f"probe {name} seed {seed}", unit="step", dynamic_ncols=True)
    model.train()
    for step in range(steps):
        lr = lr_at(step, tc)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = make_batch(settings.task, tc.batch_size, batch_generator(seed, step))
        logits = model(x).logits_BNV
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=IGNORE)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            raise ValueError(f"probe {name} seed {seed}: the loss is {loss_value} at step {step} (lr {lr:.3g}); "
                             f"lower lr")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if tc.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        opt.step()
        if step % tc.log_every == 0 or step == steps - 1:
            curve.append({"step": step + 1, "loss": loss_value, "lr": lr})
            bar.set_postfix(loss=f"{loss_value:.3f}")
        bar.update(1)
    bar.close()
    train_cpu, train_wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
    accuracy = evaluate(model, settings)
    flops_per_token = accounting.train_flops_per_token(cfg, tc.seq_len)
    tokens = steps * tc.batch_size * tc.seq_len
    run = {"variant": name, "preset": variant, "n_loops": T, "seed": seed}
    result = {
        **run,
        "accuracy": accuracy,
        "chance": {t: chance_level(settings.task, t) for t in TASKS},
        "final_loss": curve[-1]["loss"],
        "loss_curve": curve,
        "params": accounting.param_count(cfg),
        "params_non_embedding": accounting.param_count(cfg, embedding=False),
        "self_decoder_reach": self_decoder_reach(cfg),
        "steps": steps,
        "warmup_steps": warmup,
        "tokens": tokens,
        "train_flops_per_token": flops_per_token,
        "train_flops": tokens * flops_per_token,
        "equal_flops_to": None if ref is None else {"preset": ref.name, "n_loops": loops_of(ref),
                                                    "train_flops_per_token":
                                                        accounting.train_flops_per_token(ref, tc.seq_len)},
        "model": cfg.to_dict(),
        "settings": settings.to_dict(),
        "eval": {"seed": EVAL_SEED_BASE + settings.eval_seed, "sequences_per_task": settings.eval_sequences},
        "train_cpu_seconds": train_cpu,
        "train_wall_seconds": train_wall,
        "cpu_seconds": time.process_time() - t_cpu,
        "wall_seconds": time.perf_counter() - t_wall,
        "provenance": provenance({**run, "settings": settings.to_dict(), "steps": steps}, seed),
    }
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out, result)
    return result

