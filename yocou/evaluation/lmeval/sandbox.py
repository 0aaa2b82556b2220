"""Sandboxed execution of generated Python (HumanEval pass@1).

Each program runs in a separate ``python -I`` process (isolated mode: no user site, no environment
variables read), in a fresh empty temporary directory, with ``RLIMIT_AS`` (address space), ``RLIMIT_CPU``,
``RLIMIT_FSIZE`` (no file output) and ``RLIMIT_NPROC`` where the platform has them, a wall-clock timeout
after which the whole process group is killed, and an environment without proxies or credentials.
This limits accidents, it is not a security boundary against hostile code: running model output is
off unless the user opts in (``eval.downstream.code_exec: true`` or ``YOCOU_ALLOW_CODE_EXEC=1``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

__all__ = ["ExecResult", "run_program", "code_exec_allowed"]


@dataclass
class ExecResult:
    """``passed``: exit status 0 within the limits; ``status``: ``passed``/``failed``/``timeout``."""

    passed: bool
    status: str
    stderr_tail: str


def code_exec_allowed() -> bool:
    """True when the user opted in to running generated code (``YOCOU_ALLOW_CODE_EXEC=1``)."""
    return os.environ.get("YOCOU_ALLOW_CODE_EXEC", "") == "1"


def _limits(memory_mb: int, cpu_s: int) -> None:  # runs in the child before exec
    import resource

    os.setsid()
    for name, value in (("RLIMIT_AS", memory_mb * 1024 * 1024), ("RLIMIT_CPU", cpu_s), ("RLIMIT_FSIZE", 0),
                        ("RLIMIT_NPROC", 64), ("RLIMIT_CORE", 0)):
        lim = getattr(resource, name, None)
        if lim is not None:
            try:
                resource.setrlimit(lim, (value, value))
            except (ValueError, OSError):
                pass


def run_program(program: str, *, timeout_s: float = 10.0, memory_mb: int = 1024) -> ExecResult:
    """Run ``program`` (Python source) in a limited child process.

    Args:
        program: the full program (prompt + completion + tests + ``check(entry_point)``).
        timeout_s: wall-clock limit in seconds (the CPU limit is the same, rounded up).
        memory_mb: address-space limit in MiB.

    Raises:
        ValueError: non-positive limits.
    """
    if timeout_s <= 0 or memory_mb <= 0:
        raise ValueError(f"timeout_s and memory_mb must be > 0, got {timeout_s}, {memory_mb}")
    env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"}
    with tempfile.TemporaryDirectory(prefix="yocou_exec_") as tmp:
        proc = subprocess.Popen([sys.executable, "-I", "-c", program], cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=lambda: _limits(memory_mb, int(timeout_s) + 1))
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return ExecResult(False, "timeout", "")
    tail = err.decode("utf-8", "replace")[-500:]
    return ExecResult(proc.returncode == 0, "passed" if proc.returncode == 0 else "failed", tail)
