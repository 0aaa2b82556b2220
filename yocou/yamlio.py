"""YAML that refuses a duplicated key: every YAML file the project reads goes through :func:`load_yaml`.

PyYAML keeps the last of two equal keys in a mapping without a word (``seed:`` twice in a scale config, the first
silently lost). :func:`load_yaml` raises instead, naming the file, the key and both lines.

Light: PyYAML only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DuplicateKeyError", "load_yaml", "loads_yaml"]

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when available; the constructor is Python


class DuplicateKeyError(ValueError):
    """A mapping that names one key twice; the message names the source, the key and both lines."""


class _UniqueKeyLoader(_Base):  # type: ignore[misc, valid-type]
    source = "<string>"

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` merges: explicit keys may override them
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: PyYAML's own error follows
                    continue
                if first is not None:
                    raise DuplicateKeyError(f"{self.source}: duplicate key {key!r} at line {line} "
                                            f"(first at line {first})")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def loads_yaml(text: str, source: str = "<string>") -> Any:
    """Parse YAML ``text`` like ``yaml.safe_load``, refusing a duplicated mapping key.

    Raises:
        DuplicateKeyError: a mapping names a key twice (``source``, the key and both lines).
        yaml.YAMLError: the text is not YAML.
    """
    loader = _UniqueKeyLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_yaml(path: str | os.PathLike) -> Any:
    """The YAML file at ``path``, parsed, refusing a duplicated mapping key (see :func:`loads_yaml`).

    Raises:
        OSError: the file cannot be read. DuplicateKeyError, yaml.YAMLError: as :func:`loads_yaml`.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not a UTF-8 text file (byte {e.start}: {e.reason}); expected YAML") from None
    return loads_yaml(text, str(p))
