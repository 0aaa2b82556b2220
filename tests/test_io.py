import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from yocou.utils.io import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    provenance,
    remove_stale_temps,
    sha256_file,
)


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

    from yocou.utils.io import git_state

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


def test_a_rewrite_that_differs_only_in_provenance_keeps_the_committed_file(tmp_path) -> None:
    """Under results/ or figures/ of a repository, a JSON, Markdown or HTML output equal to its committed version but
    for provenance is written as committed (git status stays clean); any other change is written as given."""
    import json
    import subprocess

    from yocou.utils.io import atomic_write_json, atomic_write_text

    def git(*a):
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "results").mkdir()
    j, md = tmp_path / "results" / "t.json", tmp_path / "results" / "t.md"
    j.write_text(json.dumps({"rows": [1, 2], "provenance": {"git_commit": "aaa"}}))
    md.write_text("| a |\n\n<sub>yocou 0.1 · commit aaa · 2026-01-01</sub>\n")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")
    committed = (j.read_bytes(), md.read_bytes())
    atomic_write_json(j, {"rows": [1, 2], "provenance": {"git_commit": "bbb"}})
    atomic_write_text(md, "| a |\n\n<sub>yocou 0.1 · commit bbb · 2026-02-02</sub>\n")
    assert (j.read_bytes(), md.read_bytes()) == committed
    atomic_write_json(j, {"rows": [1, 3], "provenance": {"git_commit": "bbb"}})
    atomic_write_text(md, "| b |\n\n<sub>yocou 0.1 · commit bbb · 2026-02-02</sub>\n")
    assert json.loads(j.read_text())["rows"] == [1, 3] and md.read_text().startswith("| b |")
    other = tmp_path / "elsewhere.json"  # outside results/ and figures/: written as given
    atomic_write_json(other, {"provenance": 1})
    assert json.loads(other.read_text()) == {"provenance": 1}


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    """A writer killed mid-write (SIGKILL: no clean-up) leaves its temporary file; the next atomic write to the same
    path removes it. A live writer's file, another target's, another host's and a file not named by the writer
    are kept."""
    import signal
    import socket
    import subprocess
    import sys

    code = ("import sys, time; from yocou.utils.io import atomic_path\n"
            "with atomic_path(sys.argv[1]) as t:\n"
            "    t.write_bytes(b'half'); print(t, flush=True); time.sleep(60)\n")
    target = tmp_path / "x.json"
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True)
    left = Path(proc.stdout.readline().strip())
    live = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True)
    live_tmp = Path(live.stdout.readline().strip())
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert left.is_file() and left.name.startswith(".x.json.")
        host = socket.gethostname()[:32]
        keep = [tmp_path / ".x.json.other-host-1.abc.tmp.json", tmp_path / f".y.json.{host}-{proc.pid}.abc.tmp.json",
                tmp_path / f".x.json.{host}-{proc.pid}.notes.txt"]
        for k in keep:
            k.write_text("mine")
        atomic_write_text(target, "{}")
        assert target.read_text() == "{}" and not left.exists()
        assert live_tmp.is_file() and all(k.is_file() for k in keep)
        # a killed export's or audit's staging folder (named <prefix><host>-<pid>...) goes the same way
        stale = tmp_path / f".out.tmp-{host}-{proc.pid}-abc"
        (stale / "sub").mkdir(parents=True)
        (stale / "sub" / "f").write_text("x")
        live_dir = tmp_path / f".out.tmp-{host}-{live.pid}-abc"
        live_dir.mkdir()
        remove_stale_temps(tmp_path, ".out.tmp-")
        assert not stale.exists() and live_dir.is_dir()
    finally:
        live.kill()
        live.wait(timeout=30)
