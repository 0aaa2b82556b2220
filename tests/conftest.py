"""Shared fixtures: a small real token stream built through the data pipeline's own functions."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from yocou.data import encode_corpus, train_tokenizer

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
         "boxing matches def return import class for in if else print value key").split()


@pytest.fixture(scope="session")
def token_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``train/heldout_*`` token streams (BPE vocab 300) from seeded pseudo-text documents."""
    root = tmp_path_factory.mktemp("tokens")
    corpus = root / "corpus"
    corpus.mkdir()
    rng = random.Random(0)
    for split, n_docs in (("train", 30), ("heldout_book", 2), ("heldout_code", 2)):
        with open(corpus / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for i in range(n_docs):
                text = " ".join(rng.choice(WORDS) for _ in range(400))
                fh.write(json.dumps({"id": f"{split}/{i}", "source": "synthetic", "path": f"{i}.txt",
                                     "text": text}) + "\n")
    (corpus / "manifest.json").write_text(json.dumps({"files": [], "sources": {}, "splits": {}}))
    train_tokenizer(corpus / "train.jsonl", 300, root / "tokenizer.json")
    encode_corpus(corpus, root / "tokenizer.json", root / "tokens", show_progress=False)
    return root / "tokens"


def workflow_copy(tmp: Path) -> Path:
    """A scratch copy of the workflow: Snakefile, workflows/, environment.yml (every rule's `conda:`; Snakemake
    reads it for each job's metadata) and the audit's committed baseline (an input of the audit rule), so that
    tests never plan or run in the checkout."""
    root = Path(__file__).resolve().parents[1]
    for name in ("Snakefile", "workflows", "environment.yml", "results/audit"):
        src = root / name
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp / name)
    return tmp
