"""Config dataclasses validated by pydantic, with one-line errors that name the field.

Every config of the library (the model, training, the needle mix, the probe's tasks and settings, the profiling
and paper-shape studies) is a :func:`config_dataclass`: a frozen, keyword-only pydantic dataclass whose fields
declare their types and ranges once (``Annotated[int, Strict(), Field(ge=1)]``: an int, not a bool, at least 1).
Building one validates every field; an unknown key, a missing field, a wrong type, a number out of range or not
finite, or a rule across fields (checked in ``__post_init__``) raises :class:`FieldError`: a ``ValueError`` (bad
input, a one-line error at the entry points) and a ``TypeError`` (what a wrong call is), whose ``field`` is the
dotted name of the first bad field (``ModelConfig.stages[0].n_layers``) and whose message is one line::

    TrainConfig.lr: Input should be a finite number, got nan

:func:`from_mapping` builds one from a mapping (a YAML or JSON section), naming the section when it is not one.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

from pydantic import ConfigDict, Field, Strict, ValidationError
from pydantic.dataclasses import dataclass as _pydantic_dataclass

from yocou.utils.entry import InputTypeError

__all__ = ["Bool", "FieldError", "Float", "Int", "NonNegFloat", "NonNegInt", "PosFloat", "PosInt", "Str", "config_dataclass",
           "from_mapping"]

#: Field types: strict (an int field takes no bool or string, a float field takes an int but no string or bool),
#: numbers finite.
Int = Annotated[int, Strict()]
PosInt = Annotated[int, Strict(), Field(ge=1)]
NonNegInt = Annotated[int, Strict(), Field(ge=0)]
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]
Float = Annotated[float, Strict(), Field(allow_inf_nan=False)]
PosFloat = Annotated[float, Strict(), Field(allow_inf_nan=False, gt=0)]
NonNegFloat = Annotated[float, Strict(), Field(allow_inf_nan=False, ge=0)]

_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)

T = TypeVar("T")


class FieldError(InputTypeError):
    """A config value the dataclass cannot take: one line naming the field (``field``, dotted, with list
    indices), what was expected and what was given. A ``ValueError`` and a ``TypeError``; pydantic's
    ``ValidationError`` is its ``__cause__``."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field  # empty where a caller re-raised it with a prefix (``type(e)(f"{path}: {e}")``)


def _dotted(cls_name: str, loc: tuple[Any, ...]) -> str:
    out = cls_name
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _message(cls: type, e: ValidationError) -> tuple[str, str]:
    """``(one line, first field)`` for the errors of ``e`` raised while building ``cls``."""
    lines, first = [], None
    for err in e.errors(include_url=False):
        field = _dotted(cls.__name__, err["loc"])
        kind, msg = err["type"], err["msg"].removeprefix("Value error, ")
        if kind == "value_error" and not err["loc"]:  # a rule across fields (__post_init__): its message names one
            named = msg.startswith(f"{cls.__name__}.")
            field = msg.split()[0].rstrip(":,") if named else field
            lines.append(msg if named else f"{cls.__name__}: {msg}")
        elif kind == "unexpected_keyword_argument":
            lines.append(f"{field}: unknown key; allowed: {_allowed(cls, err['loc'])}")
        elif kind == "missing":
            lines.append(f"{field}: missing (a required field)")
        else:
            lines.append(f"{field}: {msg}, got {err['input']!r}")
        first = first or field
    return "; ".join(lines), first or cls.__name__


def _allowed(cls: type, loc: tuple[Any, ...]) -> list[str]:
    """The field names of the dataclass at ``loc`` below ``cls`` (the last part of ``loc`` is the unknown key)."""
    target: Any = cls
    for part in loc[:-1]:
        if isinstance(part, str):
            fields = getattr(target, "__pydantic_fields__", {})
            target = _dataclass_in(fields[part].annotation) if part in fields else None
    return sorted(getattr(target, "__pydantic_fields__", {}))


def _dataclass_in(hint: Any) -> Any:
    """The dataclass inside a resolved annotation (``tuple[Stage, ...]`` -> ``Stage``), or None."""
    if dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        found = _dataclass_in(arg)
        if found is not None:
            return found
    return None


def config_dataclass(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen, keyword-only pydantic dataclass that rejects unknown keys and raises
    :class:`FieldError` (one line, naming the field) instead of pydantic's multi-line ``ValidationError``.
    ``dataclasses.fields``, ``asdict`` and ``replace`` (which validates again) work as for any dataclass."""
    pcls = _pydantic_dataclass(frozen=True, kw_only=True, config=_CONFIG)(cls)
    init: Callable[..., None] = pcls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except ValidationError as e:
            message, field = _message(pcls, e)
            raise FieldError(message, field) from e

    pcls.__init__ = __init__  # type: ignore[method-assign]
    return pcls


def from_mapping(cls: type[T], d: Any, what: str) -> T:
    """``cls(**d)`` for a mapping ``d`` (a YAML or JSON section); an instance of ``cls`` is returned as is. A dotted
    ``what`` (``TrainConfig.needle_mix``) names the section's fields in errors by their place in the bigger config.

    Raises:
        FieldError: ``d`` is not a mapping (``what`` names the section), or a field of it is bad.
    """
    if isinstance(d, cls):
        return d
    if not isinstance(d, Mapping):
        raise FieldError(f"{what}: expected a mapping, got {type(d).__name__} ({d!r})", what)
    bad = [k for k in d if not isinstance(k, str)]
    if bad:
        raise FieldError(f"{what}: keys must be strings, got {bad[0]!r}", what)
    try:
        return cls(**d)
    except FieldError as e:
        if "." not in what:
            raise
        # a section of a bigger config (``TrainConfig.needle_mix``): name its fields by their place there
        name = cls.__name__
        raise FieldError(str(e).replace(f"{name}.", f"{what}.").replace(f"{name}: ", f"{what}: "),
                         e.field.replace(name, what, 1)) from e.__cause__
