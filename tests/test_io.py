import hashlib
import json
import os

import numpy as np
import pytest

from yocou.io import (atomic_path, atomic_write_bytes, atomic_write_json, atomic_write_text, provenance,
                      sha256_file)


def test_atomic_writes_roundtrip_and_no_temp_files(tmp_path):
    atomic_write_bytes(tmp_path / "a.bin", b"\x00\x01abc")
    atomic_write_text(tmp_path / "sub" / "b.txt", "héllo\nworld\r\n")
    atomic_write_json(tmp_path / "c.json", {"x": [1, 2.5, None], "é": "ü"})
    with atomic_path(tmp_path / "d.npy") as tmp:
        np.save(tmp, np.arange(5))
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01abc"
    assert (tmp_path / "sub" / "b.txt").read_bytes() == "héllo\nworld\r\n".encode()
    assert json.loads((tmp_path / "c.json").read_text(encoding="utf-8")) == {"x": [1, 2.5, None], "é": "ü"}
    assert np.load(tmp_path / "d.npy").tolist() == [0, 1, 2, 3, 4]
    assert sorted(os.listdir(tmp_path)) == ["a.bin", "c.json", "d.npy", "sub"]
    assert os.listdir(tmp_path / "sub") == ["b.txt"]
    # not the 0600 of mkstemp
    assert (tmp_path / "a.bin").stat().st_mode & 0o044


def test_atomic_overwrite_and_failure_keeps_old_file(tmp_path):
    p = tmp_path / "m.json"
    atomic_write_json(p, {"v": 1})
    atomic_write_json(p, {"v": 2})
    assert json.loads(p.read_text()) == {"v": 2}
    with pytest.raises(TypeError):
        atomic_write_json(p, {"v": object()})
    with pytest.raises(ValueError):
        atomic_write_json(p, {"v": float("nan")})
    with pytest.raises(RuntimeError):
        with atomic_path(p) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("boom")
    with pytest.raises(TypeError):
        atomic_write_bytes(p, "not bytes")
    assert json.loads(p.read_text()) == {"v": 2}
    assert os.listdir(tmp_path) == ["m.json"]


def test_deterministic_json(tmp_path):
    atomic_write_json(tmp_path / "a.json", {"b": 1, "a": [1, 2]})
    atomic_write_json(tmp_path / "b.json", {"b": 1, "a": [1, 2]})
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_sha256_file(tmp_path):
    data = os.urandom(3 << 20)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()
    assert sha256_file(tmp_path / "f", chunk_size=7) == hashlib.sha256(data).hexdigest()
    with pytest.raises(FileNotFoundError):
        sha256_file(tmp_path / "missing")


def test_provenance_keys():
    cfg = {"model": {"d": 64}}
    p = provenance(cfg, seed=3)
    for key in ("config", "git_commit", "git_dirty", "versions", "device", "seed", "created_utc", "argv"):
        assert key in p
    assert p["config"] == cfg and p["seed"] == 3
    assert isinstance(p["git_commit"], str)
    for key in ("python", "torch", "numpy", "tokenizers", "yocou"):
        assert key in p["versions"]
    assert p["versions"]["torch"] and p["versions"]["numpy"]
    for key in ("platform", "cpu_model", "n_threads", "cuda"):
        assert key in p["device"]
    assert isinstance(p["device"]["n_threads"], int)
    assert p["created_utc"].endswith("+00:00")
    json.dumps(p)  # serialisable
    assert provenance({}, None)["seed"] is None


def test_git_state_dirty_counts_code_not_outputs(tmp_path):
    """A rewritten result or figure leaves the tree clean; an edited source file makes it dirty."""
    import shutil
    import subprocess

    from yocou.io import git_state

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for d in ("pkg", "results/tiny", "figures/tiny", "benchmarks/results"):
        (tmp_path / d).mkdir(parents=True)
    for f in ("pkg/m.py", "results/tiny/t.md", "figures/tiny/f.png", "benchmarks/results/b.json"):
        (tmp_path / f).write_text("0\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=tmp_path, check=True, env=env)
    assert git_state(tmp_path / "pkg")["dirty"] is False
    for f in ("results/tiny/t.md", "figures/tiny/f.png", "benchmarks/results/b.json"):
        (tmp_path / f).write_text("1\n")
    assert git_state(tmp_path / "pkg")["dirty"] is False
    (tmp_path / "pkg/m.py").write_text("1\n")
    state = git_state(tmp_path / "pkg")
    assert state["dirty"] is True and len(state["commit"]) == 40
