"""Does ``torch.compile`` (CPU inductor) make tiny training faster, with equal results?

Trains the tiny shape (workflows/config/tiny.yaml sizes.base) of one variant for ``--steps`` optimizer steps twice
from the same initial weights and batches, eager and compiled, one thread each, alternating a step of one and a
step of the other so both see the same machine load. Reports the median step time of each after ``--warmup`` steps,
the compile time (the first compiled step), the speed-up and the largest loss difference.

    python benchmarks/compile_probe.py --variant yocou --steps 40 --out benchmarks/results/compile_probe_tiny.json
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch

from yocou.model import config as C
from yocou.training.train import TrainConfig, build_optimizer, lr_at
from yocou.utils.io import atomic_write_json, provenance

BASE = {"d_model": 96, "n_layers": 6, "n_heads": 2, "n_kv_heads": 1, "head_dim": 48, "d_ff": 256, "window": 64,
        "vocab_size": 2048}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", default="yocou", choices=["transformer", "yoco", "rins", "yocou"])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    kw = dict(BASE)
    if a.variant in ("transformer", "rins"):
        kw.pop("window")
    if a.variant in ("rins", "yocou"):
        kw["n_loops"] = 3
    cfg = getattr(C, a.variant)(**kw)
    tc = TrainConfig(steps=a.steps, batch_size=16, seq_len=256, lr=3e-3, warmup_steps=5, dtype="fp32")
    torch.manual_seed(0)
    from yocou.model.lm import LM

    eager = LM(cfg)
    compiled_model = copy.deepcopy(eager)
    fwd = {"eager": eager, "compiled": torch.compile(compiled_model)}
    models = {"eager": eager, "compiled": compiled_model}
    opts = {k: build_optimizer(m, tc) for k, m in models.items()}
    times = {k: [] for k in models}
    losses = {k: [] for k in models}
    g = torch.Generator().manual_seed(1)
    for step in range(a.steps):
        x = torch.randint(0, cfg.vocab_size, (16, 257), generator=g)
        for k in ("eager", "compiled"):
            for grp in opts[k].param_groups:
                grp["lr"] = lr_at(step, tc)
            t0 = time.perf_counter()
            logits = fwd[k](x[:, :-1]).logits_BNV
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), x[:, 1:].reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(models[k].parameters(), 1.0)
            opts[k].step()
            opts[k].zero_grad(set_to_none=True)
            times[k].append(time.perf_counter() - t0)
            losses[k].append(float(loss))
    med = {k: statistics.median(v[a.warmup:]) for k, v in times.items()}
    res = {"variant": a.variant, "steps": a.steps, "warmup_excluded": a.warmup, "threads": 1,
           "median_step_s": med, "speedup": med["eager"] / med["compiled"],
           "compile_first_step_s": times["compiled"][0],
           "max_abs_loss_diff": max(abs(x - y) for x, y in zip(losses["eager"], losses["compiled"])),
           "losses": losses, "load_avg_at_end": list(__import__("os").getloadavg()),
           "provenance": provenance(vars(a), 0)}
    atomic_write_json(a.out, res)
    print(json.dumps({k: v for k, v in res.items() if k not in ("losses", "provenance")}, indent=1))


if __name__ == "__main__":
    main()
