"""Angular distance between consecutive layer applications (paper Figure 8; docs/design.md section 7).

Held-out token windows go through the plain full forward (``cache=None``) with
``return_hidden=True``: ``hidden[0]`` is the embedding output and ``hidden[j]`` the
residual stream after the j-th layer application of ``model.plan`` (``kv``
applications, which make the shared K̂V̂, leave the residual stream alone and add
no entry). Application j maps ``hidden[j-1]`` to ``hidden[j]``; its angular distance
is, per token,

    d = arccos(cos_sim(hidden[j-1], hidden[j])) / π      (in [0, 1])

averaged over every token of the windows. The angle is computed as
``2·atan2(‖â − b̂‖, ‖â + b̂‖)`` of the unit vectors in float64: the same angle as the
arccos of the cosine, without arccos's loss of half the digits near 0.

Each application is labelled with its stage kind (``self``: self-decoder or
Transformer layer, ``cross``: cross-decoder layer), stage index, loop index t and
layer index within the stage (:class:`yocou.model.config.Application`), so a looped
stage shows as the same layers repeated T times.

Held-out text: ``heldout_book.bin`` and ``heldout_code.bin`` (documents held out
of training whole, DATA.md), cut into non-overlapping windows of ``seq_len``
tokens taken round-robin over the documents (window 0 of every document, then
window 1, ...) until ``max_tokens`` tokens per split.

CLI::

    python -m yocou.evaluation.analysis.angular --model runs/<scale>/models/<variant>/model.pt \\
        --data runs/<scale>/tokens --max-tokens N --seq-len L --out results/<scale>/angular/<variant>.json
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from yocou.model.config import Application
from yocou.model.limits import plan_eval_batch

SPLITS = {"book": "heldout_book.bin", "code": "heldout_code.bin"}


def token_angular_distance(a_BND: torch.Tensor, b_BND: torch.Tensor) -> torch.Tensor:
    """Per-token angular distance ``arccos(cos_sim(a, b)) / π`` over the last dim, float64 ``[B, N]``.

    A zero vector has no direction; its distance is defined as 0 (the unit vector is 0).
    """
    a = a_BND.double()
    b = b_BND.double()
    a = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    b = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return 2.0 * torch.atan2((a - b).norm(dim=-1), (a + b).norm(dim=-1)) / torch.pi


def consecutive_angular_distances(hidden: Sequence[torch.Tensor]) -> torch.Tensor:
    """``[n, B, N]`` float64: distance between ``hidden[j]`` and ``hidden[j+1]`` for ``j < n = len(hidden) - 1``.

    Raises:
        ValueError: fewer than two hidden states, or shapes that differ.
    """
    if len(hidden) < 2:
        raise ValueError(f"need at least two hidden states, got {len(hidden)}")
    shape = hidden[0].shape
    for j, h in enumerate(hidden):
        if h.shape != shape:
            raise ValueError(f"hidden[{j}] has shape {tuple(h.shape)}, hidden[0] {tuple(shape)}")
    return torch.stack([token_angular_distance(hidden[j], hidden[j + 1]) for j in range(len(hidden) - 1)])


def application_labels(plan: Sequence[Application]) -> list[dict[str, Any]]:
    """One label per residual-stream-changing application (``kv`` left out), in forward order.

    ``index`` is 1-based (application 1 maps the embedding to the first hidden state);
    ``stage``, ``loop`` and ``layer`` are 0-based as in the plan.
    """
    out = []
    for a in plan:
        if a.kind == "kv":
            continue
        out.append({"index": len(out) + 1, "kind": a.kind, "stage": a.stage, "loop": a.loop, "layer": a.layer,
                    "window": a.window})
    return out


def held_out_windows(docs: Sequence[np.ndarray], seq_len: int, max_tokens: int) -> list[tuple[int, np.ndarray]]:
    """Non-overlapping windows of at most ``seq_len`` tokens, round-robin over documents.

    Round k takes window k (tokens ``k·seq_len .. (k+1)·seq_len − 1``) of every document
    that has one; stops when ``max_tokens`` tokens are taken (the last window is cut to
    fit). Windows shorter than 2 tokens are skipped.

    Returns:
        ``[(doc_index, ids)]`` in the order taken.

    Raises:
        ValueError: ``seq_len < 1`` or ``max_tokens < 1``.
    """
    if seq_len < 1 or max_tokens < 1:
        raise ValueError(f"seq_len and max_tokens must be >= 1, got {seq_len}, {max_tokens}")
    out: list[tuple[int, np.ndarray]] = []
    left = max_tokens
    k = 0
    while left > 0:
        any_left = False
        for d, ids in enumerate(docs):
            w = ids[k * seq_len:(k + 1) * seq_len][:left]
            if len(ids) > (k + 1) * seq_len:
                any_left = True
            if len(w) < 2:
                continue
            out.append((d, np.asarray(w, dtype=np.int64)))
            left -= len(w)
            if left <= 0:
                break
        if not any_left:
            break
        k += 1
    return out


@torch.no_grad()
def angular_sums(model: torch.nn.Module, windows: Sequence[np.ndarray], *, batch: int = 8,
                 dtype: str = "fp32") -> tuple[torch.Tensor, int]:
    """Sum over tokens of each application's angular distance, and the token count.

    Windows of equal length are batched together (no padding enters the sums).

    Args:
        model: a :class:`yocou.model.lm.LM` in eval mode.
        windows: token id arrays (each at least 1 token).
        batch: windows per forward.
        dtype: ``fp32`` or ``bf16`` (autocast; the distances are computed in float64).

    Returns:
        (``[n_applications]`` float64 sums, number of tokens).
    """
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"eval.angular.dtype must be 'fp32' or 'bf16', got {dtype!r}")
    dev = next(model.parameters()).device
    n_apps = sum(1 for a in model.plan if a.kind != "kv")
    total = torch.zeros(n_apps, dtype=torch.float64)
    count = 0
    by_len: dict[int, list[np.ndarray]] = {}
    for w in windows:
        by_len.setdefault(len(w), []).append(w)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype == "bf16")
    for n, ws in sorted(by_len.items()):
        for b in range(0, len(ws), batch):
            ids = torch.from_numpy(np.stack(ws[b:b + batch])).to(dev)
            with amp:
                out = model(ids, return_hidden=True)
            assert len(out.hidden) == n_apps + 1, (len(out.hidden), n_apps)
            d = consecutive_angular_distances([h.float() for h in out.hidden])
            total += d.sum(dim=(1, 2)).cpu()
            count += ids.numel()
    return total, count


def _split_result(model: torch.nn.Module, stream: Any, seq_len: int, max_tokens: int, batch: int,
                  dtype: str) -> tuple[dict[str, Any], torch.Tensor, int]:
    docs = [stream.document(i) for i in range(stream.n_docs)]
    wins = held_out_windows(docs, seq_len, max_tokens)
    if not wins:
        raise ValueError(f"no window of at least 2 tokens in {stream}")
    total, count = angular_sums(model, [w for _, w in wins], batch=batch, dtype=dtype)
    used = sorted({d for d, _ in wins})
    ids = [stream.doc_ids[d] if d < len(stream.doc_ids) else str(d) for d in used]
    res = {"n_tokens": count, "n_windows": len(wins), "n_docs": len(used), "docs": ids,
           "distance": (total / count).tolist()}
    return res, total, count


def main(argv: list[str] | None = None) -> int:
    from yocou.data import TokenStream
    from yocou.training.train import load_model, read_checkpoint
    from yocou.utils.entry import DEVICE_HELP, DTYPE_HELP, resolve_device
    from yocou.utils.guard import inside, reads, writes
    from yocou.utils.io import atomic_write_json, provenance


    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.analysis.angular", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, type=reads(), help="runs/<scale>/models/<variant>/model.pt")
    ap.add_argument("--data", required=True, type=reads(paths=inside(lambda a: [f"{s}.bin" for s in a.splits])), help="folder with heldout_book.bin and heldout_code.bin")
    ap.add_argument("--max-tokens", type=int, required=True, help="tokens per split")
    ap.add_argument("--seq-len", type=int, required=True, help="window length in tokens")
    ap.add_argument("--splits", nargs="+", default=list(SPLITS), choices=list(SPLITS))
    ap.add_argument("--batch", type=int, default=8, help="windows per forward")
    ap.add_argument("--dtype", default=None, choices=["fp32", "bf16"], help=DTYPE_HELP)
    ap.add_argument("--device", default=None, help=DEVICE_HELP)
    ap.add_argument("--out", required=True, type=writes(), help="result JSON (results/<scale>/angular/<variant>.json)")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    a.device, a.dtype = resolve_device(a.device, a.dtype)
    if a.seq_len < 2 or a.max_tokens < 2 or a.batch < 1:
        raise ValueError(f"eval.angular: seq_len and max_tokens must be >= 2 and batch >= 1, got "
                         f"{a.seq_len}, {a.max_tokens}, {a.batch}")
    if a.seq_len > a.max_tokens:
        raise ValueError(f"eval.angular: seq_len {a.seq_len} is longer than max_tokens {a.max_tokens} (the tokens "
                         "per split); no window of that length fits")
    model = load_model(a.model, a.device, a.dtype)
    ck = read_checkpoint(a.model)
    cfg = model.cfg
    batch = plan_eval_batch(model, a.batch, seq_len=a.seq_len, dtype=a.dtype)
    t0 = time.perf_counter()
    splits: dict[str, Any] = {}
    grand, n_all = None, 0
    for split in a.splits:
        stream = TokenStream(Path(a.data) / SPLITS[split])
        splits[split], total, count = _split_result(model, stream, a.seq_len, a.max_tokens, batch, a.dtype)
        grand = total if grand is None else grand + total
        n_all += count
    res = {
        "variant": Path(a.model).parent.name,
        "model": a.model,
        "name": cfg.name,
        "stages": [dict(kind=s.kind, n_layers=s.n_layers, n_loops=s.n_loops, window=s.window,
                        kv_per_loop=s.kv_per_loop) for s in cfg.stages],
        "train_seq_len": ck.get("train_config", {}).get("seq_len"),
        "seq_len": a.seq_len,
        "max_tokens_per_split": a.max_tokens,
        "dtype": a.dtype,
        "device": str(next(model.parameters()).device),
        "definition": "arccos(cos_sim(h_in, h_out))/pi per token, mean over tokens; h_in/h_out: residual stream "
                      "before/after the layer application (application 1 starts from the embedding)",
        "applications": application_labels(model.plan),
        "splits": splits,
        "all": {"n_tokens": n_all, "distance": (grand / n_all).tolist()},
        "wall_s": round(time.perf_counter() - t0, 3),
        "provenance": provenance({**vars(a), "batch_used": batch, "model_config": cfg.to_dict()}, None, a.device),
    }
    atomic_write_json(a.out, res)
    for lab, d in zip(res["applications"], res["all"]["distance"]):
        print(f"{lab['index']:3d} {lab['kind']:5s} stage {lab['stage']} loop {lab['loop']} layer {lab['layer']}: "
              f"{d:.4f}")
    print(f"{n_all} tokens in {res['wall_s']} s -> {a.out}")
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
