"""Small I/O helpers used across yocou: atomic writes, hashing and provenance records.

Every artefact the harness writes (corpora, manifests, tokens, checkpoints, results) goes through the
``atomic_*`` helpers so that an interrupted run never leaves a half-written file under its final name:
data is written to a temporary file in the same directory, flushed, ``fsync``-ed and then moved into
place with :func:`os.replace` (atomic on POSIX and Windows when source and target share a filesystem).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import json
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

__all__ = [
    "DuplicateKeyError",
    "loads_json",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "sha256_bytes",
    "sha256_file",
    "git_state",
    "provenance",
]


def _default_mode() -> int:
    """Permissions a plain ``open(path, "w")`` would give (0o666 minus the umask); mkstemp uses 0o600."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_dir(directory: Path) -> None:
    """Best-effort fsync of a directory so that a rename survives a crash (no-op where unsupported)."""
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def writer_tag() -> str:
    """``<host>-<pid>`` of this process: put in a temporary name so a later write can tell a dead writer's files."""
    return f"{socket.gethostname()[:32]}-{os.getpid()}"


def remove_stale_temps(parent: Path, prefix: str, suffix: str = "") -> None:
    """Remove the entries of ``parent`` named ``<prefix><host>-<pid>.<anything><suffix>`` (or ``-``) that this
    host's process ``pid`` left when it was killed before it could clean up (it no longer exists). A live writer's
    entries, another host's (a folder shared by cluster nodes) and names not of this form are never touched."""
    host = socket.gethostname()[:32]
    pat = re.compile(rf"{re.escape(prefix)}{re.escape(host)}-(\d+)[.-].*{re.escape(suffix)}", re.DOTALL)
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for e in entries:
        if (m := pat.fullmatch(e.name)) and not _alive(int(m.group(1))):
            with contextlib.suppress(OSError):
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path)
                else:
                    os.unlink(e.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Context manager yielding a temporary path next to ``path``; on success it is moved onto ``path``.

    Use it for writers that want a file name rather than bytes (``np.save``, ``torch.save``,
    ``ndarray.tofile``). The temporary file is fsync-ed before the rename. If the body raises, the
    temporary file is removed and ``path`` is left untouched.

    Args:
        path: final destination. Its parent directory is created if missing.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # keep the final suffix so writers that append one (np.save adds ".npy") write to tmp_path itself
    remove_stale_temps(path.parent, f".{path.name}.", ".tmp" + path.suffix)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.{writer_tag()}.",
                               suffix=".tmp" + path.suffix)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_path, _default_mode())
        os.replace(tmp_path, path)
        _fsync_dir(path.parent)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        disk = _as_disk_error(e, path)
        if disk is not None:
            raise disk from e
        raise


#: Messages of writers that report a failed write as something other than OSError (torch.save's zip writer,
#: safetensors): read as a full disk when the folder has (almost) no space left.
_WRITE_FAILURES = ("No space left", "file write failed", "unexpected pos", "iostream error", "PytorchStreamWriter",
                   "requested and")  # ndarray.tofile: "OSError: N requested and M written", with no errno


def _as_disk_error(e: BaseException, path: Path) -> OSError | None:
    """An ``OSError(ENOSPC)`` naming ``path`` for a writer's report of a full disk that is not an ``OSError`` with
    an errno, else None."""
    if (isinstance(e, OSError) and e.errno is not None) or not isinstance(e, Exception):
        return None
    msg = str(e)
    if not any(m in msg for m in _WRITE_FAILURES):
        return None
    try:
        low = shutil.disk_usage(path.parent).free < 64 * 2**20
    except OSError:
        low = False
    if "No space left" not in msg and not low:
        return None
    return OSError(errno.ENOSPC, f"writing {path} failed, the disk is full ({type(e).__name__}: {msg.strip()})",
                   str(path))


def save_safetensors(state: dict[str, Any], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """``safetensors.torch.save_file``, its Rust I/O error (a full disk: "... (os error 28)") raised as the
    ``OSError`` it wraps, naming ``path``, so entry points report it in one line (:mod:`yocou.utils.entry`)."""
    import re

    from safetensors.torch import save_file

    try:
        save_file(state, str(path), metadata=metadata)
    except Exception as e:  # noqa: BLE001 - SafetensorError is not an OSError
        m = re.search(r"os error (\d+)", str(e))
        if m is None:
            raise
        code = int(m.group(1))
        raise OSError(code, os.strerror(code), str(path)) from None


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Atomically write ``data`` to ``path`` (temp file in the same directory, fsync, ``os.replace``).

    Raises:
        TypeError: if ``data`` is not bytes-like.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"atomic_write_bytes expects bytes, got {type(data).__name__}")
    data = committed_if_only_provenance_differs(path, bytes(data))
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


#: A provenance footer of the Markdown and HTML outputs (render.common.write_table, the audit's pages).
_FOOTER = re.compile(r"<(sub|small)>yocou [^<]*</(sub|small)>")


def _without_provenance(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_provenance(v) for k, v in obj.items() if k != "provenance"}
    if isinstance(obj, list):
        return [_without_provenance(v) for v in obj]
    return obj


def committed_if_only_provenance_differs(path: str | os.PathLike, data: bytes) -> bytes:
    """``data``, or the committed bytes of ``path`` (git ``HEAD``) when the two differ only in provenance (a JSON
    ``provenance`` member, a Markdown or HTML ``<sub>yocou ...</sub>`` footer): a pipeline output under
    :data:`OUTPUT_DIRS` drawn again from equal results then leaves ``git status`` clean. Other files: ``data``."""
    p = Path(path)
    if p.suffix not in (".json", ".md", ".html") or not {"results", "figures"} & set(p.parts) \
            or p.name.endswith(".provenance.json"):
        return data
    old = committed_bytes(p)
    if old is None or old == data:
        return data
    try:
        if p.suffix == ".json":
            same = _without_provenance(json.loads(old)) == _without_provenance(json.loads(data))
        else:
            same = _FOOTER.sub("", old.decode("utf-8")) == _FOOTER.sub("", data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return data
    return old if same else data


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Atomically write ``text`` (encoded with ``encoding``, no newline translation) to ``path``."""
    if not isinstance(text, str):
        raise TypeError(f"atomic_write_text expects str, got {type(text).__name__}")
    atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2,
                      sort_keys: bool = False) -> None:
    """Atomically write ``obj`` as UTF-8 JSON (``ensure_ascii=False``, trailing newline).

    Output is deterministic for equal inputs (dict insertion order is kept unless ``sort_keys``).
    NaN/inf are rejected (``allow_nan=False``) so files stay valid JSON.

    Raises:
        TypeError / ValueError: if ``obj`` is not JSON-serialisable.
    """
    try:
        text = json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=False, allow_nan=False)
    except ValueError as e:
        where = _non_finite(obj)
        if where is None:
            raise
        raise ValueError(f"{path}: not written: {where[0] or 'the value'} is {where[1]!r}, not a finite "
                         "number") from e
    atomic_write_text(path, text + "\n")


def _non_finite(obj: Any, where: str = "") -> tuple[str, float] | None:
    """The dotted key of the first NaN or infinity in ``obj`` and its value, or None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return where, obj
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for k, v in items:
        hit = _non_finite(v, f"{where}.{k}" if where and isinstance(k, str) else f"{where}[{k}]" if where
                          else str(k))
        if hit is not None:
            return hit
    return None


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of the bytes of the file at ``path`` (read in 1 MiB chunks).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk_size)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def _run_git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=str(cwd), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout


def committed_bytes(path: str | os.PathLike) -> bytes | None:
    """The bytes of ``path`` as committed at ``HEAD`` of the repository holding it, or None (not in a repository,
    not tracked, or git unavailable). A writer that makes what is committed but for provenance writes these, so a
    re-render with equal content leaves ``git status`` clean (Snakemake removes a job's outputs before it runs, so
    the file on disk cannot be compared)."""
    p = Path(path).resolve()
    try:
        out = subprocess.run(["git", "show", f"HEAD:./{p.name}"], cwd=str(p.parent), capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


OUTPUT_DIRS = ("results", "figures", "benchmarks/results")
"""Top-level folders of pipeline outputs, not counted as dirt by :func:`git_state`."""


def git_state(start: str | os.PathLike | None = None) -> dict:
    """Git commit and dirtiness of the repository containing ``start`` (default: the yocou package).

    Returns:
        ``{"commit": <40-hex sha or "unknown">, "dirty": bool | None}``; ``dirty``: a tracked file outside
        :data:`OUTPUT_DIRS` differs from the commit; None when git is unavailable or ``start`` is not
        inside a repository (or it has no commits yet).
    """
    cwd = Path(start) if start is not None else Path(__file__).resolve().parent
    head = _run_git(["rev-parse", "HEAD"], cwd)
    if head is None:
        return {"commit": "unknown", "dirty": None}
    # The pipeline's own outputs (committed results, figures, benchmark results) are rewritten by the run
    # that writes this provenance: dirty means that tracked code or configs differ from the commit.
    status = _run_git(["status", "--porcelain", "--untracked-files=no", "--", ":(top)"]
                      + [f":(top,exclude){p}" for p in OUTPUT_DIRS], cwd)
    return {"commit": head.strip(), "dirty": None if status is None else bool(status.strip())}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(module: str) -> str | None:
    try:
        from importlib import metadata
        return metadata.version(module)
    except Exception:  # noqa: BLE001 - package absent or without metadata
        return None


def provenance(config: dict, seed: int | None, device: str | None = None) -> dict:
    """Provenance record to store next to every result.

    Args:
        config: the fully resolved configuration used for the run (stored as-is; must be JSON-able).
        seed: the run's random seed, or None when nothing random happened.
        device: the torch device the job ran on (``cpu``, ``cuda``, ``cuda:N``), when it names one.

    Returns:
        dict with keys ``config``, ``git_commit`` (sha or "unknown"), ``git_dirty`` (bool or None),
        ``git`` (``{"commit", "dirty"}``), ``versions`` (python, torch, numpy, tokenizers, yocou, ...;
        None for packages that are not installed), ``device`` (platform, cpu model from /proc/cpuinfo,
        ``n_threads`` = ``torch.get_num_threads()``, ``cuda`` device name or None, that of ``device`` when it is
        one; ``used``: ``device``, None when not given), ``seed``,
        ``created_utc`` (ISO 8601, seconds) and ``argv``.
    """
    used, git = device, git_state()
    versions = {"python": platform.python_version()}
    for name in ("torch", "numpy", "tokenizers", "yocou", "tqdm", "pyyaml", "tiktoken"):
        versions[name] = _version(name)
    device: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "n_cpus": os.cpu_count(),
        "n_threads": None,
        "cuda": None,
        "used": used,
    }
    try:
        import torch

        versions["torch"] = str(torch.__version__)  # a str: TorchVersion is a class a weights-only load refuses
        device["n_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            device["cuda"] = torch.cuda.get_device_name(torch.device(used) if used and used != "cpu" else 0)
            versions["cuda"] = torch.version.cuda
    except Exception:  # noqa: BLE001 - torch missing or broken must not break provenance
        pass
    return {
        "config": config,
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "git": git,
        "versions": versions,
        "device": device,
        "seed": seed,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
    }


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (``json.loads`` would silently keep the last)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise DuplicateKeyError(f"duplicate key {k!r} (JSON keeps only the last; give each key once)")
        seen[k] = v
    return seen


def loads_json(text: str) -> Any:
    """``json.loads`` that refuses an object naming one key twice, as the YAML loader does.

    Raises:
        json.JSONDecodeError: not JSON. DuplicateKeyError: (a ValueError) a key given twice, naming it.
    """
    return json.loads(text, object_pairs_hook=_unique_pairs)


def load_config_file(path: str | os.PathLike) -> Any:
    """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) config file, or an inline JSON object.

    ``path`` may be the config itself as JSON text starting with ``{`` (what the pipeline's rules pass on the
    command line, so that a job's settings are fixed when it is scheduled and no later parse can change them).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file (or the inline text) does not parse, or its top level is not a mapping, naming it.
    """
    if isinstance(path, str) and path.lstrip().startswith("{"):
        try:
            data = loads_json(path)
        except (json.JSONDecodeError, DuplicateKeyError) as e:
            raise ValueError(f"inline JSON config: {e}") from None
        if not isinstance(data, dict):
            raise ValueError("inline JSON config: expected a mapping of keys to values at the top level")
        return data
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"config file {p} is a folder; expected a .json or .yaml file")
    if not p.is_file():
        raise FileNotFoundError(f"config file {p} not found")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"config file {p}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    try:
        if p.suffix in (".yaml", ".yml"):
            from yocou.utils.yamlio import loads_yaml
            data = loads_yaml(text, str(p))
        else:
            data = loads_json(text)
    except Exception as e:  # noqa: BLE001 - re-raised with the file's name
        raise ValueError(f"cannot parse config file {p}: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config file {p}: expected a mapping of keys to values at the top level, "
                         f"got {type(data).__name__}")
    return data
