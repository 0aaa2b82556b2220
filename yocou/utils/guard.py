"""Checks every command makes before any work: it never writes over its own inputs, and it can write where asked.

A command declares, per parsed arguments, the files and folders it reads (``inputs``), the files it writes
(``outputs``) and the folders whose contents it replaces (``out_dirs``: the audit's report folder, an exported
model folder, a corpus or token folder). :func:`check_paths` then refuses, in one line naming both arguments:

- an output file that is an input file: the same path, also through a symlink, ``..`` or a hard link;
- an output folder that is an input or holds one (writing it would replace or delete the input);
- an output whose folder cannot be written (a file where a folder is expected, a read-only file system, no
  permission): checked by creating and removing a temporary file in the nearest folder that exists, so that a
  refused command creates nothing.

Writing a new file beside the inputs stays allowed. Every command declares each path once, where argparse
declares the argument (``type=reads()``, ``writes()``, ``replaces()``), and calls :func:`check_args` after
parsing; the pipeline's Snakemake scripts check their ``snakemake.input`` against ``snakemake.output`` through
:func:`check_snakemake`. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["IOPaths", "PathArg", "Role", "check_args", "check_paths", "check_snakemake", "check_writable", "inside",
           "io_paths", "reads", "replaces", "start_script", "suffixed", "writes"]

Pathish = str | os.PathLike


@dataclass
class IOPaths:
    """What one command reads and writes, each path under the argument (label) that names it.

    ``inputs``/``outputs``/``out_dirs``: label (``--model``) -> paths; ``None`` and empty values are skipped.
    """

    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    out_dirs: dict[str, Any] = field(default_factory=dict)


def _paths(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(v) for v in value if v is not None and v != ""]


def _real(p: str) -> str:
    return os.path.realpath(os.path.abspath(p))


def _same_file(a: str, b: str) -> bool:
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def _inside(path: str, folder: str) -> bool:
    rp, rf = _real(path), _real(folder)
    return rp == rf or rp.startswith(rf.rstrip(os.sep) + os.sep)


def check_writable(path: Pathish, label: str, *, folder: bool = False) -> None:
    """Refuse an output ``path`` (a file, or a folder with ``folder``) that cannot be written, creating nothing.

    Raises:
        IsADirectoryError: a file output names an existing folder.
        NotADirectoryError: a folder output, or a folder on the way, is an existing file.
        OSError: the nearest existing folder cannot be written (``EROFS``, ``EACCES``, ``ENOSPC``, ...); its
            ``filename`` is that folder and its message names ``label``.
    """
    p = Path(path)
    if not folder and p.is_dir():
        raise IsADirectoryError(f"{label} {p}: is a folder; expected a file path")
    if folder and p.exists() and not p.is_dir():
        raise NotADirectoryError(f"{label} {p}: is a file; expected a folder")
    probe = p if folder else p.parent
    probe = Path(os.path.abspath(probe))
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise NotADirectoryError(f"{label} {p}: {probe} is a file, not a folder")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".yocou-write-check.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        err = OSError(e.errno, f"{label} {p}: cannot write in {probe}: {e.strerror}", str(probe))
        err.before_work = True  # type: ignore[attr-defined] - read by yocou.utils.entry.error_message
        raise err from None


def check_paths(io: IOPaths, *, writable: bool = True) -> None:
    """Refuse (one line, before any work) an output that would replace or delete an input, or that cannot be
    written; see the module docstring.

    Raises:
        ValueError: an output file is an input file, or an output folder is or holds an input (naming both).
        OSError and its subclasses: from :func:`check_writable`.
    """
    inputs = [(lab, p) for lab, v in io.inputs.items() for p in _paths(v)]
    for lab, out in ((lab, p) for lab, v in io.outputs.items() for p in _paths(v)):
        for ilab, inp in inputs:
            if _same_file(out, inp):
                raise ValueError(f"{lab} {out} is the input {ilab} ({inp}): refusing to write over an input; "
                                 f"choose another {lab}")
        if writable:
            check_writable(out, lab)
    for lab, out in ((lab, p) for lab, v in io.out_dirs.items() for p in _paths(v)):
        for ilab, inp in inputs:
            if _inside(inp, out):
                what = "is" if _real(inp) == _real(out) else "holds"
                raise ValueError(f"{lab} {out} {what} the input {ilab} ({inp}): writing that folder would replace "
                                 f"it; choose another {lab}")
        if writable:
            check_writable(out, lab, folder=True)


# --- the commands' arguments -----------------------------------------------------------------------------------
# A command declares each path where it declares the argument: ``type=reads()`` (a file or folder it reads),
# ``type=writes()`` (a file it writes) or ``type=replaces()`` (a folder whose contents it replaces). argparse
# converts the value to a :class:`PathArg` (a ``str`` that knows its role); :func:`check_args` gathers them from
# the parsed arguments. ``paths`` maps a value to the files it stands for (:func:`inside`, :func:`suffixed`, or a
# function of the value and the parsed arguments), for a folder whose files a command reads or writes, or a stem.

Expand = Callable[[str, argparse.Namespace], Iterable[str]]


@dataclass(frozen=True)
class Role:
    """What a path argument is to its command: ``kind`` ``in``, ``out`` or ``out_dir``; ``label`` (default: the
    option, ``--run-config`` for ``run_config``); ``paths`` (default: the value itself); ``if_exists``: an input
    only where the path exists (an option that takes a file or an inline value or name)."""

    kind: Literal["in", "out", "out_dir"]
    label: str | None = None
    paths: Expand | None = None
    if_exists: bool = False


class PathArg(str):
    """A parsed path argument: the ``str`` itself, with its :class:`Role`."""

    role: Role


def _typed(role: Role) -> Callable[[str], PathArg]:
    def convert(value: str) -> PathArg:
        out = PathArg(value)
        out.role = role
        return out

    convert.__name__ = "path"  # argparse names a type in its messages
    return convert


def reads(label: str | None = None, *, paths: Expand | None = None, if_exists: bool = False) -> Callable[[str], PathArg]:
    """``type=`` of an argument naming a file or folder the command reads."""
    return _typed(Role("in", label, paths, if_exists))


def writes(label: str | None = None, *, paths: Expand | None = None) -> Callable[[str], PathArg]:
    """``type=`` of an argument naming a file the command writes (or, with ``paths``, the files it stands for)."""
    return _typed(Role("out", label, paths))


def replaces(label: str | None = None) -> Callable[[str], PathArg]:
    """``type=`` of an argument naming a folder whose contents the command replaces (no input may lie in it)."""
    return _typed(Role("out_dir", label))


def inside(*names: str | Callable[[argparse.Namespace], Iterable[str]]) -> Expand:
    """``paths=`` for a folder: the named files in it (a name may be a function of the parsed arguments)."""
    def expand(folder: str, a: argparse.Namespace) -> list[str]:
        out = []
        for n in names:
            out += [os.path.join(folder, x) for x in ([n] if isinstance(n, str) else n(a))]
        return out
    return expand


def suffixed(*suffixes: str, replace: bool = True) -> Expand:
    """``paths=`` for a stem: ``stem.csv``, ``stem.md``, ... (``replace``: the value's own suffix replaced)."""
    def expand(stem: str, a: argparse.Namespace) -> list[str]:
        return [str(Path(stem).with_suffix(x)) if replace else f"{stem}{x}" for x in suffixes]
    return expand


def io_paths(args: argparse.Namespace) -> IOPaths:
    """The :class:`IOPaths` of parsed arguments: every :class:`PathArg` among them under its label."""
    io = IOPaths()
    kinds = {"in": io.inputs, "out": io.outputs, "out_dir": io.out_dirs}
    for dest, value in vars(args).items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(v, PathArg):
                continue
            role = v.role
            if role.if_exists and not os.path.exists(v):
                continue
            label = role.label or f"--{dest.replace('_', '-')}"
            files = list(role.paths(str(v), args)) if role.paths else [str(v)]
            kinds[role.kind].setdefault(label, []).extend(files)
    return io


def check_args(args: argparse.Namespace, extra: IOPaths | None = None) -> None:
    """:func:`check_paths` for a command's parsed arguments (:func:`io_paths`) and any ``extra`` paths it
    computes itself (a default that depends on another argument); then every :class:`PathArg` in ``args``
    becomes a plain ``str`` again (so a value written to YAML or JSON later is an ordinary string).

    Raises:
        ValueError, OSError: as :func:`check_paths`.
    """
    io = io_paths(args)
    for mine, theirs in ((io.inputs, extra.inputs), (io.outputs, extra.outputs),
                         (io.out_dirs, extra.out_dirs)) if extra else ():
        for label, v in theirs.items():
            mine.setdefault(label, []).extend(_paths(v))
    check_paths(io)
    for dest, value in vars(args).items():
        if isinstance(value, PathArg):
            setattr(args, dest, str(value))
        elif isinstance(value, (list, tuple)) and any(isinstance(v, PathArg) for v in value):
            setattr(args, dest, type(value)(str(v) if isinstance(v, PathArg) else v for v in value))


def check_snakemake(sm: Any) -> None:
    """For a pipeline script: refuse a ``snakemake.output`` file that is one of its ``snakemake.input`` files,
    or that cannot be written (:func:`check_paths`)."""
    check_paths(IOPaths(_labelled(sm.input, "input"), _labelled(sm.output, "output")))


def start_script(sm: Any) -> None:
    """The first line of every pipeline script: its stdout and stderr go to its log (``snakemake.log[0]``), then
    :func:`check_snakemake`; a refusal is one line in the log, ``rule <rule>: error: <message>``, and exit status
    2. Bad input the script meets later (a truncated result file it reads, say: :data:`yocou.utils.entry.USER_ERRORS`
    or a disk error) is reported the same way, one line and status 2, by an ``excepthook``; any other exception
    keeps its traceback (``YOCOU_TRACEBACK=1`` keeps it for bad input too)."""
    from yocou.utils.entry import (
        EXIT_USER_ERROR,
        USER_ERRORS,
        disk_error,
        error_message,
    )

    sys.stdout = sys.stderr = open(sm.log[0], "w", encoding="utf-8")  # noqa: SIM115 - open for the process
    rule = getattr(sm, "rule", "?")

    def user_error(e: BaseException) -> bool:
        return isinstance(e, USER_ERRORS) or disk_error(e)

    def hook(kind: type[BaseException], e: BaseException, tb: Any) -> None:
        if not user_error(e) or os.environ.get("YOCOU_TRACEBACK"):
            sys.__excepthook__(kind, e, tb)
            return
        print(f"rule {rule}: error: {error_message(e)}", flush=True)
        os._exit(EXIT_USER_ERROR)  # the status says bad input (sys.exit is not honoured inside an excepthook)

    sys.excepthook = hook
    try:
        check_snakemake(sm)
    except (*USER_ERRORS, OSError) as e:
        if not user_error(e):
            raise
        print(f"rule {rule}: error: {error_message(e)}", flush=True)
        raise SystemExit(EXIT_USER_ERROR) from None


def _labelled(files: Any, kind: str) -> dict[str, list[str]]:
    """``{"input <name>": paths}`` of a Snakemake ``input``/``output`` object (``items()`` gives the named ones;
    a mapping in tests); unnamed files go under ``kind`` alone."""
    if isinstance(files, Mapping):
        return {f"{kind} {k}": _paths(v) for k, v in files.items()}
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for k, v in files.items():
        out[f"{kind} {k}"] = _paths(v)
        seen.update(out[f"{kind} {k}"])
    rest = [p for p in _paths(list(files)) if p not in seen]
    if rest:
        out[kind] = rest
    return out

