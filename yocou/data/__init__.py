"""Data pipeline: offline corpus (corpus.py), BPE tokenizer (tokenizer.py), token streams (tokens.py).

See docs/design.md section 9 for the sources. Typical use::

    manifest = build_corpus(corpus_dir, cfg)
    train_tokenizer(corpus_dir / "train.jsonl", 8192, corpus_dir / "tokenizer.json")
    encode_corpus(corpus_dir, corpus_dir / "tokenizer.json")
    stream = TokenStream(corpus_dir / "train.bin")

The names load lazily (PEP 562), so ``yocou.data.corpus`` imports without torch: the Snakefile checks the
corpus config at planning time.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DEFAULT_CORPUS_CONFIG": "corpus", "SPLITS": "corpus", "build_corpus": "corpus", "read_jsonl": "corpus",
    "resolve_corpus_config": "corpus",
    "EOS_TOKEN": "tokenizer", "TokenizerAdapter": "tokenizer", "load_tokenizer": "tokenizer",
    "install_pretrained": "tokenizer", "train_tokenizer": "tokenizer",
    "TokenStream": "tokens", "encode_corpus": "tokens",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
