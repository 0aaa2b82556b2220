"""One writer per run folder: training holds an exclusive lock on ``<run folder>/.train.lock`` while it runs.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on an open file descriptor: the kernel holds it for the process and drops
it when the process ends in any way (exit, exception, ``SIGKILL``, a crash), so a killed trainer never leaves a
stale lock and the next run resumes from ``ckpt.pt`` at once. The file holds the holder's PID and host (text) for
the refusal message; it is never removed (removing a lock file lets two processes lock two different files).

A second trainer on the same folder, or the train rule of a second ``snakemake`` (which checks with
``python -m yocou.utils.runlock <folder>`` before its log is opened), refuses in one line naming the holder's PID and
how to stop it. The lock is advisory and local: on a network file system without ``flock`` support it cannot see a
trainer on another host. Standard library only.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import socket
from pathlib import Path

__all__ = ["LOCK_NAME", "RunFolderBusy", "RunLock", "check_free", "main"]

#: The lock file inside a run folder.
LOCK_NAME = ".train.lock"


class RunFolderBusy(ValueError):
    """Another live process holds the run folder's lock; the message names its PID and how to stop it."""


def _holder(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8").split()
    except OSError:
        text = []
    return text[0] if text else "unknown"


def _busy(folder: Path, path: Path) -> RunFolderBusy:
    pid = _holder(path)
    how = f"stop it with `kill {pid}`" if pid.isdigit() else "stop the trainer that uses it"
    return RunFolderBusy(f"run folder {folder} is being trained by PID {pid} (lock {path}): wait for it to finish "
                         f"or {how}, then rerun (training resumes from its last checkpoint)")


class RunLock:
    """The exclusive lock of one run folder (a context manager).

    Args:
        folder: the run folder; it must exist.

    Raises (from :meth:`acquire`):
        RunFolderBusy: another process holds the lock.
        OSError: the lock file cannot be created (a read-only file system, no permission).
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _busy(self.folder, self.path) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def release(self) -> None:
        """Drop the lock (also done by the OS when the process ends)."""
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def check_free(folder: str | os.PathLike) -> None:
    """Raise :class:`RunFolderBusy` when a live process holds ``folder``'s lock; a folder or lock file that does not
    exist is free. Takes the lock for an instant and drops it, so it changes nothing on disk."""
    path = Path(folder) / LOCK_NAME
    if not path.is_file():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise _busy(Path(folder), path) from None
        raise
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    """``python -m yocou.utils.runlock RUN_DIR``: exit 0 when no trainer holds the folder, else one line and status 2."""
    ap = argparse.ArgumentParser(prog="python -m yocou.utils.runlock", description=main.__doc__)
    ap.add_argument("run_dir", metavar="RUN_DIR", help="a training run folder")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    if os.path.exists(a.run_dir) and not os.path.isdir(a.run_dir):
        raise NotADirectoryError(f"RUN_DIR {a.run_dir} is a file; expected a training run folder")
    # a folder that does not exist yet is free: the train rule checks before its first run creates it
    check_free(a.run_dir)
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
