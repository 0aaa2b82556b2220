"""The prepared GPU check: correctness on CUDA in bf16 with named tolerances, then a short profile
of every variant that renders Figure 7 at GPU scale. One command, a few minutes on one GPU::

    python -m yocou.evaluation.bench.gpu_check --out results/gpu_check          # needs CUDA; skips cleanly without
    python -m yocou.evaluation.bench.gpu_check --out /tmp/gc --device cpu --dry  # the same code paths, tiny, on CPU

Correctness (every variant of :data:`CHECK_VARIANTS`, random weights with perturbed norms, a window shorter
than the sequence, a prompt length that is no multiple of the chunk):

* ``decode_vs_full_fp32``: chunked early-exit prefill then token-by-token decode equals the full forward at
  every position, fp32 weights and cache (TF32 off); relative error ``max|a - b| / max|b|``.
* ``decode_vs_full_bf16``: the same in bf16 weights and cache, against the bf16 full forward.
* ``bf16_vs_fp32``: the bf16 full forward against the fp32 one.
* ``kv_bytes``: the cache's bytes equal :func:`yocou.model.accounting.kv_cache_bytes` exactly.
* ``loss_device_vs_cpu`` / ``grad_device_vs_cpu``: fp32 training loss and gradients on the device against
  the CPU; ``loss_bf16_autocast``: the bf16-autocast loss (as training runs) against the fp32 one.

Tolerances are in :data:`TOLERANCES` (relative errors), recorded with every result. Profile: every preset at
``--size`` (default ``paper-1.3b``) with :func:`yocou.evaluation.bench.profile.profile_models` (CUDA events, peak
allocated memory; the CPU code path otherwise), then Figure 7 (:func:`yocou.results.summarize.efficiency.summarize_efficiency`
→ ``tidy/efficiency.{csv,json}`` → :func:`yocou.results.render.fig7.render`); the check
``peak_mem_covers_kv`` asks that the CUDA peak holds at least the measured cache.

Outputs in ``--out``: ``gpu_check.json`` (status, every check with value and tolerance, provenance),
``profile.json`` (the profile's rows, the format of :mod:`yocou.evaluation.bench.profile`), ``tidy/efficiency.{csv,json}``,
``fig7.{png,pdf}`` and
``fig7_data.{csv,md,json}``. Exit status 1 when a check fails, 0 when all pass or when skipped (no CUDA).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from yocou.model import accounting
from yocou.model import config as C
from yocou.model.generate import decode_step, prefill
from yocou.model.limits import new_cache, new_model
from yocou.model.lm import LM
from yocou.utils.io import atomic_write_json, provenance

#: Relative-error bounds (``max|a - b| / max|b|``) of the named checks; ``kv_bytes`` is exact. The MoE
#: variant's bf16 bounds are wider: bf16 rounding can swap near-tied router scores, so a few tokens take
#: other experts in one path than in the other (a routing decision, not an error of the cache).
TOLERANCES: dict[str, float] = {
    "decode_vs_full_fp32": 1e-4,
    "decode_vs_full_bf16": 5e-2,
    "decode_vs_full_bf16_moe": 2e-1,
    "bf16_vs_fp32": 5e-2,
    "bf16_vs_fp32_moe": 2e-1,
    "kv_bytes": 0.0,
    "loss_device_vs_cpu": 1e-4,
    "grad_device_vs_cpu": 1e-3,
    "loss_bf16_autocast": 2e-2,
}

#: Shapes of the correctness models: on the GPU, and with ``--dry`` (CPU plumbing test).
SHAPES = {"gpu": dict(vocab_size=512, d_model=256, n_heads=4, n_kv_heads=2, head_dim=64, d_ff=512),
          "dry": dict(vocab_size=128, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, d_ff=64)}
_WINDOW = 16

#: The variants checked for correctness (from a shape): every preset, Upper Loop without shared K̂V̂, MoE.
CHECK_VARIANTS: dict[str, Callable[[dict], C.ModelConfig]] = {
    "transformer": lambda s: C.transformer(n_layers=2, **s),
    "loop": lambda s: C.loop(n_layers=2, n_loops=2, **s),
    "rins": lambda s: C.rins(n_layers=4, n_loops=3, **s),
    "yoco": lambda s: C.yoco(n_layers=4, window=_WINDOW, **s),
    "yocou": lambda s: C.yocou(n_layers=4, window=_WINDOW, n_loops=3, **s),
    "upper_loop": lambda s: C.upper_loop(n_layers=4, window=_WINDOW, n_loops=2, **s),
    "upper_loop_nokv": lambda s: C.upper_loop(n_layers=4, window=_WINDOW, n_loops=2, shared_kv=False, **s),
    "yocou_moe": lambda s: C.yocou(n_layers=4, window=_WINDOW, n_loops=2, **{
        **s, "n_experts": 8, "top_k": 2, "d_expert": 2 * s["d_model"] // 4, "d_shared_expert": 2 * s["d_model"] // 4}),
}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float().cpu(), b.float().cpu()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


def _model(cfg: C.ModelConfig, device: torch.device, dtype: torch.dtype) -> LM:
    torch.manual_seed(0)
    m = new_model(cfg).eval()
    with torch.no_grad():  # perturbed norms: a norm applied twice or skipped shows in the logits
        for p in m.parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.3)
    return m.to(device=device, dtype=dtype)


def _decode_logits(m: LM, ids: torch.Tensor, prompt_len: int, chunk: int) -> tuple[torch.Tensor, int]:
    B, N = ids.shape
    cache = new_cache(m, B, N, fill=float("nan"))  # a read of an unwritten slot shows as NaN
    got = [prefill(m, ids[:, :prompt_len], cache, chunk_size=chunk)]
    for p in range(prompt_len, N):
        got.append(decode_step(m, ids[:, p], cache))
    return torch.stack(got, dim=1), cache.nbytes()


def correctness(device: torch.device, *, shape: str = "gpu", seq_len: int = 64, prompt_len: int = 37,
                chunk: int = 24, variants: list[str] | None = None,
                log: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run the named checks of the module docstring for every variant on ``device``.

    Args:
        device: where to run (the CPU reference of the training checks always runs on CPU).
        shape: key of :data:`SHAPES`.
        seq_len, prompt_len, chunk: tokens of the sequence, of the prompt, of a prefill chunk.
        variants: keys of :data:`CHECK_VARIANTS` (default all).
        log: called with each row as soon as it is measured (progress on a slow device).

    Returns:
        One row per (variant, check): ``variant, check, value, tolerance, passed`` (values are relative
        errors, or for ``kv_bytes`` measured minus analytic bytes).
    """
    rows: list[dict[str, Any]] = []

    def add(variant: str, check: str, value: float) -> None:
        if "moe" in variant and f"{check}_moe" in TOLERANCES:
            check = f"{check}_moe"
        tol = TOLERANCES[check]
        ok = bool(value <= tol) if check != "kv_bytes" else value == 0
        rows.append({"variant": variant, "check": check, "value": value, "tolerance": tol, "passed": ok})
        if log is not None:
            log(rows[-1])

    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        for name in variants or list(CHECK_VARIANTS):
            cfg = CHECK_VARIANTS[name](SHAPES[shape])
            ids = torch.randint(0, cfg.vocab_size, (2, seq_len), generator=torch.Generator().manual_seed(1)).to(device)
            full = {}
            for tag, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
                m = _model(cfg, device, dtype)
                with torch.no_grad():
                    full[tag] = m(ids).logits_BNV
                got, nbytes = _decode_logits(m, ids, prompt_len, chunk)
                add(name, f"decode_vs_full_{tag}", _rel(got, full[tag][:, prompt_len - 1:]))
                if tag == "bf16":
                    add(name, "kv_bytes", float(nbytes - accounting.kv_cache_bytes(cfg, seq_len, batch_size=2,
                                                                                  dtype="bf16")))
            add(name, "bf16_vs_fp32", _rel(full["bf16"], full["fp32"]))
            _training_checks(name, cfg, ids, device, add)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    return rows


def _training_checks(name: str, cfg: C.ModelConfig, ids: torch.Tensor, device: torch.device,
                     add: Callable[[str, str, float], None]) -> None:
    import torch.nn.functional as F

    def loss_and_grads(dev: torch.device, autocast: bool) -> tuple[torch.Tensor, torch.Tensor]:
        m = _model(cfg, dev, torch.float32).train()
        x = ids.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
            out = m(x[:, :-1])
            logits = out.logits_BNV
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), x[:, 1:].reshape(-1))
            loss = loss + cfg.moe_aux_weight * out.aux_loss
        loss.backward()
        grads = torch.cat([p.grad.float().flatten().cpu() for p in m.parameters() if p.grad is not None])
        return loss.detach().float().cpu(), grads

    cpu_loss, cpu_grads = loss_and_grads(torch.device("cpu"), False)
    dev_loss, dev_grads = loss_and_grads(device, False)
    amp_loss, _ = loss_and_grads(device, True)
    add(name, "loss_device_vs_cpu", _rel(dev_loss, cpu_loss))
    add(name, "grad_device_vs_cpu", _rel(dev_grads, cpu_grads))
    add(name, "loss_bf16_autocast", _rel(amp_loss, dev_loss))


def profile_variants(size: str, seq_lens: list[int], device: torch.device, *, n_decode: int, repeats: int,
                     chunk_size: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Profile every preset (and Upper Loop without shared K̂V̂) at ``size`` (a key of ``yocou.model.config.SIZES``).

    Returns the profile's rows (:func:`yocou.evaluation.bench.profile.profile_models`) and its settings.
    """
    from yocou.evaluation.bench.profile import ProfileConfig, profile_models

    cfgs = {v: C.preset(f"{v}-{size}") for v in C.PRESETS}
    cfgs["upper_loop_nokv"] = C.preset(f"upper_loop-{size}", shared_kv=False)
    pc = ProfileConfig(seq_lens=tuple(seq_lens), n_decode=n_decode, repeats=repeats, warmup=1,
                       chunk_size=chunk_size, dtype="bf16", batch_size=1)
    rows = profile_models(cfgs, pc, device=device,
                          log=lambda r: print(json.dumps({k: r[k] for k in ("variant", "seq_len", "prefill_tokens_per_s",
                                                                              "decode_tokens_per_s", "peak_mem_bytes")}),
                                              flush=True))
    return rows, {"size": size, "profile": dataclasses.asdict(pc)}


def main(argv: list[str] | None = None) -> int:
    """Run the GPU check (see the module docstring); returns the exit status."""
    from yocou.utils.guard import replaces

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.bench.gpu_check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=replaces(), help="output folder")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (with --dry, a plumbing test)")
    ap.add_argument("--dry", action="store_true", help="tiny profile (smoke size, short lengths): minutes on CPU")
    ap.add_argument("--size", default=None, help="profile size (default paper-1.3b; smoke with --dry)")
    ap.add_argument("--seq-lens", nargs="+", type=int, default=None,
                    help="profile lengths N (default 2048 8192 32768; 48 64 with --dry)")
    ap.add_argument("--n-decode", type=int, default=None, help="decoded tokens per run (default 32; 4 with --dry)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per (variant, N) (default 2; 1 with --dry)")
    ap.add_argument("--chunk-size", type=int, default=None, help="prefill chunk (default 2048; 32 with --dry)")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        msg = ("gpu_check: skipped: no CUDA device on this machine (torch.cuda.is_available() is False, torch "
               f"{torch.__version__}). Run it where a GPU is lent; `--device cpu --dry` tests the code paths on CPU.")
        print(msg, file=sys.stderr)
        atomic_write_json(out / "gpu_check.json", {"status": "skipped", "reason": msg,
                                                   "provenance": provenance({"argv": sys.argv}, 0)})
        return 0
    if a.device == "cpu" and not a.dry:
        print("gpu_check: --device cpu runs the paper-size profile on CPU (hours); add --dry", file=sys.stderr)
        return 2
    device = torch.device(a.device)
    size = a.size or ("smoke" if a.dry else "paper-1.3b")
    seq_lens = a.seq_lens or ([48, 64] if a.dry else [2048, 8192, 32768])
    n_decode = a.n_decode or (4 if a.dry else 32)
    chunk = a.chunk_size or (32 if a.dry else 2048)
    t0 = time.time()
    print(f"gpu_check: correctness of {len(CHECK_VARIANTS)} variants on {device} (a line per check), then the "
          f"profile of {size} at N = {', '.join(map(str, seq_lens))}", flush=True)
    checks = correctness(device, shape="dry" if a.dry else "gpu", log=lambda r: print(
        ("PASS" if r["passed"] else "FAIL"), f"{r['variant']:>20} {r['check']:<20} {r['value']:.3g} "
        f"(<= {r['tolerance']:g})", flush=True))
    t_corr = time.time() - t0
    rows, settings = profile_variants(size, seq_lens, device, n_decode=n_decode,
                                      repeats=a.repeats or (1 if a.dry else 2), chunk_size=chunk)
    for r in rows:
        if r["mem_kind"] == "cuda_max_allocated":
            ok = r["peak_mem_bytes"] >= r["kv_bytes_measured"]
            checks.append({"variant": r["variant"], "check": f"peak_mem_covers_kv@{r['seq_len']}",
                           "value": r["peak_mem_bytes"], "tolerance": r["kv_bytes_measured"], "passed": ok})
        checks.append({"variant": r["variant"], "check": f"kv_bytes_profile@{r['seq_len']}",
                       "value": r["kv_bytes_measured"] - r["kv_bytes_analytic"], "tolerance": 0,
                       "passed": bool(r["kv_equal"])})
    prov = provenance({"gpu_check": {"device": str(device), "dry": a.dry, "tolerances": TOLERANCES, **settings}}, 0)
    if device.type == "cuda":
        prov["cuda_device"] = torch.cuda.get_device_name(device)
        prov["cuda_capability"] = list(torch.cuda.get_device_capability(device))
    atomic_write_json(out / "profile.json", {"rows": rows, "provenance": prov})
    from yocou.results.render import fig7
    from yocou.results.summarize.efficiency import summarize_efficiency
    from yocou.results.tidy import write_tidy

    roles = {v: v for v in dict.fromkeys(r["variant"] for r in rows)}
    write_tidy(summarize_efficiency(out / "profile.json", roles), out / "tidy" / "efficiency",
               inputs=[str(out / "profile.json")])
    fig7.render(out / "tidy" / "efficiency.csv", out / "fig7.png", out / "fig7_data.csv",
                scale=f"{size} ({device.type})")
    failed = [r for r in checks if not r["passed"]]
    summary = {"status": "failed" if failed else "passed", "n_checks": len(checks), "n_failed": len(failed),
               "failed": failed, "checks": checks, "tolerances": TOLERANCES, "correctness_s": t_corr,
               "wall_s": time.time() - t0,
               "outputs": sorted(p.name for p in out.iterdir() if p.name != "gpu_check.json"),
               "provenance": prov}
    atomic_write_json(out / "gpu_check.json", summary)
    print(f"gpu_check: {summary['status']}: {len(checks) - len(failed)}/{len(checks)} checks passed, "
          f"{summary['wall_s']:.0f} s; results in {out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
