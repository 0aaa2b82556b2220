"""The ``yocou`` command line. Every subcommand prints JSON or a table; see ``yocou -h``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

MIB = 2 ** 20


def _cmd_kv(a: argparse.Namespace) -> int:
    import torch

    from .accounting import dtype_bytes, kv_cache_bytes
    from .config import preset

    cfg = preset(a.preset)
    out: dict[str, Any] = {
        "preset": a.preset, "variant": cfg.name, "seq_len": a.seq_len, "batch_size": a.batch, "dtype": a.dtype,
        "bytes_per_element": dtype_bytes(a.dtype),
        "analytic_bytes": kv_cache_bytes(cfg, a.seq_len, batch_size=a.batch, dtype=a.dtype),
        "analytic_by_kind": kv_cache_bytes(cfg, a.seq_len, batch_size=a.batch, dtype=a.dtype, by_kind=True),
    }
    out["analytic_mib"] = out["analytic_bytes"] / MIB
    if a.measure:
        from .accounting import param_count
        from .generate import prefill
        from .model import LM

        if param_count(cfg) > 200_000_000:
            raise SystemExit(f"--measure is for small presets; {a.preset} has {param_count(cfg):,} parameters")
        torch.manual_seed(0)
        model = LM(cfg).eval()
        tdtype = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[a.dtype]
        cache = model.new_cache(a.batch, a.seq_len, dtype=tdtype)
        ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq_len))
        prefill(model, ids, cache, chunk_size=512)
        out["measured_bytes"] = cache.nbytes()
        out["measured_by_kind"] = cache.nbytes_by_kind()
        out["measured_equals_analytic"] = out["measured_bytes"] == out["analytic_bytes"]
    print(json.dumps(out, indent=2))
    return 0


KV_TABLE_LENGTHS = [8192, 16384, 32768, 65536, 131072, 262144]


def kv_table(size: str = "1.3b", dtype: str = "bf16") -> list[dict[str, Any]]:
    """Table 10's layout (MiB per sequence) from the formulas: rows Transformer, RINS, YOCO, YOCO-U."""
    from .accounting import kv_cache_bytes
    from .config import preset

    rows = []
    for label, variant in [("Transformer", "transformer"), ("RINS", "rins"), ("YOCO", "yoco"), ("YOCO-U", "yocou")]:
        cfg = preset(f"{variant}-{size}")
        rows.append({"model": label, **{str(n): kv_cache_bytes(cfg, n, dtype=dtype) / MIB for n in KV_TABLE_LENGTHS}})
    return rows


def _cmd_kv_table(a: argparse.Namespace) -> int:
    size = a.preset.split("-", 1)[1] if a.preset.startswith(("yocou-", "yoco-")) else a.preset
    rows = kv_table(size, a.dtype)
    if a.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    heads = ["Model"] + [f"{n // 1024}K" for n in KV_TABLE_LENGTHS]
    fmt = (lambda v: f"{v:g}")
    if a.format == "csv":
        print(",".join(heads))
        for r in rows:
            print(",".join([r["model"]] + [fmt(r[str(n)]) for n in KV_TABLE_LENGTHS]))
        return 0
    print(f"KV cache per sequence (MiB), {size}, {a.dtype}, from the formulas of SPEC.md section 5")
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for r in rows:
        print("| " + " | ".join([r["model"]] + [fmt(r[str(n)]) for n in KV_TABLE_LENGTHS]) + " |")
    return 0


def _load_yaml_or_json(path: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"config file {p} not found")
    text = p.read_text(encoding="utf-8")
    if p.suffix in (".yaml", ".yml"):
        import yaml
        return yaml.safe_load(text)
    return json.loads(text)


def _cmd_train(a: argparse.Namespace) -> int:
    from .config import config_from_dict
    from .train import train, train_config_from_dict

    rc = _load_yaml_or_json(a.run_config)
    for key in ("model", "train"):
        if key not in rc:
            raise SystemExit(f"{a.run_config}: missing top-level key {key!r} (expected 'model' and 'train')")
    summary = train(config_from_dict(rc["model"]), train_config_from_dict(rc["train"]), a.data, a.out,
                    run_config=rc, progress=not a.no_progress)
    print(json.dumps({k: v for k, v in summary.items() if k != "provenance"}, indent=2))
    return 0


def _cmd_ppl(a: argparse.Namespace) -> int:
    import torch

    from .data.tokens import TokenStream
    from .io import atomic_write_json, provenance
    from .ppl import heldout_ppl
    from .train import load_model

    torch.manual_seed(0)
    model = load_model(a.model)
    res: dict[str, Any] = {"model": a.model, "splits": {}}
    for split in a.splits:
        stream = TokenStream(Path(a.data) / f"{split}.bin")
        res["splits"][split] = heldout_ppl(model, stream, a.seq_len, max_tokens=a.max_tokens, dtype=a.dtype,
                                           batch_size=a.batch)
    res["provenance"] = provenance({"seq_len": a.seq_len, "max_tokens": a.max_tokens, "dtype": a.dtype,
                                    "splits": a.splits, "model": a.model}, None)
    if a.out:
        atomic_write_json(a.out, res)
    print(json.dumps({s: {"ppl": r["ppl"], "n_tokens": r["n_tokens"]} for s, r in res["splits"].items()}, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="yocou", description="Universal YOCO reproduction harness")
    sub = p.add_subparsers(dest="cmd", required=True)

    k = sub.add_parser("kv", help="analytic (and measured) KV-cache bytes of a preset")
    k.add_argument("--preset", required=True, help="<variant>-<size>, e.g. yocou-paper-1.3b, yoco-tiny")
    k.add_argument("--seq-len", type=int, required=True, help="tokens per sequence N")
    k.add_argument("--batch", type=int, default=1)
    k.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    k.add_argument("--measure", action="store_true", help="also prefill N tokens and count the cache's bytes")
    k.set_defaults(func=_cmd_kv)

    t = sub.add_parser("kv-table", help="Table 10 from the formulas")
    t.add_argument("--preset", default="paper-1.3b", help="a size such as paper-1.3b or tiny")
    t.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    t.add_argument("--format", default="md", choices=["md", "csv", "json"])
    t.set_defaults(func=_cmd_kv_table)

    tr = sub.add_parser("train", help="train one model (runs under torchrun too)")
    tr.add_argument("--run-config", required=True, help="JSON/YAML with 'model' and 'train' sections")
    tr.add_argument("--data", required=True, help="train.bin token stream")
    tr.add_argument("--out", required=True, help="run folder")
    tr.add_argument("--no-progress", action="store_true")
    tr.set_defaults(func=_cmd_train)

    pp = sub.add_parser("ppl", help="held-out perplexity of a trained model")
    pp.add_argument("--model", required=True, help="model.pt")
    pp.add_argument("--data", required=True, help="folder with <split>.bin token streams")
    pp.add_argument("--splits", nargs="+", default=["heldout_book", "heldout_code"])
    pp.add_argument("--seq-len", type=int, required=True)
    pp.add_argument("--max-tokens", type=int, default=None, help="cut each document to this many tokens")
    pp.add_argument("--batch", type=int, default=8)
    pp.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    pp.add_argument("--out", default=None)
    pp.set_defaults(func=_cmd_ppl)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"yocou {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
