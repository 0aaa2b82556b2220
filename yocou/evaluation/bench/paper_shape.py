"""Efficiency at the paper's 1.3B shape on this machine: decode and prefill of Transformer, YOCO, RINS and YOCO-U
(paper Tables 8-10 and Figure 7) beside the hardware's limits measured in the same run (docs/design.md section 7,
"the paper-shape study").

The shapes are the paper config's (``workflows/config/paper.yaml``: Table 7 at 1.3B, the cl100k vocabulary,
RINS and YOCO-U with T = 3); the weights are random (timing does not depend on them) and fp32 (the fast path of a
CPU without bf16 units).

Protocol (recorded in the result):

* **Weights shared within a pair.** YOCO-U's weights have YOCO's names and shapes, and RINS's are the
  Transformer's under other names (its two stages split the 20 layers), so each pair is built once: the second
  model of a pair is made on the meta device and given the first one's tensors (:func:`build_pair`). Two 7.5 GB
  weight sets then fit where four would not (24 GiB). The pairs are measured one after the other; the YOCO over
  Transformer ratio compares numbers of two phases (each phase's load average is in its rows).
* **Decode** at each context length ``N`` of ``decode_lens``: a cache of ``max_len = N`` filled to
  ``N - n_decode`` tokens without a prefill (:func:`yocou.evaluation.bench.hardware.fill_cache`: the work of a step does not
  depend on the cached values), then ``n_decode`` greedy steps, timed together; ``repeats_decode`` repeats
  interleaved across the pair (each repeat rewinds the cache), after one untimed step per model. A variant whose
  cache does not fit beside the weights is not measured; its row says the bytes it would need and the bytes
  available. When both caches fit together they are kept across repeats, else each repeat allocates and frees its
  own (still interleaved). Every cache's bytes are checked against :func:`yocou.model.accounting.kv_cache_bytes`.
* **Prefill** of ``N - n_decode`` random tokens at each ``N`` of ``prefill_lens``
  (:func:`yocou.model.generate.prefill`: chunks of ``chunk_size``, YOCO's early exit), ``repeats_prefill`` repeats
  interleaved across the pair.
* **Filled against prefilled.** At the longest prefill length the cache of the last prefill repeat decodes
  ``n_decode`` steps, interleaved with a filled cache of the same length, ``repeats_check`` times each: the two
  medians must agree within the run's spread, and both caches have the formula's bytes.
* **Limits**: the STREAM triad bandwidth and the fp32 matmul FLOP/s (:mod:`yocou.evaluation.bench.hardware`) measured at the
  start and after each pair. Each row records the bytes a step must read (weights once, and at every application
  of a looped stage) and a prefill's useful FLOPs, so the summary divides them by the time and by the limits.
* The 1-minute load average before and after each measurement is kept; nothing else should run.

Resumable: after each measurement the result so far is written to ``<out>.partial.json``; a rerun with the same
settings keeps the measurements of every phase already finished (a phase is one pair at one length and kind).

CLI::

    python -m yocou.evaluation.bench.paper_shape --paper-config workflows/config/paper.yaml \\
        --study-config workflows/studies/paper_shape.yaml --out results/paper_shape/raw.json
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import torch

from yocou.evaluation.bench.hardware import (
    decode_read_bytes,
    fill_cache,
    matmul_peak,
    prefill_flops,
    triad_bandwidth,
)
from yocou.evaluation.bench.profile import loadavg_1m
from yocou.model import accounting
from yocou.model.config import ModelConfig
from yocou.model.generate import decode_step, prefill
from yocou.model.layers import rope_inv_freq
from yocou.model.limits import new_cache, new_model
from yocou.model.lm import LM
from yocou.utils.io import atomic_write_json, provenance
from yocou.utils.memory import available_bytes, format_bytes
from yocou.utils.validation import (
    Bool,
    Int,
    NonNegInt,
    PosInt,
    Str,
    config_dataclass,
    from_mapping,
)

__all__ = [
    "PAIRS",
    "PaperShapeConfig",
    "build_pair",
    "paper_shape_configs",
    "rins_names_from_transformer",
    "run_study",
    "study_config_from_dict",
]

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

# (base, looped): the second model of each pair takes the first one's weights
PAIRS = (("transformer", "rins"), ("yoco", "yocou"))


@config_dataclass
class PaperShapeConfig:
    """Settings of the paper-shape study (``workflows/studies/paper_shape.yaml``).

    Attributes:
        decode_lens: context lengths N of the decode rows (tokens), each > ``n_decode``.
        prefill_lens: total lengths of the prefill rows (prompt ``N - n_decode`` tokens).
        n_decode: decode steps timed together (one repeat).
        repeats_decode / repeats_prefill / repeats_check: timed repeats per (variant, N).
        chunk_size: prefill chunk (tokens).
        headroom_bytes: memory kept free beside weights and caches (activations, the allocator).
        triad_elems: elements of each of the triad's three fp32 buffers.
        matmul_n: side of the square fp32 matmul of the peak measurement.
        limit_repeats: repeats of each limit measurement.
        threads: ``torch.set_num_threads`` (None: leave as is).
        seed: seeds the weights and the random tokens and caches.
        device: where the models, caches and limit measurements run (``cpu`` or ``cuda``).
        dtype: of the weights and caches: ``fp32`` (a CPU's fast path) or ``bf16`` (a GPU's); the limits'
            matmul runs in it too, the triad in fp32.
        decode_batches: batch sizes B of the decode rows (B sequences decoded per step, each with its own cache of
            N tokens); the rows of B > 1 are the serving reading of Table 9.
        triad_beside: measure the triad bandwidth right before and after each decode block (one N and B, both
            variants of a pair), so each row can be normalised by the bandwidth beside it, not the run's median.
    """

    decode_lens: tuple[PosInt, ...]
    prefill_lens: tuple[PosInt, ...]
    n_decode: PosInt = 8
    repeats_decode: PosInt = 5
    repeats_prefill: PosInt = 2
    repeats_check: PosInt = 5
    chunk_size: PosInt = 512
    headroom_bytes: NonNegInt = 2 * 2 ** 30
    triad_elems: PosInt = 1 << 27
    matmul_n: PosInt = 4096
    limit_repeats: PosInt = 5
    threads: PosInt | None = None
    seed: Int = 0
    device: Str = "cpu"
    dtype: Literal["fp32", "bf16"] = "fp32"
    decode_batches: tuple[PosInt, ...] = (1,)
    triad_beside: Bool = False

    def __post_init__(self) -> None:
        b = self.decode_batches
        if not b or len(set(b)) != len(b):
            raise ValueError(f"PaperShapeConfig.decode_batches must be distinct batch sizes >= 1, got {b}")
        for f in ("decode_lens", "prefill_lens"):
            v = getattr(self, f)
            if not v or len(set(v)) != len(v) or min(v) <= self.n_decode:
                raise ValueError(f"PaperShapeConfig.{f} must be distinct lengths, each > n_decode "
                                 f"({self.n_decode}), got {v}")
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"PaperShapeConfig.device must be cpu or cuda[:i], got {self.device!r}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


def study_config_from_dict(d: Mapping[str, Any]) -> PaperShapeConfig:
    """Build a :class:`PaperShapeConfig` from a mapping (the study's YAML).

    Raises:
        yocou.utils.validation.FieldError: an unknown or missing key, a wrong type or a value out of range.
    """
    return from_mapping(PaperShapeConfig, d, "paper-shape study")


def paper_shape_configs(paper_config: str | Path) -> dict[str, ModelConfig]:
    """The ModelConfigs of the four core variants under the paper config (``core_variants`` of
    ``workflows/config/paper.yaml``), with its vocabulary (``data.vocab_size``).

    Raises:
        ValueError: the config lacks a core variant or a vocabulary size (naming the file).
    """
    from yocou.utils.yamlio import load_yaml
    from yocou.workflow.pipeline import resolve_model

    cfg = load_yaml(paper_config)
    vocab = (cfg.get("data") or {}).get("vocab_size")
    if not isinstance(vocab, int) or vocab < 1:
        raise ValueError(f"{paper_config}: data.vocab_size must be a positive integer, got {vocab!r}")
    out = {}
    for v in (x for pair in PAIRS for x in pair):
        try:
            out[v] = resolve_model(cfg, v, vocab_size=vocab)
        except ValueError as e:
            raise ValueError(f"{paper_config}: {e}") from None
    return out


def rins_names_from_transformer(transformer: ModelConfig, rins: ModelConfig) -> dict[str, str]:
    """``{rins parameter name: transformer parameter name}``: RINS's stages take the Transformer's layers in order
    (stage 0 its first layers, stage 1 the rest); the embedding, final norm and LM head keep their names.

    Raises:
        ValueError: the two have different layer counts or shapes.
    """
    if sum(s.n_layers for s in rins.stages) != sum(s.n_layers for s in transformer.stages) or any(
            s.kind != "self" for s in (*rins.stages, *transformer.stages)) or len(transformer.stages) != 1:
        raise ValueError(f"{rins.name} cannot take {transformer.name}'s weights: different layer stacks")
    with torch.device("meta"):
        keys_t = list(LM(transformer).state_dict())
        keys_r = list(LM(rins).state_dict())
    layer_map, i = {}, 0
    for si, st in enumerate(rins.stages):
        for j in range(st.n_layers):
            layer_map[f"stages.{si}.{j}."] = f"stages.0.{i}."
            i += 1
    out = {}
    for k in keys_r:
        pre = ".".join(k.split(".")[:3]) + "."
        out[k] = layer_map[pre] + k[len(pre):] if k.startswith("stages.") else k
    if sorted(out.values()) != sorted(keys_t):
        raise ValueError(f"{rins.name} cannot take {transformer.name}'s weights: names do not correspond")
    return out


def build_pair(base: ModelConfig, looped: ModelConfig, *, seed: int, dtype: torch.dtype = torch.float32,
               device: str | torch.device = "cpu") -> tuple[LM, LM]:
    """``(base model, looped model)`` sharing one set of weights (random init of ``base`` with ``seed``).

    A model with the base's parameter names (YOCO-U of YOCO) takes its tensors under the same names; otherwise
    the names come from :func:`rins_names_from_transformer` (RINS of the Transformer). Every parameter of the looped model *is* a tensor of the base model
    (no copy).

    Raises:
        ValueError: the weights do not correspond (names or shapes).
    """
    torch.manual_seed(seed)
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.manual_seed(seed)
    with dev:  # initialised where it runs (1.9B parameters: no copy through the host)
        a = new_model(base).to(dtype=dtype).eval()
    sd = a.state_dict()
    with torch.device("meta"):
        b = LM(looped)
    want = b.state_dict()
    names = {k: k for k in sd} if set(want) == set(sd) else rins_names_from_transformer(base, looped)
    if set(names) != set(want) or any(tuple(want[k].shape) != tuple(sd[v].shape) for k, v in names.items()):
        raise ValueError(f"{looped.name} cannot take {base.name}'s weights: names or shapes differ")
    b.load_state_dict({k: sd[v] for k, v in names.items()}, assign=True, strict=True)
    b.rope_inv_freq = rope_inv_freq(looped.head_dim, looped.rope_theta, dev)
    return a, b.eval()


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------
def _fits(nbytes: int, headroom: int, device: str = "cpu") -> tuple[bool, int | None]:
    if device.startswith("cuda"):  # blocks freed to PyTorch's cache are free to us, not to mem_get_info
        gc.collect()
        torch.cuda.empty_cache()
    got = available_bytes(device)
    if got is None:
        return True, None
    return nbytes + headroom <= got[0], got[0]


def _kv_bytes(cfg: ModelConfig, n: int, dtype: torch.dtype = torch.float32) -> int:
    return accounting.kv_cache_bytes(cfg, n, dtype=dtype)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _limits(sc: PaperShapeConfig, where: str) -> dict[str, Any]:
    bw = triad_bandwidth(sc.triad_elems, sc.limit_repeats, device=sc.device)
    mm = matmul_peak(sc.matmul_n, sc.limit_repeats, dtype=sc.torch_dtype, device=sc.device)
    return {"where": where, "triad": bw, "matmul": mm, "loadavg_1m": loadavg_1m()}


class _Run:
    """Rows so far, the finished phases and the partial file."""

    def __init__(self, out: Path, settings: dict[str, Any], log: Callable[[str], None]) -> None:
        self.partial = out.with_name(out.name + ".partial.json")
        # as the partial file holds them (tuples become lists), so that a resume compares like with like
        settings = json.loads(json.dumps(settings))
        self.settings, self.log = settings, log
        self.rows: list[dict[str, Any]] = []
        self.limits: list[dict[str, Any]] = []
        self.done: set[str] = set()
        if self.partial.is_file():
            try:
                old = json.loads(self.partial.read_text())
            except (OSError, ValueError):
                old = None
            if isinstance(old, dict) and old.get("settings") == settings:
                self.rows, self.limits, self.done = old["rows"], old["limits"], set(old["done"])
                log(f"resuming from {self.partial}: {len(self.done)} phases done")
            else:
                log(f"{self.partial} holds other settings: starting over")

    def save(self) -> None:
        atomic_write_json(self.partial, {"settings": self.settings, "rows": self.rows, "limits": self.limits,
                                         "done": sorted(self.done)})

    def finish(self, phase: str, rows: list[dict[str, Any]]) -> None:
        self.rows += rows
        self.done.add(phase)
        self.save()


def _time_decode(model: LM, cache: Any, n_start: int, n_steps: int, tok: torch.Tensor) -> float:
    cache.pos = n_start
    dev = str(tok.device)
    _sync(dev)
    t0 = time.perf_counter()
    t = tok
    for _ in range(n_steps):
        t = decode_step(model, t, cache).argmax(-1)
    _sync(dev)
    return time.perf_counter() - t0


def _read_bytes(cfg: ModelConfig, n0: int, n_steps: int, dtype: str = "fp32", batch: int = 1) -> dict[str, float]:
    """Mean over the timed steps (contexts ``n0 .. n0 + n_steps - 1``) of the bytes each must read (``batch``
    sequences a step)."""
    once = [decode_read_bytes(cfg, n0 + i, dtype=dtype, batch_size=batch)["total"] for i in range(n_steps)]
    every = [decode_read_bytes(cfg, n0 + i, dtype=dtype, weights="per_application", batch_size=batch)["total"]
             for i in range(n_steps)]
    return {"read_bytes_once": statistics.mean(once), "read_bytes_per_application": statistics.mean(every),
            "weight_bytes_once": decode_read_bytes(cfg, n0, dtype=dtype)["weights"],
            "weight_bytes_per_application": decode_read_bytes(cfg, n0, dtype=dtype,
                                                              weights="per_application")["weights"]}


def _summary_row(base: dict[str, Any], secs: list[float], tokens: int) -> dict[str, Any]:
    med = statistics.median(secs)
    return {**base, "status": "measured", "seconds": secs, "median_s": med, "min_s": min(secs), "max_s": max(secs),
            "tokens": tokens, "tokens_per_s": tokens / med}


@torch.no_grad()
def _decode_phase(models: dict[str, LM], n: int, sc: PaperShapeConfig, weights_bytes: int, gen: torch.Generator,
                  log: Callable[[str], None], batch: int = 1) -> list[dict[str, Any]]:
    n0 = n - sc.n_decode
    need = {v: batch * _kv_bytes(m.cfg, n, sc.torch_dtype) for v, m in models.items()}
    where = f"N={n}" + (f" B={batch}" if batch > 1 else "")
    rows, fit = [], []
    for v in models:
        ok, avail = _fits(need[v], sc.headroom_bytes, sc.device)
        if ok:
            fit.append(v)
        else:
            rows.append({"variant": v, "kind": "decode", "seq_len": n, "batch": batch, "status": "not_fitted",
                         "kv_bytes_formula": need[v], "needs_bytes": need[v] + sc.headroom_bytes,
                         "available_bytes": avail, "weights_resident_bytes": weights_bytes,
                         "why": f"its cache ({format_bytes(need[v])}) and {format_bytes(sc.headroom_bytes)} of "
                                f"headroom do not fit in the {format_bytes(avail or 0)} available beside the "
                                f"resident weights ({format_bytes(weights_bytes)})"})
            log(f"decode {where} {v}: not measured: {rows[-1]['why']}")
    hold = _fits(sum(need[v] for v in fit), sc.headroom_bytes, sc.device)[0]
    caches: dict[str, Any] = {}
    measured_bytes: dict[str, int] = {}
    fill_s: dict[str, float] = {}

    def make(v: str) -> Any:
        t0 = time.perf_counter()
        c = fill_cache(new_cache(models[v], batch, n), n0, generator=gen)
        fill_s[v] = time.perf_counter() - t0
        measured_bytes[v] = c.nbytes()
        if measured_bytes[v] != need[v]:
            raise AssertionError(f"{v} cache at {where}: {measured_bytes[v]} bytes, the formula says {need[v]}")
        return c

    tok = torch.randint(0, next(iter(models.values())).cfg.vocab_size, (batch,), generator=gen,
                        device=gen.device)
    triad = [triad_bandwidth(sc.triad_elems, 3, device=sc.device)["bytes_per_s"]] if sc.triad_beside and fit else []
    load0 = loadavg_1m()
    secs: dict[str, list[float]] = {v: [] for v in fit}
    for v in fit:  # one untimed step per model
        c = caches[v] = make(v)
        _time_decode(models[v], c, n0, 1, tok)
        if not hold:
            del caches[v], c
            gc.collect()
    for r in range(sc.repeats_decode):
        for v in fit:
            c = caches[v] if hold else make(v)
            secs[v].append(_time_decode(models[v], c, n0, sc.n_decode, tok))
            del c
            if not hold:
                gc.collect()
        log(f"decode {where} repeat {r + 1}/{sc.repeats_decode}: "
            + ", ".join(f"{v} {1e3 * secs[v][-1] / sc.n_decode:.0f} ms/token" for v in fit))
    load1 = loadavg_1m()
    caches.clear()
    gc.collect()
    if triad:
        triad.append(triad_bandwidth(sc.triad_elems, 3, device=sc.device)["bytes_per_s"])
    for v in fit:
        cfg = models[v].cfg
        base = {"variant": v, "kind": "decode", "seq_len": n, "batch": batch, "n_decode": sc.n_decode,
                "cache": "filled", "interleaved_with": [x for x in fit if x != v], "caches_held": hold,
                "kv_bytes_measured": measured_bytes[v], "kv_bytes_formula": need[v], "fill_s": fill_s[v],
                **_read_bytes(cfg, n0, sc.n_decode, sc.dtype, batch), "loadavg_1m_before": load0,
                "loadavg_1m_after": load1,
                **({"triad_beside_bytes_per_s": triad} if triad else {})}
        rows.append(_summary_row(base, secs[v], sc.n_decode * batch))
    return rows


@torch.no_grad()
def _prefill_phase(models: dict[str, LM], n: int, sc: PaperShapeConfig, gen: torch.Generator, check: bool,
                   log: Callable[[str], None]) -> list[dict[str, Any]]:
    n_prompt = n - sc.n_decode
    vocab = next(iter(models.values())).cfg.vocab_size
    secs: dict[str, list[float]] = {v: [] for v in models}
    real: dict[str, Any] = {}
    load0 = loadavg_1m()
    for r in range(sc.repeats_prefill):
        for v, m in models.items():
            ids = torch.randint(0, vocab, (1, n_prompt), generator=gen, device=gen.device)
            cache = new_cache(m, 1, n)
            _sync(sc.device)
            t0 = time.perf_counter()
            prefill(m, ids, cache, chunk_size=sc.chunk_size)
            _sync(sc.device)
            secs[v].append(time.perf_counter() - t0)
            if check and r == sc.repeats_prefill - 1:
                real[v] = cache
            del cache
        log(f"prefill N={n} repeat {r + 1}/{sc.repeats_prefill}: "
            + ", ".join(f"{v} {secs[v][-1]:.1f} s" for v in models))
    load1 = loadavg_1m()
    rows = []
    for v, m in models.items():
        fl = prefill_flops(m.cfg, n_prompt)
        base = {"variant": v, "kind": "prefill", "seq_len": n, "prompt_len": n_prompt, "chunk_size": sc.chunk_size,
                "interleaved_with": [x for x in models if x != v], "flop": fl["total"], "flop_matmul": fl["matmul"],
                "flop_attention": fl["attention"], "loadavg_1m_before": load0, "loadavg_1m_after": load1}
        rows.append(_summary_row(base, secs[v], n_prompt))
    if check:
        rows += _check_phase(models, real, n, sc, gen, log)
    return rows


@torch.no_grad()
def _check_phase(models: dict[str, LM], real: dict[str, Any], n: int, sc: PaperShapeConfig, gen: torch.Generator,
                 log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Decode from the last prefill's cache and from a filled cache of the same length, interleaved."""
    n0 = n - sc.n_decode
    filled = {v: fill_cache(new_cache(m, 1, n), n0, generator=gen) for v, m in models.items()}
    tok = torch.randint(0, next(iter(models.values())).cfg.vocab_size, (1,), generator=gen,
                        device=gen.device)
    secs = {(v, k): [] for v in models for k in ("prefilled", "filled")}
    for v, m in models.items():  # one untimed step each
        for c in (real[v], filled[v]):
            _time_decode(m, c, n0, 1, tok)
    load0 = loadavg_1m()
    for r in range(sc.repeats_check):
        for v, m in models.items():
            for k, c in (("prefilled", real[v]), ("filled", filled[v])):
                secs[v, k].append(_time_decode(m, c, n0, sc.n_decode, tok))
        log(f"check N={n} repeat {r + 1}/{sc.repeats_check}: " + ", ".join(
            f"{v} {k} {1e3 * secs[v, k][-1] / sc.n_decode:.0f} ms/token" for v in models
            for k in ("prefilled", "filled")))
    load1 = loadavg_1m()
    rows = []
    for v, m in models.items():
        for k, c in (("prefilled", real[v]), ("filled", filled[v])):
            base = {"variant": v, "kind": "decode_check", "seq_len": n, "n_decode": sc.n_decode, "cache": k,
                    "kv_bytes_measured": c.nbytes(), "kv_bytes_formula": _kv_bytes(m.cfg, n, sc.torch_dtype),
                    **_read_bytes(m.cfg, n0, sc.n_decode, sc.dtype), "loadavg_1m_before": load0,
                    "loadavg_1m_after": load1}
            rows.append(_summary_row(base, secs[v, k], sc.n_decode))
    return rows


def _decode_phase_name(base: str, looped: str, n: int, batch: int) -> str:
    """A decode block's name in the partial file (batch 1 keeps the name it had before batches existed)."""
    return f"{base}+{looped}:decode:{n}" + (f":b{batch}" if batch > 1 else "")


def run_study(cfgs: Mapping[str, ModelConfig], sc: PaperShapeConfig, out: str | Path, *,
              log: Callable[[str], None] = print, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the study (module docstring) and write ``out`` (rows, limits, provenance); returns what it wrote.

    Args:
        cfgs: ModelConfig of each variant of :data:`PAIRS`.
        sc: the study's settings.
        out: result JSON; ``<out>.partial.json`` holds the measurements so far and is removed at the end.
        settings: recorded with the result (and compared on resume); default: ``sc`` and the configs.

    Raises:
        ValueError: a variant of :data:`PAIRS` missing from ``cfgs``.
    """
    missing = [v for pair in PAIRS for v in pair if v not in cfgs]
    if missing:
        raise ValueError(f"paper-shape study: no config for variant(s) {missing}")
    out = Path(out)
    if sc.threads is not None:
        torch.set_num_threads(sc.threads)
    settings = settings or {"study": dataclasses.asdict(sc), "models": {v: c.to_dict() for v, c in cfgs.items()}}
    run = _Run(out, settings, log)
    t_start = time.time()
    gen = torch.Generator(device=sc.device).manual_seed(sc.seed)  # tokens and caches are drawn where they live
    if "limits:start" not in run.done:
        run.limits.append(_limits(sc, "start"))
        run.finish("limits:start", [])
    check_len = max(sc.prefill_lens)
    for base, looped in PAIRS:
        phases = [_decode_phase_name(base, looped, n, b) for n in sc.decode_lens for b in sc.decode_batches] + [
            f"{base}+{looped}:prefill:{n}" for n in sorted(sc.prefill_lens)]
        if all(p in run.done for p in phases):
            continue
        t0 = time.perf_counter()
        models = dict(zip((base, looped), build_pair(cfgs[base], cfgs[looped], seed=sc.seed, dtype=sc.torch_dtype,
                                                     device=sc.device)))
        wbytes = sum(p.nbytes for p in models[base].parameters())
        log(f"built {base} and {looped} ({format_bytes(wbytes)} of shared {sc.dtype} weights) in "
            f"{time.perf_counter() - t0:.0f} s")
        for n in sc.decode_lens:
            for b in sc.decode_batches:
                ph = _decode_phase_name(base, looped, n, b)
                if ph not in run.done:
                    run.finish(ph, _decode_phase(models, n, sc, wbytes, gen, log, batch=b))
        for n in sorted(sc.prefill_lens):
            ph = f"{base}+{looped}:prefill:{n}"
            if ph not in run.done:
                run.finish(ph, _prefill_phase(models, n, sc, gen, n == check_len, log))
        del models
        gc.collect()
        if sc.device.startswith("cuda"):
            torch.cuda.empty_cache()
        if f"limits:{base}+{looped}" not in run.done:
            run.limits.append(_limits(sc, f"after {base}+{looped}"))
            run.finish(f"limits:{base}+{looped}", [])
    prov = provenance({"paper_shape": settings["study"], "models": settings["models"],
                       "weights": f"random init (seed {sc.seed}), {sc.dtype}, one set per pair, on {sc.device}",
                       "attention": "torch.nn.functional.scaled_dot_product_attention (default backend)"}, sc.seed)
    prov["loadavg"] = list(__import__("os").getloadavg())
    prov["wall_s_this_process"] = time.time() - t_start
    result = {"rows": run.rows, "limits": run.limits, "provenance": prov}
    atomic_write_json(out, result)
    run.partial.unlink(missing_ok=True)
    return result


def main(argv: list[str] | None = None) -> int:
    from yocou.utils.guard import reads, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.bench.paper_shape", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paper-config", required=True, type=reads(), help="the paper scale's config (its core variants' shapes)")
    ap.add_argument("--study-config", required=True, type=reads(), help="YAML of PaperShapeConfig fields")
    ap.add_argument("--out", required=True, type=writes(), help="result JSON (rows, limits, provenance)")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args
    from yocou.utils.yamlio import load_yaml

    check_args(a)
    d = load_yaml(a.study_config)
    if not isinstance(d, dict):
        raise ValueError(  # noqa: TRY004 (bad input: one line, exit 2)
            f"--study-config {a.study_config}: expected a mapping of PaperShapeConfig fields")
    try:
        sc = study_config_from_dict(d)
    except (ValueError, TypeError) as e:
        raise type(e)(f"--study-config {a.study_config}: {e}") from None
    cfgs = paper_shape_configs(a.paper_config)
    t0 = time.time()
    run_study(cfgs, sc, a.out, log=lambda s: print(f"[{time.time() - t0:7.0f} s] {s}", file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
