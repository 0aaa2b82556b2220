"""``python -m yocou.evaluation.probe``: train and score one probe model (``train``), or summarize results (``summarize``).

Bad input prints ``python -m yocou.evaluation.probe: error: <message>`` and exits with status 2 (:func:`yocou.utils.entry.run_main`).

Examples::

    python -m yocou.evaluation.probe train --variant yocou --n-loops 2 --seed 0 --out runs/probe/yocou_t2_seed0.json
    python -m yocou.evaluation.probe train --variant yoco --equal-flops-to yocou:3 --seed 0 --out runs/probe/yoco_eqflops_seed0.json
    python -m yocou.evaluation.probe summarize --out results/probe runs/probe/*.json
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from yocou.utils.entry import int_at_least, run_main

PROG = "python -m yocou.evaluation.probe"


def _reference(text: str) -> tuple[str, int | None]:
    """``yocou:3`` -> ``("yocou", 3)``; ``yoco`` -> ``("yoco", None)`` (argparse type of ``--equal-flops-to``)."""
    variant, _, loops = text.partition(":")
    if not loops:
        return variant, None
    try:
        n = int(loops)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected VARIANT or VARIANT:LOOPS, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected LOOPS >= 1, got {n}")
    return variant, n


def build_parser() -> argparse.ArgumentParser:
    from yocou.evaluation.probe.run import SCALES, VARIANTS
    from yocou.utils.guard import reads, replaces, suffixed, writes


    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train one model on MQAR and k-hop, score it, write its JSON result")
    t.add_argument("--variant", required=True, choices=VARIANTS, help="the model's preset")
    t.add_argument("--n-loops", type=int_at_least(1), default=None,
                   help="T of yocou, r of rins (default: the preset's, 3)")
    t.add_argument("--seed", type=int_at_least(0), default=0, help="seeds the init and the training batches")
    t.add_argument("--scale", choices=sorted(SCALES), default="tiny", help="named probe settings (default tiny)")
    t.add_argument("--settings", default=None, type=reads(if_exists=True),
                   help="JSON or YAML file, or inline JSON, of probe settings replacing the scale's (keys of ProbeSettings; task "
                        "merged key by key)")
    t.add_argument("--steps", type=int_at_least(1), default=None, help="override the settings' steps")
    t.add_argument("--equal-flops-to", type=_reference, default=None, metavar="VARIANT[:LOOPS]",
                   help="train for the FLOPs of this model trained the settings' steps (e.g. yocou:3)")
    t.add_argument("--name", default=None, help="the run's label in results (default from variant and loops)")
    t.add_argument("--out", required=True, type=writes(), help="result JSON (written atomically)")
    t.add_argument("--threads", type=int_at_least(1), default=1, help="torch threads (default 1)")
    t.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    s = sub.add_parser("summarize", help="tidy CSV, table and figure from result JSONs")
    s.add_argument("results", nargs="+", type=reads("RESULTS"), help="result JSON files")
    s.add_argument("--out", required=True, type=replaces(), help="output folder")
    s.add_argument("--title", default="", help="figure title and table suffix")
    s.add_argument("--figure", default=None, type=writes(paths=suffixed(".png", ".pdf")), help="the figure's path (.png; a .pdf beside it); default OUT/probe.png")
    s.add_argument("--dpi", type=int_at_least(10), default=None, help="PNG resolution")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(args)
    if args.command == "train":
        import torch

        from yocou.evaluation.probe.run import SCALES, run_probe, settings_from_dict
        from yocou.utils.io import load_config_file

        torch.set_num_threads(args.threads)
        settings = SCALES[args.scale]
        if args.settings is not None:
            settings = settings_from_dict(load_config_file(args.settings) or {}, settings)
        if args.steps is not None:
            settings = settings_from_dict({"steps": args.steps,
                                           "warmup_steps": min(settings.warmup_steps, args.steps)}, settings)
        r = run_probe(args.variant, settings, seed=args.seed, out=args.out, n_loops=args.n_loops,
                      equal_flops_to=args.equal_flops_to, name=args.name, progress=not args.no_progress)
        acc = ", ".join(f"{t} k={k}: {c['accuracy']:.3f}" for t, by in r["accuracy"].items() for k, c in by.items())
        print(f"{r['variant']} seed {r['seed']}: {acc} -> {args.out}")
        return 0
    from yocou.evaluation.probe.summarize import render
    from yocou.results.render.common import configure

    if args.figure and Path(args.figure).suffix not in ("", ".png", ".pdf"):
        raise ValueError(f"--figure {args.figure}: expected a .png path (a .pdf is written beside it) or a stem")
    configure(dpi=args.dpi)
    paths = render(args.results, args.out, title=args.title, figure=args.figure)
    print(f"probe: {len(args.results)} results -> {', '.join(str(p) for p in paths.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=PROG))
