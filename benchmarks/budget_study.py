"""The tiny scale's budget, from measurement. Writes benchmarks/results/budget_study_tiny.json.

On this machine's CPU, in the training dtype, for candidate shapes of YOCO and YOCO-U:

1. **throughput**: training tokens/s of two one-thread jobs side by side (what ``--cores 2`` with
   ``launch.threads: 1`` runs) against one two-thread job, and eager against ``torch.compile`` (compile time and
   steady step time), on random token ids (the speed does not depend on the ids);
2. **loss per CPU-minute**: each candidate trained on the real tiny corpus (``runs/tiny/tokens``, from
   ``snakemake --cores 1 tokens``) for the same number of tokens, two jobs side by side, then its held-out loss
   (nats/token, first ``--eval-tokens`` tokens of the held-out book) and the CPU-minutes it took;
3. **the budget's cost** (``--from-pipeline``): after a tiny ``reproduce_all``, every run's measured tokens/s
   (``metrics.jsonl``), CPU and wall seconds (Snakemake's benchmark files, ``logs/tiny/bench/train/``), held-out
   loss (``results/tiny/ppl/``) and the unigram/bigram references: what the chosen budget costs and reaches.

The vocabulary of the loss runs is the tokenizer's (the config's data.vocab_size); other vocabularies are timed only.
Timings on a shared machine are noisy: the 1-minute load average is recorded before and after each part.

    python benchmarks/budget_study.py [--tokens 262144] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CANDIDATES = {  # name -> ModelConfig size fields (vocab from the tokens, or `vocab_size` for timing-only rows)
    "d96-L6": dict(d_model=96, n_layers=6, n_heads=2, n_kv_heads=1, head_dim=48, d_ff=256, window=64),
    "d128-L8": dict(d_model=128, n_layers=8, n_heads=2, n_kv_heads=1, head_dim=64, d_ff=352, window=64),
    "d64-L6": dict(d_model=64, n_layers=6, n_heads=2, n_kv_heads=1, head_dim=32, d_ff=192, window=64),
}


def _load() -> float:
    return os.getloadavg()[0]


def _model(variant: str, shape: dict, vocab: int):
    from yocou.model.config import preset

    kw = dict(shape, vocab_size=vocab)
    if variant == "yocou":
        kw["n_loops"] = 3
    return preset(f"{variant}-small", **kw)


def _throughput(args: tuple) -> dict:
    """Median step time of a few optimizer steps (after one warmup step) in a fresh process."""
    variant, shape_name, vocab, seq_len, batch, threads, compile_, dtype = args
    import torch

    from yocou.training.train import TrainConfig, _loss, build_model, build_optimizer

    torch.set_num_threads(threads)
    mc = _model(variant, CANDIDATES[shape_name], vocab)
    tc = TrainConfig(steps=10, batch_size=batch, seq_len=seq_len, dtype=dtype, compile=compile_)
    model = build_model(mc, tc, torch.device("cpu"), 1)
    opt = build_optimizer(model, tc)
    fwd = torch.compile(model) if compile_ else model
    x = torch.randint(0, vocab, (batch, seq_len))
    y = torch.randint(0, vocab, (batch, seq_len))
    times = []
    t0 = time.perf_counter()
    for _ in range(6):
        t = time.perf_counter()
        with torch.autocast("cpu", torch.bfloat16, enabled=dtype == "bf16"):
            loss, _ = _loss(fwd, x, y, 0.0)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    step = sorted(times[1:])[len(times[1:]) // 2]
    return {"variant": variant, "shape": shape_name, "vocab": vocab, "seq_len": seq_len, "batch": batch,
            "threads": threads, "compile": compile_, "dtype": dtype, "first_step_s": round(times[0], 3),
            "step_s": round(step, 4), "tokens_per_s": round(batch * seq_len / step, 1),
            "params": sum(p.numel() for p in model.parameters()), "setup_s": round(time.perf_counter() - t0, 2)}


def _heldout_loss(model, ids, seq_len: int) -> float:
    from yocou.evaluation.ppl import token_nll

    model.eval()
    return float(token_nll(model, ids, seq_len, batch_size=16).mean())


def _loss_run(args: tuple) -> dict:
    """Train one candidate for ``tokens`` tokens on the real corpus (one thread) and measure its held-out loss."""
    variant, shape_name, tokens_dir, n_tokens, seq_len, batch, lr, eval_tokens, dtype, out = args
    import numpy as np
    import torch

    from yocou.data import load_tokenizer
    from yocou.training.train import TrainConfig, train

    torch.set_num_threads(1)
    vocab = load_tokenizer(str(Path(tokens_dir).parent / "tokenizer.json")).vocab_size
    mc = _model(variant, CANDIDATES[shape_name], vocab)
    steps = max(1, n_tokens // (batch * seq_len))
    tc = TrainConfig(steps=steps, batch_size=batch, seq_len=seq_len, lr=lr, warmup_steps=max(1, steps // 10),
                     dtype=dtype, log_every=max(1, steps // 10), ckpt_every=10 ** 6)
    c0, w0 = time.process_time(), time.perf_counter()
    summary = train(mc, tc, Path(tokens_dir) / "train.bin", out, progress=False)
    cpu_min, wall = (time.process_time() - c0) / 60, time.perf_counter() - w0
    from yocou.training.train import load_model

    model = load_model(Path(out) / "model.pt")
    ids = np.fromfile(Path(tokens_dir) / "heldout_book.bin", dtype=np.uint16)[:eval_tokens]
    return {"variant": variant, "shape": shape_name, "vocab": vocab, "seq_len": seq_len, "batch": batch, "lr": lr,
            "tokens": summary["tokens"], "params": summary["params"], "cpu_minutes": round(cpu_min, 2),
            "wall_s": round(wall, 1), "heldout_loss_book": round(_heldout_loss(model, ids, seq_len), 4),
            "loss_per_cpu_minute_note": "lower loss at fewer CPU-minutes is better"}


def _pairs(jobs: list[tuple], fn) -> list[dict]:
    """Run ``fn`` over ``jobs`` two at a time (two one-thread processes side by side)."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        return pool.map(fn, jobs, chunksize=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens-dir", default=str(ROOT / "runs/tiny/tokens"))
    ap.add_argument("--tokens", type=int, default=262144, help="training tokens per loss run")
    ap.add_argument("--eval-tokens", type=int, default=32768)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/budget_study_tiny.json"))
    ap.add_argument("--quick", action="store_true", help="throughput only (no loss runs)")
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose runs/ and results/ --from-pipeline reads")
    ap.add_argument("--from-pipeline", action="store_true",
                    help="only part 3: summarise the tiny pipeline's runs into the result file's `pipeline` entry")
    a = ap.parse_args(argv)
    if a.from_pipeline:
        return _from_pipeline(Path(a.out), root=Path(a.root))
    from yocou.utils.io import atomic_write_json, provenance

    res: dict = {"load_before": _load(), "dtype": a.dtype}
    # 1. throughput: one-thread pairs side by side vs one two-thread job; vocab and sequence candidates
    jobs = [(v, s, voc, n, b, 1, False, a.dtype) for s in CANDIDATES for v in ("yoco", "yocou")
            for voc, n, b in ((2048, 256, 16),)]
    jobs += [(v, "d96-L6", voc, n, b, 1, False, a.dtype) for v in ("yoco", "yocou")
             for voc, n, b in ((4096, 256, 16), (8192, 256, 16), (2048, 512, 8))]
    res["throughput_pairs"] = _pairs(jobs, _throughput)
    res["throughput_two_threads"] = [_throughput((v, "d96-L6", 2048, 256, 16, 2, False, a.dtype))
                                     for v in ("yoco", "yocou")]
    res["throughput_compile"] = _pairs([(v, "d96-L6", 2048, 256, 16, 1, True, a.dtype) for v in ("yoco", "yocou")],
                                       _throughput)
    res["load_after_throughput"] = _load()
    if not a.quick:
        scratch = ROOT / "runs/budget_study"
        jobs = [(v, s, a.tokens_dir, a.tokens, 256, 16, 1.5e-3, a.eval_tokens, a.dtype, str(scratch / f"{v}-{s}"))
                for s in ("d96-L6", "d128-L8", "d64-L6") for v in ("yoco", "yocou")]
        res["loss_runs"] = _pairs(jobs, _loss_run)
        res["load_after_loss_runs"] = _load()
    # 3. what one pair of one-thread jobs means for the chosen budget (1.02M tokens per run)
    pairs = {(r["variant"], r["shape"], r["vocab"], r["seq_len"]): r for r in res["throughput_pairs"]}
    two = {r["variant"]: r for r in res["throughput_two_threads"]}
    res["one_vs_two_threads"] = {
        v: {"two_one_thread_jobs_tokens_per_s": 2 * pairs[(v, "d96-L6", 2048, 256)]["tokens_per_s"],
            "one_two_thread_job_tokens_per_s": two[v]["tokens_per_s"]} for v in two}
    res["chosen"] = {"shape": "d96-L6", "vocab": 2048, "seq_len": 256, "batch": 16, "steps": 250,
                     "tokens_per_run": 250 * 16 * 256,
                     "minutes_per_run_one_thread": {v: round(250 * 16 * 256 / pairs[(v, "d96-L6", 2048, 256)]
                                                             ["tokens_per_s"] / 60, 2) for v in ("yoco", "yocou")}}
    res["load_end"] = _load()
    keep = json.loads(Path(a.out).read_text()).get("pipeline") if Path(a.out).is_file() else None
    atomic_write_json(a.out, {**res, **({"pipeline": keep} if keep else {}),
                              "provenance": provenance({"argv": argv or sys.argv[1:]}, None)})
    print(json.dumps({k: v for k, v in res.items() if k in ("one_vs_two_threads", "chosen", "loss_runs")}, indent=1))
    return 0


def _core_pairs(runs: list[dict]) -> dict:
    """Held-out loss differences of the core pairs at the last train-time evaluation (the first train.eval_tokens
    tokens of each split), paired by seed, with the 95% t interval (yocou.results.summarize.crossover.t_interval)."""
    from yocou.results.summarize.crossover import t_interval

    by = {r["run"]: r["train_time_heldout_loss"] for r in runs}
    out = {}
    for a, b in (("yocou", "yoco"), ("yoco", "transformer"), ("yocou", "rins"), ("rins", "transformer")):
        for split in ("book", "code"):
            names = [(x, y) for x, y in [(a, b)] + [(f"{a}_seed{k}", f"{b}_seed{k}") for k in (1, 2, 3, 4)]
                     if split in by.get(x, {}) and split in by.get(y, {})]
            if len(names) < 2:
                continue
            m, lo, hi, how = t_interval([by[x][split] for x, _ in names], [by[y][split] for _, y in names], paired=True)
            out[f"{a}-{b}.{split}"] = {"effect_nats": round(m, 4), "ci95": [round(lo, 4), round(hi, 4)], "method": how}
    return out


def _from_pipeline(out: Path, scale: str = "tiny", root: Path = ROOT) -> int:
    """Part 3: the chosen budget as the pipeline ran it; merged into ``out`` (other parts kept)."""
    import csv

    from yocou.utils.io import atomic_write_json, provenance

    models, res = root / f"runs/{scale}/models", root / f"results/{scale}"
    runs = []
    for d in sorted(p for p in models.iterdir() if (p / "summary.json").is_file() and (p / "metrics.jsonl").is_file()):
        sm = json.loads((d / "summary.json").read_text())
        rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines() if x.strip()]
        tps = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
        bench = root / f"logs/{scale}/bench/train/{d.name}.tsv"
        b = next(csv.DictReader(bench.open(), delimiter="\t")) if bench.is_file() else {}
        ppl = res / "ppl" / f"{d.name}.json"
        splits = json.loads(ppl.read_text())["splits"] if ppl.is_file() else {}
        last = next((r["heldout_loss"] for r in reversed(rows) if isinstance(r.get("heldout_loss"), dict)), {})
        runs.append({"run": d.name, "params": sm.get("params"), "tokens": sm["tokens"],
                     "seed": (sm.get("provenance") or {}).get("seed"), "train_time_heldout_loss": last,
                     "tokens_per_s_median": sorted(tps)[len(tps) // 2] if tps else None,
                     "wall_s": float(b["s"]) if b.get("s") not in (None, "", "NA") else None,
                     "cpu_s": float(b["cpu_time"]) if b.get("cpu_time") not in (None, "", "NA") else None,
                     "heldout_loss": {k.removeprefix("heldout_"): v.get("nats_per_token", v.get("nll"))
                                      for k, v in splits.items()}})
    pairs = _core_pairs(runs)
    base = root / f"results/{scale}/ppl/baselines.json"
    ref = json.loads(base.read_text())["splits"] if base.is_file() else {}
    cpu = [r["cpu_s"] for r in runs if r["cpu_s"]]
    data = json.loads(out.read_text()) if out.is_file() else {}
    data["pipeline"] = {"scale": scale, "runs": runs, "n_runs": len(runs),
                        "training_cpu_minutes": round(sum(cpu) / 60, 1) if cpu else None,
                        "training_wall_minutes_summed": round(sum(r["wall_s"] or 0 for r in runs) / 60, 1),
                        "references": {k.removeprefix("heldout_"): {m: v[m]["nats_per_token"]
                                                                    for m in ("unigram", "bigram_kn") if m in v}
                                       for k, v in ref.items()},
                        "core_pairs_train_time_heldout": pairs,
                        "load_at_summary": _load(), "provenance": provenance({"part": "from-pipeline"}, None)}
    atomic_write_json(out, data)
    print(json.dumps({k: v for k, v in data["pipeline"].items() if k not in ("runs", "provenance")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
