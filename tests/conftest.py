"""Shared fixtures: a small real token stream built through the data pipeline's own functions."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
import torch

from yocou.data import encode_corpus, train_tokenizer

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers share the two cores: one torch thread each, or OpenMP's spinning threads oversubscribe them
    # (the day-to-day loop took 4 min 7 s at two threads per worker). Subprocesses inherit it; Snakemake jobs set
    # their own OMP_NUM_THREADS from their threads.
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

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


#: Test modules that take minutes, run first: under ``--dist loadscope`` each goes to a worker of its own while the
#: other worker takes the many short modules, instead of one of them starting last beside an idle worker.
LONG_FIRST = ("test_pipeline.py", "test_slurm.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))  # stable: the rest keep their order
