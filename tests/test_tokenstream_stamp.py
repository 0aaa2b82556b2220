"""TokenStream verifies a token file once: a stamp beside it lets later opens skip the sha256 and the id scan, and
anything that makes the stamp disagree with the file or its metadata brings the full check back."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from yocou.data import tokens as T
from yocou.data.tokens import TokenStream, stamp_path


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files TokenStream hashes (its sha256_file, counted)."""
    seen: list[Path] = []
    real = T.sha256_file

    def counting(path, *a, **k):
        seen.append(Path(path))
        return real(path, *a, **k)

    monkeypatch.setattr(T, "sha256_file", counting)
    return seen


def _copy(token_dir: Path, dest: Path) -> Path:
    """A scratch copy of the fixture's streams without their stamps; returns its train.bin."""
    shutil.copytree(token_dir, dest, ignore=shutil.ignore_patterns("*.verified.json"))
    return dest / "train.bin"


def test_encode_corpus_stamps_what_it_wrote(token_dir: Path, hashes: list[Path]) -> None:
    path = token_dir / "train.bin"
    stamp = json.loads(stamp_path(path).read_text())
    st = os.stat(path)
    meta = json.loads((token_dir / "train.json").read_text())
    assert stamp_path(path).name == "train.bin.verified.json"
    assert stamp["bin_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() == meta["bin_sha256"]
    assert (stamp["size"], stamp["mtime_ns"], stamp["inode"]) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert stamp["vocab_size"] == meta["vocab_size"] and stamp["format"] == T.STAMP_FORMAT
    ts = TokenStream(path)
    assert hashes == []  # the stamp of the encoder was trusted
    assert np.array_equal(np.asarray(ts.tokens), np.fromfile(path, dtype=np.uint16))


def test_the_second_open_does_not_hash_again(tmp_path: Path, token_dir: Path, hashes: list[Path]) -> None:
    path = _copy(token_dir, tmp_path / "t")
    want = np.fromfile(path, dtype=np.uint16)
    assert not stamp_path(path).exists()
    first = TokenStream(path)
    assert hashes == [path]
    stamp = json.loads(stamp_path(path).read_text())
    assert stamp["size"] == want.nbytes and stamp["mtime_ns"] == os.stat(path).st_mtime_ns
    assert stamp["bin_sha256"] == hashlib.sha256(want.tobytes()).hexdigest()
    second = TokenStream(path)
    assert hashes == [path]
    assert np.array_equal(np.asarray(second.tokens), want) and len(second) == len(first) == want.size
    assert second.document(3).tolist() == first.document(3).tolist()


def test_bytes_changed_after_stamping_are_verified_again_and_refused(tmp_path: Path, token_dir: Path,
                                                                     hashes: list[Path]) -> None:
    path = _copy(token_dir, tmp_path / "t")
    TokenStream(path)
    vocab = json.loads((tmp_path / "t" / "train.json").read_text())["vocab_size"]
    before = os.stat(path)
    ids = np.fromfile(path, dtype=np.uint16)
    ids[5] = (int(ids[5]) + 1) % vocab  # another valid id, same size: only the hash can tell
    ids.tofile(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    assert os.stat(path).st_size == before.st_size
    with pytest.raises(ValueError, match=r"t/train\.bin: sha256 .* differs from the bin_sha256 .*train\.json"):
        TokenStream(path)
    assert hashes == [path, path]


def test_a_stamp_that_disagrees_is_ignored(tmp_path: Path, token_dir: Path, hashes: list[Path]) -> None:
    path = _copy(token_dir, tmp_path / "t")
    TokenStream(path)
    good = json.loads(stamp_path(path).read_text())
    for bad in ({**good, "bin_sha256": "0" * 64}, {**good, "format": "yocou-tokens-verified-v0"},
                {**good, "size": good["size"] + 2}, "{not json", [1, 2]):
        stamp_path(path).write_text(bad if isinstance(bad, str) else json.dumps(bad))
        n = len(hashes)
        TokenStream(path)
        assert len(hashes) == n + 1, bad
        assert json.loads(stamp_path(path).read_text()) == good  # rewritten by the full check


def test_a_smaller_vocabulary_in_the_metadata_rescans_the_ids(tmp_path: Path, token_dir: Path) -> None:
    path = _copy(token_dir, tmp_path / "t")
    TokenStream(path)
    ids = np.fromfile(path, dtype=np.uint16)
    top = int(ids.max())
    meta_path = tmp_path / "t" / "train.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "vocab_size": top}))  # same bytes, same sha: the stamp is stale
    pos = int(np.argmax(ids >= top))
    with pytest.raises(ValueError, match=rf"t/train\.bin: token {pos} is id {top}, outside the vocabulary "
                                         rf"\[0, {top}\)"):
        TokenStream(path)


def test_a_read_only_folder_verifies_without_a_stamp(tmp_path: Path, token_dir: Path, hashes: list[Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = _copy(token_dir, tmp_path / "t")
    folder = path.parent
    folder.chmod(0o555)
    try:
        try:
            (folder / "probe").write_text("")
        except PermissionError:
            pass
        else:  # root writes anywhere: a write into the folder fails as it would for anyone else
            (folder / "probe").unlink()

            def refuse(p, *a, **k):
                raise PermissionError(13, "Permission denied", str(p))

            monkeypatch.setattr(T, "atomic_write_json", refuse)
        want = np.fromfile(path, dtype=np.uint16)
        for n in (1, 2):
            ts = TokenStream(path)
            assert np.array_equal(np.asarray(ts.tokens), want)
            assert hashes == [path] * n  # verified in full each time
        assert not stamp_path(path).exists()
        assert not [p.name for p in folder.iterdir() if "verified" in p.name]
    finally:
        folder.chmod(0o755)
