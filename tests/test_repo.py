"""What the repository holds: no large or binary files outside results/ and figures/, no citations of a tracker or
of files outside the repository, a README that stays a guide, and RESULTS.md and the README's results-at-a-glance
block equal to what yocou.results.resultsdoc makes from the committed results."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from yocou.results.resultsdoc import (
    GLANCE_END,
    GLANCE_START,
    glance_table,
    readme_with_glance,
)

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 1 << 20


def _tracked() -> list[str]:
    res = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if res.returncode != 0:
        pytest.skip("not a git checkout")
    return [p for p in res.stdout.decode().split("\0") if p]


def test_no_large_or_wheel_files_outside_results():
    big = [p for p in _tracked() if not p.startswith(("results/", "figures/")) and (ROOT / p).is_file()
           and (ROOT / p).stat().st_size > MAX_BYTES]
    assert big == [], f"tracked files over 1 MiB outside results/ and figures/: {big}"
    assert [p for p in _tracked() if p.endswith(".whl")] == []


@pytest.mark.parametrize("pattern", [r"\bissues? #?[0-9]+", r"SPEC\.md", r"\.\./shared|shared/paper|shared/SPEC"])
def test_no_citation_of_the_tracker_or_files_outside(pattern):
    rx = re.compile(pattern, re.I)
    hits = []
    for p in _tracked():
        if not p.startswith(("yocou/", "workflows/", "eval/", "docs/")) and p not in ("Snakefile", "README.md"):
            continue
        path = ROOT / p
        if path.suffix in (".png", ".pdf", ".gz", ".npz") or not path.is_file():
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if rx.search(line):
                hits.append(f"{p}:{i}: {line.strip()[:100]}")
    assert hits == [], "\n".join(hits[:20])


def test_readme_is_a_guide_and_results_are_generated():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert readme.startswith("# yocou") and "snakemake --cores all reproduce_all" in readme.split("```")[1]
    assert "python3 -m pytest -q" in readme.split("```")[1]
    res = subprocess.run([sys.executable, "-m", "yocou.results.resultsdoc", "--check", "--root", str(ROOT)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_glance_table_keeps_training_rows_with_seeds_and_counts_decided(tmp_path):
    audit = tmp_path / "results" / "s" / "audit"
    audit.mkdir(parents=True)
    rows = [  # id, evidence, n_seeds, verdict, verdict_unadjusted, loss_minus_bigram
        ("a", "training", 5, "opposite", "opposite", -0.1), ("b", "training", 5, "inconclusive", "", -0.1),
        ("c", "training", 1, "inconclusive", "", -0.1), ("d", "timing", 3, "same direction", "", None),
        ("e", "training", 2, "no difference", "no difference", -0.2),
        ("f", "training", 3, "not comparable (pre-bigram regime)", "opposite", 0.02),
        ("g", "training", 3, "differs", "differs", -0.3), ("h", "training", 3, "censored", "", 0.02)]
    pd.DataFrame([{"id": i, "comparison": f"X against Y ({i} detail)", "paper": "1 vs 2", "effect": 0.5,
                   "ci_low": 0.1, "ci_high": 0.9, "n_seeds": n, "evidence": e, "verdict": v, "verdict_unadjusted": u,
                   "tokens_per_param": 1.04, "annealed": True, "loss_minus_bigram": lb, "regime_split": "book"}
                  for i, e, n, v, u, lb in rows]).to_csv(audit / "verdicts.csv", index=False)
    counts = pd.Series([r[3] for r in rows]).value_counts().to_dict()
    (audit / "summary.json").write_text(json.dumps({"verdicts": {"total": len(rows), **counts}}))
    t = glance_table(tmp_path, "s")
    body = [ln for ln in t.splitlines() if ln.startswith("| X against Y")]
    assert len(body) == 6 and all("detail" not in ln for ln in body)
    assert "+0.5000 [+0.1000, +0.9000]" in body[0] and "**opposite**" in body[0] and "1.04; annealed; -0.100 book" in body[0]
    f = body[3]                                                    # rows a, b, e, f, g, h: c has one seed, d timing
    assert "+0.020 book | opposite |" in f and "**not comparable (pre-bigram regime)**" in f   # its own reading beside
    assert ("Of these 6 (restatements counted once): 0 for the paper, 2 against it, 1 differ from a parity it "
            "claims, 1 inconclusive, 1 not comparable, 1 censored; 3 decided") in t
    assert "the margin of `eval/regime.yaml` below the Kneser-Ney bigram" in t     # no summary.json: where it is
    # the README's table: the not-comparable row left out and counted; a ladder row (v.ladder.*) leads
    ladder = pd.read_csv(audit / "verdicts.csv")
    ladder.loc[len(ladder)] = {**ladder.iloc[0].to_dict(), "id": "v.ladder.x", "comparison": "the ladder's row"}
    ladder.to_csv(audit / "verdicts.csv", index=False)
    (audit / "summary.json").write_text(json.dumps({"verdicts": {"total": len(rows) + 1,
                                                                 **{**counts, "opposite": 2}}}))
    short = glance_table(tmp_path, "s", comparable_only=True)
    body = [ln for ln in short.splitlines() if ln.startswith("| ")][1:]
    assert len(body) == 6 and body[0].startswith("| the ladder's row |")
    assert not any("not comparable (pre-bigram regime)**" in ln for ln in body)
    assert "Left out here: 1 rows (restatements counted once) not comparable" in short
    (audit / "summary.json").write_text(json.dumps({"verdicts": {"total": len(rows), **counts}}))
    with pytest.raises(ValueError, match=r"verdicts\.csv: 9 counted rows, but summary\.json counts 8"):
        glance_table(tmp_path, "s")
    pd.DataFrame([{"id": "a"}, {"id": "a"}]).to_csv(audit / "verdicts.csv", index=False)
    with pytest.raises(ValueError, match="verdicts.csv: missing columns"):
        glance_table(tmp_path, "s")


def test_readme_with_glance_replaces_only_the_block():
    text = f"top\n{GLANCE_START}\nold\n{GLANCE_END}\nbottom\n"
    assert readme_with_glance(text, "NEW") == f"top\n{GLANCE_START}\nNEW\n{GLANCE_END}\nbottom\n"
    with pytest.raises(ValueError, match="markers"):
        readme_with_glance("no markers", "NEW")


def test_resultsdoc_refuses_a_cut_or_edited_verdicts_table_and_rewrites_nothing(tmp_path):
    """A verdicts.csv cut short, or with a verdict flipped against its own interval, is refused before README.md or
    RESULTS.md is rewritten (it used to publish an empty results table)."""
    import shutil

    import pandas as pd

    from yocou.results import resultsdoc
    shutil.copytree(ROOT / "results", tmp_path / "results")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "benchmarks", tmp_path / "benchmarks")
    for f in ("README.md", "RESULTS.md"):
        shutil.copy(ROOT / f, tmp_path / f)
    before = {f: (tmp_path / f).read_bytes() for f in ("README.md", "RESULTS.md")}
    vpath = tmp_path / "results/tiny/audit/verdicts.csv"
    full = pd.read_csv(vpath)
    full.head(10).to_csv(vpath, index=False)
    with pytest.raises(ValueError, match=r"verdicts\.csv: 10 counted rows, but summary\.json counts"):
        resultsdoc.results_md(tmp_path, "tiny")
    flipped = full.copy()
    i = flipped.index[(flipped["evidence"] == "training") & flipped["ci_low"].notna()][0]
    flipped.loc[i, "ci_low"], flipped.loc[i, "ci_high"] = -0.1, 0.1
    was = flipped.loc[i, "verdict"]
    flipped.loc[i, "verdict"] = "opposite"
    flipped.to_csv(vpath, index=False)
    with pytest.raises(ValueError, match="verdicts.csv"):
        resultsdoc.results_md(tmp_path, "tiny")
    assert was != "opposite"
    assert {f: (tmp_path / f).read_bytes() for f in ("README.md", "RESULTS.md")} == before


def test_the_readmes_python_examples_run_as_written():
    """Every ```python block of the README runs as written in a fresh interpreter (one once failed on an undefined
    name); the model example's output has the shape its comment gives."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert blocks, "the README has no Python example"
    for code in blocks:
        check = "\nprint(tuple(out.shape))" if "out = generate(" in code else ""
        res = subprocess.run([sys.executable, "-c", code + check], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        if check:
            assert res.stdout.strip().splitlines()[-1] == "(2, 32)", res.stdout
