"""Memory and disk limits: a request that cannot fit is refused in one line with both numbers, before anything is
allocated; a disk that fills mid-write leaves nothing half-written and names the path; the audit's several
files appear together or not at all.

The expected numbers are computed here: the weights' bytes from the modules' own parameter count on the meta
device, the cache bytes by hand from the shapes, the available memory from ``/proc/meminfo`` read directly.
"""

from __future__ import annotations

import errno
import re
import shutil
from pathlib import Path

import pytest
import torch

import yocou.model.config as C
from yocou.model.limits import require_cache_memory
from yocou.utils import memory
from yocou.utils.io import atomic_path

ROOT = Path(__file__).resolve().parents[1]


def _small(monkeypatch: pytest.MonkeyPatch, nbytes: int) -> None:
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": (nbytes, "a test's limit"))
    monkeypatch.delenv("YOCOU_NO_MEMORY_CHECK", raising=False)


def test_available_memory_is_meminfo_or_less() -> None:
    meminfo = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in Path("/proc/meminfo").read_text().splitlines()}
    got = memory.available_bytes("cpu")
    assert got is not None
    n, source = got
    assert 0 < n <= meminfo["MemAvailable"] + 64 * 2**20 and n <= meminfo["MemTotal"], (n, source)
    assert memory.available_bytes("meta") is None


def test_a_model_too_large_is_refused_with_both_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry points' constructor (new_model) checks the weights; LM() itself reads no memory state."""
    from yocou.model.limits import new_model
    from yocou.model.lm import LM

    cfg = C.preset("yocou-smoke")
    with torch.device("meta"):
        n_params = sum(p.numel() for p in LM(cfg).parameters())
    need = n_params * 4  # fp32 weights
    _small(monkeypatch, need - 1)
    with pytest.raises(memory.MemoryRefusal) as e:
        new_model(cfg)
    msg = str(e.value)
    assert "\n" not in msg and f"({need:,} bytes)" in msg and f"({need - 1:,} bytes) are available" in msg, msg
    assert "a test's limit" in msg and "YOCOU_NO_MEMORY_CHECK" in msg
    LM(cfg)  # the constructor does not check
    _small(monkeypatch, need)  # exactly enough: allowed
    new_model(cfg)
    monkeypatch.setenv("YOCOU_NO_MEMORY_CHECK", "1")
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": (1, "a test's limit"))
    new_model(cfg)  # the escape hatch


def test_a_cache_too_large_is_refused_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry points' ``new_cache`` checks the cache's bytes before allocating; ``KVCache()`` and
    ``LM.new_cache`` (the model's own code, which an exported folder ships) read no memory state."""
    from yocou.model.cache import KVCache
    from yocou.model.limits import new_cache
    from yocou.model.lm import LM

    cfg = C.preset("yoco-smoke")
    _small(monkeypatch, 1)
    with pytest.raises(memory.MemoryRefusal, match=r"not allocating the KV cache of .*batch 1, max_len 64"):
        new_cache(LM(cfg), 1, 64)
    KVCache(cfg, 1, 64)  # the constructor does not check
    LM(cfg).new_cache(1, 64)  # nor the model's method
    # by hand: the cross-decoder's one global K and V (n_kv_heads x head_dim per token) plus each self-decoder
    # layer's sliding window (K and V over `window` tokens), fp32, batch 2, 10**7 tokens
    n, b = 10**7, 2
    lower = 2 * b * n * cfg.n_kv_heads * cfg.head_dim * 4
    _small(monkeypatch, lower - 1)
    with pytest.raises(memory.MemoryRefusal, match=r"not allocating the KV cache of .*batch 2, max_len 10000000"):
        require_cache_memory(cfg, b, n, dtype=torch.float32, device="cpu")
    m = re.search(r"needs [\d.]+ \w+ \(([\d,]+) bytes\)", str(_refusal(cfg, b, n, monkeypatch)))
    assert m and int(m.group(1).replace(",", "")) >= lower


def _refusal(cfg, b, n, monkeypatch) -> memory.MemoryRefusal:
    _small(monkeypatch, 1)
    try:
        require_cache_memory(cfg, b, n, dtype=torch.float32, device="cpu")
    except memory.MemoryRefusal as e:
        return e
    raise AssertionError("no refusal")


def test_kv_measure_of_a_huge_length_is_one_line(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from yocou.cli import main

    monkeypatch.delenv("YOCOU_NO_MEMORY_CHECK", raising=False)
    rc = main(["kv", "--preset", "yocou-tiny", "--seq-len", "10000000000", "--measure"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert re.search(r"needs [\d.]+ TiB \([\d,]+ bytes\) but [\d.]+ \w+ \([\d,]+ bytes\) are available", err), err


def test_a_full_disk_mid_write_leaves_nothing_and_names_the_path(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.save reports a full disk as ``RuntimeError: ... unexpected pos``: it becomes ENOSPC naming the file."""
    import yocou.utils.io as io

    target = tmp_path / "ckpt.pt"
    target.write_bytes(b"the previous checkpoint")

    def save(tmp: Path) -> None:
        Path(tmp).write_bytes(b"half")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 4096 vs 4000")

    monkeypatch.setattr(io.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 1024, 1024))
    with pytest.raises(OSError) as e:
        with atomic_path(target) as tmp:
            save(tmp)
    assert e.value.errno == errno.ENOSPC and str(target) in str(e.value), e.value
    assert target.read_bytes() == b"the previous checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]  # no temporary file left
    # the same error with room on the disk is not a disk error: it stays what it was
    monkeypatch.setattr(io.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**12, 0, 10**12))
    with pytest.raises(RuntimeError, match="unexpected pos"):
        with atomic_path(target) as tmp:
            save(tmp)
    assert target.read_bytes() == b"the previous checkpoint"


@pytest.mark.slow
def test_the_audit_writes_all_its_files_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    import yocou.results.audit.report as report
    from yocou.cli import main

    out = tmp_path / "audit"
    assert main(["audit", "--scale", "tiny", "--results", str(ROOT / "results" / "tiny"), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"report.md", "report.html", "verdicts.csv"} <= set(before)
    (out / "report.md").write_text("an earlier report")
    before["report.md"] = b"an earlier report"
    real = report.atomic_write_text

    def failing(path, text, *a, **k):
        if Path(path).name == "report.html":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text, *a, **k)

    monkeypatch.setattr(report, "atomic_write_text", failing)
    capsys.readouterr()
    rc = main(["audit", "--scale", "tiny", "--results", str(ROOT / "results" / "tiny"), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "ENOSPC" in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the earlier report, whole
    assert [p.name for p in tmp_path.iterdir()] == ["audit"]  # the staging folder is gone


def test_writers_that_report_a_full_disk_without_an_errno_become_enospc_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ndarray.tofile (tokenize) says "N requested and M written" with no errno, and safetensors (export-hf, the
    committed weights) a Rust "I/O error: ... (os error 28)": both were tracebacks; now ENOSPC naming the file."""
    import safetensors.torch
    import torch

    import yocou.utils.io as io

    target = tmp_path / "train.bin"
    monkeypatch.setattr(io.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 1024, 1024))
    with pytest.raises(OSError) as e:
        with atomic_path(target) as tmp:
            Path(tmp).write_bytes(b"part")
            raise OSError("5841733 requested and 153600 written")
    assert e.value.errno == errno.ENOSPC and str(target) in str(e.value) and not list(tmp_path.iterdir())

    def full(state, path, metadata=None):
        Path(path).write_bytes(b"part")
        raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    with pytest.raises(OSError) as e:
        io.save_safetensors({"w": torch.zeros(2)}, tmp_path / "m.safetensors")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "m.safetensors")
    monkeypatch.setattr(safetensors.torch, "save_file", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("other")))
    with pytest.raises(RuntimeError, match="other"):   # not an I/O error: left as it was
        io.save_safetensors({"w": torch.zeros(2)}, tmp_path / "m.safetensors")
