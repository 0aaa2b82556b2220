"""How much of the held-out code split the training stream already contains: word n-gram overlap of each held-out
stdlib module with the training split's stdlib modules, beside the same measure for training modules against the
rest of the training split (the stdlib's own self-similarity, the control).

The overlap of a document is the fraction of its distinct n-grams of whitespace-separated words that occur anywhere
in the reference documents (the contamination measure of Brown et al. 2020, arXiv 2005.14165, appendix C, there
with n = 13). A held-out module whose overlap is far above the control's shares text with the training stream
(a copy or a near-copy of a training module), and its held-out loss measures recall as much as generalisation.

The documents are the corpus's own (:func:`yocou.data.corpus.build_corpus` with its default hold-out rule, the
stdlib source only: the held-out modules are chosen from the stdlib alone, so they are the same), read from the
running interpreter's standard library: run it under the interpreter that built the tokens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ngram_set", "overlap", "study"]


def ngram_set(text: str, n: int) -> set[int]:
    """The distinct n-grams of ``text``'s whitespace-separated words, each as a 64-bit hash.

    Raises:
        ValueError: ``n`` below 1.
    """
    if n < 1:
        raise ValueError(f"ngram_set: n must be >= 1, got {n}")
    w = text.split()
    return {int.from_bytes(hashlib.blake2b(" ".join(w[i:i + n]).encode(), digest_size=8).digest(), "little")
            for i in range(len(w) - n + 1)}


def overlap(doc: str, reference: set[int], n: int) -> float:
    """The fraction of ``doc``'s distinct word n-grams found in ``reference`` (:func:`ngram_set` of the reference
    documents); NaN for a document shorter than n words."""
    mine = ngram_set(doc, n)
    return len(mine & reference) / len(mine) if mine else float("nan")


def _union(texts: Iterable[str], n: int) -> set[int]:
    out: set[int] = set()
    for t in texts:
        out |= ngram_set(t, n)
    return out


def study(heldout: Sequence[dict[str, str]], train: Sequence[dict[str, str]], ns: Sequence[int] = (8, 13),
          n_control: int = 20, min_chars: int = 20000) -> dict[str, Any]:
    """Per held-out module and n its overlap with every training module; the control: ``n_control`` training
    modules of at least ``min_chars`` characters (the held-out rule's size; the first by path) each against the
    other training modules. Documents are ``{"path", "text"}`` rows of the corpus's JSONL.
    """
    big = sorted((d for d in train if len(d["text"]) >= min_chars), key=lambda d: d["path"])[:n_control]
    rows: list[dict[str, Any]] = []
    for n in ns:
        ref = _union((d["text"] for d in train), n)
        for d in heldout:
            rows.append({"split": "heldout_code", "path": d["path"], "n": n, "chars": len(d["text"]),
                         "overlap": overlap(d["text"], ref, n)})
        for d in big:
            rest = _union((x["text"] for x in train if x["path"] != d["path"]), n)
            rows.append({"split": "train (control: against the other training modules)", "path": d["path"], "n": n,
                         "chars": len(d["text"]), "overlap": overlap(d["text"], rest, n)})
    summary = [{"split": s, "n": n, "median": statistics.median(v), "mean": statistics.fmean(v), "max": max(v)}
               for s in dict.fromkeys(r["split"] for r in rows) for n in ns
               if (v := [r["overlap"] for r in rows if r["split"] == s and r["n"] == n])]
    return {"rows": rows, "summary": summary}


def _markdown(res: dict[str, Any]) -> str:
    out = ["### Held-out code against the training stream: word n-gram overlap\n",
           "Fraction of a module's distinct word n-grams found in the training split's stdlib modules "
           "(`yocou.evaluation.analysis.code_overlap`); control: training modules of the held-out rule's size, "
           "each against the other training modules.\n",
           "| split | n | median | mean | max |", "|---|---|---|---|---|"]
    out += [f"| {s['split']} | {s['n']} | {s['median']:.3f} | {s['mean']:.3f} | {s['max']:.3f} |" for s in res["summary"]]
    out += ["", "| held-out module | characters | " + " | ".join(f"{n}-gram overlap" for n in res["ns"]) + " |",
            "|---|---|" + "---|" * len(res["ns"])]
    held = [r for r in res["rows"] if r["split"] == "heldout_code"]
    for p in dict.fromkeys(r["path"] for r in held):
        cells = {r["n"]: r for r in held if r["path"] == p}
        out.append(f"| {p} | {cells[res['ns'][0]]['chars']:,} | "
                   + " | ".join(f"{cells[n]['overlap']:.3f}" for n in res["ns"]) + " |")
    prov = res["provenance"]
    out.append(f"\n<sub>Python {prov['python_version']} standard library · yocou commit {prov['git_commit'][:10]}</sub>\n")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    from yocou.data.corpus import build_corpus, read_jsonl
    from yocou.utils.guard import check_args, writes
    from yocou.utils.io import atomic_write_json, atomic_write_text, provenance

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.analysis.code_overlap", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=writes(paths=lambda v, a: [v, str(Path(v).with_suffix(".md"))]),
                    help="the JSON to write; a .md beside it")
    ap.add_argument("--n", type=int, nargs="+", default=[8, 13], help="n-gram lengths in words (default 8 13)")
    a = ap.parse_args(argv)
    check_args(a)
    if any(n < 1 for n in a.n):
        raise ValueError(f"--n {a.n}: every n-gram length must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        build_corpus(tmp, {"sources": {"shakespeare": {"enabled": False}}, "holdout": {"book": []}})
        held, train = (read_jsonl(Path(tmp) / f"{s}.jsonl") for s in ("heldout_code", "train"))
    res = study(held, train, a.n)
    res["ns"] = a.n
    res["provenance"] = {**provenance({"n": a.n}, None), "python_version": sys.version.split()[0]}
    atomic_write_json(a.out, res)
    atomic_write_text(Path(a.out).with_suffix(".md"), _markdown(res))
    print(_markdown(res))
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    run_main(main)
