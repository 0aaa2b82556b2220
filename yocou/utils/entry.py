"""Process entry points (``yocou`` and every ``python -m yocou.<module>``): an error from bad input prints one
line, ``<prog>: error: <message>``, on stderr and exits with status 2, as argparse does for a bad argument.

Bad input is what the library raises, naming the field, file or argument, for a config, path or value it
cannot use: :data:`USER_ERRORS` (``ValueError`` and its subclasses, among them :class:`InputTypeError` for a
value of the wrong type, and the file errors). Anything else is a bug and keeps its traceback: a bare
``KeyError`` or ``TypeError`` is not taken for bad input, the library validates what it reads instead.
``YOCOU_TRACEBACK=1`` shows the traceback of user errors too. Standard library only: cheap to import.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DEVICE_HELP",
    "DISK_ERRNOS",
    "DTYPE_HELP",
    "EXIT_USER_ERROR",
    "MissingPackage",
    "USER_ERRORS",
    "InputTypeError",
    "disk_error",
    "error_message",
    "int_at_least",
    "report_user_error",
    "resolve_device",
    "run_main",
]


class InputTypeError(TypeError, ValueError):
    """A value of the wrong type in the input (a config field, say), naming it: a ``TypeError`` to callers,
    and bad input (a ``ValueError``, so in :data:`USER_ERRORS`) to the entry points."""


#: Exceptions that mean bad input (the library's documented errors): reported without a traceback. Not
#: ``KeyError`` or ``TypeError``: raised bare they are bugs (a missing key the reader did not validate).
class MissingPackage(ImportError):
    """An optional package the input asks for (a named tokenizer, say) is not installed; the message has the pip
    command. Bad input to the entry points (in :data:`USER_ERRORS`), an ``ImportError`` to callers."""


USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError, MissingPackage,
    FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError,
)
#: Exit status of a user error (argparse's for a bad argument).
EXIT_USER_ERROR = 2


#: ``OSError`` numbers that mean the disk, not the program: a full disk or quota, a read-only file system, a
#: file too large. Reported in one line naming the path, like :data:`USER_ERRORS`.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG})


def disk_error(e: BaseException) -> bool:
    """True for an ``OSError`` whose errno is in :data:`DISK_ERRNOS`."""
    return isinstance(e, OSError) and e.errno in DISK_ERRNOS


def error_message(e: BaseException) -> str:
    """The message of ``e``; a bare ``KeyError('x')`` reads ``key 'x' not found``; a disk error
    (:func:`disk_error`) names its path, what failed, and that nothing was left under a final name."""
    if disk_error(e):
        name = errno.errorcode.get(e.errno, "")
        what = e.strerror or str(e)
        where = f"{e.filename}: " if e.filename and str(e.filename) not in what else ""
        if getattr(e, "before_work", False):  # yocou.utils.guard.check_writable: refused before any work
            return f"{where}{what} ({name}): nothing was started; choose a writable output or free space"
        return (f"{where}{what} ({name}): writes are atomic, so nothing was left half-written under a final "
                f"name; free space or choose a writable output, and rerun (an interrupted training resumes from "
                f"its checkpoint)")
    if isinstance(e, OSError) and e.strerror:  # "[Errno 13] text: 'path'" as "path: text"
        text, path = e.strerror, e.filename
        return text if path is None or str(path) in text else f"{path}: {text}"
    if isinstance(e, UnicodeDecodeError):  # the codec does not know the file: find it among the arguments
        return f"{_not_utf8_argument() or 'an input file'}: not UTF-8 text (byte {e.start}: {e.reason}); expected a " \
               "text file (JSON, YAML, CSV, JSONL or Markdown)"
    if isinstance(e, KeyError) and len(e.args) == 1:
        arg = e.args[0]
        return arg if isinstance(arg, str) and " " in arg else f"key {arg!r} not found"
    return str(e) or type(e).__name__


def _not_utf8_argument() -> str | None:
    """The first command-line argument (``--opt=path`` or a bare path, also a file inside a folder argument, one
    level down) naming a file that is not UTF-8 text, as ``path (argument --opt)``; None if there is none."""
    prev = ""
    for arg in sys.argv[1:]:
        opt, _, val = arg.partition("=") if arg.startswith("--") and "=" in arg else (prev, "", arg)
        prev = arg if arg.startswith("-") else ""
        path = Path(val)
        try:
            files = [path] if path.is_file() else sorted(f for f in path.iterdir() if f.is_file()) if path.is_dir() \
                else []
        except OSError:
            continue
        for f in files[:200]:
            try:
                with open(f, "rb") as fh:
                    fh.read(1 << 22).decode("utf-8")
            except UnicodeDecodeError as err:
                if err.end < (1 << 22) - 4:  # not a multi-byte character cut by the read size
                    return f"{f}" + (f" (argument {opt})" if opt else "")
            except OSError:
                continue
    return None


def report_user_error(prog: str, e: BaseException) -> int:
    """Print ``<prog>: error: <message>`` to stderr and return :data:`EXIT_USER_ERROR`; re-raise ``e`` when
    ``YOCOU_TRACEBACK`` is set (not empty or ``0``)."""
    if os.environ.get("YOCOU_TRACEBACK", "") not in ("", "0"):
        raise e
    msg = " ".join(part.strip() for part in error_message(e).splitlines() if part.strip())  # one line (a YAML
    # parser's message spans three: the problem, the line, the column)
    print(f"{prog}: error: {msg}", file=sys.stderr)
    return EXIT_USER_ERROR


def _default_prog() -> str:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return f"python -m {spec.name.removesuffix('.__main__')}"
    return os.path.basename(sys.argv[0]) or "yocou"


def run_main(main: Callable[[Any], Any], argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """Call ``main(argv)`` as a process entry point; returns the exit status (``None`` counts as 0).

    :data:`USER_ERRORS` become one line on stderr and status 2 (:func:`report_user_error`); any other
    exception propagates with its traceback. ``prog`` defaults to ``python -m <module>`` of ``__main__``.
    """
    try:
        rc = main(argv)
    except USER_ERRORS as e:
        return report_user_error(prog or _default_prog(), e)
    except OSError as e:
        if (bad := name_too_long(e)) is not None:
            return report_user_error(prog or _default_prog(), bad)
        if not disk_error(e):
            raise
        return report_user_error(prog or _default_prog(), e)
    return 0 if rc is None else int(rc)


def name_too_long(e: OSError) -> ValueError | None:
    """Bad input, not a bug: an ``ENAMETOOLONG`` error (a path the file system cannot hold) as a ValueError naming
    the path and its too-long component; None for any other error."""
    if e.errno != errno.ENAMETOOLONG:
        return None
    name = str(e.filename) if e.filename is not None else "a path"
    bad = next((c for c in Path(name).parts if len(os.fsencode(c)) > 255), None)
    return ValueError(f"{name[:80]}{'...' if len(name) > 80 else ''}: a file name longer than the file system allows"
                      + (f" (a component of {len(os.fsencode(bad))} bytes; at most 255)" if bad else ""))


def int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """argparse ``type``: an integer >= ``minimum`` (and <= ``maximum`` when given); anything else fails naming the
    argument and what it expects."""
    want = f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected {want}, got {value}")
        return value
    return parse


#: Help of every evaluation entry point's ``--device`` (:func:`resolve_device`).
DEVICE_HELP = "cpu, cuda or cuda:N (default: cuda when available, else cpu)"
#: Help of their ``--dtype`` where it defaults by device (:func:`resolve_device`).
DTYPE_HELP = "bf16 (autocast; on CUDA also bf16 weights) or fp32; default: bf16 on CUDA, fp32 on CPU"


def resolve_device(device: str | None, dtype: str | None = None) -> tuple[str, str]:
    """``(device, dtype)`` of an evaluation entry point from its ``--device`` and ``--dtype``: the device (None:
    ``cuda`` when CUDA is available, else ``cpu``) checked to be ``cpu``, ``cuda`` or ``cuda:N`` and usable here;
    the dtype as given, None giving ``bf16`` on CUDA and ``fp32`` on CPU. Imports torch when called.

    Raises:
        ValueError: another device name, or CUDA (or its device N) where this machine has none, naming ``--device``.
    """
    import re

    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", device):
        raise ValueError(f"--device {device!r}: expected cpu, cuda or cuda:N")
    n = torch.cuda.device_count() if device != "cpu" and torch.cuda.is_available() else 0
    if device != "cpu" and int(device.partition(":")[2] or 0) >= n:
        raise ValueError(f"--device {device!r}: this machine has {n} CUDA device(s); expected cpu"
                         + (f" or cuda:0 ... cuda:{n - 1}" if n else ""))
    return device, dtype or ("fp32" if device == "cpu" else "bf16")
