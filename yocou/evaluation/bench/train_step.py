"""The training step on one device, as the GPU check measures it: the attention kernels, flex against the SDPA path,
and a bf16 training step of the paper's 1.3B YOCO-U at 8,192 tokens, eager and compiled, against the memory planner::

    python -m yocou.evaluation.bench.train_step --out /tmp/ts                      # CUDA: yocou-paper-1.3b, N 8192
    python -m yocou.evaluation.bench.train_step --out /tmp/ts --device cpu --dry   # the same code, smoke size, CPU

What it writes to ``--out/train_step.json`` (with provenance):

* ``kernels``: the kernel each attention call site gets (:func:`yocou.model.attention.call_sites`) for both backends.
* ``attention``: flex against sdpa on a window layer's call (``[1, H, N, D]``, window W) at the model's shape:
  forward relative error and, where flex has a backward (CUDA), the relative error of q/k/v gradients; each
  backend's forward + backward time (ms).
* ``steps``: per mode (``eager``, ``compiled``: per-layer ``torch.compile``, as under FSDP) a training step (bf16
  autocast over fp32 weights, AdamW, activation checkpointing as the paper config): tokens/s, model FLOPs/s and MFU
  against the device's dense bf16 peak (:data:`PEAK_BF16_FLOPS`, named), and the peak memory
  (``torch.cuda.max_memory_allocated``) against :func:`yocou.training.memplan.plan_memory`'s total.
* ``checks``: named tolerances (:data:`TOLERANCES`); exit status 1 when one fails.

Timings are wall-clock with device synchronisation, after warm-up steps; on CPU they are labelled CPU and mean nothing
for a GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from yocou.model import accounting
from yocou.model import attention as A
from yocou.model import config as C
from yocou.training import parallel
from yocou.training.memplan import plan_memory
from yocou.utils.io import atomic_write_json, provenance

#: Dense bf16 peak FLOP/s by device name (vendor data sheets: H100 SXM and H200 989.4 TFLOP/s without sparsity).
PEAK_BF16_FLOPS = {"H100": 989.4e12, "H200": 989.4e12}

#: The largest model ``--dry`` builds on CPU (the smoke sizes are far below it).
DRY_MAX_PARAMS = 50_000_000

#: Relative errors (``max|a - b| / max|b|``) of flex against the sdpa path in bf16; the planner's total against the
#: measured peak (``measured / planned`` within ``[low, high]``).
TOLERANCES = {"flex_vs_sdpa_forward": 2e-2, "flex_vs_sdpa_grad": 5e-2, "peak_over_plan_low": 0.6,
              "peak_over_plan_high": 1.15}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_flops(device: torch.device) -> tuple[float | None, str]:
    """The dense bf16 peak of ``device`` from :data:`PEAK_BF16_FLOPS` by name, and the name; ``None`` if unknown."""
    if device.type != "cuda":
        return None, "cpu"
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None), name


def attention_check(cfg: C.ModelConfig, seq_len: int, device: torch.device, repeats: int) -> dict[str, Any]:
    """flex against sdpa on one sliding-window call at the model's head shape (bf16): errors and times."""
    W = min(st.window for st in cfg.stages if st.window is not None)
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(1, h, seq_len, cfg.head_dim, generator=g).to(device, torch.bfloat16)
               for h in (cfg.n_heads, cfg.n_kv_heads, cfg.n_kv_heads))
    backward = device.type == "cuda"  # flex has no CPU backward in torch 2.13
    out: dict[str, Any] = {"window": W, "seq_len": seq_len, "backward": backward}
    res = {}
    for backend in ("sdpa", "flex"):
        qs, ks, vs = (t.clone().requires_grad_(backward) for t in (q, k, v))
        times = []
        for _ in range(repeats + 1):
            for t in (qs, ks, vs):
                t.grad = None
            _sync(device)
            t0 = time.perf_counter()
            with torch.enable_grad() if backward else torch.no_grad():
                o = A.attention(qs, ks, vs, window=W, backend=backend)
                if backward:
                    o.float().pow(2).mean().backward()
            _sync(device)
            times.append(time.perf_counter() - t0)
        res[backend] = (o.detach(), [t.grad for t in (qs, ks, vs)] if backward else None)
        out[f"{backend}_ms"] = 1e3 * min(times[1:])
    out["forward_rel"] = _rel(res["flex"][0], res["sdpa"][0])
    if backward:
        out["grad_rel"] = max(_rel(a, b) for a, b in zip(res["flex"][1], res["sdpa"][1]))
    return out


def training_step(cfg: C.ModelConfig, seq_len: int, micro_batch: int, device: torch.device, *, compiled: bool,
                  steps: int, warmup: int, activation_checkpointing: bool) -> dict[str, Any]:
    """Time ``steps`` training steps (after ``warmup``) of ``cfg`` on ``device``: bf16 autocast, fused AdamW."""
    from yocou.model.limits import new_model

    torch.manual_seed(0)
    model = new_model(cfg).to(device).train()
    if activation_checkpointing:
        parallel.apply_activation_checkpointing(model)
    if compiled:
        parallel.compile_layers(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (micro_batch, seq_len + 1), generator=g).to(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for i in range(warmup + steps):
        _sync(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            out = model(ids[:, :-1])
            logits = out.logits_BNV
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    step_s = min(times)
    tokens_per_s = micro_batch * seq_len / step_s
    flops_per_s = tokens_per_s * accounting.train_flops_per_token(cfg, seq_len)
    peak, name = peak_flops(device)
    plan = plan_memory(cfg, world_size=1, micro_batch=micro_batch, seq_len=seq_len, param_dtype="fp32",
                       compute_dtype="bf16", activation_checkpointing=activation_checkpointing)
    row = {"mode": "compiled" if compiled else "eager", "step_s": step_s, "tokens_per_s": tokens_per_s,
           "model_flops_per_s": flops_per_s, "mfu": flops_per_s / peak if peak else None, "peak_flops": peak,
           "device_name": name, "planned_bytes": plan.total, "loss": float(loss.detach())}
    if device.type == "cuda":
        row["peak_bytes"] = int(torch.cuda.max_memory_allocated(device))
        row["peak_over_plan"] = row["peak_bytes"] / plan.total
    return row


def main(argv: list[str] | None = None) -> int:
    """Run the training-step check (module docstring); returns the exit status."""
    from yocou.utils.entry import int_at_least
    from yocou.utils.guard import check_args, replaces

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.bench.train_step", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=replaces(), help="output folder")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (with --dry)")
    ap.add_argument("--dry", action="store_true", help="smoke size and 64 tokens: the code paths, on CPU in seconds")
    ap.add_argument("--variant", default=None, help="a preset name (default yocou-paper-1.3b; yocou-smoke with --dry)")
    ap.add_argument("--seq-len", type=int_at_least(1), default=None,
                    help="tokens per sequence (default 8192; 64 with --dry)")
    ap.add_argument("--steps", type=int_at_least(1), default=3, help="timed steps per mode (default 3)")
    a = ap.parse_args(argv)
    check_args(a)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("train_step: skipped: no CUDA device (torch.cuda.is_available() is False); `--device cpu --dry` runs "
              "the code paths on CPU", file=sys.stderr)
        return 0
    if a.device == "cpu" and not a.dry:
        print("train_step: --device cpu at the paper size takes hours; add --dry", file=sys.stderr)
        return 2
    from yocou.model.accounting import param_count
    from yocou.training.train import check_device

    check_device(a.device)
    device = torch.device(a.device)
    cfg = C.preset(a.variant or ("yocou-smoke" if a.dry else "yocou-paper-1.3b"))
    if a.dry and device.type == "cpu" and param_count(cfg) > DRY_MAX_PARAMS:
        print(f"train_step: --dry runs the code paths at a small size; {cfg.name} ({a.variant}) has "
              f"{param_count(cfg):,} parameters (at most {DRY_MAX_PARAMS:,} on CPU)", file=sys.stderr)
        return 2
    seq_len = a.seq_len or (64 if a.dry else 8192)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    windows = [st.window for st in cfg.stages if st.window is not None]
    result: dict[str, Any] = {"variant": cfg.name, "seq_len": seq_len, "device": str(device), "dry": a.dry,
                              "kernels": {b: A.call_sites(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, seq_len,
                                                          min(windows) if windows else None, device=device,
                                                          dtype=torch.bfloat16, backend=b) for b in A.BACKENDS}}
    print(f"train_step: {cfg.name} at N {seq_len} on {device}; kernels {result['kernels']}", flush=True)
    checks = []
    if windows:
        att = attention_check(cfg, seq_len, device, repeats=2)
        result["attention"] = att
        checks.append({"check": "flex_vs_sdpa_forward", "value": att["forward_rel"],
                       "tolerance": TOLERANCES["flex_vs_sdpa_forward"]})
        if "grad_rel" in att:
            checks.append({"check": "flex_vs_sdpa_grad", "value": att["grad_rel"],
                           "tolerance": TOLERANCES["flex_vs_sdpa_grad"]})
        print(f"attention: {att}", flush=True)
    result["steps"] = []
    for compiled in (False, True):
        row = training_step(cfg, seq_len, 1, device, compiled=compiled, steps=a.steps, warmup=2,
                            activation_checkpointing=True)
        result["steps"].append(row)
        print(f"step: {row}", flush=True)
        if "peak_over_plan" in row:
            ok = TOLERANCES["peak_over_plan_low"] <= row["peak_over_plan"] <= TOLERANCES["peak_over_plan_high"]
            checks.append({"check": f"peak_over_plan_{row['mode']}", "value": row["peak_over_plan"],
                           "tolerance": [TOLERANCES["peak_over_plan_low"], TOLERANCES["peak_over_plan_high"]],
                           "passed": ok})
    for c in checks:
        c.setdefault("passed", bool(c["value"] <= c["tolerance"]))
    result["checks"] = checks
    result["status"] = "failed" if any(not c["passed"] for c in checks) else "passed"
    atomic_write_json(out / "train_step.json", {**result, "provenance": provenance({"train_step": vars(a)}, 0)})
    print(f"train_step: {result['status']}: {sum(c['passed'] for c in checks)}/{len(checks)} checks; {out}",
          file=sys.stderr)
    return 1 if result["status"] == "failed" else 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
