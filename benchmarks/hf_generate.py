"""Benchmark: greedy generation of exported models in transformers (the remote code's cache) against yocou's own
``generate``, at one shape, same weights, same machine, in one run (a benchmark, not a test).

For each variant the model (random weights at the scale's shape, seeded) is saved as a run folder and exported
with :func:`yocou.export.export_hf`, then loaded back with ``AutoModelForCausalLM.from_pretrained(...,
trust_remote_code=True)``, as a user would. Every round runs, for every variant, yocou's ``generate`` and
transformers' ``generate(max_new_tokens=N, do_sample=False, use_cache=True)`` on the same prompt, in reversed
order every other round, so drift in the machine's speed falls on both sides alike; the ratio HF time / yocou
time is taken per round and reported as median, min and max (> 1: yocou faster). Per decoded token, a logits
processor stamps the clock at every step of transformers' loop: the median step time over the first and the last
quarter of the generated tokens shows whether decode time per token stays flat as the sequence grows. One
round of ``use_cache=False`` (the previous remote code's only mode: every token re-runs the whole prefix) is
timed beside it. The greedy tokens of all three are compared.

``--scale tiny`` takes the shapes of ``workflows/config/<scale>.yaml`` (its variants, ``data.vocab_size``) and
the threads of one evaluation job. Writes a JSON with provenance (load average at start and end included).

Run (the numbers in benchmarks/README.md come from this command, on the 2-core CPU)::

    python benchmarks/hf_generate.py --scale tiny --rounds 5 --out benchmarks/results/hf_generate_tiny.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yocou.utils.entry import int_at_least, run_main  # noqa: E402
from yocou.utils.io import atomic_write_json, atomic_write_text, provenance  # noqa: E402

#: Every non-Llama kind of model the remote code serves (the Transformer exports as a native Llama).
DEFAULT_VARIANTS = ("yoco", "yocou", "rins", "loop", "upper_loop", "upper_loop_nokv", "yocou_moe")


def _tokenizer(folder: Path, vocab_size: int) -> Path:
    """A BPE of at most ``vocab_size`` ids trained on yocou's own source (the export needs one; timing does
    not depend on it)."""
    from yocou.data.tokenizer import train_tokenizer

    docs = folder / "train.jsonl"
    with open(docs, "w", encoding="utf-8") as fh:
        for p in sorted((ROOT / "yocou").rglob("*.py")):
            fh.write(json.dumps({"id": str(p), "text": p.read_text(encoding="utf-8")}) + "\n")
    train_tokenizer(docs, vocab_size, folder / "tokenizer.json")
    return folder / "tokenizer.json"


def _export(cfg: Any, tok: Path, root: Path, seq_len: int, seed: int) -> tuple[torch.nn.Module, Any]:
    """``(yocou model, transformers model)`` with the same random weights, through a real export."""
    import transformers

    from yocou.export import export_hf
    from yocou.model.lm import LM
    from yocou.training.train import TrainConfig, _save_model

    torch.manual_seed(seed)
    model = LM(cfg).eval()
    run_dir = root / "runs" / "bench" / "models" / cfg.name
    run_dir.mkdir(parents=True)
    tc = TrainConfig(steps=1, batch_size=1, seq_len=seq_len)
    _save_model(run_dir / "model.pt", model.state_dict(), cfg, tc, 1, {})
    atomic_write_json(run_dir / "run_config.json", {"variant": cfg.name, "model": cfg.to_dict(),
                                                    "train": dataclasses.asdict(tc)})
    hf_dir = root / "hf" / cfg.name
    export_hf(run_dir, hf_dir, tokenizer=tok)
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, trust_remote_code=True).eval()
    hf.generation_config.eos_token_id = None  # yocou's generate runs all N tokens: so does this one
    return model, hf


class _StepClock:
    """A transformers logits processor that records the clock at every generation step."""

    def __init__(self) -> None:
        self.t: list[float] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.t.append(time.perf_counter())
        return scores


def _hf_generate(hf: Any, ids: torch.Tensor, n: int, use_cache: bool) -> tuple[float, torch.Tensor, list[float]]:
    from transformers import LogitsProcessorList

    clock = _StepClock()
    t0 = time.perf_counter()
    with torch.no_grad():
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                          do_sample=False, use_cache=use_cache, logits_processor=LogitsProcessorList([clock]))
    dt = time.perf_counter() - t0
    steps = [b - a for a, b in zip(clock.t, clock.t[1:])]
    return dt, out[:, ids.shape[1]:], steps


def _yocou_generate(model: Any, ids: torch.Tensor, n: int) -> tuple[float, torch.Tensor]:
    from yocou.model.generate import generate

    t0 = time.perf_counter()
    with torch.no_grad():
        out = generate(model, ids, n)
    return time.perf_counter() - t0, out


def _spread(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="hf_generate.py")
    ap.add_argument("--scale", default="tiny", help="shapes and vocabulary from workflows/config/<scale>.yaml")
    ap.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), help="variants of the scale config")
    ap.add_argument("--new-tokens", type=int_at_least(8), default=256, help="tokens generated per call")
    ap.add_argument("--prompt-len", type=int_at_least(1), default=32, help="prompt tokens")
    ap.add_argument("--rounds", type=int_at_least(1), default=5, help="paired rounds")
    ap.add_argument("--threads", type=int_at_least(1), default=None, help="torch threads (default: eval.threads)")
    ap.add_argument("--seed", type=int_at_least(0), default=0)
    ap.add_argument("--out", required=True, help="result JSON (a .md summary is written beside it)")
    a = ap.parse_args(argv)

    from tqdm.auto import tqdm

    from yocou.model.config import config_from_dict
    from yocou.workflow.pipeline import resolve_run
    from yocou.workflow.wfconfig import read_scale_file, resolve_config

    path = ROOT / "workflows" / "config" / f"{a.scale}.yaml"
    cfg = resolve_config(read_scale_file(path), source=str(path), root=ROOT)
    unknown = [v for v in a.variants if v not in cfg["variants"]]
    if unknown:
        raise ValueError(f"--variants: {unknown} not in {path}'s variants ({sorted(cfg['variants'])})")
    threads = a.threads or int(cfg["eval"].get("threads") or 1)
    torch.set_num_threads(threads)
    vocab = int(cfg["data"]["vocab_size"])
    seq_len = int(cfg["train"]["seq_len"])
    load0 = os.getloadavg()
    ids = torch.randint(0, vocab, (1, a.prompt_len), generator=torch.Generator().manual_seed(a.seed))
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="hf_generate_") as tmp:
        tok = _tokenizer(Path(tmp), vocab)
        models = {}
        for v in a.variants:
            mc = resolve_run(cfg, v, vocab)["model"]
            mc = mc if not isinstance(mc, dict) else config_from_dict(mc)
            models[v] = _export(mc, tok, Path(tmp), seq_len, a.seed)
            rows[v] = {"n_params": sum(p.numel() for p in models[v][0].parameters()), "yocou_s": [], "hf_s": [],
                       "ratio": [], "hf_step_s": []}
        for v, (model, hf) in models.items():  # warm-up, and the tokens of all three ways
            _, y = _yocou_generate(model, ids, a.new_tokens)
            _, h, _ = _hf_generate(hf, ids, a.new_tokens, True)
            t_nc, h_nc, _ = _hf_generate(hf, ids, a.new_tokens, False)
            rows[v].update(tokens_equal_cache=bool(torch.equal(h, y)), tokens_equal_no_cache=bool(torch.equal(h_nc, y)),
                           hf_no_cache_s=t_nc)
        bar = tqdm(total=a.rounds * len(models), desc="rounds", unit="pair")
        for r in range(a.rounds):
            for v, (model, hf) in models.items():
                sides = ["yocou", "hf"] if r % 2 == 0 else ["hf", "yocou"]
                got: dict[str, float] = {}
                for side in sides:
                    if side == "yocou":
                        got["yocou"], _ = _yocou_generate(model, ids, a.new_tokens)
                    else:
                        got["hf"], _, steps = _hf_generate(hf, ids, a.new_tokens, True)
                        rows[v]["hf_step_s"].append(steps)
                rows[v]["yocou_s"].append(got["yocou"])
                rows[v]["hf_s"].append(got["hf"])
                rows[v]["ratio"].append(got["hf"] / got["yocou"])
                bar.update()
        bar.close()
    q = a.new_tokens // 4
    summary = {}
    for v, r in rows.items():
        first = statistics.median([s for steps in r["hf_step_s"] for s in steps[:q]])
        last = statistics.median([s for steps in r["hf_step_s"] for s in steps[-q:]])
        summary[v] = {"n_params": r["n_params"], "ratio_hf_over_yocou": _spread(r["ratio"]),
                      "yocou_tokens_per_s": a.new_tokens / statistics.median(r["yocou_s"]),
                      "hf_tokens_per_s": a.new_tokens / statistics.median(r["hf_s"]),
                      "hf_no_cache_tokens_per_s": a.new_tokens / r["hf_no_cache_s"],
                      "hf_step_ms_first_quarter": 1e3 * first, "hf_step_ms_last_quarter": 1e3 * last,
                      "hf_step_last_over_first": last / first,
                      "tokens_equal_cache": r["tokens_equal_cache"], "tokens_equal_no_cache": r["tokens_equal_no_cache"],
                      "within_1.5x": _spread(r["ratio"])["median"] <= 1.5}
        r.pop("hf_step_s")
    settings = {"scale": a.scale, "variants": a.variants, "new_tokens": a.new_tokens, "prompt_len": a.prompt_len,
                "rounds": a.rounds, "threads": threads, "seed": a.seed, "dtype": "fp32", "batch": 1}
    out = {"what": "greedy generate: transformers (exported remote code, use_cache=True) against yocou.model.generate, "
                   "paired rounds, CPU", "settings": settings, "summary": summary, "rounds": rows,
           "load_average": {"start": load0, "end": os.getloadavg()},
           "provenance": provenance({"hf_generate": settings}, a.seed)}
    atomic_write_json(a.out, out)
    lines = [f"# transformers generate (cache) against yocou generate: {a.new_tokens} new tokens, prompt "
             f"{a.prompt_len}, {a.scale} shape, fp32, batch 1, {threads} thread(s), CPU", "",
             f"{a.rounds} paired rounds; load average {load0[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.",
             "", "| variant | params | HF / yocou time (median [min, max]) | yocou tok/s | HF tok/s (cache) | "
             "HF tok/s (no cache) | HF ms/token first / last quarter | same tokens (cache, no cache) |",
             "|---|---:|---|---:|---:|---:|---|---|"]
    for v, s in summary.items():
        rs = s["ratio_hf_over_yocou"]
        lines.append(f"| {v} | {s['n_params']:,} | {rs['median']:.2f} [{rs['min']:.2f}, {rs['max']:.2f}] | "
                     f"{s['yocou_tokens_per_s']:.0f} | {s['hf_tokens_per_s']:.0f} | {s['hf_no_cache_tokens_per_s']:.0f} | "
                     f"{s['hf_step_ms_first_quarter']:.2f} / {s['hf_step_ms_last_quarter']:.2f} | "
                     f"{s['tokens_equal_cache']}, {s['tokens_equal_no_cache']} |")
    atomic_write_text(Path(a.out).with_suffix(".md"), "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog="hf_generate.py"))
