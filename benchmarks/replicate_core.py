"""Do the tiny audit's decided training-side verdicts replicate?

Every training-side verdict the committed tiny audit decides comes from the core runs (Transformer, YOCO, RINS,
YOCO-U, 5 seeds each) through three studies: ``heldout_ppl`` (held-out loss and perplexity), ``fig2`` (the loss
gap at equal FLOPs, tokens saved) and ``fig4`` (long-context perplexity). This script reads those three tidy tables
from a *replica*, a second checkout whose pipeline retrained the 20 core runs (on another machine, or at a later
commit whose training code is the same up to floating-point rounding), and evaluates the audit's declared
comparisons (``eval/comparisons.yaml``, :func:`yocou.results.audit.verdicts.evaluate`) on the replica's tables and on the
committed ones, side by side:

- each row's verdict, effect and 95% interval across seeds in both, and whether the verdicts agree;
- per run (same name = same seed and data order): the held-out loss in both, and the difference, beside the
  seed spread of the same role (what a replica may differ by if the two machines' rounding sends the run on
  another trajectory);
- the replica's provenance: its git commit (from its ppl result files) and this machine's CPU flags.

Make the replica (about 40 min on a 2-core CPU; nothing else is retrained)::

    git clone . /tmp/replica && cd /tmp/replica
    snakemake --cores 2 results/tiny/tidy/heldout_ppl.csv results/tiny/tidy/fig2.csv results/tiny/tidy/fig4.csv

then, from this checkout::

    python benchmarks/replicate_core.py --replica /tmp/replica --out benchmarks/results/replicate_core_tiny.json

The replica must have trained every compared core run itself, and its three tidy tables must be newer than those
runs' metrics files, i.e. rewritten by its own pipeline rather than the clone's committed copies, with the same runs
and finite values as the reference's; otherwise the script stops with one line naming the file (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yocou.results.audit.claims import load_sources  # noqa: E402
from yocou.results.audit.spread import load_tidy  # noqa: E402
from yocou.results.audit.verdicts import evaluate, load_comparisons, set_axis_max  # noqa: E402
from yocou.results.tidy import read_tidy  # noqa: E402
from yocou.utils.io import atomic_write_json, atomic_write_text, provenance  # noqa: E402

STUDIES = ("heldout_ppl", "fig2", "fig4")
"""The studies every decided training-side verdict of the committed tiny audit reads (all from the core runs)."""
SCALE = "tiny"


class Refused(Exception):
    """Bad input: printed as one line ``replicate_core: error: <message>``, exit status 2."""


def _cpu_flags() -> dict:
    """This machine's CPU family/model and the vector extensions that decide fp32/bf16 speed (from /proc/cpuinfo)."""
    info: dict = {}
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            k, _, v = line.partition(":")
            k = k.strip()
            if k in ("model name", "cpu family", "model") and k not in info:
                info[k] = v.strip()
            if k == "flags" and "flags" not in info:
                fl = set(v.split())
                info["flags"] = sorted(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in fl)
    except OSError:
        pass
    return info


def _rows() -> list[dict]:
    return [r for r in load_comparisons() if r["study"] in STUDIES and r["evidence"] == "training"]


def _num(x) -> float | None:
    """A finite float, else None (JSON has no inf/NaN: an effect of -inf is "never reaches", shown in ``ours``)."""
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _verdicts(results_dir: Path, rows: list[dict], src) -> dict[str, dict]:
    """The verdict of every row on the tidy tables under ``results_dir`` (``axis_max`` as in ``reproduce``)."""
    missing = [s for s in STUDIES if not (results_dir / f"tidy/{s}.csv").is_file()]
    if missing:
        raise Refused(f"{results_dir}/tidy/{missing[0]}.csv not found (run the pipeline's summarize_{missing[0]} there)")
    try:
        tidy = load_tidy(results_dir, rows)
    except (ValueError, OSError) as e:  # ResultFileError is a ValueError: it names the file and what is wrong
        raise Refused(str(e).splitlines()[0]) from None
    rows = [dict(r) for r in rows]
    set_axis_max(rows, tidy)
    out = {}
    for r in rows:
        v = evaluate(r, tidy, src, SCALE)
        out[v.id] = {"verdict": v.verdict, "effect": _num(v.effect), "ci_low": _num(v.ci_low), "ci_high": _num(v.ci_high),
                     "ci_method": v.ci_method, "ours": v.ours, "paper": v.paper, "qualifier": v.qualifier}
    return out


def _losses(results_dir: Path) -> pd.DataFrame:
    """Per run: held-out loss (nats/token) on book and code, with the run's role, seed and tokens scored."""
    p = results_dir / "tidy/heldout_ppl.csv"
    try:
        t = read_tidy(p)  # validated: finite values, unique keys, a complete last row
    except (ValueError, OSError) as e:
        raise Refused(str(e).splitlines()[0]) from None
    t = t[t["metric"].isin(["loss.book", "loss.code"]) & (t["seed"] >= 0)]
    if t["n"].isna().any():
        raise Refused(f"{p}: {t[t['n'].isna()].iloc[0]['run']}: no token count n (expected the tokens scored)")
    return t[["run", "role", "seed", "metric", "value", "n"]].set_index(["run", "metric"])


def _check_replica(replica: Path, runs: list[str]) -> None:
    """The replica must have trained every compared run itself (``runs/<scale>/models/<run>/metrics.jsonl``), and
    its three tidy tables must be newer than all of them: rewritten by its own pipeline, not the clone's copies."""
    missing = [r for r in runs if not (replica / f"runs/{SCALE}/models/{r}/metrics.jsonl").is_file()]
    if missing:
        raise Refused(f"{replica}/runs/{SCALE}/models/{missing[0]}/metrics.jsonl not found: the replica must train "
                      f"every core run it is compared on ({len(missing)} of {len(runs)} missing)")
    newest = max((replica / f"runs/{SCALE}/models/{r}/metrics.jsonl").stat().st_mtime for r in runs)
    for s in STUDIES:
        p = replica / f"results/{SCALE}/tidy/{s}.csv"
        if p.stat().st_mtime < newest:
            raise Refused(f"{p}: older than the replica's runs (the clone's committed copy?); rerun its summarize_{s}")


def _commits(results_dir: Path, runs: list[str]) -> list[str]:
    """The git commits in the provenance of the compared runs' held-out results (``ppl/<run>.json``)."""
    seen = []
    for r in runs:
        p = results_dir / "ppl" / f"{r}.json"
        c = (json.loads(p.read_text()).get("provenance") or {}).get("git_commit") if p.is_file() else None
        if c and c not in seen:
            seen.append(c)
    return seen


def _fmt(v: dict) -> str:
    if v["effect"] is None:
        return v["ours"]
    if v["ci_low"] is None:
        return f"{v['effect']:+.4f}"
    return f"{v['effect']:+.4f} [{v['ci_low']:+.4f}, {v['ci_high']:+.4f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="replicate_core", description=__doc__.split("\n\n")[0])
    ap.add_argument("--replica", required=True, help="the checkout whose pipeline retrained the core runs")
    ap.add_argument("--reference", default=str(ROOT), help="the checkout with the committed results (default: this)")
    ap.add_argument("--out", required=True, help="result JSON (a .md beside it), e.g. "
                    "benchmarks/results/replicate_core_tiny.json")
    a = ap.parse_args(argv)
    ref, rep = Path(a.reference) / f"results/{SCALE}", Path(a.replica) / f"results/{SCALE}"
    for p in (ref, rep):
        if not (p / "tidy").is_dir():
            ap.error(f"{p}/tidy: no such folder (expected a checkout's results/{SCALE})")
    try:
        return _main(a, ref, rep)
    except Refused as e:
        print(f"replicate_core: error: {e}", file=sys.stderr)
        return 2


def _main(a: argparse.Namespace, ref: Path, rep: Path) -> int:
    rows, src = _rows(), load_sources()
    vr, vp = _verdicts(ref, rows, src), _verdicts(rep, rows, src)  # each table exists and reads
    names = sorted(_losses(ref).index.get_level_values("run").unique())
    _check_replica(Path(a.replica), names)
    table = []
    for i in vr:
        table.append({"id": i, "reference": vr[i], "replica": vp[i], "agree": vr[i]["verdict"] == vp[i]["verdict"],
                      "decided_in_reference": vr[i]["verdict"] != "inconclusive"})
    lr, lp = _losses(ref), _losses(rep)
    if set(lp.index) != set(lr.index):
        gone = sorted(set(lr.index) ^ set(lp.index))[0]
        raise Refused(f"{rep}/tidy/heldout_ppl.csv: its core runs and splits differ from the reference's (first: "
                      f"{gone[0]} {gone[1]}; {len(lp)} rows against {len(lr)}): a partial or another scale's table")
    both = lr.join(lp[["value", "n"]].add_suffix("_replica"), how="inner")
    if (both["n"] != both["n_replica"]).any():
        bad = both[both["n"] != both["n_replica"]].index[0]
        raise Refused(f"{bad}: tokens scored differ ({both.loc[bad, 'n']} vs {both.loc[bad, 'n_replica']}): the "
                      f"replica's tokenizer or held-out split is not the reference's")
    both["diff"] = both["value_replica"] - both["value"]
    spread = lr.reset_index().groupby(["role", "metric"])["value"].std(ddof=1)
    runs = [{"run": r, "metric": m, "role": x.role, "seed": int(x.seed), "reference": x.value,
             "replica": x.value_replica, "diff": x["diff"], "role_seed_sd": float(spread.loc[(x.role, m)])}
            for (r, m), x in both.iterrows()]
    dec = [t for t in table if t["decided_in_reference"]]
    summary = {
        "rows": len(table), "decided_in_reference": len(dec),
        "decided_in_replica": sum(t["replica"]["verdict"] != "inconclusive" for t in table),
        "decided_agree": sum(t["agree"] for t in dec),
        "all_agree": sum(t["agree"] for t in table),
        "runs_compared": len(names),
        "max_abs_run_diff_nats": float(both["diff"].abs().max()),
        "bit_identical_values": int((both["diff"] == 0).sum()), "values_compared": len(both),
        "mean_run_diff_nats": float(both["diff"].mean()),
        "median_role_seed_sd_nats": float(spread.median()),
    }
    res = {"summary": summary, "verdicts": table, "runs": runs,
           "reference": {"results": str(ref), "run_commits": _commits(ref, names)},
           "replica": {"results": str(rep), "run_commits": _commits(rep, names), "cpu": _cpu_flags()},
           "provenance": provenance({"studies": list(STUDIES), "scale": SCALE}, None)}
    out = Path(a.out)
    atomic_write_json(out, res)
    lines = [f"# Do the tiny audit's training-side verdicts replicate?\n",
             f"Reference: `{ref}` (runs at {', '.join(c[:7] for c in res['reference']['run_commits'])}); replica: "
             f"`{rep}` (runs at {', '.join(c[:7] for c in res['replica']['run_commits'])}; CPU "
             f"{res['replica']['cpu'].get('model name', '?')}, family {res['replica']['cpu'].get('cpu family', '?')} model "
             f"{res['replica']['cpu'].get('model', '?')}, {' '.join(res['replica']['cpu'].get('flags', []))}).\n",
             f"{summary['decided_agree']} of the {summary['decided_in_reference']} verdicts decided in the reference "
             f"have the same verdict in the replica; {summary['all_agree']} of {summary['rows']} rows agree in all "
             f"({summary['decided_in_replica']} decided in the replica). Effects with their 95% interval across seeds.\n",
             "| id | reference | effect [95% CI] | replica | effect [95% CI] | agree |", "|---|---|---|---|---|---|"]
    lines += [f"| {t['id']} | {t['reference']['verdict']} | {_fmt(t['reference'])} | {t['replica']['verdict']} | "
              f"{_fmt(t['replica'])} | {'yes' if t['agree'] else '**no**'} |" for t in table]
    lines += ["", f"Per run (same name: same seed and data order), held-out loss in nats/token: largest |replica - "
              f"reference| {summary['max_abs_run_diff_nats']:.1e}, mean {summary['mean_run_diff_nats']:+.1e}, "
              f"{summary['bit_identical_values']} of {summary['values_compared']} values bit-identical; the "
              f"median seed sd of a role is {summary['median_role_seed_sd_nats']:.4f}.", "",
              "| run | split | reference | replica | diff | role's seed sd |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['metric'].split('.')[1]} | {r['reference']:.4f} | {r['replica']:.4f} | "
              f"{r['diff']:+.1e} | {r['role_seed_sd']:.4f} |" for r in runs]
    atomic_write_text(out.with_suffix(".md"), "\n".join(lines) + "\n")
    print(f"{out}: {summary['decided_agree']}/{summary['decided_in_reference']} decided verdicts agree; "
          f"max |run diff| {summary['max_abs_run_diff_nats']:.1e} nats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
