"""Data pipeline: offline corpus (corpus.py), BPE tokenizer (tokenizer.py), token streams (tokens.py).

See /work/shared/DATA.md for the sources. Typical use::

    manifest = build_corpus(corpus_dir, cfg)
    train_tokenizer(corpus_dir / "train.jsonl", 8192, corpus_dir / "tokenizer.json")
    encode_corpus(corpus_dir, corpus_dir / "tokenizer.json")
    stream = TokenStream(corpus_dir / "train.bin")
"""

from .corpus import DEFAULT_CORPUS_CONFIG, SPLITS, build_corpus, read_jsonl, resolve_corpus_config
from .tokenizer import EOS_TOKEN, TokenizerAdapter, install_pretrained, load_tokenizer, train_tokenizer
from .tokens import TokenStream, encode_corpus

__all__ = [
    "DEFAULT_CORPUS_CONFIG",
    "SPLITS",
    "build_corpus",
    "read_jsonl",
    "resolve_corpus_config",
    "EOS_TOKEN",
    "TokenizerAdapter",
    "load_tokenizer",
    "install_pretrained",
    "train_tokenizer",
    "TokenStream",
    "encode_corpus",
]
