"""Peer benchmark: our Transformer against Hugging Face transformers' Llama at the same shape, same dtype,
same machine, in one run (a benchmark, not a test).

Both models get the same weights (ours copied into ``LlamaForCausalLM``, as ``tests/test_model.py`` checks
for parity), the same thread count and the same attention kernel family (``scaled_dot_product_attention``;
HF with ``attn_implementation="sdpa"``). Measured, each as a median of repeats after warm-up:

* training tokens/s: forward + backward + AdamW step on ``batch × seq_len`` tokens under bf16 autocast with
  fp32 weights (what ``yocou train`` does), eager for both (``--compile`` adds both under torch.compile).
  The models are timed in interleaved rounds and the training ratio is the median of per-round paired
  ratios, so that drift in the machine's speed during the run does not favour either side;
* prefill tokens/s over a prompt of ``--prefill-len`` tokens (bf16 weights; ours in one chunk and in
  chunks of 512, HF one forward with its default ``DynamicCache``);
* decode tokens/s of ``--n-decode`` greedy steps after that prompt (prefill excluded);
* training MFU: analytic training FLOPs per token (:func:`yocou.accounting.train_flops_per_token`) ×
  tokens/s over the bf16 matrix-multiply peak measured in the same run (``--peak-n``³ bf16 matmuls).

Ratios are ours / HF (> 1: ours faster). Writes a JSON with provenance (load average included).

Run (the numbers in README.md come from this command, at the tiny shape on the 2-core CPU)::

    python benchmarks/hf_llama_peer.py --compile --rounds 16 --out benchmarks/results/hf_llama_peer.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

from yocou import accounting
from yocou import config as C
from yocou.generate import decode_step, prefill
from yocou.io import atomic_write_json, provenance
from yocou.entry import int_at_least, run_main
from yocou.model import LM


def hf_llama_from(model: LM) -> torch.nn.Module:
    """``LlamaForCausalLM`` with the shape and (copied) weights of our Transformer ``model``."""
    from yocou.hf import to_llama

    return to_llama(model)


def median_time(fn: Callable[[], Any], repeats: int, warmup: int) -> tuple[float, list[float]]:
    """Median seconds of ``repeats`` calls after ``warmup`` untimed ones, and all of them."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), ts


def matmul_peak_flops(n: int, dtype: torch.dtype = torch.bfloat16, repeats: int = 5) -> float:
    """Best FLOP/s of an ``n × n × n`` matmul in ``dtype`` (the machine's matmul peak, measured)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(2):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def train_step_fn(model: torch.nn.Module, is_hf: bool, batch: int, seq_len: int, vocab: int
                  ) -> Callable[[], None]:
    """One optimizer step (bf16 autocast, fp32 weights, AdamW, clipping) on random tokens.

    Both models use the fused AdamW kernel: ``yocou train`` does, and it is the default optimizer of
    transformers' ``Trainer`` (``TrainingArguments.optim = "adamw_torch_fused"``).
    """
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab, (batch, seq_len), generator=g)
    y = torch.randint(0, vocab, (batch, seq_len), generator=g)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x).logits if is_hf else model(x).logits_BNV
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    pos, nonneg = int_at_least(1), int_at_least(0)
    ap.add_argument("--preset", default="transformer-tiny", help="our Transformer preset (shape of both models)")
    ap.add_argument("--batch", type=pos, default=8, help="training batch (sequences)")
    ap.add_argument("--seq-len", type=pos, default=512, help="training sequence length")
    ap.add_argument("--rounds", type=pos, default=8, help="interleaved timing rounds of the training step")
    ap.add_argument("--steps-per-round", type=pos, default=2, help="timed training steps per model per round")
    ap.add_argument("--warmup-steps", type=nonneg, default=3, help="untimed training steps per model (compiles)")
    ap.add_argument("--prefill-len", type=pos, default=4096)
    ap.add_argument("--n-decode", type=pos, default=64)
    ap.add_argument("--repeats", type=pos, default=3)
    ap.add_argument("--peak-n", type=pos, default=4096, help="matmul size of the bf16 peak measurement")
    ap.add_argument("--threads", type=pos, default=os.cpu_count())
    ap.add_argument("--compile", action="store_true", help="also time both training steps under torch.compile")
    ap.add_argument("--out", default="benchmarks/results/hf_llama_peer.json")
    a = ap.parse_args(argv)
    try:
        cfg = C.preset(a.preset)
    except ValueError as e:
        raise ValueError(f"--preset {a.preset!r}: {e}") from None
    if [s.kind for s in cfg.stages] != ["self"] or cfg.stages[0].n_loops != 1 or cfg.stages[0].window is not None:
        raise ValueError(f"--preset must be a plain Transformer (e.g. transformer-tiny), got {a.preset}")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if os.path.isdir(a.out) or (os.path.exists(out_dir) and not os.path.isdir(out_dir)):
        raise ValueError(f"--out {a.out}: expected a JSON file path in a folder")  # before minutes of timing
    torch.set_num_threads(a.threads)
    load0 = os.getloadavg()
    res: dict[str, Any] = {"shape": cfg.to_dict(), "threads": torch.get_num_threads()}
    peak = matmul_peak_flops(a.peak_n)
    res["bf16_matmul_peak_flops"] = peak
    print(f"bf16 matmul peak: {peak / 1e9:.0f} GFLOP/s", flush=True)

    # -- training ---------------------------------------------------------------
    # All models are built and warmed up first, then timed in interleaved rounds (each round runs every
    # model for --steps-per-round steps, in reversed order every other round), so that drift in the
    # machine's speed (frequency, other tenants) falls on both sides alike. The ratio is the median over
    # rounds of the paired per-round ratios, HF step time / our step time.
    fpt = accounting.train_flops_per_token(cfg, a.seq_len)
    tokens = a.batch * a.seq_len
    names = ("ours", "hf") + (("ours_compiled", "hf_compiled") if a.compile else ())
    steps: dict[str, Callable[[], None]] = {}
    for name in names:
        torch.manual_seed(0)
        ours = LM(cfg).train()
        is_hf = name.startswith("hf")
        model = hf_llama_from(ours).train() if is_hf else ours
        fwd = torch.compile(model) if name.endswith("_compiled") else model
        steps[name] = train_step_fn(fwd, is_hf, a.batch, a.seq_len, cfg.vocab_size)
        t0 = time.perf_counter()
        for _ in range(a.warmup_steps):
            steps[name]()
        print(f"train {name}: warm-up {time.perf_counter() - t0:.1f} s", flush=True)
    per_round: dict[str, list[float]] = {n: [] for n in names}
    all_steps: dict[str, list[float]] = {n: [] for n in names}
    for r in range(a.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            ts = []
            for _ in range(a.steps_per_round):
                t0 = time.perf_counter()
                steps[name]()
                ts.append(time.perf_counter() - t0)
            per_round[name].append(statistics.mean(ts))
            all_steps[name].extend(ts)
    train: dict[str, Any] = {}
    for name in names:
        t = statistics.median(all_steps[name])
        train[name] = {"step_s": t, "steps_s": all_steps[name], "round_mean_step_s": per_round[name],
                       "tokens_per_s": tokens / t, "mfu": tokens / t * fpt / peak}
        print(f"train {name}: {tokens / t:.0f} tokens/s, MFU {train[name]['mfu']:.3f}", flush=True)

    def paired(o: str, h: str) -> dict[str, float]:
        r = [hh / oo for oo, hh in zip(per_round[o], per_round[h])]
        return {"median": statistics.median(r), "min": min(r), "max": max(r)}

    res["train"] = {"batch": a.batch, "seq_len": a.seq_len, "train_flops_per_token": fpt, "dtype": "bf16 autocast",
                    "rounds": a.rounds, "steps_per_round": a.steps_per_round, "warmup_steps": a.warmup_steps,
                    "paired_ratio_ours_over_hf": {"eager": paired("ours", "hf"),
                                                  **({"compiled": paired("ours_compiled", "hf_compiled")}
                                                     if a.compile else {})},
                    **train}

    # -- inference (bf16 weights) ---------------------------------------------------
    torch.manual_seed(0)
    ours = LM(cfg).eval()
    hf = hf_llama_from(ours).eval().to(torch.bfloat16)
    ours = ours.to(torch.bfloat16)
    ids = torch.randint(0, cfg.vocab_size, (1, a.prefill_len), generator=torch.Generator().manual_seed(1))
    from transformers import DynamicCache

    def ours_prefill(chunk: int) -> Callable[[], Any]:
        def f() -> Any:
            cache = ours.new_cache(1, a.prefill_len + a.n_decode)
            return prefill(ours, ids, cache, chunk_size=chunk), cache
        return f

    @torch.no_grad()
    def hf_prefill() -> Any:
        cache = DynamicCache(config=hf.config)
        out = hf(ids, cache=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1], cache

    inf: dict[str, Any] = {"prefill_len": a.prefill_len, "n_decode": a.n_decode, "dtype": "bf16 weights"}
    for name, fn in (("ours", ours_prefill(a.prefill_len)), ("ours_chunk512", ours_prefill(512)), ("hf", hf_prefill)):
        t, ts = median_time(fn, a.repeats, 1)
        inf[f"prefill_{name}"] = {"s": t, "all_s": ts, "tokens_per_s": a.prefill_len / t}
        print(f"prefill {name}: {a.prefill_len / t:.0f} tokens/s", flush=True)

    def decode_runs(pre: Callable[[], Any], step: Callable[[torch.Tensor, Any], torch.Tensor]) -> tuple[float, list]:
        ts = []
        for r in range(a.repeats + 1):
            logits, cache = pre()
            tok = logits.argmax(-1)
            t0 = time.perf_counter()
            with torch.no_grad():
                for _ in range(a.n_decode):
                    tok = step(tok, cache).argmax(-1)
            if r:  # the first is a warm-up
                ts.append(time.perf_counter() - t0)
        return statistics.median(ts), ts

    def hf_step(tok: torch.Tensor, cache: Any) -> torch.Tensor:
        return hf(tok[:, None], cache=cache, use_cache=True).logits[:, -1]

    for name, pre, step in (("ours", ours_prefill(a.prefill_len), lambda t, c: decode_step(ours, t, c)),
                            ("hf", hf_prefill, hf_step)):
        t, ts = decode_runs(pre, step)
        inf[f"decode_{name}"] = {"s": t, "all_s": ts, "tokens_per_s": a.n_decode / t}
        print(f"decode {name}: {a.n_decode / t:.1f} tokens/s", flush=True)
    res["inference"] = inf
    res["ratios_ours_over_hf"] = {
        "train_tokens_per_s": res["train"]["paired_ratio_ours_over_hf"]["eager"]["median"],
        **({"train_tokens_per_s_compiled": res["train"]["paired_ratio_ours_over_hf"]["compiled"]["median"]}
           if a.compile else {}),
        "prefill_tokens_per_s": inf["prefill_ours"]["tokens_per_s"] / inf["prefill_hf"]["tokens_per_s"],
        "prefill_tokens_per_s_chunk512": inf["prefill_ours_chunk512"]["tokens_per_s"] / inf["prefill_hf"]["tokens_per_s"],
        "decode_tokens_per_s": inf["decode_ours"]["tokens_per_s"] / inf["decode_hf"]["tokens_per_s"],
    }
    print({k: round(v, 3) for k, v in res["ratios_ours_over_hf"].items()}, flush=True)
    import transformers
    prov = provenance(vars(a), 0)
    prov["versions"]["transformers"] = transformers.__version__
    prov["loadavg_start"] = list(load0)
    prov["loadavg_end"] = list(os.getloadavg())
    res["command"] = "python benchmarks/hf_llama_peer.py " + " ".join(argv if argv is not None else sys.argv[1:])
    atomic_write_json(a.out, {**res, "provenance": prov})
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main, prog="benchmarks/hf_llama_peer.py"))
