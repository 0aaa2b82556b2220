"""Refuse an allocation that cannot fit, before making it: one line with the bytes needed and the bytes available.

A model, KV cache or batch far larger than memory otherwise ends in the allocator's traceback (or, on Linux, in
the kernel's out-of-memory killer after minutes of swapping). :func:`require` compares an estimate with
:func:`available_bytes`: for the CPU the ``MemAvailable`` line of ``/proc/meminfo`` (memory that can be had without
swapping), lowered to the cgroup's limit less its usage when the process runs under one (a container); for a CUDA
device the free bytes ``torch.cuda.mem_get_info`` reports. Where neither can be read (another OS, the ``meta``
device) nothing is refused. The estimates are lower bounds (the tensors themselves), so a refusal is certain to
be right; an allocation just under the limit can still fail in the allocator.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MemoryRefusal", "available_bytes", "format_bytes", "require"]

_CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),  # cgroup v2
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))


class MemoryRefusal(ValueError):
    """The estimated size of an allocation exceeds the memory available; the message has both numbers."""


def format_bytes(n: float) -> str:
    """``n`` bytes as ``12.3 GiB`` (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _meminfo_available(path: str = "/proc/meminfo") -> int | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_available() -> int | None:
    for limit_f, usage_f in _CGROUP_FILES:
        try:
            limit = Path(limit_f).read_text().strip()
            usage = int(Path(usage_f).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= 1 << 60:
            return None  # no limit
        return max(int(limit) - usage, 0)
    return None


def available_bytes(device: object = "cpu") -> tuple[int, str] | None:
    """``(bytes, source)``: the memory an allocation on ``device`` can use now, and where that number comes from;
    None where it cannot be read (nothing is then refused)."""
    import torch

    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return None
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free), f"free on {dev} (torch.cuda.mem_get_info)"
    if dev.type != "cpu":
        return None
    mem, cg = _meminfo_available(), _cgroup_available()
    if mem is None and cg is None:
        return None
    if cg is not None and (mem is None or cg < mem):
        return cg, "the cgroup's memory limit less its usage"
    return mem, "MemAvailable in /proc/meminfo"


def require(nbytes: int, what: str, device: object = "cpu") -> None:
    """Refuse ``what`` (``"the KV cache of yoco_u at seq_len 100000000"``) when its ``nbytes`` exceed the memory
    available on ``device``.

    Raises:
        MemoryRefusal: (a ValueError) ``nbytes`` > :func:`available_bytes`; the one-line message names ``what``,
            both numbers, where the available number comes from and ``YOCOU_NO_MEMORY_CHECK``.
    """
    if os.environ.get("YOCOU_NO_MEMORY_CHECK", "") not in ("", "0"):
        return
    got = available_bytes(device)
    if got is None:
        return
    avail, source = got
    if nbytes > avail:
        raise MemoryRefusal(f"not allocating {what}: it needs {format_bytes(nbytes)} ({nbytes:,} bytes) but "
                            f"{format_bytes(avail)} ({avail:,} bytes) are available ({source}); make it smaller "
                            "(set YOCOU_NO_MEMORY_CHECK=1 to try anyway)")
