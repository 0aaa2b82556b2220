"""The ``variants:`` section of a pipeline config (``workflows/config/<scale>.yaml``), checked against the model's
presets before anything runs: which keys a variant may set, and one-line errors naming ``variants.<name>.<key>``.

The model's config (:mod:`yocou.model.config`) knows presets and fields; this module knows the pipeline's YAML.
Light (no torch): the Snakefile imports it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from yocou.model.config import PRESETS, ModelConfig

__all__ = ["VARIANT_KEYS", "check_variant", "check_variants", "preset_arguments", "variant_keys"]

#: Keys of ``variants.<name>`` that are not preset arguments (read by :func:`yocou.workflow.pipeline.resolve_run`).
VARIANT_KEYS = ("preset", "size", "equal_flops_to", "train")
# ModelConfig fields a variant may not set: the variant's name, the stages its preset builds, and the
# vocabulary, which comes from data.vocab_size / the tokenizer.
_NOT_VARIANT_FIELDS = frozenset({"name", "stages", "vocab_size"})


def preset_arguments(kind: str) -> list[str]:
    """Keyword arguments that preset ``kind`` (a key of :data:`PRESETS`) accepts: its own
    (``n_layers``, ``window``, ``n_loops``, ``shared_kv`` as the preset takes them) and the
    :class:`ModelConfig` fields, less ``name``, ``stages`` and ``vocab_size``."""
    own = [p.name for p in inspect.signature(PRESETS[kind]).parameters.values() if p.kind is p.KEYWORD_ONLY]
    model = [f.name for f in fields(ModelConfig) if f.name not in _NOT_VARIANT_FIELDS]
    return sorted(set(own) | set(model))


def variant_keys(kind: str | None = None) -> list[str]:
    """Keys allowed under ``variants.<name>`` for preset ``kind``; with ``None``, for any preset."""
    kinds = [kind] if kind is not None else list(PRESETS)
    return sorted(set(VARIANT_KEYS).union(*(preset_arguments(k) for k in kinds)))


def check_variant(name: str, spec: Any) -> None:
    """Reject a malformed ``variants.<name>`` of a pipeline config before anything runs.

    Raises:
        ValueError: ``spec`` is not a mapping, has no ``preset`` or an unknown one, or has a key that its
            preset does not take, naming ``variants.<name>.<key>`` and the allowed keys.
    """
    where = f"variants.{name}"
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: expected a mapping with at least 'preset', got {type(spec).__name__}")
    kind = spec.get("preset")
    if kind is None:
        raise ValueError(f"{where}: missing key 'preset' (one of {sorted(PRESETS)})")
    if not isinstance(kind, str) or kind not in PRESETS:
        raise ValueError(f"{where}.preset: {kind!r} is not a preset; expected one of {sorted(PRESETS)}")
    allowed = variant_keys(kind)
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        keys = ", ".join(f"{where}.{k}" for k in unknown)
        raise ValueError(f"{keys}: unknown key{'s' if len(unknown) > 1 else ''} for preset {kind!r}; "
                         f"allowed keys: {allowed}")


def check_variants(cfg: Mapping[str, Any]) -> None:
    """:func:`check_variant` for every entry of ``cfg["variants"]`` (a pipeline config); nothing if absent.

    Then ``model.overrides``, which applies to every variant: each key must be one that every configured
    variant's preset takes (``preset``, ``size``, ``equal_flops_to`` and ``train`` excepted).

    Raises:
        ValueError: as :func:`check_variant`; or ``model.overrides.<key>``, naming a variant whose preset
            does not take it and the keys it does.
    """
    variants = cfg.get("variants")
    if not isinstance(variants, Mapping):
        return
    for name, spec in variants.items():
        check_variant(str(name), spec)
    model = cfg.get("model")
    overrides = model.get("overrides") if isinstance(model, Mapping) else None
    if not isinstance(overrides, Mapping):
        return
    for key in overrides:
        for name, spec in variants.items():
            allowed = [k for k in variant_keys(spec["preset"]) if k not in VARIANT_KEYS]
            if key not in allowed:
                raise ValueError(f"model.overrides.{key}: not a key that preset {spec['preset']!r} (variant "
                                 f"{name!r}) takes; the overrides apply to every variant; allowed keys: {allowed}")
