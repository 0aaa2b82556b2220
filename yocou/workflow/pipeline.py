"""Resolve the pipeline's YAML config into per-run configs (model + training).

The pipeline config (``workflows/config/<scale>.yaml``, schema in
``workflows/schemas/config.schema.yaml``) names a size, the variants and the
training budget. :func:`resolve_run` turns one variant into the exact
``ModelConfig`` and ``TrainConfig`` a run uses, together with the [assume]
fields of docs/design.md, so that every run logs them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from yocou.model.accounting import train_flops_per_token
from yocou.model.config import ModelConfig, config_from_dict, preset
from yocou.training.train import train_config_from_dict
from yocou.workflow.variants import check_variant

# Fields of ModelConfig that docs/design.md marks [assume]; logged with every run.
ASSUMPTION_FIELDS = ("init_std", "init_scaled_out", "norm_eps", "cross_rope", "moe_aux_weight")


def resolve_model(cfg: Mapping[str, Any], variant: str, vocab_size: int | None = None) -> ModelConfig:
    """The ModelConfig of ``variant`` under pipeline config ``cfg``.

    ``cfg["variants"][variant]`` holds ``preset`` (a key of
    :data:`yocou.model.config.PRESETS`), optionally ``size`` (default ``cfg["model"]["size"]``: a key of
    ``cfg["sizes"]``, the scale's own sizes, or of :data:`yocou.model.config.SIZES`)
    and any preset argument (``n_loops``, ``window``, ``n_layers``, ``d_model``, ...).
    ``cfg["model"]["overrides"]`` and ``cfg["model"]["assumptions"]`` apply to all
    variants; the variant's own keys win.

    Raises:
        ValueError: unknown variant, naming the configured ones; no vocab_size (neither given nor in the size).
    """
    variants = cfg.get("variants", {})
    if variant not in variants:
        raise ValueError(f"variant {variant!r} is not in the config's 'variants' ({sorted(variants)})")
    spec = dict(variants[variant])
    kind = spec.pop("preset")
    size = spec.pop("size", cfg["model"]["size"])
    kw: dict[str, Any] = {**cfg["model"].get("overrides", {}), **cfg["model"].get("assumptions", {}), **spec}
    if vocab_size is not None:
        kw["vocab_size"] = vocab_size
    sizes = cfg.get("sizes") or {}
    if "vocab_size" not in kw and size in sizes and "vocab_size" not in sizes[size]:
        raise ValueError(f"variant {variant!r}: the model's vocab_size is the tokenizer's, and sizes.{size} does not "
                         "set it: give the tokenizer (--tokenizer runs/<scale>/tokenizer.json)")
    mc = preset(f"{kind}-{size}", sizes=cfg.get("sizes"), **kw)
    return mc.replace(name=variant)


def embedding_params(cfg: Mapping[str, Any], variant: str) -> dict[str, int]:
    """``{"params": P, "embedding": 2·V·D}`` of ``variant`` at the config's ``data.vocab_size`` (the tokenizer
    is trained to it): its parameters and those of its input embedding and untied LM head, which Figure 5's
    non-embedding axis leaves out (:func:`yocou.model.accounting.param_count`).

    Raises:
        ValueError: ``variant`` is not in the config's ``variants`` (from :func:`resolve_model`).
        KeyError: the config has no ``data.vocab_size``.
    """
    from yocou.model.accounting import param_count

    mc = resolve_model(cfg, variant, vocab_size=cfg["data"]["vocab_size"])
    return {"params": param_count(mc), "embedding": 2 * mc.vocab_size * mc.d_model}


def resolve_run(cfg: Mapping[str, Any], variant: str, vocab_size: int | None = None) -> dict[str, Any]:
    """``{"variant", "scale", "model", "train", "assumptions"}`` for one training run.

    ``cfg["train"]`` is shared; ``cfg["variants"][variant]["train"]`` (optional)
    overrides it for this run (e.g. a different budget). ``equal_flops_to: <other variant>``
    adds a snapshot at the last step whose training FLOPs (analytic, :mod:`yocou.model.accounting`) do
    not exceed the other run's full budget (Table 2 "equal FLOPs", docs/design.md section 6) and records
    it under ``"equal_flops"``.

    Raises:
        ValueError: unknown variant, a missing or unknown preset, a key of ``variants.<variant>`` that its
            preset does not take (:func:`yocou.workflow.variants.check_variant`), or an ``equal_flops_to`` that names no
            other variant or whose step falls outside the run.
    """
    if variant not in cfg.get("variants", {}):
        raise ValueError(f"variant {variant!r} is not in the config's 'variants' ({sorted(cfg.get('variants', {}))})")
    for key in ("model", "train"):  # the schema requires them; checked here for a config used without it
        if not isinstance(cfg.get(key), Mapping):
            raise ValueError(f"config: expected a {key!r} mapping at the top level, got {cfg.get(key)!r:.60}")
    if "size" not in cfg["model"]:
        raise ValueError("config: model.size is required (a key of yocou.model.config.SIZES)")
    check_variant(variant, cfg["variants"][variant])
    spec = dict(cfg["variants"][variant])
    train_over = dict(spec.pop("train", {}))
    eq_to = spec.pop("equal_flops_to", None)
    cfg2 = {**cfg, "variants": {**cfg["variants"], variant: spec}}
    mc = resolve_model(cfg2, variant, vocab_size)
    try:
        tc = train_config_from_dict({"seed": cfg.get("seed", 0), **cfg["train"], **train_over})
    except (TypeError, ValueError) as e:
        where = f"train + variants.{variant}.train" if train_over else "train"
        raise ValueError(f"{where}: {e}") from e
    out: dict[str, Any] = {}
    if eq_to is not None:
        if eq_to == variant or eq_to not in cfg["variants"]:
            raise ValueError(f"variants.{variant}.equal_flops_to: {eq_to!r} must name another variant of the "
                             f"config ({sorted(set(cfg['variants']) - {variant})})")
        ref = resolve_run(cfg, eq_to, vocab_size)
        ref_flops = ref["train"]["steps"] * ref["train"]["batch_size"] * ref["train"]["seq_len"] * \
            train_flops_per_token(config_from_dict(ref["model"]), ref["train"]["seq_len"])
        per_step = tc.batch_size * tc.seq_len * train_flops_per_token(mc, tc.seq_len)
        step = int(ref_flops // per_step)
        if not 1 <= step <= tc.steps:
            raise ValueError(f"variants.{variant}.equal_flops_to {eq_to!r}: the equal-FLOPs step {step} is outside "
                             f"1..{tc.steps} (this run's steps)")
        tc = dataclasses.replace(tc, snapshot_steps=tuple(sorted({*tc.snapshot_steps, step})))
        out["equal_flops"] = {"to": eq_to, "step": step, "train_flops": step * per_step,
                              "reference_train_flops": ref_flops}
    return {
        "variant": variant,
        "scale": cfg.get("scale"),
        "model": mc.to_dict(),
        "train": dataclasses.asdict(tc),
        "assumptions": {f: getattr(mc, f) for f in ASSUMPTION_FIELDS},
        **out,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m yocou.workflow.pipeline --config CFG.yaml --variant V [--tokenizer T] --out run.json``."""
    from yocou.data import load_tokenizer
    from yocou.utils.guard import reads, writes
    from yocou.utils.io import atomic_write_json, load_config_file


    ap = argparse.ArgumentParser(prog="python -m yocou.workflow.pipeline", description=main.__doc__)
    ap.add_argument("--config", required=True, type=reads(if_exists=True), help="pipeline config: a file, or inline JSON (what the rule passes)")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--tokenizer", default=None, type=reads(), help="take vocab_size from this tokenizer")
    ap.add_argument("--out", required=True, type=writes())
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    cfg = load_config_file(a.config)
    vocab = load_tokenizer(a.tokenizer).vocab_size if a.tokenizer else None
    rc = resolve_run(cfg, a.variant, vocab)
    atomic_write_json(a.out, rc)
    print(json.dumps(rc, indent=2))
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
