"""The ``yocou`` command line. Every subcommand prints JSON or a table; see ``yocou -h``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from yocou.results.names import PAPER_LENGTHS
from yocou.utils.entry import DEVICE_HELP, DTYPE_HELP, int_at_least, resolve_device
from yocou.workflow.cluster import DIST_TIMEOUT_S

MIB = 2 ** 20


def _cmd_kv(a: argparse.Namespace) -> int:
    import torch

    from yocou.model.accounting import dtype_bytes, kv_cache_bytes
    from yocou.model.config import preset

    cfg = preset(a.preset)
    out: dict[str, Any] = {
        "preset": a.preset, "variant": cfg.name, "seq_len": a.seq_len, "batch_size": a.batch, "dtype": a.dtype,
        "bytes_per_element": dtype_bytes(a.dtype),
        "analytic_bytes": kv_cache_bytes(cfg, a.seq_len, batch_size=a.batch, dtype=a.dtype),
        "analytic_by_kind": kv_cache_bytes(cfg, a.seq_len, batch_size=a.batch, dtype=a.dtype, by_kind=True),
    }
    out["analytic_mib"] = out["analytic_bytes"] / MIB
    if a.measure:
        from yocou.model.accounting import param_count
        from yocou.model.generate import prefill
        from yocou.model.limits import new_cache, new_model

        if param_count(cfg) > 200_000_000:
            raise ValueError(f"--measure is for small presets; {a.preset} has {param_count(cfg):,} parameters")
        torch.manual_seed(0)
        model = new_model(cfg).eval()
        tdtype = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[a.dtype]
        cache = new_cache(model, a.batch, a.seq_len, dtype=tdtype)
        from yocou.utils.memory import require

        require(8 * a.batch * a.seq_len, f"the prompt's token ids (batch {a.batch} x seq_len {a.seq_len}, int64)")
        ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq_len))
        prefill(model, ids, cache, chunk_size=512)
        out["measured_bytes"] = cache.nbytes()
        out["measured_by_kind"] = cache.nbytes_by_kind()
        out["measured_equals_analytic"] = out["measured_bytes"] == out["analytic_bytes"]
    print(json.dumps(out, indent=2))
    return 0


KV_TABLE_LENGTHS = PAPER_LENGTHS  # Table 10's lengths, 8K ... 256K (yocou.results.names)


def kv_table(size: str = "1.3b", dtype: str = "bf16") -> list[dict[str, Any]]:
    """Table 10's layout (MiB per sequence) from the formulas: rows Transformer, RINS, YOCO, YOCO-U."""
    from yocou.model.accounting import kv_cache_bytes
    from yocou.model.config import preset

    rows = []
    for label, variant in [("Transformer", "transformer"), ("RINS", "rins"), ("YOCO", "yoco"), ("YOCO-U", "yocou")]:
        cfg = preset(f"{variant}-{size}")
        rows.append({"model": label, **{str(n): kv_cache_bytes(cfg, n, dtype=dtype) / MIB for n in KV_TABLE_LENGTHS}})
    return rows


def _cmd_kv_table(a: argparse.Namespace) -> int:
    from yocou.model.config import PRESETS, SIZES

    variant, _, rest = a.preset.partition("-")
    size = rest if variant in PRESETS and rest in SIZES else a.preset
    if size not in SIZES:
        raise ValueError(f"--preset {a.preset!r}: expected a size (optionally after a variant, e.g. yocou-tiny), "
                         f"one of {sorted(SIZES)}")
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
    print(f"KV cache per sequence (MiB), {size}, {a.dtype}, from the formulas of docs/design.md section 5")
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for r in rows:
        print("| " + " | ".join([r["model"]] + [fmt(r[str(n)]) for n in KV_TABLE_LENGTHS]) + " |")
    return 0


def _load_yaml_or_json(path: str) -> Any:
    from yocou.utils.io import load_config_file
    return load_config_file(path)


#: The top-level keys of a run config (``yocou.workflow.pipeline.resolve_run``; ``model`` and ``train`` are required).
RUN_CONFIG_KEYS = frozenset({"variant", "scale", "model", "train", "assumptions", "equal_flops", "ladder"})


def _cmd_train(a: argparse.Namespace) -> int:
    from yocou.model.config import config_from_dict
    from yocou.training.train import heldout_split_name, train, train_config_from_dict

    rc = _load_yaml_or_json(a.run_config)
    for key in ("model", "train"):
        if key not in rc:
            raise ValueError(f"{a.run_config}: missing top-level key {key!r} (expected 'model' and 'train')")
    if unknown := sorted(set(rc) - RUN_CONFIG_KEYS):
        raise ValueError(f"{a.run_config}: unknown top-level key(s) {unknown}; a run config has "
                         f"{sorted(RUN_CONFIG_KEYS)}")
    heldout: dict[str, str] = {}
    for p in a.heldout or []:
        if (name := heldout_split_name(p)) in heldout:
            raise ValueError(f"--heldout: {heldout[name]} and {p} are both split {name!r}; give one file per split")
        heldout[name] = p
    summary = train(config_from_dict(rc["model"]), train_config_from_dict(rc["train"]), a.data, a.out,
                    run_config=rc, progress=not a.no_progress, tokenizer=a.tokenizer,
                    heldout=heldout, init_from=a.init_from,
                    save_state=a.save_state, dist_timeout_s=a.dist_timeout_s, allow_heldout=a.allow_heldout)
    print(json.dumps({k: v for k, v in summary.items() if k != "provenance"}, indent=2))
    return 0


def _cmd_ppl(a: argparse.Namespace) -> int:
    import torch

    from yocou.data.tokens import TokenStream, check_stream_tokenizer
    from yocou.evaluation.heldout import BYTES_METHOD, token_byte_lengths
    from yocou.evaluation.ppl import heldout_ppl
    from yocou.training.train import load_model
    from yocou.utils.io import atomic_write_json, provenance

    a.device, a.dtype = resolve_device(a.device, a.dtype)
    torch.manual_seed(0)
    model = load_model(a.model, a.device, a.dtype)
    from yocou.model.limits import plan_eval_batch

    batch = plan_eval_batch(model, a.batch, seq_len=a.seq_len, dtype=a.dtype)
    byte_len, method = token_byte_lengths(a.tokenizer) if a.tokenizer else (None, None)
    res: dict[str, Any] = {"model": a.model, "tokenizer": a.tokenizer, "splits": {}}
    if method:
        res["bytes_method"] = f"{method}: {BYTES_METHOD[method]}"
    for split in a.splits:
        stream = TokenStream(Path(a.data) / f"{split}.bin")
        if byte_len is not None and len(byte_len) < stream.vocab_size:
            raise ValueError(f"{a.tokenizer}: {len(byte_len)} token ids, but {split}.bin has a vocabulary of "
                             f"{stream.vocab_size} (not the run's tokenizer)")
        if a.tokenizer:
            check_stream_tokenizer(stream, a.tokenizer)
        res["splits"][split] = heldout_ppl(model, stream, a.seq_len, max_tokens=a.max_tokens, dtype=a.dtype,
                                           batch_size=batch, byte_len=byte_len, bytes_method=method)
        if not math.isfinite(res["splits"][split]["nats_per_token"]):
            raise ValueError(f"--model {a.model}: the held-out loss on {split} is "
                             f"{res['splits'][split]['nats_per_token']} (the weights hold NaN or inf?): nothing "
                             "written or reported")
    res["provenance"] = provenance({"seq_len": a.seq_len, "max_tokens": a.max_tokens, "dtype": a.dtype,
                                    "splits": a.splits, "model": a.model, "tokenizer": a.tokenizer,
                                    "device": a.device, "batch": a.batch, "batch_used": batch}, None, a.device)
    if a.out:
        atomic_write_json(a.out, res)
    print(json.dumps({s: {k: r.get(k) for k in ("ppl", "nats_per_token", "bits_per_byte", "n_tokens")}
                      for s, r in res["splits"].items()}, indent=2))
    return 0


def _cmd_baselines(a: argparse.Namespace) -> int:
    from yocou.evaluation.baselines import baselines_report
    from yocou.utils.io import atomic_write_json, provenance

    given = [a.budget_steps, a.budget_batch, a.budget_seq_len]
    if any(v is not None for v in given) and not all(v is not None for v in given):
        raise ValueError("--budget-steps, --budget-batch and --budget-seq-len go together (the training budget)")
    budget = (dict(steps=a.budget_steps, batch_size=a.budget_batch, seq_len=a.budget_seq_len, seed=a.budget_seed)
              if a.budget_steps is not None else None)
    res = baselines_report(a.train, a.data, splits=a.splits, seq_len=a.seq_len, max_tokens=a.max_tokens,
                           tokenizer=a.tokenizer, budget=budget)
    res["provenance"] = provenance({"train": a.train, "data": a.data, "seq_len": a.seq_len,
                                    "max_tokens": a.max_tokens, "splits": a.splits, "tokenizer": a.tokenizer,
                                    "budget": budget}, a.budget_seed)
    if a.out:
        atomic_write_json(a.out, res)
    print(json.dumps({s: {m: {k: r[m].get(k) for k in ("nats_per_token", "bits_per_byte", "n_tokens")}
                          for m in res["models"]} for s, r in res["splits"].items()}, indent=2))
    return 0


def _pipeline_section(path: str, *keys: str) -> Any:
    cfg = _load_yaml_or_json(path)
    for k in keys:
        if not isinstance(cfg, dict) or k not in cfg:
            where = "--config (inline JSON)" if path.lstrip().startswith("{") else path
            raise ValueError(f"{where}: missing key {'.'.join(keys)}")
        cfg = cfg[k]
    return cfg


def _cmd_corpus(a: argparse.Namespace) -> int:
    from yocou.data import build_corpus

    manifest = build_corpus(Path(a.out), _pipeline_section(a.config, "data", "corpus"))
    print(json.dumps({k: v for k, v in manifest.items() if k in ("splits", "totals", "sources")}, indent=2,
                     default=str)[:4000])
    return 0


def _cmd_tokenizer(a: argparse.Namespace) -> int:
    from yocou.data import install_pretrained, train_tokenizer

    pretrained = a.pretrained or (_load_yaml_or_json(a.config).get("data", {}).get("tokenizer") if a.config else None)
    if pretrained:
        print(json.dumps({"tokenizer": a.out, **install_pretrained(pretrained, a.out)}))
        return 0
    if a.vocab_size is None and a.config is None:
        raise ValueError("--vocab-size or --config (with data.vocab_size) is required to train a tokenizer")
    vocab = a.vocab_size if a.vocab_size is not None else _pipeline_section(a.config, "data", "vocab_size")
    from yocou.data.tokenizer import MAX_VOCAB_SIZE

    if isinstance(vocab, bool) or not isinstance(vocab, int) or not 256 <= vocab <= MAX_VOCAB_SIZE:
        raise ValueError(f"--vocab-size / data.vocab_size: expected an integer in [256, {MAX_VOCAB_SIZE}] (the byte "
                         f"alphabet to 2^20 ids), got {vocab!r}")
    train_tokenizer(Path(a.corpus) / "train.jsonl", vocab, Path(a.out))
    print(json.dumps({"tokenizer": a.out, "vocab_size": vocab}))
    return 0


def _cmd_tokenize(a: argparse.Namespace) -> int:
    from yocou.data import encode_corpus

    meta = encode_corpus(Path(a.corpus), Path(a.tokenizer), Path(a.out))
    print(json.dumps({s: {"n_tokens": m.get("n_tokens"), "n_docs": m.get("n_docs")} for s, m in meta.items()},
                     indent=2))
    return 0


def _cmd_kv_measure(a: argparse.Namespace) -> int:
    """Measured vs analytic cache bytes after a prefill of N tokens, per run config."""
    import torch

    from yocou.model.accounting import kv_cache_bytes
    from yocou.model.config import config_from_dict
    from yocou.model.generate import prefill
    from yocou.model.limits import new_cache, new_model
    from yocou.utils.io import atomic_write_json, provenance

    tdtype = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[a.dtype]
    device, _ = resolve_device(a.device, a.dtype)  # bf16 weights on CUDA with --dtype bf16, as load_model
    rows = []
    for rc_path in a.run_configs:
        rc = _load_yaml_or_json(rc_path)
        if "model" not in rc:
            raise ValueError(f"{rc_path}: missing top-level key 'model' (a run_config.json of the pipeline)")
        try:
            cfg = config_from_dict(rc["model"])
        except (ValueError, TypeError, KeyError) as e:
            raise type(e)(f"{rc_path}: model: {e}") from None
        torch.manual_seed(0)
        model = new_model(cfg).to(device, torch.bfloat16 if device != "cpu" and a.dtype == "bf16" else None).eval()
        for n in a.seq_lens:
            cache = new_cache(model, 1, n, dtype=tdtype)
            ids = torch.randint(0, cfg.vocab_size, (1, n)).to(device)
            with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
                prefill(model, ids, cache, chunk_size=512)
            analytic = kv_cache_bytes(cfg, n, dtype=a.dtype)
            rows.append({"variant": rc.get("variant", cfg.name), "seq_len": n, "dtype": a.dtype,
                         "measured_bytes": cache.nbytes(), "analytic_bytes": analytic,
                         "equal": cache.nbytes() == analytic})
            print(json.dumps(rows[-1]))
    if not all(r["equal"] for r in rows):
        raise ValueError("measured KV bytes differ from the formula: " + json.dumps([r for r in rows if not r["equal"]]))
    prov = provenance({"run_configs": a.run_configs, "seq_lens": a.seq_lens, "dtype": a.dtype, "device": device}, 0,
                      device)
    atomic_write_json(a.out, {"rows": rows, "provenance": prov})
    return 0


def _cmd_export_hf(a: argparse.Namespace) -> int:
    """A run as a Hugging Face folder (:func:`yocou.export.export_hf`); prints what it wrote as JSON."""
    from yocou.export import export_hf

    print(json.dumps(export_hf(a.run_dir, a.out_dir, model_file=a.model, tokenizer=a.tokenizer,
                               overwrite=a.overwrite, max_position_embeddings=a.max_position_embeddings),
                     indent=2))
    return 0


def _cmd_audit(a: argparse.Namespace) -> int:
    """Consistency checks and reproduced verdicts of the paper's numbers; 1 on a baseline regression."""
    from yocou.results.audit.report import run_from_args

    return run_from_args(a)


_SPLITS = ("train", "heldout_book", "heldout_code")
_CORPUS_FILES = (*(f"{s}.jsonl" for s in _SPLITS), "manifest.json")


def _split_bins(a: argparse.Namespace) -> list[str]:
    return [f"{s}.bin" for s in a.splits]


def _run_files(out: str, a: argparse.Namespace) -> list[str]:
    """What ``yocou train`` writes in its run folder: its files and any step snapshots already there."""
    snapshots = sorted(str(p) for p in Path(out).glob("model_step*.pt")) if os.path.isdir(out) else []
    return [os.path.join(out, n) for n in ("model.pt", "ckpt.pt", "metrics.jsonl", "summary.json", "state.pt")] + \
        snapshots


def build_parser() -> argparse.ArgumentParser:
    from yocou.utils.guard import inside, reads, replaces, writes

    p = argparse.ArgumentParser(prog="yocou", description="Universal YOCO reproduction harness")
    sub = p.add_subparsers(dest="cmd", required=True)

    k = sub.add_parser("kv", help="analytic (and measured) KV-cache bytes of a preset")
    k.add_argument("--preset", required=True, help="<variant>-<size>, e.g. yocou-paper-1.3b, yoco-tiny")
    k.add_argument("--seq-len", type=int_at_least(1), required=True, help="tokens per sequence N")
    k.add_argument("--batch", type=int_at_least(1), default=1)
    k.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    k.add_argument("--measure", action="store_true", help="also prefill N tokens and count the cache's bytes")
    k.set_defaults(func=_cmd_kv)

    t = sub.add_parser("kv-table", help="Table 10 from the formulas")
    t.add_argument("--preset", default="paper-1.3b", help="a size such as paper-1.3b or tiny")
    t.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    t.add_argument("--format", default="md", choices=["md", "csv", "json"])
    t.set_defaults(func=_cmd_kv_table)

    tr = sub.add_parser("train", help="train one model (runs under torchrun too)")
    tr.add_argument("--run-config", required=True, type=reads(), help="JSON/YAML with 'model' and 'train' sections")
    tr.add_argument("--data", required=True, type=reads(), help="train.bin token stream")
    tr.add_argument("--out", required=True, type=writes(paths=_run_files), help="run folder")
    tr.add_argument("--heldout", nargs="+", metavar="BIN", type=reads(),
                    help="held-out token streams (heldout_book.bin heldout_code.bin) scored every train.eval_every "
                         "steps into metrics.jsonl as heldout_loss.<book|code>")
    tr.add_argument("--tokenizer", default=None, type=reads(),
                    help="the run's tokenizer.json (needed when train.needle_mix.fraction > 0)")
    tr.add_argument("--init-from", default=None, metavar="STATE", type=reads(),
                    help="a cooldown branch: start from another run's state.pt (written with --save-state)")
    tr.add_argument("--allow-heldout", action="store_true",
                    help="train on a held-out split (its .json names it) on purpose; refused otherwise")
    tr.add_argument("--save-state", action="store_true",
                    help="also write state.pt (model and optimizer state) at the end, for branches to start from")
    tr.add_argument("--dist-timeout-s", type=int_at_least(1), default=DIST_TIMEOUT_S, metavar="S",
                    help="under torchrun: seconds a collective waits for the other ranks before the run fails "
                         "(the process group's timeout; the pipeline passes launch.dist_timeout_s)")
    tr.add_argument("--no-progress", action="store_true")
    tr.set_defaults(func=_cmd_train)

    c = sub.add_parser("corpus", help="build the corpus (documents, hold-outs, manifest)")
    c.add_argument("--config", required=True, type=reads(if_exists=True), help="pipeline config: a file, or inline JSON (reads data.corpus)")
    c.add_argument("--out", required=True, type=writes(paths=inside(*_CORPUS_FILES)))
    c.set_defaults(func=_cmd_corpus)

    tk = sub.add_parser("tokenizer", help="train the BPE tokenizer on the training split")
    tk.add_argument("--corpus", required=True, type=reads(paths=inside("train.jsonl")))
    tk.add_argument("--config", default=None, type=reads(if_exists=True), help="pipeline config: a file, or inline JSON (reads data.vocab_size)")
    tk.add_argument("--vocab-size", type=int, default=None)
    tk.add_argument("--pretrained", default=None, type=reads(if_exists=True),
                    help="use this tokenizer.json path or name (gpt2-offline, cl100k_base) instead of training")
    tk.add_argument("--out", required=True, type=writes())
    tk.set_defaults(func=_cmd_tokenizer)

    te = sub.add_parser("tokenize", help="encode every split into token streams")
    te.add_argument("--corpus", required=True, type=reads(paths=inside(*(f"{s}.jsonl" for s in _SPLITS))))
    te.add_argument("--tokenizer", required=True, type=reads())
    te.add_argument("--out", required=True, type=writes(paths=inside(*(f"{s}{x}" for s in _SPLITS for x in (".bin", ".offsets.npy", ".json")))))
    te.set_defaults(func=_cmd_tokenize)

    km = sub.add_parser("kv-measure", help="measured vs analytic KV bytes after prefill, per run config")
    km.add_argument("--run-configs", nargs="+", required=True, type=reads())
    km.add_argument("--seq-lens", nargs="+", type=int_at_least(1), required=True, help="prompt lengths, each >= 1")
    km.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    km.add_argument("--device", default=None, help=DEVICE_HELP)
    km.add_argument("--out", required=True, type=writes())
    km.set_defaults(func=_cmd_kv_measure)

    pp = sub.add_parser("ppl", help="held-out perplexity of a trained model")
    pp.add_argument("--model", required=True, type=reads(), help="model.pt")
    pp.add_argument("--data", required=True, type=reads(paths=inside(_split_bins)), help="folder with <split>.bin token streams")
    pp.add_argument("--splits", nargs="+", default=["heldout_book", "heldout_code"])
    pp.add_argument("--seq-len", type=int_at_least(2), required=True)
    pp.add_argument("--max-tokens", type=int_at_least(2), default=None,
                    help="cap per split: tokens read from its documents in stored order, the last one cut "
                         "(default: all)")
    pp.add_argument("--tokenizer", default=None, type=reads(),
                    help="the run's tokenizer.json (or name), for bits/byte; without it no n_bytes/bits_per_byte")
    pp.add_argument("--batch", type=int_at_least(1), default=8)
    pp.add_argument("--dtype", default=None, choices=["fp32", "bf16"], help=DTYPE_HELP)
    pp.add_argument("--device", default=None, help=DEVICE_HELP)
    pp.add_argument("--out", default=None, type=writes())
    pp.set_defaults(func=_cmd_ppl)

    bl = sub.add_parser("baselines", help="unigram and Kneser-Ney bigram held-out loss (the trivial references), "
                                          "on the tokens and windows `ppl` scores")
    bl.add_argument("--train", required=True, type=reads(), help="train.bin token stream the baselines are fitted on")
    bl.add_argument("--data", required=True, type=reads(paths=inside(_split_bins)), help="folder with <split>.bin held-out token streams")
    bl.add_argument("--splits", nargs="+", default=["heldout_book", "heldout_code"])
    bl.add_argument("--seq-len", type=int_at_least(2), required=True, help="window length (as for ppl)")
    bl.add_argument("--max-tokens", type=int_at_least(2), default=None, help="cap per split (as for ppl)")
    bl.add_argument("--tokenizer", default=None, type=reads(), help="the run's tokenizer.json (or name), for bits/byte")
    bl.add_argument("--budget-steps", type=int_at_least(1), default=None,
                    help="training steps of a run: also fit the bigram on that run's training windows")
    bl.add_argument("--budget-batch", type=int_at_least(1), default=None, help="training batch size (sequences)")
    bl.add_argument("--budget-seq-len", type=int_at_least(1), default=None, help="training sequence length")
    bl.add_argument("--budget-seed", type=int_at_least(0), default=0, help="training seed of the replayed windows")
    bl.add_argument("--out", default=None, type=writes())
    bl.set_defaults(func=_cmd_baselines)

    ex = sub.add_parser("export-hf", help="write a trained run as a Hugging Face folder (loads offline with "
                                          "transformers alone)")
    ex.add_argument("run_dir", metavar="RUN_DIR", type=reads("RUN_DIR"), help="run folder with model.pt, e.g. runs/tiny/models/yocou")
    ex.add_argument("out_dir", metavar="OUT_DIR", type=replaces("OUT_DIR"), help="folder to write (must not exist or be empty)")
    ex.add_argument("--model", default="model.pt", type=reads(paths=lambda v, a: [os.path.join(a.run_dir, v)]), help="checkpoint in RUN_DIR to export (default model.pt)")
    ex.add_argument("--tokenizer", default=None, type=reads(), help="tokenizer.json path or name (cl100k_base); default "
                    "RUN_DIR/tokenizer.json, else the pipeline's runs/<scale>/tokenizer.json two folders up")
    ex.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT_DIR")
    ex.add_argument("--max-position-embeddings", type=int_at_least(1, 2**31 - 1), default=None, metavar="N",
                    help="max_position_embeddings to write (default: the longest length the run's scale config "
                         "evaluates it at, from workflows/config/<scale>.yaml; else its training seq_len)")
    ex.set_defaults(func=_cmd_export_hf)

    from yocou.results.audit.args import add_arguments as _audit_arguments
    from yocou.results.audit.args import extra_paths as _audit_paths

    au = sub.add_parser("audit", help="audit the paper's reported numbers: consistency checks, verdicts, report")
    _audit_arguments(au)
    au.set_defaults(func=_cmd_audit, extra_paths=_audit_paths)
    return p


def main(argv: list[str] | None = None) -> int:
    """The ``yocou`` console script. Bad input (:data:`yocou.utils.entry.USER_ERRORS`) prints
    ``yocou <cmd>: error: <message>`` and returns 2, as every ``python -m yocou.<module>`` does; other
    exceptions (bugs) keep their traceback."""
    from yocou.utils.entry import (
        USER_ERRORS,
        disk_error,
        name_too_long,
        report_user_error,
    )
    from yocou.utils.guard import check_args

    args = build_parser().parse_args(argv)
    try:
        check_args(args, args.extra_paths(args) if hasattr(args, "extra_paths") else None)
        return args.func(args)
    except USER_ERRORS as e:
        return report_user_error(f"yocou {args.cmd}", e)
    except OSError as e:
        if (bad := name_too_long(e)) is not None:
            return report_user_error(f"yocou {args.cmd}", bad)
        if not disk_error(e):
            raise
        return report_user_error(f"yocou {args.cmd}", e)


if __name__ == "__main__":
    sys.exit(main())
