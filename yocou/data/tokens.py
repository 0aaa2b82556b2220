"""Token files: encode corpus splits to flat binary token streams, and sample / read them back.

Layout written by :func:`encode_corpus` for each split ``S`` in ``train``, ``heldout_book``,
``heldout_code`` (splits whose JSONL file is missing are skipped):

* ``S.bin``: all documents' token ids concatenated, each document followed by the EOS id; raw
  little-endian ``uint16`` when every id fits (vocab <= 65,536), else ``uint32``.
* ``S.offsets.npy``: ``int64[n_docs + 1]``; document ``i`` is ``tokens[offsets[i]:offsets[i+1]]``
  (its trailing EOS included as the last token).
* ``S.json``: metadata (dtype, n_tokens, n_docs, doc ids, eos_id, vocab_size, tokenizer fingerprint).
* ``S.bin.verified.json``: a stamp saying that ``S.bin`` as it is now (size, mtime, ctime, inode) was checked
  against ``S.json`` (size, ``bin_sha256``, every id in ``[0, vocab_size)``), so that later opens
  (every rank of every run) skip the full read (:func:`stamp_path`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from yocou.data.corpus import SPLITS, read_jsonl
from yocou.data.tokenizer import load_tokenizer, tokenizer_fingerprint
from yocou.utils.io import atomic_path, atomic_write_json, sha256_file

__all__ = ["TokenStream", "check_stream_tokenizer", "encode_corpus", "stamp_path"]

#: Format of the verification stamp beside a token file; a stamp of another format is ignored.
STAMP_FORMAT = "yocou-tokens-verified-v1"


def stamp_path(bin_path: str | os.PathLike) -> Path:
    """The verification stamp of a token file: ``<split>.bin.verified.json`` beside ``<split>.bin``."""
    bin_path = Path(bin_path)
    return bin_path.with_name(bin_path.name + ".verified.json")


def _file_state(st: os.stat_result) -> dict:
    """What identifies the bytes of a file without reading them: size, mtime and ctime (ns), inode. A rewrite in
    place changes mtime and ctime (ctime even when mtime is set back), a replacement the inode."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino}


def _stamp_record(state: dict, meta: dict, dtype: np.dtype) -> dict:
    return {"format": STAMP_FORMAT, **state, "bin_sha256": meta.get("bin_sha256"),
            "vocab_size": int(meta["vocab_size"]), "dtype": dtype.str, "n_tokens": int(meta["n_tokens"])}


def _stamp_matches(path: Path, state: dict, meta: dict, dtype: np.dtype) -> bool:
    """True when the stamp beside ``path`` records exactly this file state and metadata (missing, unreadable or
    other stamps: False)."""
    try:
        with open(stamp_path(path), encoding="utf-8") as fh:
            got = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(got, dict) and got == _stamp_record(state, meta, dtype)


def _write_stamp(path: Path, state: dict, meta: dict, dtype: np.dtype) -> None:
    """Write the stamp of ``path`` (atomically) if the file still has ``state``, the state it was verified in;
    a folder that cannot be written to (read-only, full) leaves it unwritten, as does a file changed meanwhile."""
    try:
        if _file_state(path.stat()) != state:
            return
        atomic_write_json(stamp_path(path), _stamp_record(state, meta, dtype))
    except OSError:
        pass


def _dtype_for(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 65536 else np.dtype("<u4")


def encode_corpus(corpus_dir: str | os.PathLike, tokenizer_path: str | os.PathLike,
                  out_dir: str | os.PathLike | None = None, *, batch_docs: int = 64,
                  show_progress: bool = True) -> dict:
    """Tokenize every split of a corpus built by :func:`yocou.data.corpus.build_corpus`.

    Args:
        corpus_dir: directory holding ``{split}.jsonl`` and ``manifest.json``.
        tokenizer_path: anything :func:`yocou.data.tokenizer.load_tokenizer` accepts (a
            ``tokenizer.json`` path, ``"gpt2-offline"``, ``"cl100k_base"``).
        out_dir: where to write ``{split}.bin``, ``{split}.offsets.npy``, ``{split}.json``
            (default: ``corpus_dir``).
        batch_docs: documents per ``encode_batch`` call.
        show_progress: tqdm progress bar per split.

    Side effects:
        Writes the files above atomically (and each ``.bin``'s verification stamp, :func:`stamp_path`, where the
        folder can be written to) and updates ``corpus_dir/manifest.json`` in place (atomically):
        ``files[*].n_tokens`` (tokens of the document, EOS excluded), ``sources[*].n_tokens`` and
        ``splits[*].n_tokens`` (sums, EOS excluded) and ``tokenization`` (tokenizer fingerprint, eos
        handling, per-split stream sizes including EOS).

    Returns:
        ``{split: meta}`` with the per-split metadata written to ``{split}.json``.

    Raises:
        FileNotFoundError: ``corpus_dir`` has no ``manifest.json`` or no split file; tokenizer missing.
        ValueError: the tokenizer produced an id >= its ``vocab_size``.
    """
    corpus_dir = Path(corpus_dir)
    out_dir = Path(out_dir) if out_dir is not None else corpus_dir
    manifest_path = corpus_dir / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"encode_corpus: {manifest_path} not found (corpus_dir must be a build_corpus output)")
    present = [s for s in SPLITS if (corpus_dir / f"{s}.jsonl").is_file()]
    if not present:
        raise FileNotFoundError(f"encode_corpus: no {{train,heldout_book,heldout_code}}.jsonl in {corpus_dir}")
    tok = load_tokenizer(tokenizer_path)
    fp = tokenizer_fingerprint(tokenizer_path)
    dtype = _dtype_for(tok.vocab_size)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(manifest_path, encoding="utf-8") as fh:
        manifest = json.load(fh)

    doc_tokens: dict[str, int] = {}
    metas: dict[str, dict] = {}
    for split in present:
        rows = read_jsonl(corpus_dir / f"{split}.jsonl")
        lengths = np.zeros(len(rows), dtype=np.int64)
        chunks: list[np.ndarray] = []
        bar = tqdm(total=sum(len(r["text"]) for r in rows), desc=f"encode {split}", unit="char",
                   unit_scale=True, disable=not show_progress)
        for start in range(0, len(rows), batch_docs):
            batch = rows[start:start + batch_docs]
            encoded = tok.encode_batch([r["text"] for r in batch])
            for j, ids in enumerate(encoded):
                arr = np.asarray(ids, dtype=np.int64)
                if arr.size and (arr.max() >= tok.vocab_size or arr.min() < 0):
                    raise ValueError(f"tokenizer {tokenizer_path} produced id {int(arr.max())} outside "
                                     f"[0, {tok.vocab_size})")
                if arr.size and (arr == tok.eos_id).any():
                    raise ValueError(f"document {batch[j]['id']} encodes to the EOS id {tok.eos_id}")
                chunks.append(arr.astype(dtype))
                chunks.append(np.asarray([tok.eos_id], dtype=dtype))
                lengths[start + j] = arr.size
                doc_tokens[batch[j]["id"]] = int(arr.size)
            bar.update(sum(len(r["text"]) for r in batch))
        bar.close()
        tokens = np.concatenate(chunks) if chunks else np.zeros(0, dtype=dtype)
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths + 1, out=offsets[1:])
        assert offsets[-1] == tokens.size
        with atomic_path(out_dir / f"{split}.bin") as tmp:
            tokens.tofile(tmp)
        with atomic_path(out_dir / f"{split}.offsets.npy") as tmp:
            np.save(tmp, offsets)
        state = _file_state((out_dir / f"{split}.bin").stat())
        meta = {
            "format": "yocou-tokens-v1",
            "split": split,
            "dtype": dtype.str.lstrip("<|="),
            "byte_order": "little",
            "n_tokens": int(tokens.size),
            "n_docs": len(rows),
            "eos_id": tok.eos_id,
            "eos_after_each_doc": True,
            "vocab_size": tok.vocab_size,
            "tokenizer": fp,
            "bin_file": f"{split}.bin",
            "bin_sha256": sha256_file(out_dir / f"{split}.bin"),
            "offsets_file": f"{split}.offsets.npy",
            "doc_ids": [r["id"] for r in rows],
            "source_jsonl_sha256": sha256_file(corpus_dir / f"{split}.jsonl"),
        }
        atomic_write_json(out_dir / f"{split}.json", meta)
        # every id was checked against the vocabulary above: the file is verified when it holds these bytes
        if hashlib.sha256(memoryview(tokens).cast("B")).hexdigest() == meta["bin_sha256"]:
            _write_stamp(out_dir / f"{split}.bin", state, meta, dtype)
        metas[split] = meta

    # ---- manifest update ---------------------------------------------------------------------------
    for f in manifest.get("files", []):
        if f["id"] in doc_tokens:
            f["n_tokens"] = doc_tokens[f["id"]]
    for key, table in (("source", manifest.get("sources", {})), ("split", manifest.get("splits", {}))):
        for name, entry in table.items():
            vals = [f["n_tokens"] for f in manifest.get("files", []) if f[key] == name]
            entry["n_tokens"] = int(sum(vals)) if vals and all(v is not None for v in vals) else (0 if not vals else None)
    manifest["tokenization"] = {
        "tokenizer": fp,
        "vocab_size": tok.vocab_size,
        "eos_id": tok.eos_id,
        "n_tokens_note": "n_tokens counts document tokens without the EOS separator appended after each document",
        "streams": {s: {"out_dir": "." if out_dir.resolve() == corpus_dir.resolve() else str(out_dir), "n_tokens_with_eos": m["n_tokens"], "dtype": m["dtype"]}
                    for s, m in metas.items()},
    }
    atomic_write_json(manifest_path, manifest)
    return metas


def write_documents(stream: "TokenStream", docs: list[int], out_dir: str | os.PathLike, split: str,
                    extra: dict | None = None) -> int:
    """Write the documents ``docs`` (indices into ``stream``, in that order, each with its EOS) as the token stream
    ``out_dir/<split>.{bin,offsets.npy,json}``, the source's metadata kept (tokenizer, vocabulary), its document ids
    and digests those of the new stream, ``extra`` merged into the json. Returns the stream's tokens (EOS included).

    Raises:
        IndexError: an index outside the source's documents (nothing written).
    """
    parts = [stream.document(i, include_eos=True) for i in docs]  # read (and checked) before anything is written
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokens = np.concatenate(parts).astype(stream.dtype) if parts else np.zeros(0, stream.dtype)
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in parts], out=offsets[1:])
    with atomic_path(out_dir / f"{split}.bin") as tmp:
        tokens.tofile(tmp)
    with atomic_path(out_dir / f"{split}.offsets.npy") as tmp:
        np.save(tmp, offsets)
    ids = stream.meta.get("doc_ids") or []
    meta = {**stream.meta, "split": split, "n_tokens": int(tokens.size), "n_docs": len(parts),
            "bin_file": f"{split}.bin", "bin_sha256": sha256_file(out_dir / f"{split}.bin"),
            "offsets_file": f"{split}.offsets.npy", "doc_ids": [ids[i] for i in docs] if ids else [],
            **(extra or {})}
    atomic_write_json(out_dir / f"{split}.json", meta)
    return int(tokens.size)


class TokenStream:
    """Read-only, memory-mapped view of a ``{split}.bin`` file written by :func:`encode_corpus`.

    Args:
        path: the ``.bin`` file (its ``.json`` / ``.offsets.npy`` siblings are read too), or the
            ``.json`` metadata file.

    Verification: the file's size is checked against the metadata on every open. Its sha256 (``bin_sha256``) and
    the range of its ids (``[0, vocab_size)``) are checked by reading the whole file once: a full check then writes
    the stamp :func:`stamp_path` beside it (atomically; not where the folder is read-only, without error), and a
    later open whose stamp records the file's current size, mtime, ctime and inode and the metadata's
    ``bin_sha256``, ``vocab_size``, dtype and token count only maps the file (its pages are read when used). A
    missing, unreadable or disagreeing stamp means a full check again. Metadata without ``bin_sha256`` (older
    streams) is range-checked on every open and never stamped.

    Raises:
        FileNotFoundError: the ``.bin`` or ``.json`` file is missing.
        ValueError: the metadata is not JSON or lacks a field (naming the file), or the token file disagrees
            with it: its size, its sha256 (``bin_sha256``) or an id outside ``[0, vocab_size)`` (naming the file
            and the token's position).
    """

    def __init__(self, path: str | os.PathLike):
        path = Path(path)
        if path.suffix == ".json":
            path = path.with_suffix(".bin")
        self.path = path
        meta_path = path.with_suffix(".json")
        if path.is_dir():
            raise IsADirectoryError(f"TokenStream: {path} is a folder; expected a token file <split>.bin in it "
                                    f"(e.g. {path / 'train.bin'})")
        if not path.is_file():
            raise FileNotFoundError(f"TokenStream: token file {path} not found (run encode_corpus)")
        if not meta_path.is_file():
            raise FileNotFoundError(f"TokenStream: metadata {meta_path} not found next to {path}")
        try:
            with open(meta_path, encoding="utf-8") as fh:
                self.meta = json.load(fh)
            if not isinstance(self.meta, dict):
                raise ValueError(f"expected a JSON object, got {type(self.meta).__name__}")
            dt = str(self.meta["dtype"])
            self.dtype = np.dtype(dt if dt[:1] in ("<", ">", "|", "=") else "<" + dt)
            n = int(self.meta["n_tokens"])
            eos_id, vocab_size = int(self.meta["eos_id"]), int(self.meta["vocab_size"])
        except (ValueError, TypeError, KeyError) as e:  # json.JSONDecodeError is a ValueError
            what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
            raise ValueError(f"TokenStream: metadata {meta_path} is not a token-stream metadata file ({what}); "
                             "rebuild it with encode_corpus (snakemake reruns the tokens rule)") from e
        state = _file_state(path.stat())
        if state["size"] != n * self.dtype.itemsize:
            raise ValueError(f"TokenStream: {path} has {state['size']} bytes, metadata says "
                             f"{n} tokens of {self.dtype} ({n * self.dtype.itemsize} bytes)")
        rebuild = "rebuild it with encode_corpus (snakemake reruns the tokens rule)"
        recorded = self.meta.get("bin_sha256")
        verified = recorded is not None and _stamp_matches(path, state, self.meta, self.dtype)
        if recorded is not None and not verified:
            actual = sha256_file(path)
            if actual != recorded:
                raise ValueError(f"TokenStream: {path}: sha256 {actual} differs from the bin_sha256 {recorded} "
                                 f"recorded in {meta_path} (corrupt or rewritten since it was encoded); {rebuild}")
        self.tokens = np.memmap(path, dtype=self.dtype, mode="r", shape=(n,)) if n else np.zeros(0, self.dtype)
        if not verified:
            if n and (int(self.tokens.min()) < 0 or int(self.tokens.max()) >= vocab_size):
                pos = int(np.argmax((self.tokens < 0) | (self.tokens >= vocab_size)))
                raise ValueError(f"TokenStream: {path}: token {pos} is id {int(self.tokens[pos])}, outside the "
                                 f"vocabulary [0, {vocab_size}) of {meta_path}; {rebuild}")
            if recorded is not None:
                _write_stamp(path, state, self.meta, self.dtype)
        self.eos_id = eos_id
        self.vocab_size = vocab_size
        self.doc_ids: list[str] = list(self.meta.get("doc_ids", []))
        self._offsets: np.ndarray | None = None

    def __len__(self) -> int:
        """Number of tokens in the stream (EOS separators included)."""
        return int(self.tokens.shape[0])

    @property
    def offsets(self) -> np.ndarray:
        """``int64[n_docs + 1]`` document start offsets (last entry = ``len(self)``)."""
        if self._offsets is None:
            off_path = self.path.parent / self.meta.get("offsets_file", self.path.stem + ".offsets.npy")
            if not off_path.is_file():
                raise FileNotFoundError(f"TokenStream: offsets file {off_path} not found")
            try:
                off = np.load(off_path, allow_pickle=False)
            except (ValueError, OSError, EOFError) as e:
                raise ValueError(f"TokenStream: offsets file {off_path} is not a .npy array of document offsets "
                                 f"({type(e).__name__}); rerun the tokens step") from None
            n = len(self)
            if (off.ndim != 1 or off.dtype.kind not in "iu" or len(off) < 2 or int(off[0]) != 0
                    or int(off[-1]) != n or bool((np.diff(off) < 0).any())):
                raise ValueError(f"TokenStream: offsets file {off_path} is not a non-decreasing integer array from "
                                 f"0 to the stream's {n} tokens; rerun the tokens step")
            self._offsets = off
        return self._offsets

    @property
    def n_docs(self) -> int:
        """Number of documents in the stream."""
        return int(self.offsets.shape[0] - 1)

    def document(self, i: int, include_eos: bool = False) -> np.ndarray:
        """Token ids of document ``i`` (``np.ndarray`` of the file dtype; a copy, not a view).

        Args:
            i: document index in ``[0, n_docs)`` (order of ``doc_ids``; negative indexes allowed).
            include_eos: keep the EOS separator that follows the document.

        Raises:
            IndexError: ``i`` out of range.
        """
        n = self.n_docs
        if not -n <= i < n:
            raise IndexError(f"TokenStream: document index {i} out of range for {n} documents in {self.path}")
        i %= n
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        if not include_eos:
            end -= 1
        return np.array(self.tokens[start:end])

    def sample_batch(self, batch_size: int, seq_len: int,
                     generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Random training windows.

        Each row starts at ``s ~ Uniform{0, ..., len - seq_len - 1}`` (drawn with ``torch.randint`` from
        ``generator``, so batches are reproducible from the generator state, e.g. seeded by (seed, step));
        ``x = tokens[s : s + seq_len]``, ``y = tokens[s + 1 : s + seq_len + 1]``.

        Returns:
            ``(x, y)``: ``torch.int64`` tensors of shape ``[batch_size, seq_len]``.

        Raises:
            ValueError: non-positive sizes, or the stream has fewer than ``seq_len + 1`` tokens.
        """
        if batch_size <= 0 or seq_len <= 0:
            raise ValueError(f"sample_batch: batch_size and seq_len must be positive, got {batch_size}, {seq_len}")
        n = len(self)
        if n < seq_len + 1:
            raise ValueError(f"sample_batch: {self.path} has {n} tokens, need at least seq_len + 1 = {seq_len + 1}")
        starts = torch.randint(0, n - seq_len, (batch_size,), generator=generator).numpy()
        idx = starts[:, None] + np.arange(seq_len + 1)[None, :]
        window = torch.from_numpy(np.asarray(self.tokens[idx], dtype=np.int64))
        return window[:, :-1].contiguous(), window[:, 1:].contiguous()

    def __repr__(self) -> str:
        return f"TokenStream({str(self.path)!r}, n_tokens={len(self)}, dtype={self.dtype})"


def check_stream_tokenizer(stream: TokenStream, spec: str) -> None:
    """Refuse a tokenizer other than the one that wrote ``stream`` (its metadata's fingerprint: the file's
    sha256, or the name of a packaged tokenizer), so that bytes per token are counted with the right one.

    Raises:
        ValueError: naming both tokenizers and the stream.
    """
    made = stream.meta.get("tokenizer") if isinstance(stream.meta, dict) else None
    if not isinstance(made, dict):
        return  # older streams carry no fingerprint
    fp = tokenizer_fingerprint(spec)
    same = (fp.get("sha256") == made.get("sha256")) if "sha256" in made or "sha256" in fp else (
        fp.get("spec") == made.get("spec"))
    if not same:
        raise ValueError(f"--tokenizer {spec}: not the tokenizer that wrote {stream.path} (that was "
                         f"{made.get('spec')}, sha256 {str(made.get('sha256', '-'))[:12]}); bytes per token would be "
                         "counted wrongly: pass the run's tokenizer")
