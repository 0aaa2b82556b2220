"""Trained weights as a committed ``.safetensors`` file: the tensors, the model config and a digest of the tensors in
its metadata, so a new evaluation of a committed model needs no retraining and a damaged file is refused on load.

:func:`yocou.training.train.load_model` reads such a file as it reads ``model.pt``, so every evaluation command takes
it as ``--model``.

Command line (rule ``ladder_weights``)::

    python -m yocou.training.weights --model runs/tiny/ladder/yoco_deep9_seed0_d4000/model.pt \\
        --out results/tiny/ladder/weights/yoco_deep9_seed0_d4000.safetensors
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

FORMAT = "yocou-weights-v1"


def tensors_sha256(state: dict[str, torch.Tensor]) -> str:
    """sha256 over the tensors in name order: each name, dtype, shape and the bytes of its values."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def write_weights(model_pt: str | os.PathLike, out: str | os.PathLike) -> dict[str, Any]:
    """Write the weights of a trained ``model.pt`` to ``out`` (``.safetensors``, fp32 as trained), its metadata
    holding ``format``, ``model_config``, ``train_config``, ``step`` and ``tensors_sha256``; atomic."""
    from yocou.training.train import read_checkpoint
    from yocou.utils.io import _default_mode as default_mode
    from yocou.utils.io import save_safetensors

    ck = read_checkpoint(model_pt)
    state = {k: v.detach().cpu().contiguous() for k, v in ck["model"].items()}
    meta = {"format": FORMAT, "model_config": json.dumps(ck["model_config"], sort_keys=True),
            "train_config": json.dumps(ck.get("train_config") or {}, sort_keys=True), "step": str(ck.get("step")),
            "tensors_sha256": tensors_sha256(state)}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        save_safetensors(state, tmp, metadata=meta)
        os.chmod(tmp, default_mode())  # safetensors creates it 0600: readable by all, as every other result
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return meta


def read_weights(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(state_dict, model_config dict)`` of a file :func:`write_weights` wrote, its digest verified.

    Raises:
        ValueError: not a safetensors file of this format, or its tensors do not match the recorded digest
            (damaged or edited), naming the file.
    """
    from safetensors import safe_open

    p = Path(path)
    try:
        with safe_open(str(p), framework="pt") as f:
            meta = f.metadata() or {}
            state = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # noqa: BLE001 - safetensors raises SafetensorError, OSError, ...
        raise ValueError(f"weights {p} cannot be read as safetensors ({type(e).__name__}: "
                         f"{(str(e).splitlines() or [''])[0][:120]})") from None
    if meta.get("format") != FORMAT or "model_config" not in meta or "tensors_sha256" not in meta:
        raise ValueError(f"weights {p}: no {FORMAT} metadata (format, model_config, tensors_sha256); write it with "
                         "python -m yocou.training.weights")
    if tensors_sha256(state) != meta["tensors_sha256"]:
        raise ValueError(f"weights {p}: its tensors do not match the digest in its metadata (damaged or edited); "
                         "nothing loaded")
    return state, json.loads(meta["model_config"])


def main(argv: list[str] | None = None) -> int:
    """``python -m yocou.training.weights``: a trained model.pt as a committed .safetensors file."""
    from yocou.utils.guard import check_args, reads, suffixed, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.training.weights", description=main.__doc__)
    ap.add_argument("--model", required=True, type=reads())
    ap.add_argument("--out", required=True, type=writes(paths=suffixed(".safetensors")))
    a = ap.parse_args(argv)
    check_args(a)
    meta = write_weights(a.model, a.out)
    print(json.dumps({"out": str(a.out), "tensors_sha256": meta["tensors_sha256"]}))
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
