"""The audit report and the ``yocou audit`` command.

Runs the consistency checks (:mod:`yocou.results.audit.checks`) on the reported tables, the reproduced verdicts
(:mod:`yocou.results.audit.verdicts`) on ``results/<scale>/``, joins both to the claims registry, and writes to ``--out``
(``results/<scale>/audit/`` in the pipeline):

- ``report.md``: counts, every check and verdict, every claim's status, links to the figures;
- ``report.html``: the same, self-contained (inline CSS, figures as base64 PNG);
- ``checks.csv``, ``verdicts.csv``, ``claims.csv``: tidy data behind the report; ``summary.json``: the counts,
  regressions against the baseline and provenance; ``verdicts_training`` there counts the training-side verdicts
  (evidence ``training``: decided by the interval across seeds, Holm-adjusted) decided and undecided, and lists each decided
  one with its effect and interval;
- ``seed_spread.csv``, ``seed_spread.md``: mean, standard deviation across seeds and number of seeds of every
  training-side metric a comparison reads, per study, role and axis value (:func:`yocou.results.audit.verdicts.seed_spread`);
- ``power.csv``, ``power.md``: the seeds each comparison of the family (and each one-seed row that borrows a
  member's spread) would need, and what one more seed costs (:func:`yocou.results.audit.family.power_table`).

The training-side verdicts with an interval are one family per scale, decided with Holm's adjustment
(:mod:`yocou.results.audit.family`): ``verdict`` is the adjusted verdict and ``verdict_unadjusted`` the row's own at 95%;
a row that restates another (``restates``) is counted once, under the row it restates.

Baseline: a JSON file ``{"checks": {check id: result}}`` (committed as ``results/audit/baseline.json``). A check
that ``holds`` there and no longer holds (or no longer exists) is a regression; ``yocou audit`` then exits 1.
A malformed baseline raises ValueError (exit 2 through the CLI).

Claim status (the headline counts): ``failing`` when a consistency check on the claim does not hold or a verdict
is ``opposite``, ``no difference`` (the effect the paper claims is absent: its interval lies inside the
margin) or ``differs`` (a parity or equality the paper claims does not hold); else ``holding`` when a check holds
or a verdict has the paper's direction; else ``inconclusive`` when it was looked at but nothing could be decided
(cannot be checked from what is published; inconclusive, not comparable or censored verdicts); else
``not audited``. ``checked`` = holding + failing + inconclusive.

The counts keep the paper's internal consistency apart from its empirical reproduction (``summary.json``:
``consistency``, ``reproduction``): the consistency checks of its printed numbers (table arithmetic, Table 10
and Table 1 against the formulas: ``checks.csv``) and our deterministic rows (KV bytes against the formulas) on one
side; the timing, eval and training rows on the other, counted for the paper (same direction, and size), against it
(opposite, no difference), differs, inconclusive, not comparable (a learning-side row whose models are not past the
bigram of their own budget: :mod:`yocou.results.audit.regime`, eval/regime.yaml), censored and not run, each by evidence.

Source: the paper, arXiv 2604.01220 (Universal YOCO), Tables 1 to 10 and its prose; docs/design.md sections 5, 6, 8.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
import math
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from yocou.results.audit.args import DEFAULT_BASELINE, add_arguments
from yocou.results.audit.checks import (
    FAILS,
    HOLDS,
    RESULTS,
    UNCHECKABLE,
    CheckResult,
    run_checks,
)
from yocou.results.audit.claims import load_claims, load_sources
from yocou.results.audit.decision import (
    AGAINST,
    CENSORED,
    DECIDED,
    DIFFERS,
    FOR,
    LEARNING,
    NOT_COMPARABLE_KINDS,
)
from yocou.results.audit.family import power_table, read_timing
from yocou.results.audit.ladder import ID_PREFIX as LADDER_PREFIX
from yocou.results.audit.ladder import verdicts as ladder_verdicts
from yocou.results.audit.regime import PAST, PRE, UNKNOWN, load_rules
from yocou.results.audit.resultsconfig import results_config
from yocou.results.audit.verdicts import (
    INCONCLUSIVE,
    NO_DIFFERENCE,
    NOT_RUN,
    OPPOSITE,
    SAME,
    SAME_SIZE,
    VERDICTS,
    Verdict,
    load_comparisons,
    load_tidy,
    reproduce,
    seed_spread,
)
from yocou.utils.entry import USER_ERRORS, disk_error, name_too_long, report_user_error
from yocou.utils.io import (
    atomic_write_json,
    atomic_write_text,
    committed_if_only_provenance_differs,
    provenance,
    remove_stale_temps,
    writer_tag,
)
from yocou.workflow.scales import check_scale

__all__ = [
    "add_arguments",
    "audit",
    "claim_status",
    "load_baseline",
    "main",
    "regressions",
    "run_from_args",
    "write_baseline",
    "write_report",
]

STATUSES = ("holding", "failing", "inconclusive", "not audited")


def audit(scale: str, results_dir: str | Path | None = None, *, reported_dir: str | Path | None = None,
          registry: str | Path | None = None) -> dict[str, Any]:
    """Run checks and verdicts; returns ``{"sources", "checks", "verdicts", "claims"}`` (claims with status).

    ``results_dir`` defaults to ``results/<scale>``; ``scale`` must then be a scale of the working directory (a
    ``workflows/config/<scale>.yaml`` or a ``results/<scale>/``; one with a config but no results yet has every
    verdict "not run"). A given ``results_dir`` must be a folder; ``scale`` then only labels the report.

    Raises:
        ValueError / FileNotFoundError: an unknown scale (naming the scales there are), a missing results folder,
            malformed registry, reported tables or result files, naming them.
    """
    if results_dir is None:
        check_scale(scale, "--scale")
        rdir = Path("results") / scale
    else:
        rdir = Path(results_dir)
        if not rdir.is_dir():
            raise FileNotFoundError(f"--results {rdir}: no such folder (expected the result files of scale "
                                    f"{scale!r}, e.g. results/{scale})")
        if not any((rdir / "tidy").glob("*.csv")):  # (a scale's own folder may be empty: nothing run yet)
            raise FileNotFoundError(f"--results {rdir}: no tidy tables in {rdir / 'tidy'} (expected <study>.csv "
                                    f"files written by the pipeline's summarize steps, e.g. results/{scale}/tidy)")
    src = load_sources(reported_dir, registry)
    checks = run_checks(src)
    rows = load_comparisons()
    tidy = load_tidy(rdir, rows)  # read and checked once, for the verdicts and the seed spread
    main = reproduce(src, rdir, scale, tidy=tidy)  # the declared comparisons: one family (Holm), the power table's rows
    verdicts = main + ladder_verdicts(rdir, _ladder_margin())  # the ladder's rows, decided by eval/ladder.yaml
    claims = claim_status(load_claims(src), checks, verdicts)
    cfg = results_config(rdir) or {}   # the config computing runs with, else the committed results'
    return {"sources": src, "checks": checks, "verdicts": verdicts, "claims": claims, "scale": scale,
            "results_dir": str(rdir), "notes": shared_study_notes(rdir, rows), "seed_spread": seed_spread(tidy, rows),
            "regime_rules": load_rules(),
            "model_params": _param_range(rdir),
            "power": power_table(main, rows, config=cfg, timing=read_timing(rdir))}


def _ladder_margin() -> float:
    """The ladder's bigram margin (eval/ladder.yaml ``regime.bigram_margin_nats``), stated in its verdicts."""
    from yocou.results import evaldefs
    from yocou.results.summarize.ladder_fits import read_rules

    return float(read_rules(evaldefs.eval_dir() / "ladder.yaml")["regime"]["bigram_margin_nats"])


def shared_study_notes(rdir: Path, rows: list[dict]) -> list[str]:
    """One line per study that comparison ``rows`` read from a folder beside ``rdir`` (``results: <name>``, such as
    the paper-shape efficiency study in ``results/paper_shape``) whose table is absent there, with the number of
    rows it leaves "not run": an audit of a results folder copied elsewhere would otherwise lose them silently."""
    from yocou.results.audit.spread import study_dir

    absent: dict[Path, int] = {}
    for r in rows:
        if r.get("results"):
            f = study_dir(rdir, r) / f"{r['study']}.csv"
            if not f.is_file():
                absent[f] = absent.get(f, 0) + 1
    return [f"{f} not found (it is read beside --results {rdir}): its {n} comparison row(s) are 'not run'; copy "
            f"that folder beside {rdir} to audit them" for f, n in sorted(absent.items())]


def _param_range(rdir: Path) -> tuple[float, float] | None:
    """(smallest, largest) ``params`` of the runs in ``rdir/tidy/runs.csv``, or None without that table."""
    f = rdir / "tidy" / "runs.csv"
    if not f.is_file():
        return None
    from yocou.results.tidy import read_tidy

    v = read_tidy(f, complete=False)
    v = v.loc[v["metric"] == "params", "value"].astype(float)
    return (float(v.min()), float(v.max())) if len(v) else None


def claim_status(claims: pd.DataFrame, checks: Iterable[CheckResult], verdicts: Iterable[Verdict]) -> pd.DataFrame:
    """Add ``consistency``, ``reproduction`` and ``status`` columns to the claims table (see module docstring).

    Raises:
        ValueError: a check or verdict names a claim id the registry does not hold.
    """
    ids = set(claims["id"])
    cons: dict[str, list[str]] = {i: [] for i in ids}
    rep: dict[str, list[str]] = {i: [] for i in ids}
    for r in checks:
        for c in r.claims:
            if c not in ids:
                raise ValueError(f"check {r.id} names claim {c!r}, which is not in the registry")
            cons[c].append(r.result)
    for v in verdicts:
        for c in v.claims:
            if c not in ids:
                raise ValueError(f"verdict {v.id} names claim {c!r}, which is not in the registry")
            rep[c].append(v.verdict)
    out = claims.copy()

    def summarise(xs: list[str], order: tuple[str, ...]) -> str:
        cnt = Counter(xs)
        return ", ".join(f"{k}: {cnt[k]}" for k in order if cnt[k]) or "-"

    out["consistency"] = [summarise(cons[i], RESULTS) for i in out["id"]]
    out["reproduction"] = [summarise(rep[i], VERDICTS) for i in out["id"]]
    status = []
    for i in out["id"]:
        c, r = cons[i], rep[i]
        if FAILS in c or OPPOSITE in r or NO_DIFFERENCE in r or DIFFERS in r:
            status.append("failing")
        elif HOLDS in c or SAME in r or SAME_SIZE in r:
            status.append("holding")
        elif c or r:
            status.append("inconclusive")
        else:
            status.append("not audited")
    out["status"] = status
    return out


# --------------------------------------------------------------------------------------------- baseline


def load_baseline(path: str | Path) -> dict[str, str]:
    """``{check id: result}`` from a baseline JSON.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: not JSON, no ``checks`` mapping, or a result outside the three allowed, naming the file.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"baseline {p} not found")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"baseline {p}: not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("checks"), dict):
        raise ValueError(f"baseline {p}: expected an object with a 'checks' mapping of check id -> result")
    for k, v in data["checks"].items():
        if v not in RESULTS:
            raise ValueError(f"baseline {p}: checks[{k!r}] = {v!r}; expected one of {list(RESULTS)}")
    return dict(data["checks"])


def regressions(baseline: dict[str, str], checks: Iterable[CheckResult]) -> list[dict[str, str]]:
    """Checks that held in ``baseline`` and now do not hold, or no longer exist."""
    now = {c.id: c for c in checks}
    out = []
    for cid, was in baseline.items():
        if was != HOLDS:
            continue
        if cid not in now:
            out.append({"id": cid, "was": was, "now": "missing", "message": "the check no longer exists"})
        elif now[cid].result != HOLDS:
            out.append({"id": cid, "was": was, "now": now[cid].result, "message": now[cid].message})
    return out


def write_baseline(path: str | Path, checks: Iterable[CheckResult]) -> None:
    """Write ``{"checks": {id: result}}`` for every check (sorted by id), atomically."""
    atomic_write_json(path, {
        "description": "Consistency checks of the paper's reported numbers (yocou.results.audit.checks) and their "
                       "results; `yocou audit` fails when a check that holds here stops holding.",
        "checks": {c.id: c.result for c in sorted(checks, key=lambda c: c.id)}})


# --------------------------------------------------------------------------------------------- counts


def counts(res: dict[str, Any], regress: list[dict] | None = None) -> dict[str, Any]:
    """Headline counts: claims by status, checks by result, verdicts by label; ``consistency`` (the paper's internal
    consistency: checks and deterministic rows) and ``reproduction`` (timing, eval and training rows: for, against,
    differs, inconclusive, not comparable, censored, not run; by evidence; the regime of the learning-side ones);
    ``verdicts_training``: the training-side verdicts (evidence ``training``) decided and undecided (of which not
    run), by verdict, and each decided one's id, verdict, effect, 95% interval and the interval at its Holm
    level."""
    claims = res["claims"]
    st = Counter(claims["status"])
    cr = Counter(c.result for c in res["checks"])
    counted = [v for v in res["verdicts"] if v.counted]   # one row of a restatement group
    vr = Counter(v.verdict for v in counted)
    return {
        "scale": res["scale"],
        "claims": {"total": len(claims), "prose": int((claims["kind"] == "prose").sum()),
                   "table_cells": int((claims["kind"] == "table_cell").sum()),
                   "tables": sorted(int(t) for t in claims["table"].dropna().unique()),
                   "checked": int(st["holding"] + st["failing"] + st["inconclusive"]),
                   **{k: int(st[k]) for k in STATUSES}},
        "checks": {"total": len(res["checks"]), **{k: int(cr[k]) for k in RESULTS}},
        "verdicts": {"total": len(counted), **{k: int(vr[k]) for k in VERDICTS},
                     "not run at this scale": sum(v.qualifier == NOT_RUN for v in counted),
                     "restatements": len(res["verdicts"]) - len(counted)},
        "consistency": consistency_counts(res["checks"], counted),
        "reproduction": reproduction_counts(counted, res.get("regime_rules")),
        "verdicts_training": training_counts(res["verdicts"]),
        "family": family_counts(res["verdicts"]),
        "regressions": regress or [],
    }


#: The outcome columns of the reproduction counts, in order (:func:`outcome`).
OUTCOMES = ("for", "against", "differs", "inconclusive", "not comparable", "censored", "not run")


def outcome(v: Verdict) -> str:
    """One verdict as an outcome of :data:`OUTCOMES`: for the paper (same direction, and size), against it
    (opposite, no difference), differs, inconclusive, not comparable, censored, not run."""
    if v.qualifier == NOT_RUN:
        return "not run"
    return ("for" if v.verdict in FOR else "against" if v.verdict in AGAINST else "differs" if v.verdict == DIFFERS
            else "not comparable" if v.verdict in NOT_COMPARABLE_KINDS else "censored" if v.verdict == CENSORED
            else "inconclusive")


def consistency_counts(checks: Iterable[CheckResult], verdicts: Iterable[Verdict]) -> dict[str, Any]:
    """The paper's internal consistency: its printed numbers checked against each other and against the formulas
    (``checks.csv``, by result) and our deterministic rows (KV bytes against the formulas, by outcome; restatements
    counted once)."""
    cr = Counter(c.result for c in checks)
    det = [v for v in verdicts if v.evidence == "deterministic"]
    dc = Counter(outcome(v) for v in det)
    return {"checks": sum(cr.values()), **{k: int(cr[k]) for k in RESULTS},
            "deterministic_rows": len(det), **{f"deterministic {k}": int(dc[k]) for k in OUTCOMES}}


def reproduction_counts(verdicts: Iterable[Verdict], rules: Any = None) -> dict[str, Any]:
    """Empirical reproduction: the timing, eval and training rows (restatements counted once) by outcome
    (:data:`OUTCOMES`), then ``by_evidence`` the same per evidence kind, and ``regime``: the gate's rule and the
    learning-side rows by regime (past the bigram, pre-bigram, regime unknown)."""
    rep = [v for v in verdicts if v.evidence != "deterministic"]
    oc = Counter(outcome(v) for v in rep)
    learning = [v for v in rep if v.evidence in LEARNING and v.qualifier != NOT_RUN]
    rg = Counter(v.regime for v in learning)
    rules = rules or load_rules()
    return {"total": len(rep), **{k: int(oc[k]) for k in OUTCOMES},
            "by_evidence": {ev: {"total": len(vs), **{k: int(c[k]) for k in OUTCOMES}}
                            for ev in ("timing", "eval", "training")
                            for vs in [[v for v in rep if v.evidence == ev]] for c in [Counter(map(outcome, vs))]},
            "regime": {"rule": rules.text(), "bigram_margin_nats": rules.margin,
                       "gated_evidence": list(rules.gated_evidence), "unknown": rules.unknown,
                       "learning_rows_run": len(learning), **{k: int(rg[k]) for k in (PAST, PRE, UNKNOWN)}}}


def family_counts(verdicts: Iterable[Verdict]) -> dict[str, Any]:
    """The family-wise adjustment in numbers: method, alpha, the family's size and members (ids, raw and adjusted
    p), the verdicts it changed (unadjusted -> adjusted) and the restatements (id -> the id it restates)."""
    vs = list(verdicts)
    fam = [v for v in vs if v.family_size and v.counted]
    return {"method": "Holm step-down on the p-values of 'no effect'; intervals at the Holm levels",
            "alpha": 0.05, "size": fam[0].family_size if fam else 0,
            "members": [{"id": v.id, "p": v.p_value, "p_adjusted": v.p_adjusted, "verdict": v.verdict,
                         "verdict_unadjusted": v.verdict_unadjusted} for v in sorted(fam, key=lambda v: v.p_value)],
            "changed": [{"id": v.id, "unadjusted": v.verdict_unadjusted, "adjusted": v.verdict} for v in vs
                        if v.family_size and v.counted and v.verdict != v.verdict_unadjusted],
            "restatements": {v.id: v.restates for v in vs if v.restates}}


def training_counts(verdicts: Iterable[Verdict]) -> dict[str, Any]:
    """Training-side verdicts (evidence ``training``, restatements not counted) decided (for, against or differs,
    after the family-wise adjustment) and undecided (inconclusive, not comparable, censored), by verdict; each decided
    one listed with its regime."""
    tr = [v for v in verdicts if v.evidence == "training" and v.counted]
    dec = [v for v in tr if v.verdict in DECIDED]
    by = Counter(v.verdict for v in tr)
    lad = [v for v in tr if v.id.startswith(LADDER_PREFIX)]
    return {"decided": len(dec), "undecided": len(tr) - len(dec),
            # the annealed ladder's rows (yocou.results.audit.ladder), decided by its own rules (eval/ladder.yaml)
            "ladder": {"total": len(lad), **{k: int(c[k]) for k in OUTCOMES}}
            if (c := Counter(outcome(v) for v in lad)) or lad else {"total": 0},
            "not_run": sum(v.qualifier == NOT_RUN for v in tr),
            "not_comparable": sum(v.verdict in NOT_COMPARABLE_KINDS for v in tr),
            "censored": sum(v.verdict == CENSORED for v in tr),
            "by_interval": sum(v.ci_low is not None for v in dec),
            "by_verdict": {k: int(by[k]) for k in VERDICTS},
            # an effect of -inf (the compared run never reaches the reference loss) is JSON null, with `ours`
            # saying so
            "decided_list": [{"id": v.id, "verdict": v.verdict, "effect": _finite_or_none(v.effect),
                              "ours": v.ours, "ci_low": _finite_or_none(v.ci_low),
                              "ci_high": _finite_or_none(v.ci_high), "ci_method": v.ci_method, "margin": v.margin,
                              "p_adjusted": v.p_adjusted, "level_adjusted": v.level_adjusted,
                              "ci_low_adjusted": _finite_or_none(v.ci_low_adjusted),
                              "ci_high_adjusted": _finite_or_none(v.ci_high_adjusted),
                              "paper": v.paper, "tokens_per_param": v.tokens_per_param, "annealed": v.annealed,
                              "loss_minus_bigram": v.loss_minus_bigram, "regime_split": v.regime_split,
                              "regime": v.regime} for v in dec]}


def _finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _outcomes_text(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {d[k]}" for k in OUTCOMES if d.get(k))


def summary_text(cnt: dict[str, Any]) -> str:
    c, k, v, t = cnt["claims"], cnt["checks"], cnt["verdicts"], cnt["verdicts_training"]
    f = cnt.get("family") or {"size": 0, "changed": []}
    lines = [
        (f"audit ({cnt['scale']}): {c['total']} claims ({c['prose']} prose/caption, {c['table_cells']} cells of "
        f"Tables {', '.join(map(str, c['tables']))})"),
        (f"  claims checked {c['checked']}: holding {c['holding']}, failing {c['failing']}, inconclusive "
        f"{c['inconclusive']}; not audited {c['not audited']}"),
        (f"  consistency checks {k['total']}: holds {k[HOLDS]}, does not hold {k[FAILS]}, cannot be checked from what "
        f"is published {k[UNCHECKABLE]}"),
    ]
    if (cs := cnt.get("consistency")) and (rp := cnt.get("reproduction")):
        det = {o: cs.get(f"deterministic {o}", 0) for o in OUTCOMES}
        rg = rp["regime"]
        lines += [
            (f"  internal consistency (the paper's arithmetic and formulas): {cs['checks']} checks (holds "
            f"{cs[HOLDS]}, does not hold {cs[FAILS]}, cannot be checked {cs[UNCHECKABLE]}) and "
            f"{cs['deterministic_rows']} deterministic rows ({_outcomes_text(det) or 'none'})"),
            (f"  empirical reproduction {rp['total']} (timing, eval, training; restatements once): "
            f"{_outcomes_text(rp)}"),
            *(f"    {ev} {d['total']}: {_outcomes_text(d)}" for ev, d in rp["by_evidence"].items() if d["total"]),
            (f"  regime of the {rg['learning_rows_run']} learning-side rows run: {PAST} {rg[PAST]}, {PRE} {rg[PRE]}, "
            f"{UNKNOWN} {rg[UNKNOWN]} (margin {rg['bigram_margin_nats']:g} nats below the bigram of their own "
            "budget, eval/regime.yaml)"),
        ]
    lines += [
        f"  reproduced verdicts {v['total']}: " + ", ".join(f"{x} {v[x]}" for x in VERDICTS if v.get(x))
        + f" (not run at this scale {v['not run at this scale']}; restatements counted once: "
          f"{v.get('restatements', 0)})",
        (f"  training-side verdicts {t['decided'] + t['undecided']}: decided {t['decided']} ({t['by_interval']} by the "
        f"interval across seeds, Holm-adjusted over a family of {f['size']}), undecided {t['undecided']} "
        f"(not comparable {t.get('not_comparable', 0)}, censored {t.get('censored', 0)}, not run at this scale "
        f"{t['not_run']}); the adjustment changed {len(f['changed'])} verdicts"),
    ]
    if (lad := t.get("ladder") or {}).get("total"):
        lines.append(f"    of which the annealed token ladder {lad['total']} (eval/ladder.yaml: Holm over the two "
                     f"held-out splits): {_outcomes_text(lad)}")
    if cnt["regressions"]:
        lines.append(f"  REGRESSIONS against the baseline: {len(cnt['regressions'])}")
        lines += [f"    {r['id']}: {r['was']} -> {r['now']}: {r['message']}" for r in cnt["regressions"]]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- writing


def _md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_none_\n"
    d = df.copy()
    for c in d.columns:
        d[c] = d[c].map(lambda x: "" if x is None or (isinstance(x, float) and pd.isna(x)) else
                        (f"{x:.4g}" if isinstance(x, float) else str(x)).replace("|", "\\|").replace("\n", " "))
    head = "| " + " | ".join(d.columns) + " |\n|" + "---|" * len(d.columns) + "\n"
    return head + "".join("| " + " | ".join(r) + " |\n" for r in d.astype(str).values.tolist())


def _sections(res: dict[str, Any], cnt: dict[str, Any]) -> list[tuple[str, str, pd.DataFrame | None]]:
    """(title, intro text, table) in report order; shared by Markdown and HTML."""
    checks = pd.DataFrame([c.as_row() for c in res["checks"]])
    verd = pd.DataFrame([v.as_row() for v in res["verdicts"]])
    claims = res["claims"]
    c, k, v, t = cnt["claims"], cnt["checks"], cnt["verdicts"], cnt["verdicts_training"]
    cs, rp = cnt["consistency"], cnt["reproduction"]
    fam = cnt.get("family") or {"size": 0, "changed": [], "restatements": {}}
    summary = pd.DataFrame([
        {"what": "claims in the registry", "count": c["total"],
         "detail": f"{c['prose']} prose/caption statements + {c['table_cells']} printed cells of Tables "
                   f"{', '.join(map(str, c['tables']))}"},
        {"what": "claims checked", "count": c["checked"], "detail": "holding + failing + inconclusive"},
        {"what": "claims holding", "count": c["holding"], "detail": "a check holds or a verdict has the paper's direction, none fails"},
        {"what": "claims failing", "count": c["failing"],
         "detail": "a consistency check does not hold, or a verdict is opposite, no difference or differs"},
        {"what": "claims inconclusive", "count": c["inconclusive"],
         "detail": "only 'cannot be checked from what is published', inconclusive, not comparable or censored"},
        {"what": "claims not audited", "count": c["not audited"], "detail": "no check and no verdict reads them"},
        {"what": "internal consistency: checks of the paper's numbers", "count": k["total"],
         "detail": f"holds {k[HOLDS]}, does not hold {k[FAILS]}, cannot be checked from what is published {k[UNCHECKABLE]}"},
        {"what": "internal consistency: deterministic rows (KV bytes against the formulas)",
         "count": cs["deterministic_rows"], "detail": _outcomes_text(
             {o: cs.get(f"deterministic {o}", 0) for o in OUTCOMES}) or "-"},
        {"what": f"empirical reproduction ({res['scale']}): timing, eval and training rows", "count": rp["total"],
         "detail": _outcomes_text(rp) + "; " + "; ".join(
             f"{ev} {d['total']}: {_outcomes_text(d)}" for ev, d in rp["by_evidence"].items() if d["total"])},
        {"what": "regime of the learning-side rows run", "count": rp["regime"]["learning_rows_run"],
         "detail": f"{PAST} {rp['regime'][PAST]}, {PRE} {rp['regime'][PRE]}, {UNKNOWN} {rp['regime'][UNKNOWN]}: "
                   + rp["regime"]["rule"]},
        {"what": f"reproduced verdicts ({res['scale']})", "count": v["total"],
         "detail": ", ".join(f"{x} {v[x]}" for x in VERDICTS if v.get(x))
                   + f" (of which not run at this scale: {v['not run at this scale']})"},
        {"what": "training-side verdicts decided", "count": t["decided"],
         "detail": f"{t['by_interval']} by the interval across seeds after Holm's adjustment over a family of "
                   f"{fam['size']}; undecided {t['undecided']} (not comparable {t['not_comparable']}, censored "
                   f"{t['censored']}, not run at this scale {t['not_run']})"},
        {"what": "verdicts the family-wise adjustment changed", "count": len(fam["changed"]),
         "detail": ", ".join(f"{x['id']}: {x['unadjusted']} -> {x['adjusted']}" for x in fam["changed"]) or "-"},
        {"what": "restatements (counted once, under the row they restate)", "count": v.get("restatements", 0),
         "detail": ", ".join(f"{a} -> {b}" for a, b in fam["restatements"].items()) or "-"},
        {"what": "regressions against the baseline", "count": len(cnt["regressions"]),
         "detail": ", ".join(r["id"] for r in cnt["regressions"]) or "-"},
    ])
    cols_c = ["id", "result", "observed", "expected", "tolerance", "message"]
    cols_v = ["id", "comparison", "paper", "ours", "spread", "n_seeds", "evidence", "verdict", "qualifier", "message"]
    cols_t = ["id", "paper", "effect", "ci_low", "ci_high", "ci_method", "margin", "tokens_per_param", "annealed",
              "loss_minus_bigram", "regime_split", "regime", "verdict_unadjusted", "p_value", "p_adjusted",
              "level_adjusted", "ci_low_adjusted", "ci_high_adjusted", "verdict", "restates", "qualifier"]
    per_table = (claims[claims["kind"] == "table_cell"].groupby("table")["status"].value_counts().unstack(fill_value=0)
                 .reindex(columns=list(STATUSES), fill_value=0).reset_index())
    per_table.insert(1, "cells", per_table[list(STATUSES)].sum(axis=1))
    prose = claims[claims["kind"] == "prose"][["id", "location", "value", "unit", "printed", "consistency",
                                               "reproduction", "status"]]
    out: list[tuple[str, str, pd.DataFrame | None]] = [
        ("Summary", (f"Scale `{res['scale']}`; results read from `{res['results_dir']}`. Paper: "
                    "arXiv 2604.01220 (Universal YOCO). Consistency checks need no training and "
                    "are the same at every scale; verdicts compare our runs at this scale with the paper's numbers "
                    "and are never stronger than the evidence (a training-side verdict only from several seeds, by "
                    f"its interval, at the level Holm's adjustment over the scale's training-side comparisons gives it; "
                    f"CPU timings; {model_sizes_text(res)})."), summary),
    ]
    if cnt["regressions"]:
        out.append(("Regressions against the baseline", "", pd.DataFrame(cnt["regressions"])))
    out.append(("Consistency checks that do not hold", "", checks[checks["result"] == FAILS][cols_c]))
    for g in dict.fromkeys(checks["group"]):
        sub = checks[checks["group"] == g]
        cnt_g = Counter(sub["result"])
        out.append((f"Consistency checks: {g}",
                    f"{len(sub)} checks: " + ", ".join(f"{r} {cnt_g[r]}" for r in RESULTS if cnt_g[r]), sub[cols_c]))
    decided = verd[verd["verdict"].isin(DECIDED)]
    out.append(("Reproduced verdicts: decided", (f"{len(decided)} of {len(verd)} verdicts are decided: for the paper "
                "(same direction, and size), against it (opposite, no difference) or differs (a parity or equality "
                "it claims does not hold)."), decided[cols_v]))
    out.append(("Reproduced verdicts: inconclusive", "", verd[verd["verdict"] == INCONCLUSIVE][cols_v]))
    apart = verd[verd["verdict"].isin((*NOT_COMPARABLE_KINDS, CENSORED))]
    out.append(("Reproduced verdicts: not comparable or censored",
                ("Not decisions. Not comparable: a learning-side row whose models are not past the Kneser-Ney bigram "
                "of their own budget by the margin of eval/regime.yaml (the qualifier gives the regime and the row's "
                "own reading, also in `verdict_unadjusted`); censored: the outcome lies outside what the runs "
                "measured (no interval)."), apart[cols_v]))
    learn = verd[verd["evidence"].isin(LEARNING) & (verd["qualifier"] != NOT_RUN)] if not verd.empty else verd
    out.append(("Regime of the learning-side verdicts", rp["regime"]["rule"] + ". `tokens_per_param`: training "
                "tokens over total parameters (tidy runs), the smallest over the runs read; `annealed`: every run "
                "read at the end of a decayed schedule; `loss_minus_bigram`: the worse run's held-out loss minus "
                "the bigram of its own budget on `regime_split`.",
                learn[["id", "evidence", "n_seeds", "tokens_per_param", "annealed", "loss_minus_bigram",
                       "regime_split", "regime", "verdict", "regime_detail"]] if not learn.empty else None))
    train = verd[verd["evidence"] == "training"] if not verd.empty else verd
    out.append(("Training-side verdicts: effect and interval across seeds, raw and Holm-adjusted",
                (f"{t['decided']} decided, {t['undecided']} undecided (restatements not counted). A Student-t "
                "interval (Welch for two sides, the delta method for relative effects); same direction or opposite "
                "only when it excludes 0, no difference only when it lies inside the margin, else inconclusive; one "
                "seed: no interval. A row whose models are not past the bigram of their own budget is not "
                "comparable (its own reading in `verdict_unadjusted`) and not in the family. "
                f"The {fam['size']} other rows with an interval (a restatement counts once) are one "
                "family, decided with Holm's step-down at a family-wise 0.05: `p_value` is the row's two-sided p of "
                "'no effect', `p_adjusted` Holm's, and the verdict is decided again on the interval at "
                "`level_adjusted` (1 - 0.05/(m - i + 1) for the i-th row Holm rejects, 1 - 0.05/(m - r) for the "
                "rest); `verdict_unadjusted` is the row's own 95% verdict. Seed spread of the metrics behind them: "
                "`seed_spread.md`; the seeds each would need: `power.md`."),
                train[[c for c in cols_t if c in train.columns]] if not train.empty else train))
    power = res.get("power")
    if power is not None:
        out.append(("Seeds needed: a power calculation from the measured seed spread", power_intro(fam["size"]),
                    power))
    spread = res.get("seed_spread")
    if spread is not None:
        out.append(("Seed spread of the training-side metrics", ("Mean, standard deviation across seeds (ddof 1) and "
                    "number of seeds, per study, role, metric and axis value (also `seed_spread.csv`)."), spread))
    out.append(("Claims: prose and captions", "", prose))
    out.append(("Claims: table cells by table", ("Status of the printed cells of each table "
                "(every cell is a claim; `claims.csv` lists each with its checks and verdicts)."), per_table))
    return out


POWER_INTRO = (
    "For each comparison of the family (and each one-seed row that borrows the spread of a row with an interval: "
    "`spread_from`), the "
    "seeds a paired t interval would need to decide with 80% power at the strictest Holm level alpha = 0.05/{m} = "
    "{a:.4f}: `seeds_margin` a true difference of the margin, `seeds_observed` the effect we observed, "
    "`seeds_no_difference` 'no difference' if the true effect were 0 (sd taken as known). `sd_per_seed` is the "
    "standard deviation of the per-seed effect (se x sqrt(seeds)); blank: more than 200. `cpu_s_per_seed`: the CPU "
    "seconds of one more seed of the row's runs (training and evaluation, from the committed `timing.csv`). "
    "`status`: decided, borderline (decided at 95% but not after the adjustment, or adjusted p >= 0.01), "
    "undecided, or one seed (no interval of its own). Rows that are not comparable with the paper (their models not "
    "past the bigram of their own budget, eval/regime.yaml) are not in the family and not here: more seeds would "
    "not make them comparable.")


def power_intro(m: int) -> str:
    """:data:`POWER_INTRO` for a family of ``m`` (none: says so)."""
    if not m:
        return ("No training-side comparison is in the family at this scale (every row with an interval is not "
                "comparable with the paper, or none has one), so no seeds are computed: more seeds would not make "
                "a pre-bigram comparison comparable (eval/regime.yaml).")
    return POWER_INTRO.format(m=m, a=0.05 / m)


#: What each figure the audit shows is, by file stem (the paper's numbering; ours where the paper has none).
FIGURE_NAMES = {
    "fig2": "Figure 2: loss against training FLOPs and tokens",
    "fig3": "Figure 3: accuracy on math benchmarks",
    "fig4": "Figure 4: perplexity against input length",
    "fig5": "Figure 5: held-out loss against parameters and activated parameters",
    "fig6": "Figure 6: loop scaling, T = 1, 2, 3, 5",
    "fig7": "Figure 7: prefill and decode throughput and KV-cache memory against N",
    "fig8": "Figure 8: angular distance per layer application",
    "niah_heatmap": "Table 4: needle in a haystack by length and depth",
    "crossover": "Ours: YOCO-U's gap to YOCO at 8x the tokens",
    "fig7_paper_shape": "Figure 7 at the paper's 1.3B shape (CPU)",
}


def figure_caption(path: str | Path, scale: str) -> str:
    """``"Figure 2: loss against training FLOPs and tokens (ours, tiny scale; figures/tiny/fig2.png)"``: what the
    figure is, then its file (the stem alone where :data:`FIGURE_NAMES` does not know it)."""
    p = Path(path)
    return f"{FIGURE_NAMES.get(p.stem, p.stem)} (ours, {scale} scale; {p})"


def _inline_code(text: str) -> str:
    """HTML of ``text`` with its Markdown inline code (`` `x` ``) as ``<code>x</code>``, the rest escaped."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: plain text
        return html.escape(text)
    return "".join(html.escape(t) if i % 2 == 0 else f"<code>{html.escape(t)}</code>" for i, t in enumerate(parts))


def model_sizes_text(res: dict[str, Any]) -> str:
    """``"models of 0.25M-2.0M parameters at this scale"`` from the ``params`` rows of the results' tidy ``runs``
    table (``res["model_params"]``), or says that no sizes were recorded."""
    lo_hi = res.get("model_params")
    if not lo_hi:
        return "model sizes not recorded (no tidy runs table)"
    lo, hi = lo_hi
    return f"models of {lo / 1e6:.2f}M-{hi / 1e6:.2f}M parameters at this scale (tidy runs table)"


def _img_data(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def write_report(res: dict[str, Any], out_dir: str | Path, *, figures: Iterable[str | Path] = (),
                 baseline: str | Path | None = None) -> dict[str, Any]:
    """Write report.md, report.html, checks.csv, verdicts.csv, claims.csv, summary.json and (when ``res`` has one)
    seed_spread.{csv,md} and power.{csv,md} into ``out_dir``.

    ``figures``: PNG files shown in the report (inline in the HTML). Returns the counts (see :func:`counts`).

    Raises:
        FileNotFoundError: a listed figure or the baseline does not exist. ValueError: a malformed baseline.
    """
    out = Path(out_dir)
    figs = [Path(f) for f in figures]
    for f in figs:
        if f.is_dir():
            raise IsADirectoryError(f"--figures {f}: is a folder; expected a PNG file")
        if not f.is_file():
            raise FileNotFoundError(f"--figures {f}: figure not found")
        with open(f, "rb") as fh:
            if fh.read(8) != b"\x89PNG\r\n\x1a\n":
                raise ValueError(f"--figures {f}: not a PNG image (the report embeds PNG figures)")
    regress = regressions(load_baseline(baseline), res["checks"]) if baseline else []
    cnt = counts(res, regress)
    out.mkdir(parents=True, exist_ok=True)
    prov = provenance({"scale": res["scale"], "results_dir": res["results_dir"], "baseline": str(baseline or ""),
                       "reported": res["sources"].origin}, None)
    sections = _sections(res, cnt)
    # Every file is written into a temporary folder beside out_dir and moved in only when all are written: a full
    # disk or an error midway leaves out_dir as it was, never a report.md without its report.html.
    remove_stale_temps(out.parent, f".{out.name}.tmp-")  # a killed audit's staging folder
    stage = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-{writer_tag()}-"))
    try:
        _write_report_files(res, out, stage, cnt, figs, prov, sections)
        for f in sorted(stage.iterdir()):
            data = f.read_bytes()
            kept = committed_if_only_provenance_differs(out / f.name, data)  # equal content: the committed file
            if kept is not data:
                f.write_bytes(kept)
            os.replace(f, out / f.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return cnt


def _write_report_files(res: dict[str, Any], out: Path, stage: Path, cnt: dict[str, Any], figs: list[Path],
                        prov: dict[str, Any], sections: Any) -> None:
    """The report's files into ``stage`` (links relative to ``out``, where they are moved)."""
    md = io.StringIO()
    md.write(f"# Audit of the paper's reported numbers ({res['scale']} scale)\n\n")
    md.write("Per scale under `results/<scale>/audit/` (one report per scale; the committed "
             "baseline of the consistency checks is `results/audit/baseline.json`). Self-contained page with the "
             "figures inline: `report.html`.\n\n")
    md.write("```\n" + summary_text(cnt) + "\n```\n\n")
    for title, intro, df in sections:
        md.write(f"## {title}\n\n")
        if intro:
            md.write(intro + "\n\n")
        if df is not None:
            md.write(_md_table(df) + "\n")
    if figs:
        md.write("## Figures\n\n")
        for f in figs:
            md.write(f"![{figure_caption(f, res['scale'])}]({os.path.relpath(f, out)})\n\n")
    footer = (f"<sub>yocou {prov['versions'].get('yocou')} · commit {prov['git_commit'][:10]}"
              f"{' (dirty)' if prov.get('git_dirty') else ''} · {prov['created_utc']}</sub>\n")
    md.write(footer)
    atomic_write_text(stage / "report.md", md.getvalue())

    h = io.StringIO()
    h.write("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>yocou audit ({html.escape(res['scale'])})</title><style>"
            "body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}"
            "table{border-collapse:collapse;font-size:12px;margin-bottom:1.5em}"
            "td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}"
            "th{background:#f3f3f3}.holds,.holding,.same-direction-and-size{background:#e6f4e6}"
            ".does-not-hold,.failing,.opposite,.no-difference,.differs{background:#fbe3e3}"
            ".not-comparable-pre-bigram-regime,.not-comparable-regime-unknown,.censored{background:#ececec}"
            ".cannot-be-checked-from-what-is-published,.inconclusive{background:#f5f5dc}"
            "img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}pre{background:#f7f7f7;padding:1em}"
            "</style></head><body>")
    h.write(f"<h1>Audit of the paper's reported numbers ({html.escape(res['scale'])} scale)</h1>")
    h.write(f"<pre>{html.escape(summary_text(cnt))}</pre>")
    for title, intro, df in sections:
        h.write(f"<h2>{html.escape(title)}</h2>")
        if intro:
            h.write(f"<p>{_inline_code(intro)}</p>")
        if df is not None:
            h.write(_html_table(df))
    if figs:
        h.write("<h2>Figures</h2>")
        for f in figs:
            cap = figure_caption(f, res["scale"])
            h.write(f"<figure><img alt='{html.escape(cap, quote=True)}' src='{_img_data(f)}'>"
                    f"<figcaption>{html.escape(cap)}</figcaption></figure>")
    h.write(f"<p><small>yocou {html.escape(str(prov['versions'].get('yocou')))} · commit "
            f"{html.escape(prov['git_commit'][:10])} · {html.escape(prov['created_utc'])}</small></p></body></html>\n")
    atomic_write_text(stage / "report.html", h.getvalue())

    atomic_write_text(stage / "checks.csv", pd.DataFrame([c.as_row() for c in res["checks"]]).to_csv(index=False))
    atomic_write_text(stage / "verdicts.csv", pd.DataFrame([v.as_row() for v in res["verdicts"]]).to_csv(index=False))
    atomic_write_text(stage / "claims.csv", res["claims"].to_csv(index=False))
    if (power := res.get("power")) is not None:
        atomic_write_text(stage / "power.csv", power.to_csv(index=False))
        atomic_write_text(stage / "power.md", (
            f"# Seeds needed: a power calculation from the measured seed spread ({res['scale']} scale)\n\n"
            + power_intro(cnt["family"]["size"]) + "\n\n"
            + _md_table(power) + "\n" + footer))
    if (spread := res.get("seed_spread")) is not None:
        atomic_write_text(stage / "seed_spread.csv", spread.to_csv(index=False))
        atomic_write_text(stage / "seed_spread.md", (
            f"# Seed spread of the training-side metrics ({res['scale']} scale)\n\n"
            f"Read from `{res['results_dir']}/tidy/`: every metric a training-side comparison of "
            "eval/comparisons.yaml reads; mean and standard deviation (ddof 1) over seeds, per study, role, metric "
            "and axis value (yocou.results.audit.verdicts.seed_spread).\n\n" + _md_table(spread) + "\n" + footer))
    atomic_write_json(stage / "summary.json", {**cnt, "figures": [str(f) for f in figs], "provenance": prov})


def _html_table(df: pd.DataFrame) -> str:
    cls_cols = {"result", "verdict", "status"}
    rows = ["<table><tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns) + "</tr>"]
    for r in df.itertuples(index=False):
        cells = []
        for c, x in zip(df.columns, r):
            s = "" if x is None or (isinstance(x, float) and pd.isna(x)) else (f"{x:.4g}" if isinstance(x, float) else str(x))
            cls = f" class='{re.sub(r'[^A-Za-z0-9-]', '', s.replace(' ', '-'))}'" if c in cls_cols else ""
            cells.append(f"<td{cls}>{html.escape(s)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(rows) + "</table>"


# --------------------------------------------------------------------------------------------- CLI


def run_from_args(a: argparse.Namespace) -> int:
    """Run the audit for parsed arguments; print the summary. Returns 1 on a regression (unless --report-only)."""
    res = audit(a.scale, a.results, reported_dir=a.reported_dir, registry=a.registry)
    baseline = a.baseline
    if baseline is None and Path(DEFAULT_BASELINE).is_file():
        baseline = DEFAULT_BASELINE
    if a.out:
        figs = a.figures if a.figures is not None else sorted(str(p) for p in Path("figures", a.scale).glob("*.png"))
        cnt = write_report(res, a.out, figures=figs, baseline=baseline)
    else:
        cnt = counts(res, regressions(load_baseline(baseline), res["checks"]) if baseline else [])
    if a.write_baseline:
        write_baseline(a.write_baseline, res["checks"])
    print(summary_text(cnt))
    for note in res.get("notes", []):
        print(f"  note: {note}")
    if not baseline:
        print("  (no baseline: regressions not checked)")
    return 1 if cnt["regressions"] and not a.report_only else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m yocou.results.audit", description=__doc__.split("\n\n")[0])
    add_arguments(ap)
    a = ap.parse_args(argv)
    try:
        from yocou.results.audit.args import extra_paths
        from yocou.utils.guard import check_args

        check_args(a, extra_paths(a))
        return run_from_args(a)
    except USER_ERRORS as e:
        return report_user_error("yocou audit", e)
    except OSError as e:
        if (bad := name_too_long(e)) is not None:
            return report_user_error("yocou audit", bad)
        if not disk_error(e):
            raise
        return report_user_error("yocou audit", e)


if __name__ == "__main__":
    raise SystemExit(main())
