"""The paper's studies: the equal-FLOPs model of Table 2, and the numbers read off Figure 2.

* :func:`equal_flops_model`: Table 2's "YOCO-U (Equal FLOPS)" is the equal-steps YOCO-U run stopped at the step
  where its analytic training FLOPs reach those of YOCO's full run (docs/design.md section 6). The run writes that
  step's weights as ``model_step<N>.pt`` (``TrainConfig.snapshot_steps``, set by
  :func:`yocou.workflow.pipeline.resolve_run` from ``equal_flops_to``); this turns the snapshot into a model folder of
  its own (``model.pt``, ``summary.json``) that every evaluation rule can read.
* :func:`tokens_to_reach` and :func:`loss_gap_at_flops`: Figure 2's caption claims (YOCO-U needs about 62% fewer
  tokens to reach YOCO's loss; at equal training FLOPs its loss is lower by ΔL = 0.033), computed from our curves.

CLI: ``python -m yocou.workflow.studies eqflops --run RUN_DIR --out OUT_DIR``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yocou.results.readers import ResultFileError, number, read_json, read_summary, text
from yocou.utils.io import atomic_path, atomic_write_json


def equal_flops_model(run_dir: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Write ``out_dir/model.pt`` and ``summary.json`` from the equal-FLOPs snapshot of the run in ``run_dir``.

    Returns the summary: the run's own summary with ``steps``, ``tokens`` and ``train_flops`` of the snapshot
    and ``equal_flops = {of, to, step, train_flops, reference_train_flops}``.

    Raises:
        ValueError: the run's ``run_config.json`` has no ``equal_flops`` entry (no ``equal_flops_to`` in config).
        FileNotFoundError: the run folder lacks ``run_config.json``, ``summary.json`` or the snapshot.
    """
    import torch

    from yocou.training.train import read_checkpoint

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    for name in ("run_config.json", "summary.json"):
        if not (run_dir / name).is_file():
            raise FileNotFoundError(f"{run_dir / name} not found (train the run first)")
    rc_path = run_dir / "run_config.json"
    rc = read_json(rc_path, what="run config")
    if not isinstance(rc, dict):
        raise ResultFileError(rc_path, "top level", f"expected an object, got {type(rc).__name__}")
    eq = rc.get("equal_flops")
    if not eq:
        raise ValueError(f"{run_dir / 'run_config.json'}: no 'equal_flops' entry; set equal_flops_to in the "
                         f"variant {rc.get('variant')!r} of the config")
    number(eq, "step", rc_path, "equal_flops", integer=True, positive=True)
    text(rc, "variant", rc_path, "top level")
    for k in ("batch_size", "seq_len"):
        number(rc.get("train"), k, rc_path, "train", integer=True, positive=True)
    snap = run_dir / f"model_step{eq['step']}.pt"
    if not snap.is_file():
        raise FileNotFoundError(f"{snap} not found: the run did not write its equal-FLOPs snapshot")
    ck = read_checkpoint(snap, what="equal-FLOPs snapshot", remedy="remove the run folder and train it again")
    if ck.get("step") != eq["step"]:
        raise ValueError(f"{snap} holds step {ck.get('step')}, expected {eq['step']}")
    name = out_dir.name
    ck["model_config"] = {**ck["model_config"], "name": name}
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out_dir / "model.pt") as tmp:
        torch.save(ck, tmp)
    sm = read_summary(run_dir / "summary.json", require=("train_flops_per_token",))
    tokens_per_step = rc["train"]["batch_size"] * rc["train"]["seq_len"]
    sm.update(name=name, steps=eq["step"], tokens=eq["step"] * tokens_per_step,
              train_flops=eq["step"] * tokens_per_step * sm["train_flops_per_token"],
              equal_flops={**eq, "of": rc["variant"]})
    atomic_write_json(out_dir / "summary.json", sm)
    atomic_write_json(out_dir / "run_config.json", {**rc, "variant": name})
    return sm


def smoothed(loss: pd.Series, alpha: float) -> np.ndarray:
    """Exponential moving average of a logged loss curve (``alpha`` = 1: raw)."""
    return (loss.ewm(alpha=alpha).mean() if alpha < 1 else loss).to_numpy(dtype=float)


def tokens_to_reach(curve: pd.DataFrame, target: float, alpha: float) -> float | None:
    """Training tokens at which the smoothed ``loss`` of ``curve`` (columns ``tokens``, ``loss``, by step) first
    falls to ``target``, linearly interpolated between logged rows; ``None`` if it never does."""
    c = curve.sort_values("tokens")
    x, y = c["tokens"].to_numpy(dtype=float), smoothed(c["loss"], alpha)
    below = np.nonzero(y <= target)[0]
    if below.size == 0:
        return None
    i = int(below[0])
    if i == 0:
        return float(x[0])
    x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
    return float(x0 + (x1 - x0) * (y0 - target) / (y0 - y1))


def loss_at(curve: pd.DataFrame, column: str, value: float, alpha: float) -> float | None:
    """Smoothed loss of ``curve`` at ``column`` (``tokens`` or ``train_flops``) = ``value``, interpolated;
    ``None`` outside the logged range."""
    c = curve.sort_values(column)
    x, y = c[column].to_numpy(dtype=float), smoothed(c["loss"], alpha)
    if value < x[0] or value > x[-1]:
        return None
    return float(np.interp(value, x, y))


def figure2_numbers(ref: pd.DataFrame, new: pd.DataFrame, alpha: float) -> dict[str, Any]:
    """Figure 2's two numbers for ``new`` (YOCO-U) against ``ref`` (YOCO), from their training curves.

    * ``token_saving``: ``1 − tokens_new / tokens_ref`` where ``tokens_ref`` is the reference's full run and
      ``tokens_new`` the tokens at which ``new`` first reaches the reference's final (smoothed) loss
      (paper: about 0.62 = 1 − 80/210); ``None`` when ``new`` never reaches it.
    * ``loss_gap_at_equal_flops``: ``L_ref − L_new`` at the training FLOPs of the reference's full run (paper:
      0.033, positive: YOCO-U lower); when ``new``'s run has fewer FLOPs, at ``new``'s last row, flagged.
    """
    r = ref.sort_values("step")
    final_loss = float(smoothed(r["loss"], alpha)[-1])
    ref_tokens = float(r["tokens"].iloc[-1])
    ref_flops = float(r["train_flops"].iloc[-1])
    t_new = tokens_to_reach(new, final_loss, alpha)
    l_new = loss_at(new, "train_flops", ref_flops, alpha)
    at = "reference's final FLOPs"
    if l_new is None:
        n = new.sort_values("train_flops")
        l_new, at = float(smoothed(n["loss"], alpha)[-1]), f"new run's final FLOPs {n['train_flops'].iloc[-1]:.3g}"
    return {"reference_final_loss": final_loss, "reference_tokens": ref_tokens, "reference_train_flops": ref_flops,
            "tokens_to_reach": t_new, "token_saving": None if t_new is None else 1 - t_new / ref_tokens,
            "loss_gap_at_equal_flops": final_loss - l_new, "loss_gap_at": at, "smoothing_alpha": alpha}


def main(argv: list[str] | None = None) -> int:
    from yocou.utils.guard import inside, reads, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.workflow.studies", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("eqflops", help="the equal-FLOPs snapshot of a run as a model folder of its own")
    e.add_argument("--run", required=True, type=reads(paths=inside("run_config.json", "summary.json")), help="run folder with run_config.json, summary.json, model_step<N>.pt")
    e.add_argument("--out", required=True, type=writes(paths=inside("model.pt", "summary.json", "run_config.json")), help="output model folder (<run>_eqflops)")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    sm = equal_flops_model(a.run, a.out)
    print(json.dumps({k: sm[k] for k in ("name", "steps", "tokens", "train_flops", "equal_flops")}, indent=2))
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
