"""Lines of Python in yocou/ by layer, at a git revision: the package's shape, before and after a re-layout.

    python benchmarks/line_counts.py            # HEAD
    python benchmarks/line_counts.py --rev REV  # any commit (the flat layout before the layers is classified by
                                                # the same table, module by module)

Layers (docs/design.md): model, training, evaluation, results, workflow, utils, and the top level (cli, data, export).
Counts are physical lines of the .py files (docstrings and comments included), so the numbers compare layouts, not
code quality.
"""
from __future__ import annotations

import argparse
import subprocess
from collections import Counter

#: where each module of the flat layout lives now (old top-level name -> layer)
FLAT = {"config": "model", "model": "model", "cache": "model", "generate": "model", "accounting": "model",
        "hf": "model", "train": "training", "parallel": "training", "ladder": "training", "heldout": "evaluation",
        "ppl": "evaluation", "baselines": "evaluation", "lmeval": "evaluation", "longctx": "evaluation",
        "analysis": "evaluation", "bench": "evaluation", "probe": "evaluation", "tidy": "results",
        "readers": "results", "summarize": "results", "render": "results", "audit": "results", "reported": "results",
        "resultsdoc": "results", "timing": "results", "names": "results", "evaldefs": "results",
        "wfconfig": "workflow", "scales": "workflow", "studies": "workflow", "pipeline": "workflow",
        "cluster": "workflow", "committed": "workflow", "io": "utils", "yamlio": "utils", "memory": "utils",
        "guard": "utils", "runlock": "utils", "entry": "utils"}
LAYERS = ("model", "training", "evaluation", "results", "workflow", "utils")


def layer_of(path: str) -> str:
    """``yocou/model/lm.py`` -> model; ``yocou/train.py`` (flat) -> training; cli, data, export -> top level."""
    first = path.split("/")[1].removesuffix(".py")
    return first if first in LAYERS else FLAT.get(first, "top level")


def count(rev: str) -> Counter:
    files = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "yocou"], capture_output=True, text=True,
                           check=True).stdout.split()
    out: Counter = Counter()
    for f in (f for f in files if f.endswith(".py")):
        text = subprocess.run(["git", "show", f"{rev}:{f}"], capture_output=True, text=True, check=True).stdout
        out[layer_of(f)] += text.count("\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD", help="git revision (default HEAD)")
    a = ap.parse_args()
    c = count(a.rev)
    print(f"| layer | lines of Python at {a.rev} |\n|---|---:|")
    for k in (*LAYERS, "top level"):
        print(f"| {k} | {c[k]:,} |")
    print(f"| total | {sum(c.values()):,} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
