"""Word n-gram overlap of held-out code with the training stream (yocou.evaluation.analysis.code_overlap), on texts
whose overlap is known by construction."""

from __future__ import annotations

import math

import pytest

from yocou.evaluation.analysis.code_overlap import ngram_set, overlap, study


def test_overlap_by_hand() -> None:
    ref = ngram_set("a b c d e f", 3)                      # abc bcd cde def
    assert len(ref) == 4
    assert overlap("a b c d e f", ref, 3) == 1.0          # a copy
    assert overlap("x y z w", ref, 3) == 0.0              # nothing shared
    assert overlap("c d e q r", ref, 3) == pytest.approx(1 / 3)   # cde of cde, deq, eqr
    assert math.isnan(overlap("a b", ref, 3))             # shorter than n words
    with pytest.raises(ValueError, match="n must be >= 1"):
        ngram_set("a", 0)


def test_a_near_copy_stands_out_against_the_control() -> None:
    words = [f"w{i}" for i in range(400)]
    train = [{"path": f"t{k}.py", "text": " ".join(f"{w}_{k}" for w in words)} for k in range(3)]
    copy = {"path": "copy.py", "text": train[0]["text"]}
    fresh = {"path": "fresh.py", "text": " ".join(f"{w}_new" for w in words)}
    res = study([copy, fresh], train, ns=(8,), n_control=3, min_chars=10)
    by = {(r["split"].split()[0], r["path"]): r["overlap"] for r in res["rows"]}
    assert by[("heldout_code", "copy.py")] == 1.0 and by[("heldout_code", "fresh.py")] == 0.0
    assert all(by[("train", f"t{k}.py")] == 0.0 for k in range(3))   # each unlike the others
