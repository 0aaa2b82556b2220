"""Write a trained run as a Hugging Face folder that loads offline with transformers alone.

What :func:`export_hf` writes into ``OUT_DIR``:

- ``model.safetensors``: the weights, in the checkpoint's dtype (fp32 for a run of ``yocou train``).
- ``config.json`` and ``generation_config.json``. The plain Transformer becomes a native
  ``LlamaForCausalLM`` (``model_type: llama``, fused matrices split as :mod:`yocou.hf` does); every other
  variant a ``YocouForCausalLM`` whose code ships in the folder (``configuration_yocou.py``,
  ``modeling_yocou.py``, named in ``auto_map``; load with ``trust_remote_code=True``). Its config holds the
  architecture as ``stages``, like :class:`yocou.config.ModelConfig`.
- The tokenizer: for a ``tokenizers`` BPE (the trained ``tokenizer.json``, ``gpt2-offline``)
  ``tokenizer.json`` and ``tokenizer_config.json`` (``AutoTokenizer`` reads them); for ``cl100k_base``,
  which is a tiktoken encoding, only its name in ``tokenizer_ref.json`` (``{"yocou_tokenizer_ref":
  "cl100k_base"}``, load it with ``tiktoken.get_encoding("cl100k_base")``).
- ``yocou_export.json``: where it came from (run folder, checkpoint step, yocou's model and training
  configs, the tokenizer's fingerprint) and the provenance record of :func:`yocou.io.provenance`.

``max_position_embeddings`` is the run's training sequence length (lm-eval's ``hf`` model takes its default
``max_length`` from it, as :class:`yocou.lmeval.model.YocouLM` takes it from the checkpoint); RoPE itself
has no limit. Token ids: BOS, EOS and padding are all ``<|endoftext|>``, yocou's document separator.
One difference remains: the Hugging Face tokenizer reads the literal text ``<|endoftext|>`` inside a string
as the special token, where yocou's encodes it as plain text.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from ..config import ModelConfig, config_from_dict

__all__ = ["REMOTE_CODE_FILES", "export_hf", "find_tokenizer"]

#: The remote-code files copied from this package into an exported folder of a non-Transformer variant.
REMOTE_CODE_FILES = ("configuration_yocou.py", "modeling_yocou.py")
_HERE = Path(__file__).resolve().parent


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
    from ..hf import llama_config_kwargs

    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **llama_config_kwargs(cfg, max_len),
            "bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id, "dtype": dtype}


def _tokenizer_files(spec: str | os.PathLike, max_len: int) -> tuple[dict[str, bytes], dict[str, Any], int]:
    """The tokenizer's files for the folder (name -> bytes), its record for ``yocou_export.json`` and its
    EOS id.

    Raises:
        FileNotFoundError / ImportError / ValueError: as :func:`yocou.data.tokenizer.load_tokenizer`.
    """
    from ..data.tokenizer import EOS_TOKEN, REF_KEY, _named_ref, load_tokenizer, tokenizer_fingerprint

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
              tokenizer: str | os.PathLike | None = None, overwrite: bool = False) -> dict[str, Any]:
    """Write the run in ``run_dir`` as a Hugging Face folder ``out_dir`` (module docstring).

    Args:
        run_dir: a run folder (``runs/<scale>/models/<variant>``) with ``model.pt`` and, optionally,
            ``run_config.json`` (checked against the checkpoint's config when present).
        out_dir: the folder to write; it must not exist or be empty unless ``overwrite``. It is written
            beside itself first and moved into place whole, so a failed export leaves nothing behind.
        model_file: the checkpoint inside ``run_dir`` (e.g. ``model_step100.pt``), or a path.
        tokenizer: a ``tokenizer.json`` path or a name (``cl100k_base``); default :func:`find_tokenizer`.
        overwrite: replace a non-empty ``out_dir``.

    Returns:
        ``{"out_dir", "format" ("llama" or "yocou-remote-code"), "variant", "step", "files", "n_params"}``.

    Raises:
        FileNotFoundError: ``run_dir``, the checkpoint or the tokenizer does not exist.
        NotADirectoryError: ``run_dir`` is not a folder.
        FileExistsError: ``out_dir`` is a file, a non-empty folder without ``overwrite``, or ``run_dir`` itself or
            a folder above it (whatever ``overwrite`` says).
        ValueError: an unreadable checkpoint, a ``run_config.json`` whose model differs from the
            checkpoint's, or a tokenizer with more ids than the model's ``vocab_size``.
    """
    from safetensors.torch import save_file

    from ..hf import is_llama_compatible, llama_state_dict
    from ..io import provenance, sha256_file
    from ..model import LM
    from ..train import read_checkpoint

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if not run_dir.exists():
        raise FileNotFoundError(f"RUN_DIR {run_dir} does not exist")
    if not run_dir.is_dir():
        raise NotADirectoryError(f"RUN_DIR {run_dir} is not a folder (expected runs/<scale>/models/<variant>)")
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"OUT_DIR {out_dir} exists and is a file")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"OUT_DIR {out_dir} exists and is not empty (pass --overwrite to replace it)")
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
    max_len = int(train_cfg.get("seq_len") or 2048)
    tok_spec = tokenizer if tokenizer is not None else find_tokenizer(run_dir)
    tok_files, tok_record, eos_id = _tokenizer_files(tok_spec, max_len)
    if tok_record["vocab_size"] > cfg.vocab_size:
        raise ValueError(f"tokenizer {tok_spec} has {tok_record['vocab_size']} ids but the model's vocab_size is "
                         f"{cfg.vocab_size}: not the run's tokenizer (pass --tokenizer)")

    with torch.device("meta"):  # no random init: the checkpoint's tensors become the parameters (assign)
        model = LM(cfg)
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
        state = {(k if k == "lm_head.weight" else "model." + k): v.detach().contiguous()
                 for k, v in model.state_dict().items()}
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
    }
    record["provenance"] = provenance({"export_hf": {"run_dir": str(run_dir), "model_file": model_file,
                                                     "tokenizer": str(tok_spec)}}, None)

    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        _write_json(tmp / "config.json", config)
        _write_json(tmp / "generation_config.json", gen)
        for name, data in tok_files.items():
            (tmp / name).write_bytes(data)
        if not llama:
            for name in REMOTE_CODE_FILES:
                shutil.copyfile(_HERE / name, tmp / name)
        _write_json(tmp / "yocou_export.json", record)
        _move_into_place(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return {"out_dir": str(out_dir), "format": record["format"], "variant": cfg.name,
            "step": record["source"]["step"], "files": sorted(p.name for p in out_dir.iterdir()),
            "n_params": sum(v.numel() for v in state.values())}


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


def _move_into_place(tmp: Path, out_dir: Path) -> None:
    """Rename the finished folder ``tmp`` to ``out_dir``, replacing an empty or (when allowed) old one."""
    old = None
    if out_dir.is_dir():
        old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
        out_dir.rename(old)
    tmp.rename(out_dir)
    if old is not None:
        shutil.rmtree(old)
