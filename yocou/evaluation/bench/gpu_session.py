"""The prepared GPU check: one command, under 10 minutes on one H100, each step in its own process under its own time
limit, each result written as soon as it is measured, so a cut-off run leaves what it finished::

    python -m yocou.evaluation.bench.gpu_session                        # on the GPU: results/gpu/<device>/
    python -m yocou.evaluation.bench.gpu_session --cpu-smoke --out DIR  # the same steps at tiny shapes on CPU

Steps (:data:`STEPS`, in this order, each ``<step>.json`` in the output folder; ``session.json`` lists every step's
status, exit code and seconds, rewritten after each; exit status 1 when a step failed or ran out of time):

* ``env``: torch, CUDA, cuDNN, the device, its memory, the host (:func:`yocou.utils.io.provenance`).
* ``prefill_exit``: YOCO's and YOCO-U's chunked prefill runs the K̂V̂ maker on every chunk and the cross-decoder
  on the final chunk only, for one position (forward hooks count the calls and their lengths; paper Table 1).
* ``kernels``: each attention call site (training, prefill chunk and decode; global and window; the static decode's
  masked read) at the paper's shapes under ``torch.profiler``, for each backend: the aten ops that compute attention
  (:data:`KEY_OPS`) and the device kernels it ran, beside :func:`yocou.model.attention.call_sites`' prediction.
* ``serving``: the four core variants at the paper's 1.3B shapes (``workflows/config/paper.yaml``, random weights,
  bf16): prefill tokens/s at B = 1 (chunked, early exit) and decode tokens/s at B in {1, 16, 64} over a cache filled
  as a prefill of N tokens would (:func:`fill_static`) through :class:`yocou.model.generate.StaticDecoder` (CUDA
  graphs; the mode each row ran in is recorded), the dynamic eager decode at B = 1 beside it, at N in {8192, 32768};
  a batch whose cache does not fit is a row marked so. Ratios YOCO-U/YOCO and RINS/Transformer beside the paper's
  Tables 8-9 (:func:`serving_ratios`).
* ``train_step``: :mod:`yocou.evaluation.bench.train_step` (the 1.3B YOCO-U at 8,192 tokens in bf16, eager and
  compiled; flex against sdpa forward and backward; tokens/s, MFU, peak memory against the planner).
* ``correctness``: :func:`yocou.evaluation.bench.gpu_check.correctness` (bf16 against fp32, decode against the full
  forward, cache bytes against the formula, training loss and gradients against the CPU).

``--cpu-smoke`` runs every step at the smoke scale's shapes on the CPU in well under two minutes (the test suite
does: tests/test_gpu_session.py), so the script is known to run before a GPU is lent. The result format is
:data:`SESSION_SCHEMA` (JSON Schema); GPU rows render beside the CPU ones through
:func:`yocou.results.render.gpu_rows.gpu_rows`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

#: Each step's time limit in seconds on the GPU (their sum stays under the 10-minute call; measured times go to
#: benchmarks/README.md once a GPU ran it) and with ``--cpu-smoke``.
STEPS: dict[str, tuple[int, int]] = {"env": (30, 60), "prefill_exit": (30, 60), "kernels": (120, 90),
                                     "serving": (180, 120), "train_step": (150, 120), "correctness": (50, 120)}

#: The shapes of each mode: the config the four core variants come from, lengths, batches, decode steps, repeats.
SHAPES = {"gpu": {"config": "workflows/config/paper.yaml", "seq_lens": (8192, 32768), "batches": (1, 16, 64),
                  "n_decode": 32, "repeats": 2, "chunk": 4096, "dtype": torch.bfloat16},
          "cpu-smoke": {"config": "workflows/config/smoke.yaml", "seq_lens": (64, 128), "batches": (1, 2, 4),
                        "n_decode": 4, "repeats": 1, "chunk": 32, "dtype": torch.float32}}

#: The aten ops that say which attention computation ran (the rest are views and copies).
KEY_OPS = re.compile(r"attention|flex|softmax|bmm|matmul|unfold|masked_fill")

STATUS = ("passed", "failed", "timeout", "skipped")

SESSION_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["mode", "device", "steps", "status"],
    "properties": {
        "mode": {"enum": list(SHAPES)},
        "device": {"type": "string", "minLength": 1},
        "status": {"enum": ["passed", "failed"]},
        "steps": {"type": "array", "items": {
            "type": "object", "required": ["step", "status", "seconds", "limit_s"],
            "properties": {"step": {"enum": list(STEPS)}, "status": {"enum": list(STATUS)},
                           "seconds": {"type": "number", "minimum": 0}, "limit_s": {"type": "integer", "minimum": 1},
                           "exit_code": {"type": ["integer", "null"]}, "error": {"type": ["string", "null"]},
                           "result": {"type": ["string", "null"]}}}},
    },
}


def device_slug(device: torch.device) -> str:
    """The folder name of a device's results: ``nvidia-h100-80gb-hbm3`` (CUDA), ``cpu-smoke`` otherwise."""
    if device.type != "cuda":
        return "cpu-smoke"
    return re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(device).lower()).strip("-")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], Any], device: torch.device) -> float:
    """Seconds of ``fn()`` (CUDA events on CUDA)."""
    if device.type == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize(device)
        return a.elapsed_time(b) / 1e3
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def core_configs(mode: str) -> dict:
    """``{variant: ModelConfig}`` of the four core variants at the mode's shapes."""
    from yocou.evaluation.bench.paper_shape import paper_shape_configs

    return paper_shape_configs(SHAPES[mode]["config"])


def _model(cfg, device: torch.device, dtype: torch.dtype):
    from yocou.model.limits import new_model

    torch.manual_seed(0)
    with torch.device(device):
        return new_model(cfg).to(dtype).eval()


# -- steps -------------------------------------------------------------------------------------------------------
def step_env(mode: str, device: torch.device) -> dict[str, Any]:
    from yocou.utils.io import provenance

    env: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                           "device": str(device), "device_count": torch.cuda.device_count()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        env.update(name=p.name, capability=f"{p.major}.{p.minor}", total_memory_bytes=p.total_memory,
                   multiprocessors=p.multi_processor_count)
    return {"env": env, "provenance": provenance({"gpu_session": {"mode": mode}}, None), "passed": True}


def step_prefill_exit(mode: str, device: torch.device) -> dict[str, Any]:
    """Count the K̂V̂ maker's and the cross layers' calls (and their query lengths) over a chunked prefill."""
    from yocou.model.generate import prefill
    from yocou.model.limits import new_cache
    from yocou.model.lm import CrossLayer, SharedKV

    shp = SHAPES[mode]
    rows = []
    for name in ("yoco", "yocou"):
        cfg = core_configs(mode)[name]
        m = _model(cfg, device, shp["dtype"])
        seen: dict[str, list[int]] = {"kv": [], "cross": []}
        hooks = [mod.register_forward_pre_hook(lambda _m, args, k=("kv" if isinstance(mod, SharedKV) else "cross"):
                                               seen[k].append(int(args[0].shape[1])))
                 for mod in m.modules() if isinstance(mod, (SharedKV, CrossLayer))]
        n_chunks, chunk = 3, min(shp["chunk"], 512)
        ids = torch.randint(0, cfg.vocab_size, (1, n_chunks * chunk), device=device)
        with torch.no_grad():
            prefill(m, ids, new_cache(m, 1, ids.shape[1]), chunk_size=chunk)
        for h in hooks:
            h.remove()
        n_cross = sum(st.n_layers for st in cfg.stages if st.kind == "cross")
        ok = seen["kv"] == [chunk] * n_chunks and seen["cross"] == [1] * n_cross
        rows.append({"variant": name, "chunk": chunk, "n_chunks": n_chunks, "kv_maker_query_lens": seen["kv"],
                     "cross_query_lens": seen["cross"], "cross_layers": n_cross, "passed": ok})
    return {"rows": rows, "passed": all(r["passed"] for r in rows)}


def step_kernels(mode: str, device: torch.device) -> dict[str, Any]:
    """Each attention call site at the YOCO-U shapes under the profiler, per backend: its aten ops and kernels."""
    from torch.profiler import ProfilerActivity, profile

    from yocou.model import attention as A

    shp = SHAPES[mode]
    cfg = core_configs(mode)["yocou"]
    W = min(st.window for st in cfg.stages if st.window)
    N, C, dt = shp["seq_lens"][0], min(shp["chunk"], shp["seq_lens"][0]), torch.bfloat16
    H, G, Dh = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim

    def t(h: int, n: int) -> torch.Tensor:
        return torch.randn(1, h, n, Dh, device=device, dtype=dt)

    mask = (torch.arange(N, device=device) < N - 1)[None, None, None, :]
    sites = {"train/global": (t(H, N), t(G, N), {}), "train/window": (t(H, N), t(G, N), {"window": W}),
             "prefill/global": (t(H, C), t(G, 2 * C), {}), "prefill/window": (t(H, C), t(G, W - 1 + C), {"window": W}),
             "decode": (t(H, 1), t(G, N), {}), "decode/static": (t(H, 1), t(G, N), {"key_mask": mask})}
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out: dict[str, Any] = {"variant": cfg.name, "seq_len": N, "chunk": C, "window": W, "dtype": "bf16", "sites": {}}
    for backend in A.BACKENDS:
        pred = A.call_sites(H, G, Dh, N, W, device=device, dtype=dt, backend=backend, chunk=C)
        for site, (q, k, kw) in sites.items():
            try:
                with torch.no_grad():
                    A.attention(q, k, k, backend=backend, **kw)  # warm-up (compiles flex on CUDA)
                    _sync(device)
                    with profile(activities=acts) as prof:
                        A.attention(q, k, k, backend=backend, **kw)
                        _sync(device)
                ev = prof.key_averages()
                aten = sorted({e.key for e in ev if e.key.startswith("aten::") and KEY_OPS.search(e.key)})
                kern = sorted({e.key for e in ev if getattr(e, "device_type", None) is not None
                               and "CUDA" in str(e.device_type) and not e.key.startswith(("aten::", "cuda"))})
                row = {"aten_ops": aten, "device_kernels": kern[:20]}
            except Exception as e:  # noqa: BLE001 (a call site that fails is a result, named)
                row = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            out["sites"][f"{backend}/{site}"] = {**row, "predicted": pred.get(site.replace("/static", ""))}
    return {**out, "passed": not any("error" in r for r in out["sites"].values())}


def fill_static(dec, n_ctx: int, generator: torch.Generator | None = None) -> None:
    """Fill a :class:`~yocou.model.generate.StaticDecoder`'s cache as a prefill of ``n_ctx`` tokens per row would
    (random normal keys in every position it writes; decode time does not depend on their values)."""
    for slot in dec.cache.slots.values():
        n = n_ctx if slot.window is None else min(n_ctx, slot.window)
        for t in (slot.k_BGSD, slot.v_BGSD):
            t[:, :, :n].normal_(generator=generator)
    dec.cache.pos_B.fill_(n_ctx)
    dec.lengths = [n_ctx] * dec.cache.batch_size


def serving_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """YOCO-U/YOCO and RINS/Transformer of each measured throughput at each (N, B, path), beside the paper's ratio
    of Tables 8 (prefill) and 9 (decode) at that N where it prints one (GPU, 1.3B, batch not stated)."""
    from yocou.evaluation.bench.paper_shape import PAIRS
    from yocou.results.names import paper_row
    from yocou.results.reported import load_table

    paper = {8: load_table(8), 9: load_table(9)}
    key = {(r["variant"], r["phase"], r["seq_len"], r["batch_size"], r["path"]): r for r in rows if "tokens_per_s" in r}
    out = []
    for (v, phase, n, b, path), r in key.items():
        for base, looped in PAIRS:
            if v != looped or (base, phase, n, b, path) not in key:
                continue
            table = 8 if phase == "prefill" else 9
            pa, pb = paper_row(f"table{table}", looped), paper_row(f"table{table}", base)
            p = paper[table]
            ga = p[(p["model"] == pa) & (p["seq_len"] == n)]["value"] if pa else []
            gb = p[(p["model"] == pb) & (p["seq_len"] == n)]["value"] if pb else []
            out.append({"ratio": f"{looped}/{base}", "phase": phase, "seq_len": n, "batch_size": b, "path": path,
                        "mode": r.get("mode"), "value": r["tokens_per_s"] / key[base, phase, n, b, path]["tokens_per_s"],
                        "paper": float(ga.iloc[0] / gb.iloc[0]) if len(ga) and len(gb) else None})
    return out


def step_serving(mode: str, device: torch.device, write: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    from yocou.model import accounting
    from yocou.model.generate import StaticDecoder, decode_step, prefill
    from yocou.model.limits import max_decode_batch, new_cache

    shp = SHAPES[mode]
    dt, nd = shp["dtype"], shp["n_decode"]
    g = torch.Generator(device=device).manual_seed(0)
    res: dict[str, Any] = {"rows": [], "dtype": str(dt).replace("torch.", ""), "n_decode": nd}
    for name, cfg in core_configs(mode).items():
        m = _model(cfg, device, dt)
        for n in shp["seq_lens"]:
            base = {"variant": name, "seq_len": n, "kv_bytes_per_row": accounting.kv_cache_bytes(cfg, n, dtype=dt)}
            cache = new_cache(m, 1, n)
            ids = torch.randint(0, cfg.vocab_size, (1, n - nd), device=device)
            secs = []
            for _ in range(shp["repeats"]):
                cache.pos = 0
                secs.append(_timed(lambda: prefill(m, ids, cache, chunk_size=shp["chunk"]), device))
            res["rows"].append({**base, "phase": "prefill", "batch_size": 1, "path": "chunked", "mode": "eager",
                                "seconds": min(secs), "tokens_per_s": (n - nd) / min(secs)})
            tok = torch.zeros(1, dtype=torch.int64, device=device)
            secs = []
            for _ in range(shp["repeats"]):
                cache.pos = n - nd  # after the prefill: the same nd positions rewritten each repeat
                secs.append(_timed(lambda: [decode_step(m, tok, cache) for _ in range(nd)], device))
            res["rows"].append({**base, "phase": "decode", "batch_size": 1, "path": "dynamic", "mode": "eager",
                                "seconds": min(secs), "tokens_per_s": nd / min(secs)})
            del cache
            for b in shp["batches"]:
                fits = max_decode_batch(cfg, n, dtype=dt, device=device, chunk_size=shp["chunk"], cap=b)
                row = {**base, "phase": "decode", "batch_size": b, "path": "static"}
                if fits < b:
                    res["rows"].append({**row, "skipped": f"the cache of {b} rows does not fit (at most {fits})"})
                    continue
                dec = StaticDecoder(m, b, n, cache_dtype=dt)
                fill_static(dec, n - nd, g)
                dec.capture()
                tok = torch.zeros(b, dtype=torch.int64, device=device)
                times = []
                for _ in range(shp["repeats"]):
                    fill_static(dec, n - nd)
                    times.append(_timed(lambda: [dec.step(tok) for _ in range(nd)], device))
                res["rows"].append({**row, "mode": dec.mode, "why_eager": dec.why_eager, "seconds": min(times),
                                    "tokens_per_s": b * nd / min(times)})
                del dec
            write(res)
        del m
        if device.type == "cuda":
            torch.cuda.empty_cache()
    res["ratios"] = serving_ratios(res["rows"])
    res["passed"] = True
    return res


def step_train_step(mode: str, device: torch.device, out: Path) -> dict[str, Any]:
    from yocou.evaluation.bench import train_step

    args = ["--out", str(out / "train_step"), "--device", str(device)] + (["--dry"] if mode == "cpu-smoke" else [])
    rc = train_step.main(args)
    got = json.loads((out / "train_step" / "train_step.json").read_text())
    return {**{k: v for k, v in got.items() if k != "provenance"}, "passed": rc == 0}


def step_correctness(mode: str, device: torch.device) -> dict[str, Any]:
    from yocou.evaluation.bench.gpu_check import correctness

    smoke = mode == "cpu-smoke"
    rows = correctness(device, shape="dry" if smoke else "gpu",
                       variants=["transformer", "yoco", "yocou", "rins"] if smoke else None)
    return {"rows": rows, "passed": all(r["passed"] for r in rows)}


# -- driver --------------------------------------------------------------------------------------------------------
def run_step(name: str, mode: str, device: torch.device, out: Path) -> int:
    """Run one step in this process and write ``<out>/<name>.json``; 0 when it passed, 1 when a check failed."""
    from yocou.utils.io import atomic_write_json

    path = out / f"{name}.json"

    def write(partial: dict[str, Any]) -> None:
        atomic_write_json(path, {"step": name, "mode": mode, "device": str(device), "complete": False, **partial})

    if name == "serving":
        res = step_serving(mode, device, write)
    elif name == "train_step":
        res = step_train_step(mode, device, out)
    else:
        res = globals()[f"step_{name}"](mode, device)
    atomic_write_json(path, {"step": name, "mode": mode, "device": str(device), "complete": True, **res})
    return 0 if res["passed"] else 1


def run_session(mode: str, out: Path, *, steps: list[str] | None = None, log: Callable[[str], None] = print) -> int:
    """Every step in its own process under its limit; ``session.json`` after each. Returns 0 when all passed."""
    from yocou.utils.io import atomic_write_json

    device = "cuda" if mode == "gpu" else "cpu"
    out.mkdir(parents=True, exist_ok=True)
    session: dict[str, Any] = {"mode": mode, "device": device, "steps": [], "status": "passed"}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in steps or list(STEPS):
        limit = STEPS[name][0 if mode == "gpu" else 1]
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "yocou.evaluation.bench.gpu_session", "--step", name, "--out", str(out)]
        cmd += ["--cpu-smoke"] if mode == "cpu-smoke" else []
        with open(out / f"{name}.log", "w", encoding="utf-8") as fh:
            try:
                rc: int | None = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=limit, env=env,
                                                check=False).returncode
                status = "passed" if rc == 0 else "failed"
            except subprocess.TimeoutExpired:
                rc, status = None, "timeout"
        tail = (out / f"{name}.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] \
            if status != "passed" else []
        result = out / f"{name}.json"
        session["steps"].append({"step": name, "status": status, "seconds": round(time.monotonic() - t0, 1),
                                 "limit_s": limit, "exit_code": rc, "error": tail[0][:300] if tail else None,
                                 "result": result.name if result.exists() else None})
        if status != "passed":
            session["status"] = "failed"
        atomic_write_json(out / "session.json", session)
        log(f"gpu_session: {name}: {status} in {session['steps'][-1]['seconds']} s (limit {limit} s)")
    return 0 if session["status"] == "passed" else 1


def main(argv: list[str] | None = None) -> int:
    from yocou.utils.guard import check_args, replaces

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.bench.gpu_session", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=replaces(), help="output folder (default results/gpu/<device>/ on a GPU; required with --cpu-smoke)")
    ap.add_argument("--cpu-smoke", action="store_true", help="every step at the smoke scale's shapes, on CPU")
    ap.add_argument("--step", choices=list(STEPS), help="run one step in this process (what the driver calls)")
    ap.add_argument("--steps", nargs="+", choices=list(STEPS), help="the steps to run (default all, in order)")
    a = ap.parse_args(argv)
    check_args(a)
    mode = "cpu-smoke" if a.cpu_smoke else "gpu"
    if mode == "gpu" and not torch.cuda.is_available():
        raise ValueError("gpu_session: no CUDA device (torch.cuda.is_available() is False); --cpu-smoke runs the "
                         "same steps at tiny shapes on the CPU")
    if a.out is None and mode == "cpu-smoke":
        raise ValueError("gpu_session: --cpu-smoke needs --out (results/gpu/ holds GPU measurements only)")
    device = torch.device("cuda" if mode == "gpu" else "cpu")
    out = Path(a.out or f"results/gpu/{device_slug(device)}")
    if a.step:
        return run_step(a.step, mode, device, out)
    return run_session(mode, out, steps=a.steps)


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
