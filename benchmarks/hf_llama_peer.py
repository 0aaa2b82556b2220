"""Peer benchmark: our Transformer against Hugging Face transformers' Llama at the same shape, same dtype,
same machine, in one run (a benchmark, not a test).

Both models get the same weights (ours copied into ``LlamaForCausalLM``, as ``tests/test_model.py`` checks
for parity), the same thread count and the same attention kernel family (``scaled_dot_product_attention``;
HF with ``attn_implementation="sdpa"``). Every measurement is taken in **interleaved rounds**: each round runs
every side once, in reversed order every other round, so drift in the machine's speed (frequency, other
tenants) falls on both sides alike, and each ratio is reported as the median, min and max of the per-round
paired ratios (HF time / our time; > 1: ours faster).

* training: forward + backward + AdamW step on ``batch × seq_len`` tokens, in the training dtype (fp32, or bf16
  autocast over fp32 weights: what ``yocou train`` does), eager for both (``--compile`` adds both under
  torch.compile); training MFU = analytic training FLOPs per token
  (:func:`yocou.model.accounting.train_flops_per_token`) × tokens/s over the matmul peak measured in the same run
  (``--peak-n``³ matmuls in the training dtype);
* prefill over a prompt of ``--prefill-len`` tokens (ours in one chunk and in chunks of 512, HF one forward
  with its default ``DynamicCache``), each from a fresh cache;
* decode: ``--n-decode`` greedy steps after that prompt, every step timed on its own, so a swing in the mean
  can be told apart from a few slow steps; the per-step distribution (median, p10, p90, max) and the number
  of ATen operators one decode step dispatches (``torch.profiler``) are recorded for both. With
  ``--threads`` above 1 the decode rounds are repeated at one thread (``decode_1thread``), which separates the
  cost of waking and joining a thread pool per operator from the arithmetic.

``--scale tiny`` takes the shape (``sizes.base``, the tokenizer's vocabulary), batch, sequence length, dtype
and threads per job from ``workflows/config/tiny.yaml``; explicit flags override it. Writes a JSON with
provenance (load average included).

Run (the numbers in README.md come from this command, at the tiny shape on the 2-core CPU)::

    python benchmarks/hf_llama_peer.py --scale tiny --compile --rounds 16 --out benchmarks/results/hf_llama_peer.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yocou.model import accounting  # noqa: E402
from yocou.model import config as C  # noqa: E402
from yocou.model.generate import decode_step, prefill  # noqa: E402
from yocou.model.limits import new_cache  # noqa: E402
from yocou.model.lm import LM  # noqa: E402
from yocou.utils.entry import int_at_least, run_main  # noqa: E402
from yocou.utils.io import atomic_write_json, provenance  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def hf_llama_from(model: LM) -> torch.nn.Module:
    """``LlamaForCausalLM`` with the shape and (copied) weights of our Transformer ``model``."""
    from yocou.model.hf import to_llama

    return to_llama(model)


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


def spread(xs: list[float]) -> dict[str, float]:
    """Median, min, max, p10, p90 and n of ``xs`` (nearest-rank percentiles)."""
    s = sorted(xs)
    def q(p: float) -> float:
        return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]
    return {"median": statistics.median(s), "min": s[0], "max": s[-1], "p10": q(0.1), "p90": q(0.9), "n": len(s)}


def paired_ratio(ours_s: list[float], hf_s: list[float]) -> dict[str, float]:
    """Per-round paired ratios HF time / our time (> 1: ours faster): their :func:`spread`."""
    return spread([h / o for o, h in zip(ours_s, hf_s)])


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[Any]]:
    """Call every ``fns`` entry once per round, in reversed order every other round; their results per name."""
    names = list(fns)
    out: dict[str, list[Any]] = {n: [] for n in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            out[name].append(fns[name]())
    return out


def train_step_fn(model: torch.nn.Module, is_hf: bool, batch: int, seq_len: int, vocab: int, dtype: str
                  ) -> Callable[[], None]:
    """One optimizer step (fp32 or bf16 autocast over fp32 weights, AdamW, clipping) on random tokens.

    Both models use the fused AdamW kernel: ``yocou train`` does, and it is the default optimizer of
    transformers' ``Trainer`` (``TrainingArguments.optim = "adamw_torch_fused"``).
    """
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab, (batch, seq_len), generator=g)
    y = torch.randint(0, vocab, (batch, seq_len), generator=g)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = model(x).logits if is_hf else model(x).logits_BNV
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def aten_ops(fn: Callable[[], Any]) -> int:
    """How many ATen operators (``aten::*`` events, nested ones included) one call of ``fn`` dispatches."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(1 for e in prof.events() if e.name.startswith("aten::"))


def scale_defaults(scale: str) -> dict[str, Any]:
    """Shape and training settings of ``workflows/config/<scale>.yaml``, validated and with the schema's defaults
    (:func:`yocou.workflow.wfconfig.resolve_config`): the Transformer at ``sizes.base``, the tokenizer's vocabulary, the
    training batch, ``seq_len`` and dtype, and the threads of one training job (``launch.threads``, else all cores).

    Raises:
        ConfigError / ValueError: no such scale file, a config the schema rejects, or no ``sizes.base``.
    """
    from yocou.workflow.wfconfig import read_scale_file, resolve_config

    path = ROOT / "workflows" / "config" / f"{scale}.yaml"
    cfg = resolve_config(read_scale_file(path), source=str(path), root=ROOT)
    sizes, train = cfg.get("sizes") or {}, cfg["train"]
    if "base" not in sizes:
        raise ValueError(f"--scale {scale}: {path} has no sizes.base")
    return {"preset": "transformer-base", "sizes": sizes, "vocab_size": int(cfg["data"]["vocab_size"]),
            "batch": int(train["batch_size"]), "seq_len": int(train["seq_len"]), "dtype": train["dtype"],
            "threads": int(cfg["launch"]["threads"] or os.cpu_count())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    pos, nonneg = int_at_least(1), int_at_least(0)
    ap.add_argument("--scale", default=None, help="take shape, batch, seq_len, dtype, threads from this scale config")
    ap.add_argument("--preset", default=None, help="our Transformer preset (default transformer-small)")
    ap.add_argument("--batch", type=pos, default=None, help="training batch (sequences; default 8)")
    ap.add_argument("--seq-len", type=pos, default=None, help="training sequence length (default 512)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="training/inference dtype (default bf16)")
    ap.add_argument("--rounds", type=pos, default=8, help="interleaved timing rounds (training and inference)")
    ap.add_argument("--steps-per-round", type=pos, default=2, help="timed training steps per model per round")
    ap.add_argument("--warmup-steps", type=nonneg, default=3, help="untimed training steps per model (compiles)")
    ap.add_argument("--prefill-len", type=pos, default=4096)
    ap.add_argument("--n-decode", type=pos, default=64)
    ap.add_argument("--peak-n", type=pos, default=2048, help="matmul size of the peak measurement")
    ap.add_argument("--threads", type=pos, default=None, help="torch threads (default: all cores)")
    ap.add_argument("--compile", action="store_true", help="also time both training steps under torch.compile")
    ap.add_argument("--out", default="benchmarks/results/hf_llama_peer.json")
    a = ap.parse_args(argv)
    d: dict[str, Any] = {"preset": "transformer-small", "sizes": None, "vocab_size": None, "batch": 8, "seq_len": 512,
                         "dtype": "bf16", "threads": os.cpu_count()}
    if a.scale is not None:
        d.update(scale_defaults(a.scale))
    for k in ("preset", "batch", "seq_len", "dtype", "threads"):
        if getattr(a, k) is None:
            setattr(a, k, d[k])
    try:
        kw = {"vocab_size": d["vocab_size"]} if d["vocab_size"] else {}
        cfg = C.preset(a.preset, sizes=d["sizes"], **kw)
    except ValueError as e:
        raise ValueError(f"--preset {a.preset!r}: {e}") from None
    if [s.kind for s in cfg.stages] != ["self"] or cfg.stages[0].n_loops != 1 or cfg.stages[0].window is not None:
        raise ValueError(f"--preset must be a plain Transformer (e.g. transformer-small), got {a.preset}")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if os.path.isdir(a.out) or (os.path.exists(out_dir) and not os.path.isdir(out_dir)):
        raise ValueError(f"--out {a.out}: expected a JSON file path in a folder")  # before minutes of timing
    torch.set_num_threads(a.threads)
    load0 = os.getloadavg()
    wdtype = DTYPES[a.dtype]
    res: dict[str, Any] = {"shape": cfg.to_dict(), "threads": torch.get_num_threads(), "dtype": a.dtype}
    peak = matmul_peak_flops(a.peak_n, wdtype)
    res["matmul_peak_flops"] = peak
    print(f"{a.dtype} matmul peak: {peak / 1e9:.0f} GFLOP/s at {a.threads} thread(s)", flush=True)

    # -- training: every model built and warmed up first, then timed in interleaved rounds ------------------
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
        steps[name] = train_step_fn(fwd, is_hf, a.batch, a.seq_len, cfg.vocab_size, a.dtype)
        t0 = time.perf_counter()
        for _ in range(a.warmup_steps):
            steps[name]()
        print(f"train {name}: warm-up {time.perf_counter() - t0:.1f} s", flush=True)

    def timed_steps(name: str) -> Callable[[], list[float]]:
        def f() -> list[float]:
            ts = []
            for _ in range(a.steps_per_round):
                t0 = time.perf_counter()
                steps[name]()
                ts.append(time.perf_counter() - t0)
            return ts
        return f

    rounds = interleaved({n: timed_steps(n) for n in names}, a.rounds)
    per_round = {n: [statistics.mean(ts) for ts in rounds[n]] for n in names}
    train: dict[str, Any] = {}
    for name in names:
        all_s = [t for ts in rounds[name] for t in ts]
        t = statistics.median(all_s)
        train[name] = {"step_s": t, "steps_s": all_s, "round_mean_step_s": per_round[name],
                       "tokens_per_s": tokens / t, "mfu": tokens / t * fpt / peak}
        print(f"train {name}: {tokens / t:.0f} tokens/s, MFU {train[name]['mfu']:.3f}", flush=True)
    res["train"] = {"batch": a.batch, "seq_len": a.seq_len, "train_flops_per_token": fpt,
                    "dtype": "bf16 autocast" if a.dtype == "bf16" else "fp32", "rounds": a.rounds,
                    "steps_per_round": a.steps_per_round, "warmup_steps": a.warmup_steps,
                    "paired_ratio_ours_over_hf": {
                        "eager": paired_ratio(per_round["ours"], per_round["hf"]),
                        **({"compiled": paired_ratio(per_round["ours_compiled"], per_round["hf_compiled"])}
                           if a.compile else {})},
                    **train}
    del steps

    # -- inference (weights in the dtype), interleaved rounds ----------------------------------------------
    torch.manual_seed(0)
    ours = LM(cfg).eval()
    hf = hf_llama_from(ours).eval().to(wdtype)
    ours = ours.to(wdtype)
    ids = torch.randint(0, cfg.vocab_size, (1, a.prefill_len), generator=torch.Generator().manual_seed(1))
    from transformers import DynamicCache

    @torch.no_grad()
    def ours_prefill(chunk: int) -> tuple[torch.Tensor, Any]:
        cache = new_cache(ours, 1, a.prefill_len + a.n_decode)
        return prefill(ours, ids, cache, chunk_size=chunk), cache

    @torch.no_grad()
    def hf_prefill() -> tuple[torch.Tensor, Any]:
        cache = DynamicCache(config=hf.config)
        out = hf(ids, cache=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1], cache

    @torch.no_grad()
    def hf_step(tok: torch.Tensor, cache: Any) -> torch.Tensor:
        return hf(tok[:, None], cache=cache, use_cache=True).logits[:, -1]

    @torch.no_grad()
    def ours_step(tok: torch.Tensor, cache: Any) -> torch.Tensor:
        return decode_step(ours, tok, cache)

    sides = {"ours": (lambda: ours_prefill(a.prefill_len), ours_step), "hf": (hf_prefill, hf_step)}

    def prefill_timed(pre: Callable[[], Any]) -> Callable[[], float]:
        def f() -> float:
            t0 = time.perf_counter()
            pre()
            return time.perf_counter() - t0
        return f

    def decode_timed(pre: Callable[[], Any], step: Callable[[torch.Tensor, Any], torch.Tensor]
                     ) -> Callable[[], list[float]]:
        def f() -> list[float]:
            logits, cache = pre()
            tok = logits.argmax(-1)
            ts, toks = [], []
            for _ in range(a.n_decode):
                t0 = time.perf_counter()
                tok = step(tok, cache).argmax(-1)
                ts.append(time.perf_counter() - t0)
                toks.append(int(tok[0]))
            generated[id(step)] = toks
            return ts
        return f

    generated: dict[int, list[int]] = {}  # the last round's greedy tokens, per step function
    inf: dict[str, Any] = {"prefill_len": a.prefill_len, "n_decode": a.n_decode, "dtype": f"{a.dtype} weights",
                           "rounds": a.rounds, "warmup_rounds": 1}
    pre_fns = {"ours": prefill_timed(sides["ours"][0]), "ours_chunk512": prefill_timed(lambda: ours_prefill(512)),
               "hf": prefill_timed(hf_prefill)}
    interleaved(pre_fns, 1)  # warm-up round
    pre_s = interleaved(pre_fns, a.rounds)
    for name, ts in pre_s.items():
        t = statistics.median(ts)
        inf[f"prefill_{name}"] = {"s": t, "all_s": ts, "tokens_per_s": a.prefill_len / t, "s_spread": spread(ts)}
        print(f"prefill {name}: {a.prefill_len / t:.0f} tokens/s (rounds {min(ts):.3f}-{max(ts):.3f} s)", flush=True)
    inf["prefill_paired_ratio"] = paired_ratio(pre_s["ours"], pre_s["hf"])
    inf["prefill_chunk512_paired_ratio"] = paired_ratio(pre_s["ours_chunk512"], pre_s["hf"])

    def decode_block(threads: int) -> dict[str, Any]:
        torch.set_num_threads(threads)
        fns = {n: decode_timed(*sides[n]) for n in sides}
        interleaved(fns, 1)  # warm-up round
        runs = interleaved(fns, a.rounds)
        blk: dict[str, Any] = {"threads": threads}
        round_s = {n: [sum(ts) for ts in runs[n]] for n in runs}
        for n in runs:
            steps_ms = [t * 1e3 for ts in runs[n] for t in ts]
            logits, cache = sides[n][0]()
            tok = logits.argmax(-1)
            blk[n] = {"tokens_per_s": a.n_decode / statistics.median(round_s[n]), "round_s": round_s[n],
                      "step_ms": spread(steps_ms),
                      "round_median_step_ms": [statistics.median(ts) * 1e3 for ts in runs[n]],
                      "aten_ops_per_step": aten_ops(lambda: sides[n][1](tok, cache))}
            s = blk[n]["step_ms"]
            print(f"decode {n} @{threads}t: {blk[n]['tokens_per_s']:.1f} tokens/s, step ms median {s['median']:.2f} "
                  f"p10 {s['p10']:.2f} p90 {s['p90']:.2f} max {s['max']:.2f}, "
                  f"{blk[n]['aten_ops_per_step']} ATen ops/step", flush=True)
        blk["paired_ratio"] = paired_ratio(round_s["ours"], round_s["hf"])
        # the same weights decode the same greedy tokens (exactly in fp32): the caches are really used
        ot, ht = generated[id(sides["ours"][1])], generated[id(sides["hf"][1])]
        blk["greedy_tokens_agree"] = sum(x == y for x, y in zip(ot, ht)) / len(ot)
        return blk

    inf["decode"] = decode_block(a.threads)
    if a.threads > 1:
        inf["decode_1thread"] = decode_block(1)
        torch.set_num_threads(a.threads)
    res["inference"] = inf
    pr = res["train"]["paired_ratio_ours_over_hf"]
    res["ratios_ours_over_hf"] = {
        "train_tokens_per_s": pr["eager"]["median"],
        **({"train_tokens_per_s_compiled": pr["compiled"]["median"]} if a.compile else {}),
        "prefill_tokens_per_s": inf["prefill_paired_ratio"]["median"],
        "prefill_tokens_per_s_chunk512": inf["prefill_chunk512_paired_ratio"]["median"],
        "decode_tokens_per_s": inf["decode"]["paired_ratio"]["median"],
        **({"decode_tokens_per_s_1thread": inf["decode_1thread"]["paired_ratio"]["median"]}
           if a.threads > 1 else {}),
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
