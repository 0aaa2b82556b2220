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


#: The most values a YAML document may expand to (aliases counted every time they are used) and the deepest
#: nesting it may have: a config is far below both; an alias bomb ("billion laughs") or a runaway nesting is not.
MAX_VALUES = 1_000_000
MAX_DEPTH = 100


def _expanded(node: yaml.Node, memo: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """``(values, depth)`` of ``node`` with every alias expanded, in time linear in the composed graph."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = (1, 1)  # a recursive alias (PyYAML refuses those) must not loop here
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    values, depth = 1, 1
    for c in children:
        v, d = _expanded(c, memo)
        values, depth = min(values + v, MAX_VALUES + 1), max(depth, d + 1)
    memo[key] = (values, depth)
    return values, depth


def loads_yaml(text: str, source: str = "<string>") -> Any:
    """Parse YAML ``text`` like ``yaml.safe_load``, refusing a duplicated mapping key, a document that expands to
    more than :data:`MAX_VALUES` values (aliases counted at each use) or nests deeper than :data:`MAX_DEPTH`.

    Raises:
        DuplicateKeyError: a mapping names a key twice (``source``, the key and both lines).
        ValueError: the document is too large once its aliases are expanded, or too deep (naming ``source``).
        yaml.YAMLError: the text is not YAML.
    """
    loader = _UniqueKeyLoader(text)
    loader.source = source
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise ValueError(f"{source}: nested deeper than Python can parse; a config nests at most "
                             f"{MAX_DEPTH} levels") from None
        if node is None:
            return None
        try:
            values, depth = _expanded(node, {})
        except RecursionError:  # deeper than the interpreter's stack: far past MAX_DEPTH
            raise ValueError(f"{source}: nested thousands of levels deep; a config nests at most {MAX_DEPTH}") \
                from None
        if values > MAX_VALUES:
            raise ValueError(f"{source}: expands to more than {MAX_VALUES:,} values once its aliases are expanded "
                             "(aliases of aliases?); refusing it")
        if depth > MAX_DEPTH:
            raise ValueError(f"{source}: nested {depth} levels deep; a config nests at most {MAX_DEPTH}")
        return loader.construct_document(node)
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
