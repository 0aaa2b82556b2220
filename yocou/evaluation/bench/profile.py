"""Inference profiling: prefill and decode throughput, time to first token, KV bytes and peak memory
against sequence length, one variant at a time (paper Figure 7, Tables 1, 8, 9, 10; docs/design.md section 7).

Protocol (the same for every variant, recorded in each result):

* A length ``N`` is the total context: a prompt of ``N - n_decode`` random tokens is prefilled
  (:func:`yocou.model.generate.prefill`, chunks of ``chunk_size`` with YOCO's early exit), then ``n_decode``
  tokens are decoded greedily (:func:`yocou.model.generate.decode_step`). The cache holds exactly ``N`` tokens.
* Prefill tokens/s = prompt tokens / prefill seconds. Time to first token = prefill + picking the
  first token. Decode tokens/s = ``n_decode`` / decode seconds (prefill excluded).
* ``warmup`` untimed runs at the smallest N per variant, then ``repeats`` timed runs at each N; the
  median is reported, every repeat is kept. Repeats are interleaved across variants (for each N, for each
  repeat, every variant in turn), so changes of load touch all variants alike; process CPU seconds are
  recorded beside wall-clock seconds.
* Weights and cache in one dtype (``bf16`` by default: bf16 weights, not autocast), random init
  (timing does not depend on the weights), batch size ``batch_size`` (and, with ``max_batch``, also the largest
  batch up to it whose cache fits the free memory: :func:`yocou.model.limits.max_decode_batch`, per variant and
  length; ``batch_rule`` says which), one attention dispatch (:func:`yocou.model.attention.attention`; the kernel
  each call site takes is recorded in ``attention_kernels``) and one thread count for all variants.
* Decode path (``decode_path``): ``dynamic`` (:func:`yocou.model.generate.decode_step` over a cache whose reads grow
  with the position) or ``static`` (:class:`yocou.model.generate.StaticDecoder`: fixed shapes, rows prefilled one
  at a time, on CUDA one CUDA graph replayed per step, captured before the timing). ``decode_mode`` says ``eager``
  or ``graphs`` for every row, ``why_eager`` why not graphs.
* Memory: on CPU the peak resident set size sampled every millisecond during the run (``peak_rss_bytes``;
  ``peak_mem_delta_bytes`` is its rise above the resident size before the run); on CUDA
  ``torch.cuda.max_memory_allocated`` after a reset. Timing on CUDA uses CUDA events.
* KV bytes: the real cache's ``nbytes()`` beside :func:`yocou.model.accounting.kv_cache_bytes` (must be equal).
* Each row carries the 1-minute load average before and after it (other work on the machine shows).

CLI::

    python -m yocou.evaluation.bench.profile --run-configs runs/tiny/models/*/run_config.json \\
        --seq-lens 1024 2048 4096 8192 16384 32768 --out results/tiny/profile.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import torch

from yocou.model import accounting
from yocou.model.config import ModelConfig, config_from_dict
from yocou.model.attention import call_sites
from yocou.model.generate import StaticDecoder, decode_step, prefill
from yocou.model.limits import max_decode_batch, new_cache, new_model
from yocou.model.lm import LM
from yocou.utils.io import atomic_write_json, provenance
from yocou.utils.validation import (
    Int,
    NonNegInt,
    PosInt,
    config_dataclass,
    from_mapping,
)

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


@config_dataclass
class ProfileConfig:
    """Settings of one profiling run (config ``eval.profile``).

    Attributes:
        seq_lens: total lengths N in tokens (prompt + decoded), each > ``n_decode``.
        n_decode: tokens decoded after the prefill.
        repeats: timed runs per (variant, N); the median is reported.
        warmup: untimed runs at the smallest N per variant.
        chunk_size: prefill chunk in tokens (the same for every variant).
        dtype: weights and cache dtype.
        batch_size: sequences per run.
        max_batch: also profile at the largest batch up to this many sequences that fits the device
            (``None``: ``batch_size`` only).
        decode_path: ``dynamic`` or ``static`` (module docstring).
        threads: ``torch.set_num_threads`` (``None``: leave as is).
        seed: seeds the random init and the prompt.
    """

    seq_lens: tuple[PosInt, ...]
    n_decode: PosInt = 32
    repeats: PosInt = 3
    warmup: NonNegInt = 1
    chunk_size: PosInt = 512
    dtype: Literal["bf16", "fp32", "fp16"] = "bf16"
    batch_size: PosInt = 1
    max_batch: PosInt | None = None
    decode_path: Literal["dynamic", "static"] = "dynamic"
    threads: PosInt | None = None
    seed: Int = 0

    def __post_init__(self) -> None:
        if not self.seq_lens:
            raise ValueError("ProfileConfig.seq_lens must name at least one length")
        if len(set(self.seq_lens)) != len(self.seq_lens):
            raise ValueError(f"ProfileConfig.seq_lens must be distinct (each length is one row), got {self.seq_lens}")
        if min(self.seq_lens) <= self.n_decode:
            raise ValueError(f"ProfileConfig.seq_lens must all exceed n_decode={self.n_decode}, got {self.seq_lens}")


def profile_config_from_dict(d: Mapping[str, Any]) -> ProfileConfig:
    """Build a :class:`ProfileConfig` from a mapping (``eval.profile``).

    Raises:
        yocou.utils.validation.FieldError: an unknown or missing key, a wrong type or a value out of range.
    """
    return from_mapping(ProfileConfig, d, "ProfileConfig")


# ---------------------------------------------------------------------------
# Timers and memory
# ---------------------------------------------------------------------------
def _rss_bytes() -> int:
    """Resident set size of this process (Linux ``/proc/self/statm``; 0 where unavailable)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _hwm_bytes() -> int | None:
    """Peak resident set size of this process since its last reset (Linux ``VmHWM``); None if unavailable."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_hwm() -> bool:
    """Reset this process's peak RSS to its current RSS (Linux >= 4.0: ``5`` into ``/proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return _hwm_bytes() is not None


class PeakMemory:
    """Context manager: peak memory during its body.

    CUDA: ``max_memory_allocated`` after a reset (``kind = "cuda_max_allocated"``). CPU on Linux: the
    kernel's high-water mark of the resident set, reset on entry (``kind = "cpu_rss_hwm"``): exact and free,
    nothing runs beside the timed work. Elsewhere the resident set sampled every ``interval_s`` by a
    thread (``kind = "cpu_rss_sampled"``), which competes with the kernels for the cores: on 2 cores it
    slowed a YOCO prefill chunk by about 40%.
    After exit: ``peak_bytes`` and ``delta_bytes`` (peak minus the value at entry).
    """

    def __init__(self, device: torch.device, interval_s: float = 1e-3, *, sample: bool = False) -> None:
        self.device = device
        self.interval_s = interval_s
        self.sample = sample
        self.kind = ""  # chosen on every entry
        self.peak_bytes = 0
        self.delta_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0

    def __enter__(self) -> PeakMemory:
        self.kind = "cuda_max_allocated" if self.device.type == "cuda" else "cpu_rss_sampled"
        self._stop.clear()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
        elif not self.sample and _reset_hwm():
            self.kind = "cpu_rss_hwm"
            self._start = self.peak_bytes = _rss_bytes()
        else:
            self._start = self.peak_bytes = _rss_bytes()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, _rss_bytes())
            self._stop.wait(self.interval_s)

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device)
        elif self.kind == "cpu_rss_hwm":
            self.peak_bytes = max(self._start, _hwm_bytes() or 0)
        else:
            self._stop.set()
            assert self._thread is not None
            self._thread.join()
            self.peak_bytes = max(self.peak_bytes, _rss_bytes())
        self.delta_bytes = self.peak_bytes - self._start


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[Any, float]:
    """Run ``fn`` and return ``(result, seconds)``: CUDA events on CUDA, ``perf_counter`` on CPU."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        out = fn()
        end.record()
        torch.cuda.synchronize(device)
        return out, start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def loadavg_1m() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# ---------------------------------------------------------------------------
# One run, one variant
# ---------------------------------------------------------------------------
def run_once(model: LM, seq_len: int, pc: ProfileConfig, device: torch.device, generator: torch.Generator,
             batch_size: int | None = None) -> dict[str, Any]:
    """One prefill of ``seq_len - n_decode`` tokens per row, then ``n_decode`` decode steps, timed separately, at
    ``batch_size`` rows (default ``pc.batch_size``) on ``pc.decode_path``.

    Returns seconds (``prefill_s``, ``ttft_s``, ``decode_s``; ``*_cpu_s`` process CPU seconds), cache bytes
    (``kv_bytes_measured``), peak memory (``peak_rss_bytes`` or CUDA peak, ``peak_mem_delta_bytes``) and the decode
    mode (``eager`` or ``graphs``, ``why_eager``).
    """
    B = batch_size or pc.batch_size
    n_prompt = seq_len - pc.n_decode
    ids = torch.randint(0, model.cfg.vocab_size, (B, n_prompt), generator=generator).to(device)
    dtype = TORCH_DTYPES[pc.dtype]
    with torch.no_grad(), PeakMemory(device) as mem:
        if pc.decode_path == "static":
            dec = StaticDecoder(model, B, seq_len, cache_dtype=dtype)
            cache, do_prefill, do_step = dec.cache, lambda: dec.prefill(list(ids), chunk_size=pc.chunk_size), dec.step
        else:
            dec = None
            cache = new_cache(model, B, seq_len, dtype=dtype)
            do_prefill = lambda: prefill(model, ids, cache, chunk_size=pc.chunk_size)  # noqa: E731
            do_step = lambda t: decode_step(model, t, cache)  # noqa: E731
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        c0 = time.process_time()
        logits, prefill_s = timed(do_prefill, device)
        prefill_cpu_s = time.process_time() - c0
        tok, pick_s = timed(lambda: logits.argmax(-1), device)
        ttft_s = prefill_s + pick_s
        if dec is not None:
            dec.capture()  # untimed: a CUDA graph's warm-up and capture (a no-op off CUDA)

        def _decode() -> torch.Tensor:
            t = tok
            for _ in range(pc.n_decode):
                t = do_step(t).argmax(-1)
            return t

        c0 = time.process_time()
        _, decode_s = timed(_decode, device)
        decode_cpu_s = time.process_time() - c0
        wall_s = time.perf_counter() - t0
    assert (dec.lengths == [seq_len] * B) if dec is not None else cache.pos == seq_len
    return {"prefill_s": prefill_s, "prefill_cpu_s": prefill_cpu_s, "ttft_s": ttft_s, "decode_s": decode_s,
            "decode_cpu_s": decode_cpu_s, "wall_s": wall_s,
            "kv_bytes_measured": cache.nbytes(), "peak_mem_bytes": mem.peak_bytes,
            "peak_mem_delta_bytes": mem.delta_bytes, "mem_kind": mem.kind,
            "decode_mode": dec.mode if dec is not None else "eager",
            "why_eager": dec.why_eager if dec is not None else "decode_path dynamic"}


def profile_variant(cfg: ModelConfig, pc: ProfileConfig, *, variant: str | None = None,
                    device: str | torch.device = "cpu", log: Callable[[dict], None] | None = None
                    ) -> list[dict[str, Any]]:
    """Profile one model config at every N of ``pc.seq_lens``: :func:`profile_models` with one model."""
    return profile_models({variant or cfg.name: cfg}, pc, device=device, log=log)


def profile_models(cfgs: Mapping[str, ModelConfig], pc: ProfileConfig, *, device: str | torch.device = "cpu",
                   log: Callable[[dict], None] | None = None) -> list[dict[str, Any]]:
    """Profile several variants at every N of ``pc.seq_lens`` (see the module docstring).

    Repeats are interleaved (for each N, for each repeat, every variant in turn), so a change of load on
    the machine touches all variants alike and ratios between them stay fair.

    Returns one row per (variant, N, batch rule), variant-major: ``variant, seq_len, prompt_len, n_decode,
    chunk_size, dtype, batch_size, batch_rule (fixed: ``batch_size``; max: the largest that fits), device, n_threads, prefill_s, prefill_cpu_s, prefill_tokens_per_s, ttft_s, decode_s,
    decode_cpu_s, decode_tokens_per_s, decode_ms_per_token, kv_bytes_measured, kv_bytes_analytic, kv_equal,
    peak_mem_bytes, peak_mem_delta_bytes, mem_kind, decode_path, decode_mode, why_eager, attention_kernels, n_repeats, repeats (every repeat's seconds),
    loadavg_1m_before, loadavg_1m_after``. Times in seconds (``*_cpu_s``: process CPU seconds, all threads),
    throughputs in tokens/s (all sequences of the batch), bytes in bytes.
    """
    dev = torch.device(device)
    if pc.threads is not None:
        torch.set_num_threads(pc.threads)
    models = {}
    for name, cfg in cfgs.items():
        torch.manual_seed(pc.seed)
        models[name] = new_model(cfg).to(device=dev, dtype=TORCH_DTYPES[pc.dtype]).eval()
    gen = torch.Generator().manual_seed(pc.seed)
    for _ in range(pc.warmup):
        for m in models.values():
            run_once(m, min(pc.seq_lens), pc, dev, gen)
    dtype = TORCH_DTYPES[pc.dtype]
    rows: list[dict[str, Any]] = []
    for n in pc.seq_lens:
        batches = {name: {"fixed": pc.batch_size} for name in models}
        if pc.max_batch is not None:
            for name, m in models.items():
                b = max_decode_batch(m.cfg, n, dtype=dtype, device=dev, chunk_size=pc.chunk_size, cap=pc.max_batch)
                if b > pc.batch_size:
                    batches[name]["max"] = b
        for rule in ("fixed", "max"):
            todo = {name: bs[rule] for name, bs in batches.items() if rule in bs}
            load0 = loadavg_1m()
            reps: dict[str, list[dict[str, Any]]] = {name: [] for name in todo}
            for _ in range(pc.repeats):
                for name, B in todo.items():
                    reps[name].append(run_once(models[name], n, pc, dev, gen, B))
            load1 = loadavg_1m()
            for name, B in todo.items():
                rows.append(_row(name, models[name].cfg, n, B, rule, pc, dev, reps[name], load0, load1))
                if log is not None:
                    log(rows[-1])
    order = {name: i for i, name in enumerate(models)}
    return sorted(rows, key=lambda r: (order[r["variant"]], r["seq_len"], r["batch_rule"] != "fixed"))


def _row(name: str, cfg: ModelConfig, n: int, B: int, rule: str, pc: ProfileConfig, dev: torch.device,
         reps: list[dict[str, Any]], load0: float | None, load1: float | None) -> dict[str, Any]:
    keys = ("prefill_s", "prefill_cpu_s", "ttft_s", "decode_s", "decode_cpu_s")
    med = {k: statistics.median(r[k] for r in reps) for k in keys}
    n_prompt = n - pc.n_decode
    analytic = accounting.kv_cache_bytes(cfg, n, batch_size=B, dtype=pc.dtype)
    measured = reps[-1]["kv_bytes_measured"]
    return {
        "variant": name, "seq_len": n, "prompt_len": n_prompt, "n_decode": pc.n_decode,
        "chunk_size": pc.chunk_size, "dtype": pc.dtype, "batch_size": B, "batch_rule": rule,
        "device": str(dev), "n_threads": torch.get_num_threads(),
        "prefill_s": med["prefill_s"], "prefill_cpu_s": med["prefill_cpu_s"],
        "prefill_tokens_per_s": B * n_prompt / med["prefill_s"],
        "ttft_s": med["ttft_s"], "decode_s": med["decode_s"], "decode_cpu_s": med["decode_cpu_s"],
        "decode_tokens_per_s": B * pc.n_decode / med["decode_s"],
        "decode_ms_per_token": 1e3 * med["decode_s"] / pc.n_decode,
        "kv_bytes_measured": measured, "kv_bytes_analytic": analytic, "kv_equal": measured == analytic,
        "peak_mem_bytes": max(r["peak_mem_bytes"] for r in reps),
        "peak_mem_delta_bytes": max(r["peak_mem_delta_bytes"] for r in reps), "mem_kind": reps[0]["mem_kind"],
        "decode_path": pc.decode_path, "decode_mode": reps[0]["decode_mode"], "why_eager": reps[0]["why_eager"],
        "attention_kernels": call_sites(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, n,
                                        min((st.window for st in cfg.stages if st.window), default=None), device=dev,
                                        dtype=TORCH_DTYPES[pc.dtype], chunk=pc.chunk_size,
                                        static_decode=pc.decode_path == "static"),
        "n_repeats": pc.repeats,
        "repeats": [{k: r[k] for k in keys} for r in reps],
        "loadavg_1m_before": load0, "loadavg_1m_after": load1,
    }


# ---------------------------------------------------------------------------
# Growth exponents (Table 1 checked by measurement)
# ---------------------------------------------------------------------------
def fit_exponent(n: Sequence[float], y: Sequence[float], *, lo: float | None = None, hi: float | None = None
                 ) -> float:
    """Least-squares slope of ``log y`` against ``log n`` for ``lo <= n <= hi``: ``y ∝ n^slope``.

    Raises:
        ValueError: fewer than two distinct lengths in range, or a non-positive value.
    """
    pts = [(a, b) for a, b in zip(n, y, strict=True) if (lo is None or a >= lo) and (hi is None or a <= hi)]
    if len({a for a, _ in pts}) < 2:
        raise ValueError(f"fit_exponent needs at least two distinct lengths in [{lo}, {hi}], got {pts}")
    if any(a <= 0 or b <= 0 for a, b in pts):
        raise ValueError(f"fit_exponent needs positive lengths and values, got {pts}")
    xs = [math.log(a) for a, _ in pts]
    ys = [math.log(b) for _, b in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (v - my) for x, v in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def fit_linear(n: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``y = intercept + slope · n``; returns ``(slope, intercept)``.

    Raises:
        ValueError: fewer than two distinct lengths.
    """
    if len(set(n)) < 2:
        raise ValueError("fit_linear needs at least two distinct lengths")
    mx, my = sum(n) / len(n), sum(y) / len(y)
    slope = sum((a - mx) * (b - my) for a, b in zip(n, y, strict=True)) / sum((a - mx) ** 2 for a in n)
    return slope, my - slope * mx


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    from yocou.utils.guard import reads, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.bench.profile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-configs", nargs="+", required=True, type=reads(),
                    help="run_config.json of each variant (its 'model' section; weights are random)")
    ap.add_argument("--profile-config", type=reads(), help="JSON/YAML mapping of ProfileConfig fields (overridden by flags)")
    ap.add_argument("--seq-lens", nargs="+", type=int)
    ap.add_argument("--n-decode", type=int)
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--chunk-size", type=int)
    ap.add_argument("--dtype", choices=sorted(TORCH_DTYPES))
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--max-batch", type=int)
    ap.add_argument("--decode-path", choices=["dynamic", "static"])
    ap.add_argument("--threads", type=int)
    from yocou.utils.entry import DEVICE_HELP

    ap.add_argument("--device", default=None, help=DEVICE_HELP)
    ap.add_argument("--out", required=True, type=writes(), help="result JSON (rows + provenance)")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    d: dict[str, Any] = {}
    if a.profile_config:
        from yocou.utils.io import load_config_file
        d.update(load_config_file(a.profile_config) or {})
    for f in ("seq_lens", "n_decode", "repeats", "warmup", "chunk_size", "dtype", "batch_size", "max_batch", "decode_path",
              "threads"):
        if getattr(a, f) is not None:
            d[f] = getattr(a, f)
    pc = profile_config_from_dict(d)
    from yocou.utils.entry import resolve_device

    a.device, _ = resolve_device(a.device)
    from yocou.utils.io import load_config_file
    t0 = time.time()
    cfgs: dict[str, ModelConfig] = {}
    for rc_path in a.run_configs:
        rc = load_config_file(rc_path)
        if not isinstance(rc.get("model"), dict):
            raise ValueError(f"--run-configs {rc_path}: expected a 'model' mapping (a run_config.json of the "
                             f"pipeline), got keys {sorted(rc)}")
        try:
            cfg = config_from_dict(rc["model"])
        except (ValueError, TypeError) as e:
            raise type(e)(f"--run-configs {rc_path}: {e}") from None
        variant = rc.get("variant", cfg.name)
        cfgs[variant if isinstance(variant, str) else cfg.name] = cfg
    rows = profile_models(cfgs, pc, device=a.device,
                          log=lambda r: print(json.dumps({k: v for k, v in r.items() if k != "repeats"}), flush=True))
    bad = [r for r in rows if not r["kv_equal"]]
    if bad:
        raise ValueError("measured KV bytes differ from the formula: " + json.dumps(bad))
    prov = provenance({"profile": dataclasses.asdict(pc), "run_configs": list(a.run_configs), "device": a.device,
                       "attention": "yocou.model.attention.attention (each row's attention_kernels)",
                       "weights": f"random init (seed {pc.seed}), cast to {pc.dtype}"}, pc.seed)
    prov["loadavg"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    prov["wall_s"] = time.time() - t0
    atomic_write_json(a.out, {"rows": rows, "provenance": prov})
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
