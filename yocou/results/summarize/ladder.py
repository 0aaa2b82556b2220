"""The token ladder's tables: the learning-rate bracket, the annealed points, and (``fits``) the fitted trends and
the paper's Figure 2 quantities decided by ``eval/ladder.yaml``.

Command line (what ``workflows/rules/ladder.smk`` calls)::

    python -m yocou.results.summarize.ladder bracket --scale S --ppl-root results/S/ladder/ppl --baseline B.json --out bracket.json
    python -m yocou.results.summarize.ladder points --scale S --run-root runs/S/ladder --res results/S/ladder --out points.csv
    python -m yocou.results.summarize.ladder fits --scale S --points points.csv --rules eval/ladder.yaml \\
        --bracket bracket.json --out ladder.json --figure figures/S/fig2_ladder.png

Every table is written as CSV, Markdown and JSON with provenance (:func:`yocou.results.render.common.write_table`).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from yocou.training.ladder import (
    LADDER_SPLITS,
    STUDY_FILE,
    LadderStudy,
    best_rates,
    load_study,
    plan,
)

SPLITS = ("heldout_book", "heldout_code")
SPLIT_NAMES = {"heldout_book": "book", "heldout_code": "code", "heldout_plays": "plays"}
#: the splits of the annealed points (yocou.training.ladder.LADDER_SPLITS): the decided ones (book, code) and the
#: plays held out of the ladder's training, where the ladder's ppl and baselines have it
POINT_SPLITS = LADDER_SPLITS


def _read(path: str | Path) -> Any:
    from yocou.results.render.common import read_json

    return read_json(path)


def _split_loss(ppl: Mapping[str, Any], split: str, where: str) -> float:
    try:
        return float(ppl["splits"][split]["nats_per_token"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{where}: no splits.{split}.nats_per_token") from None


def bigram_losses(baseline: Mapping[str, Any], where: str) -> dict[str, float]:
    """``{split: nats/token}`` of the Kneser-Ney bigram fitted on a budget's training windows (``bigram_kn_budget``
    of ``yocou cli baselines --budget-steps ...``).

    Raises:
        ValueError: the file has no ``splits.<split>.bigram_kn_budget.nats_per_token``, naming ``where``.
    """
    out = {}
    for s in POINT_SPLITS:
        if s not in SPLITS and s not in (baseline.get("splits") or {}):
            continue  # the plays split, where the baselines were scored without it
        try:
            out[s] = float(baseline["splits"][s]["bigram_kn_budget"]["nats_per_token"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{where}: no splits.{s}.bigram_kn_budget.nats_per_token (a budget's baselines file)") \
                from None
    return out


# --- the bracket ---------------------------------------------------------------------------------------------


def bracket_table(study: LadderStudy, ppl_root: str | Path, kind: str = "bracket") -> pd.DataFrame:
    """One row per bracket run (``kind``: the ladder's ``bracket`` or the depth control's ``depth_bracket``):
    variant, lr, the held-out loss per split and their mean (the score)."""
    rows = []
    for p in plan(study).values():
        if p.kind != kind:
            continue
        path = Path(ppl_root) / f"{p.name}.json"
        ppl = _read(path)
        row = {"variant": p.variant, "lr": p.rate, "steps": p.steps}
        for s in SPLITS:
            row[SPLIT_NAMES[s]] = _split_loss(ppl, s, str(path))
        row["score"] = sum(row[SPLIT_NAMES[s]] for s in SPLITS) / len(SPLITS)
        rows.append(row)
    return pd.DataFrame(rows)


def bracket_best(df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per variant: the best rate (lowest score), its score, and whether it is interior (a rate on each side of it
    scores higher: eval/ladder.yaml ``bracket``)."""
    best = {}
    for v, g in df.groupby("variant", sort=False):
        g = g.sort_values("lr").reset_index(drop=True)
        i = int(g["score"].idxmin())
        interior = 0 < i < len(g) - 1 and g["score"][i - 1] > g["score"][i] < g["score"][i + 1]
        side = None if interior else ("lowest" if i == 0 else "highest")
        best[v] = {"lr": float(g["lr"][i]), "score": float(g["score"][i]), "interior": bool(interior),
                   "edge": side}
    return best


def write_rates(study: LadderStudy, ppl_root: str | Path, out: str | Path, kind: str = "bracket") -> dict[str, Any]:
    """``rates.json``: each variant's best bracketed rate (``{"best": {variant: {lr, score, interior, edge}}}``,
    :func:`bracket_best`), the only file the ladder's run configs read from the bracket. Rule ladder_rates makes it
    from the bracket runs' held-out losses alone (no code file among its inputs), so it is rewritten when those runs
    are re-evaluated, and not when the bracket's summary or its code is. ``kind="depth_bracket"``: the depth
    control's own bracket (``depth_rates.json``, rule depth_rates)."""
    from yocou.utils.io import atomic_write_json

    doc = {"best": bracket_best(bracket_table(study, ppl_root, kind))}
    atomic_write_json(out, doc)
    return doc


def _bracket_word(best: Mapping[str, Any]) -> str:
    return "interior" if best["interior"] else f"NOT bracketed: best at the {best['edge']} rate"


def write_bracket(study: LadderStudy, ppl_root: str | Path, baseline: str | Path, out_json: str | Path,
                  scale: str) -> dict[str, Any]:
    """``bracket.{json,csv,md}``: every run's losses, the best rate per variant and whether it is interior."""
    from yocou.results.render.common import write_table
    from yocou.utils.io import atomic_write_json, provenance

    df = bracket_table(study, ppl_root)
    best = bracket_best(df)
    big = bigram_losses(_read(baseline), str(baseline))
    df["best"] = [best[v]["lr"] == lr for v, lr in zip(df["variant"], df["lr"])]
    for s in SPLITS:
        df[f"{SPLIT_NAMES[s]}_minus_bigram"] = df[SPLIT_NAMES[s]] - big[s]
    stem = Path(out_json).with_suffix("")
    notes = [f"{study.bracket.steps} steps of the ladder's schedule (warmup {study.warmup_steps}, stable, linear "
             f"cooldown over the last {study.cooldown_fraction:g} of the steps to {study.min_lr_ratio:g} x the rate); "
             "one seed per rate; held-out losses in nats/token; score = the mean of book and code.",
             "best: the lowest score per variant; interior: a rate on each side scores higher (eval/ladder.yaml).",
             "Bigram: interpolated Kneser-Ney fitted on the training windows of this budget, "
             f"book {big['heldout_book']:.4f}, code {big['heldout_code']:.4f}; *_minus_bigram < 0: the run beats it.",
             "Best rates: " + "; ".join(f"{v} {b['lr']:g} ({_bracket_word(b)})" for v, b in best.items())]
    write_table(df, stem, title=f"Learning-rate bracket of the token ladder ({scale}, CPU)", notes=notes,
                config={"scale": scale, "study": study.model_dump()})
    # write_table wrote bracket.json as its rows; the run configs read `best` from it.
    doc = json.loads(Path(stem.with_suffix(".json")).read_text())
    doc = {"best": best, "bigram": {SPLIT_NAMES[s]: big[s] for s in SPLITS}, **doc}
    doc["provenance"] = provenance({"scale": scale, "study": study.model_dump()}, None)
    atomic_write_json(stem.with_suffix(".json"), doc)
    return doc


# --- the annealed points -------------------------------------------------------------------------------------


def _metrics_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise ValueError(f"{path}: line {i} is not JSON") from None
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def check_rates(study: LadderStudy, run_root: str | Path, bracket: Mapping[str, Any],
                up_to: int | None = None) -> None:
    """Every stable segment and annealed branch was trained at its variant's best rate in ``bracket`` (the
    bracket summary, ``bracket.json``): a reader's check that the rates the run configs read (``rates.json``, rule
    ladder_rates) and the summary's agree.

    Raises:
        ValueError: a run's rate differs from its variant's best, naming the run's summary.json and how to retrain.
    """
    best = best_rates(bracket)
    for p in plan(study).values():
        if p.kind not in ("stable", "anneal") or (up_to is not None and p.steps > up_to):
            continue
        path = Path(run_root) / p.name / "summary.json"
        lr = float(_read(path)["provenance"]["config"]["train"]["lr"])
        if p.variant not in best or not math.isclose(lr, best[p.variant], rel_tol=1e-9):
            root = Path(run_root)
            raise ValueError(
                f"{path}: trained at lr {lr:g}, but the bracket's best rate for {p.variant} is "
                f"{best.get(p.variant)}: retrain the ladder's runs with the bracket's rates (`snakemake --cores all "
                f"ladder --config mode=compute -R ladder_rates`; rates in {root}/rates.json)")


def points_table(study: LadderStudy, run_root: str | Path, res: str | Path, train_tokens: int,
                 up_to: int | None = None, kind: str = "anneal") -> pd.DataFrame:
    """One row per annealed model: variant, seed, steps, tokens, parameters (all and without the embedding and head),
    tokens per parameter, training FLOPs, the held-out loss per split and its own budget's bigram, the training
    loss over the cooldown's last 10% of steps, and epochs over the training stream. ``up_to``: only the budgets of
    at most that many steps (an interim table while the larger ones train). ``kind="depth"``: the depth control's
    annealed models."""
    rows = []
    for p in plan(study).values():
        if p.kind != kind or (up_to is not None and p.steps > up_to):
            continue
        run = Path(run_root) / p.name
        summ = _read(run / "summary.json")
        ppl = _read(Path(res) / "ppl" / f"{p.name}.json")
        big = bigram_losses(_read(Path(res) / "baselines" / f"d{p.steps}.json"), f"baselines d{p.steps}")
        metrics = _metrics_rows(run / "metrics.jsonl")
        tail = [r["loss"] for r in metrics if r["step"] > p.steps - max(1, p.steps // 10)]
        params = int(summ.get("params_total") or summ.get("params") or 0)
        row = {"variant": p.variant, "seed": p.seed_index, "run": p.name, "steps": p.steps,
               "tokens": int(summ["tokens"]), "params": params,
               "params_non_embedding": int(summ.get("params_non_embedding") or 0),
               "tokens_per_param": int(summ["tokens"]) / params if params else float("nan"),
               "train_flops": float(summ["train_flops"]), "lr": float(summ["provenance"]["config"]["train"]["lr"]),
               "train_loss": sum(tail) / len(tail), "epochs": int(summ["tokens"]) / train_tokens}
        for s in POINT_SPLITS:
            if s not in SPLITS and (s not in (ppl.get("splits") or {}) or s not in big):
                continue  # a ladder scored before the plays were held out
            row[SPLIT_NAMES[s]] = _split_loss(ppl, s, f"ppl of {p.name}")
            row[f"bigram_{SPLIT_NAMES[s]}"] = big[s]
        rows.append(row)
    return pd.DataFrame(rows)


def checks_table(study: LadderStudy, ppl_root: str | Path, points: str | Path, rules: Mapping[str, Any]
                 ) -> tuple[pd.DataFrame, list[str]]:
    """The ladder's checks (``checks:`` of the study) beside the ladder's own annealed point of the same variant,
    seed 0 and budget (``points.csv``), and the verdicts of ``eval/ladder.yaml`` (``checks``):

    * a check with its own ``rate`` (the horizon bracket): per variant, the ladder's rate is "interior at this
      budget" when a check below and a check above it both score higher (the mean of the book and code losses)
      than the ladder's point, else "not interior";
    * a check with ``assumptions`` (e.g. ``cross_rope``): "insensitive" when it differs from the ladder's point by
      less than ``checks.sensitivity_nats`` on both splits, else "sensitive" (one seed a side: no interval).

    Returns the table (one row per check) and the verdict lines.

    Raises:
        ValueError: a check's held-out loss or the ladder's point is missing, naming the file.
    """
    pts = pd.read_csv(points)
    margin = float(rules["checks"]["sensitivity_nats"])
    rows = []
    for p in (p for p in plan(study).values() if p.kind == "check"):
        ref = pts[(pts["variant"] == p.variant) & (pts["seed"] == 0) & (pts["steps"] == p.steps)]
        if len(ref) != 1:
            raise ValueError(f"{points}: no annealed point of {p.variant} seed 0 at {p.steps} steps for check {p.name}")
        r0 = ref.iloc[0]
        where = Path(ppl_root) / f"{p.name}.json"
        ppl = _read(where)
        row = {"check": p.name, "variant": p.variant, "steps": p.steps, "tokens": int(r0["tokens"]),
               "tokens_per_param": float(r0["tokens_per_param"]),
               "lr": p.rate if p.rate is not None else float(r0["lr"]),
               "ladder_lr": float(r0["lr"]), "assumptions": ", ".join(f"{k}={v}" for k, v in p.assumptions)}
        for s in ("book", "code"):
            row[s] = _split_loss(ppl, f"heldout_{s}", str(where))
            row[f"ladder_{s}"] = float(r0[s])
            row[f"{s}_minus_ladder"] = row[s] - row[f"ladder_{s}"]
            row[f"{s}_minus_bigram"] = row[s] - float(r0[f"bigram_{s}"])
        row["score"] = (row["book"] + row["code"]) / 2
        row["ladder_score"] = (row["ladder_book"] + row["ladder_code"]) / 2
        rows.append(row)
    df = pd.DataFrame(rows)
    lines = []
    for v, g in df[df["assumptions"] == ""].groupby("variant", sort=False):
        lr0, s0 = float(g["ladder_lr"].iloc[0]), float(g["ladder_score"].iloc[0])
        lower = g[g["lr"] < lr0]
        upper = g[g["lr"] > lr0]
        interior = bool(len(lower) and len(upper) and (lower["score"] > s0).all() and (upper["score"] > s0).all())
        lines.append(f"{v} at {int(g['steps'].iloc[0])} steps: the ladder's rate {lr0:g} scores {s0:.4f}; "
                     + "; ".join(f"{r.lr:g} scores {r.score:.4f} ({r.score - s0:+.4f})" for r in g.itertuples())
                     + f": **{'interior' if interior else 'not interior'}** at this budget")
    for r in df[df["assumptions"] != ""].itertuples():
        big = max(abs(r.book_minus_ladder), abs(r.code_minus_ladder))
        lines.append(f"{r.variant} with {r.assumptions} at {r.steps} steps minus the ladder's seed 0: book "
                     f"{r.book_minus_ladder:+.4f}, code {r.code_minus_ladder:+.4f} nats: **"
                     f"{'insensitive' if big < margin else 'sensitive'}** (margin {margin:g}; one seed a side, no "
                     "interval)")
    return df, lines


def main(argv: list[str] | None = None) -> int:
    """``python -m yocou.results.summarize.ladder {bracket,points,fits}``."""
    from yocou.utils.guard import reads, suffixed, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.results.summarize.ladder", description=main.__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bracket")
    b.add_argument("--scale", required=True)
    b.add_argument("--study", default=STUDY_FILE, type=reads())
    b.add_argument("--ppl-root", required=True, type=reads())
    b.add_argument("--baseline", required=True, type=reads())
    b.add_argument("--out", required=True, type=writes(paths=suffixed(".json", ".csv", ".md")))
    r = sub.add_parser("rates")
    r.add_argument("--scale", required=True)
    r.add_argument("--study", default=STUDY_FILE, type=reads())
    r.add_argument("--ppl-root", required=True, type=reads())
    r.add_argument("--kind", choices=("bracket", "depth_bracket"), default="bracket",
                   help="the ladder's bracket or the depth control's")
    r.add_argument("--out", required=True, type=writes(paths=suffixed(".json")))
    pt = sub.add_parser("points")
    pt.add_argument("--scale", required=True)
    pt.add_argument("--study", default=STUDY_FILE, type=reads())
    pt.add_argument("--run-root", required=True, type=reads())
    pt.add_argument("--res", required=True, type=reads())
    pt.add_argument("--data", default=None, type=reads(), help="train.bin (epochs); default runs/<scale>/tokens/train.bin")
    pt.add_argument("--bracket", default=None, type=reads(),
                    help="bracket.json: check that every run was trained at its variant's best rate")
    pt.add_argument("--up-to", type=int, default=None, metavar="STEPS",
                    help="only the budgets of at most STEPS steps (an interim table while larger ones train)")
    pt.add_argument("--kind", choices=("anneal", "depth"), default="anneal",
                    help="the ladder's annealed points or the depth control's")
    pt.add_argument("--out", required=True, type=writes(paths=suffixed(".json", ".csv", ".md")))
    f = sub.add_parser("fits")
    f.add_argument("--scale", required=True)
    f.add_argument("--points", required=True, type=reads())
    f.add_argument("--rules", default="eval/ladder.yaml", type=reads())
    f.add_argument("--bracket", default=None, type=reads(),
                   help="bracket.json: a variant whose best rate is not interior caps the verdicts that read it")
    f.add_argument("--out", required=True, type=writes(paths=suffixed(".json", ".csv", ".md")))
    f.add_argument("--figure", required=True, type=writes(paths=suffixed(".png", ".pdf")))
    f.add_argument("--dpi", type=int, default=150)
    dp = sub.add_parser("depth", help="the depth control's readouts and decisions (yocou.results.summarize.depth)")
    dp.add_argument("--scale", required=True)
    dp.add_argument("--study", default=STUDY_FILE, type=reads())
    dp.add_argument("--points", required=True, type=reads(), help="the ladder's points.csv")
    dp.add_argument("--depth-points", required=True, type=reads(), help="the control's depth_points.csv")
    dp.add_argument("--ppl-root", required=True, type=reads(), help="the held-out losses of the control's bracket")
    dp.add_argument("--rules", default="eval/ladder.yaml", type=reads())
    dp.add_argument("--out", required=True, type=writes(paths=suffixed(".json", ".csv", ".md")))
    dp.add_argument("--figure", required=True, type=writes(paths=suffixed(".png", ".pdf")))
    dp.add_argument("--dpi", type=int, default=150)
    c = sub.add_parser("checks")
    c.add_argument("--scale", required=True)
    c.add_argument("--study", default=STUDY_FILE, type=reads())
    c.add_argument("--ppl-root", required=True, type=reads())
    c.add_argument("--points", required=True, type=reads())
    c.add_argument("--rules", default="eval/ladder.yaml", type=reads())
    c.add_argument("--out", required=True, type=writes(paths=suffixed(".json", ".csv", ".md")))
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    if a.cmd == "fits":
        a.study = STUDY_FILE
    check_args(a)
    study = load_study(a.scale, a.study)
    if study is None:
        raise ValueError(f"--scale {a.scale}: {STUDY_FILE} has no section for this scale")
    if a.cmd == "bracket":
        write_bracket(study, a.ppl_root, a.baseline, a.out, a.scale)
    elif a.cmd == "rates":
        write_rates(study, a.ppl_root, a.out, a.kind)
    elif a.cmd == "depth":
        from yocou.results.summarize.depth import write as write_depth
        from yocou.results.summarize.ladder_fits import read_rules

        if study.depth_control is None:
            raise ValueError(f"--scale {a.scale}: {a.study} has no depth_control for this scale")
        rules = read_rules(a.rules)
        if "depth_control" not in rules:
            raise ValueError(f"{a.rules}: missing 'depth_control'")
        planned = [int(x) for x in rules["depth_control"]["budgets"]]
        write_depth(a.points, a.depth_points, bracket_table(study, a.ppl_root, "depth_bracket"), rules, a.out,
                    a.figure, a.scale, planned, dpi=a.dpi)
    elif a.cmd == "checks":
        from yocou.results.render.common import write_table
        from yocou.results.summarize.ladder_fits import read_rules

        rules = read_rules(a.rules)
        df, lines = checks_table(study, a.ppl_root, a.points, rules)
        write_table(df, Path(a.out).with_suffix(""), title=f"Checks beside the token ladder ({a.scale}, CPU)",
                    notes=["Each check is one run from step 0 with its own warmup-stable-decay schedule, seed 0, "
                           "beside the ladder's annealed point of the same variant, seed and budget; held-out losses "
                           "in nats/token (rule ppl). Verdicts by eval/ladder.yaml (checks):", *lines],
                    config={"scale": a.scale, "checks": [x.model_dump() for x in study.checks], "rules": rules["checks"]})
    elif a.cmd == "points":
        from yocou.data.tokens import TokenStream
        from yocou.results.render.common import write_table

        data = a.data or f"runs/{a.scale}/tokens/train.bin"
        if a.up_to is not None and a.up_to not in study.budgets:
            raise ValueError(f"--up-to {a.up_to}: not a budget of the ladder ({study.budgets})")
        if a.bracket:
            check_rates(study, a.run_root, _read(Path(a.bracket)), up_to=a.up_to)
        df = points_table(study, a.run_root, a.res, len(TokenStream(data)), up_to=a.up_to, kind=a.kind)
        what = "the token ladder" if a.kind == "anneal" else "the depth control beside the token ladder"
        write_table(df, Path(a.out).with_suffix(""), title=f"Annealed points of {what} ({a.scale}, CPU)",
                    notes=["Held-out losses in nats/token (rule ppl); bigram_*: Kneser-Ney fitted on the training "
                           "windows of the point's own budget; train_loss: the mean logged training loss over the last "
                           "10% of steps (in the cooldown); epochs: tokens / the training stream's tokens."],
                    config={"scale": a.scale, "study": study.model_dump()})
    else:
        from yocou.results.summarize.ladder_fits import write_fits

        write_fits(a.points, a.rules, a.out, a.figure, a.scale, dpi=a.dpi, planned_steps=max(study.budgets),
                   bracket=a.bracket)
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
