"""The regime of a learning-side verdict, and the gate that keeps a pre-bigram one from speaking to the paper.

A learning-side verdict (evidence ``training`` or ``eval``) compares trained models. Whether it can say anything about
the paper, whose models are trained on hundreds of tokens per parameter to the end of their schedule, depends on
how far training went. :func:`of_row` states, for one row and the runs it reads:

- ``tokens_per_param``: training tokens over total parameters (``tokens`` / ``params`` of ``tidy/runs.csv``: every
  weight once, input embedding and LM head included), the smallest over the runs read;
- ``annealed``: every run read ends at the end of a decayed schedule (its ``steps`` equal those its config
  schedules: ``runs/<scale>/started.json`` while computing, else ``results/<scale>/config.json``), False for a
  mid-schedule snapshot or a row declared ``mid_schedule:`` (it reads a point of a training curve), None when
  unknown (no config);
- ``loss_minus_bigram``: the worse (larger), over the runs read, of the held-out loss minus the interpolated
  Kneser-Ney bigram fitted on the training windows of the run's own budget (``bigram_kn_budget``, fitted on the
  budget of the runs of its own study, ``heldout_ppl``: the run's if its tokens are theirs), on the split the row
  reads, or on both splits when it reads none;
- ``regime``: :data:`PAST` (every run read at least ``bigram_margin_nats`` below its bigram on every split read),
  :data:`PRE` (one is not) or :data:`UNKNOWN` (a run read has no held-out loss in the tidy tables, or no bigram was
  fitted on its budget), and ``gate``: whether the row is "not comparable" (:data:`yocou.results.audit.decision.
  NOT_COMPARABLE`): a pre-bigram row of the gated evidence, or an unknown one where the rules say
  ``unknown: not_comparable``.

The rules (margin, gated evidence, what an unknown regime does, where losses and the bigram are read) are data:
``eval/regime.yaml``, whose header documents every field. The gate reads only the tidy tables of the results
folder; ``annealed`` also reads the resolved config (the schedules).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from yocou.results import evaldefs
from yocou.results.audit.decision import EVIDENCE, LEARNING
from yocou.results.tidy import NO_SEED, read_tidy

__all__ = [
    "PAST",
    "PRE",
    "REGIME_FIELDS",
    "UNKNOWN",
    "Context",
    "Rules",
    "base_run",
    "context",
    "load_rules",
    "of_row",
    "row_splits",
]

PAST, PRE, UNKNOWN = "past the bigram", "pre-bigram", "regime unknown"
#: The regime columns of a verdict (yocou.results.audit.decision.Verdict), in order.
REGIME_FIELDS = ("tokens_per_param", "annealed", "loss_minus_bigram", "regime_split", "regime", "regime_detail")
_KEYS = {"bigram_margin_nats", "gated_evidence", "unknown", "bigram", "heldout_loss", "splits", "split_of_metric",
         "decayed_schedules"}
_UNKNOWN_RULES = ("decide", "not_comparable")


@dataclass(frozen=True)
class Rules:
    """eval/regime.yaml, validated (its header documents the fields)."""

    margin: float
    gated_evidence: tuple[str, ...]
    unknown: str
    bigram: dict
    heldout_loss: tuple[dict, ...]
    splits: tuple[str, ...]
    split_of_metric: dict
    decayed_schedules: tuple[str, ...]
    source: str

    def text(self) -> str:
        """The rule in one line, for reports."""
        return (f"a run is past the bigram when its held-out loss is at least {self.margin:g} nats/token below the "
                f"Kneser-Ney bigram fitted on its own training budget on each split the row reads (both when none); "
                f"{'/'.join(self.gated_evidence)} rows with a run that is not are not comparable; a row whose regime "
                f"is unknown is {'decided' if self.unknown == 'decide' else 'not comparable'} ({self.source})")


def load_rules(path: str | Path | None = None) -> Rules:
    """Read and validate ``eval/regime.yaml`` (or ``path``).

    Raises:
        ValueError: a missing or unknown key or a malformed value, naming the file and the key.
    """
    p = Path(path or evaldefs.eval_dir() / "regime.yaml")
    raw = evaldefs._load(str(p))

    def bad(key: str, want: str) -> ValueError:
        return ValueError(f"{p}: {key}: expected {want}, got {raw.get(key)!r}" if isinstance(raw, dict) else
                          f"{p}: expected a mapping of {sorted(_KEYS)}")

    if not isinstance(raw, dict):
        raise bad("", "")
    if miss := sorted(_KEYS - set(raw)):
        raise ValueError(f"{p}: missing {miss[0]!r} (the keys are {', '.join(sorted(_KEYS))})")
    if extra := sorted(map(str, set(raw) - _KEYS)):
        raise ValueError(f"{p}: unknown key {extra[0]!r} (the keys are {', '.join(sorted(_KEYS))})")
    m = raw["bigram_margin_nats"]
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m < 0:
        raise bad("bigram_margin_nats", "a number >= 0")
    ev = raw["gated_evidence"]
    if not isinstance(ev, list) or any(e not in EVIDENCE for e in ev):
        raise bad("gated_evidence", f"a list of evidence kinds ({', '.join(EVIDENCE)})")
    if raw["unknown"] not in _UNKNOWN_RULES:
        raise bad("unknown", " or ".join(_UNKNOWN_RULES))
    splits = raw["splits"]
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) and s for s in splits):
        raise bad("splits", "a list of split names")
    b = raw["bigram"]
    if not isinstance(b, dict) or set(b) != {"study", "role", "metric"} or "{split}" not in str(b.get("metric")):
        raise bad("bigram", "{study, role, metric} with {split} in the metric")
    src = raw["heldout_loss"]
    if not isinstance(src, list) or not src or any(
            not isinstance(x, dict) or set(x) != {"study", "metric"} or "{split}" not in str(x["metric"])
            for x in src):
        raise bad("heldout_loss", "a list of {study, metric} with {split} in the metric")
    sm = raw["split_of_metric"]
    if not isinstance(sm, dict) or any(v not in splits for v in sm.values()):
        raise bad("split_of_metric", "a mapping of metric parts to one of the splits")
    ds = raw["decayed_schedules"]
    if not isinstance(ds, list) or not all(isinstance(s, str) for s in ds):
        raise bad("decayed_schedules", "a list of schedule names")
    shown = "eval/regime.yaml" if path is None else str(p)     # the default named as in the repository
    return Rules(float(m), tuple(ev), raw["unknown"], dict(b), tuple(dict(x) for x in src), tuple(splits),
                 {str(k): v for k, v in sm.items()}, tuple(ds), shown)


@dataclass(frozen=True)
class Context:
    """What the regime reads from one results folder: per run its held-out loss by split, its tokens, parameters and
    steps; the own-budget bigram by split and the budget it was fitted on (tokens: those of the runs of the bigram's
    own study, which all train on it); the resolved config (for the schedules)."""

    rules: Rules
    loss: dict[str, dict[str, float]]
    runs: dict[str, dict[str, float]]
    bigram: dict[str, float]
    budget_tokens: float | None
    config: dict | None


def _table(results_dir: Path, tidy: dict[str, pd.DataFrame], study: str) -> pd.DataFrame | None:
    if study in tidy:
        return tidy[study]
    p = results_dir / "tidy" / f"{study}.csv"
    return read_tidy(p) if p.is_file() else None


def context(results_dir: str | Path, tidy: dict[str, pd.DataFrame], rules: Rules | None = None) -> Context:
    """The :class:`Context` of ``results_dir``: its tidy tables (those in ``tidy``, else read from
    ``results_dir/tidy``) and its resolved config
    (:func:`yocou.results.audit.resultsconfig.results_config`; only the schedules are read from it)."""
    rules = rules or load_rules()
    rd = Path(results_dir)
    from yocou.results.audit.resultsconfig import results_config

    cfg = results_config(rd)
    loss: dict[str, dict[str, float]] = {}
    for src in rules.heldout_loss:
        df = _table(rd, tidy, src["study"])
        if df is None or "run" not in df:
            continue
        for split in rules.splits:
            for run, v in df.loc[df["metric"] == src["metric"].format(split=split)].groupby("run")["value"]:
                loss.setdefault(str(run), {}).setdefault(split, float(v.mean()))
    runs: dict[str, dict[str, float]] = {}
    rt = _table(rd, tidy, "runs")
    if rt is not None and "run" in rt:
        for (run, metric), v in rt[rt["metric"].isin(("tokens", "params", "steps"))].groupby(["run", "metric"])["value"]:
            runs.setdefault(str(run), {})[str(metric)] = float(v.iloc[0])
    bigram: dict[str, float] = {}
    budget = None
    bt = _table(rd, tidy, rules.bigram["study"])
    if bt is not None:
        for split in rules.splits:
            v = bt.loc[(bt["role"] == rules.bigram["role"])
                       & (bt["metric"] == rules.bigram["metric"].format(split=split)), "value"]
            if len(v):
                bigram[split] = float(v.iloc[0])
        # the budget: the training tokens of the study's own runs (one value, or none is known)
        own = {runs[r]["tokens"] for r in bt.loc[bt["seed"] != NO_SEED, "run"].astype(str).unique()
               if "tokens" in runs.get(r, {})}
        budget = own.pop() if len(own) == 1 else None
    return Context(rules, loss, runs, bigram, budget, cfg)


def base_run(run: str) -> str:
    """The base run of a seed replica (``yoco_seed3`` -> ``yoco``); other runs are their own base."""
    return re.sub(r"_seed\d+$", "", run)


def row_splits(row: dict, rules: Rules) -> tuple[str, ...]:
    """The held-out splits a row reads: a ``split`` field (rows expanded over splits), else every split named by a
    dotted part of its metric(s) (``rules.split_of_metric``); all splits when it names none."""
    if isinstance(row.get("split"), str) and row["split"] in rules.splits:
        return (row["split"],)
    mets = row.get("metrics") or [row.get("metric")]
    mets = list(evaldefs.column_metrics(mets).values()) if isinstance(mets, str) else mets
    got = {rules.split_of_metric[p] for m in mets if isinstance(m, str) for p in m.split(".")
           if p in rules.split_of_metric}
    return tuple(s for s in rules.splits if s in got) or rules.splits


def _schedule(run: str, steps: float | None, ctx: Context) -> tuple[bool | None, str]:
    """Whether ``run`` ended at the end of a decayed schedule, and the words for it. The schedule is the config's
    ``train`` with the run's variant's ``train`` over it (the run's own entry, else the longest variant name it
    starts with: a derived snapshot such as ``<variant>_eqflops``)."""
    cfg = ctx.config
    if cfg is None or steps is None:
        return None, "schedule unknown (" + ("no config.json" if cfg is None else f"no steps of {run} in tidy runs") + ")"
    variants = cfg.get("variants") or {}
    name = run if run in variants else max((v for v in variants if run.startswith(v + "_")), key=len, default=None)
    tr = {**(cfg.get("train") or {}), **(((variants.get(name) or {}) if name else {}).get("train") or {})}
    sched, ratio, total = tr.get("schedule"), tr.get("min_lr_ratio"), tr.get("steps")
    if not isinstance(total, int) or not isinstance(ratio, (int, float)):
        return None, "schedule unknown (no train.steps or min_lr_ratio in config.json)"
    decays = sched in ctx.rules.decayed_schedules and ratio < 1 and (sched != "wsd" or tr.get("cooldown_steps", 0))
    if not decays:
        return False, f"{sched} schedule to {ratio:g}x: no decay"
    if int(steps) != total:
        return False, f"step {int(steps)} of a {total}-step {sched} schedule (mid-schedule)"
    return True, f"{sched} to {ratio:g}x, step {total} of {total}"


def of_row(row: dict, runs_read: list[str], ctx: Context | None, evidence: str) -> dict[str, Any] | None:
    """The regime of one evaluated row (module docstring): the :data:`REGIME_FIELDS` and ``gate``, or None for a
    row that does not depend on training (evidence not in :data:`yocou.results.audit.decision.LEARNING`) or without a
    context."""
    if ctx is None or evidence not in LEARNING:
        return None
    rules = ctx.rules
    splits = row_splits(row, rules)
    groups: dict[str, list[str]] = {}
    for r in sorted({x for run in runs_read for x in str(run).split("|") if x}):
        groups.setdefault(base_run(r), []).append(r)
    tpp, ann, diffs, why, no_loss = [], [], {}, [], {}
    for base, members in sorted(groups.items()):
        info = next((ctx.runs[m] for m in [base, *members] if m in ctx.runs), {})
        if info.get("tokens") and info.get("params"):
            tpp.append(info["tokens"] / info["params"])
        ann.append((base, *_schedule(base, info.get("steps"), ctx)))
        own = ctx.budget_tokens is not None and info.get("tokens") == ctx.budget_tokens
        for split in splits:
            have = [ctx.loss[m][split] for m in members if split in ctx.loss.get(m, {})]
            if not have:
                no_loss.setdefault(base, []).append(split)
            elif split not in ctx.bigram:
                why.append(f"no {rules.bigram['role']} {split} loss in tidy/{rules.bigram['study']}")
            elif not own:
                why.append(f"no bigram fitted on {base}'s budget ("
                           + (f"{info['tokens'] / 1e6:.3g}M tokens against the bigram's "
                              f"{ctx.budget_tokens / 1e6:.3g}M)" if info.get("tokens") and ctx.budget_tokens
                              else "its tokens, or the bigram's budget (its study's runs' tokens), unknown)"))
            else:
                diffs[(base, split)] = sum(have) / len(have) - ctx.bigram[split]
    if no_loss:
        why.insert(0, "no held-out loss of " + ", ".join(f"{b} ({', '.join(s)})" for b, s in no_loss.items())
                   + " in the tidy tables")
    if not groups:
        why.append("the row names no runs")
    worst = max(diffs.values()) if diffs else None
    regime = PRE if worst is not None and worst > -rules.margin else UNKNOWN if why else PAST
    annealed = False if row.get("mid_schedule") or any(a is False for _, a, _ in ann) else (
        True if ann and all(a is True for _, a, _ in ann) else None)
    gate = evidence in rules.gated_evidence and (regime == PRE or (regime == UNKNOWN and rules.unknown != "decide"))
    split_text = "+".join(splits)
    parts = []
    if tpp:
        lo, hi = min(tpp), max(tpp)
        parts.append(f"{lo:.3g}{'' if f'{lo:.3g}' == f'{hi:.3g}' else f'-{hi:.3g}'} tokens/param (total "
                     "parameters, tidy runs)")
    texts = sorted({t for _, _, t in ann})
    parts.append(("not annealed: " + row["mid_schedule"]) if row.get("mid_schedule") else
                 ("annealed: " if annealed else "not annealed: " if annealed is False else "annealing unknown: ")
                 + ("; ".join(f"{b} {t}" for b, a, t in ann if a is not True) if annealed is not True
                    else "; ".join(texts)))
    if diffs:
        parts.append(f"held-out loss minus the own-budget bigram ({split_text}, nats): " + ", ".join(
            f"{b}{'' if len(splits) == 1 else ' ' + s} {d:+.3f}" for (b, s), d in sorted(diffs.items()))
            + f"; past it needs every one <= {-rules.margin:+g}")
    if why and regime != PRE:
        parts.append("unknown: " + "; ".join(dict.fromkeys(why)))
    return {"tokens_per_param": min(tpp) if tpp else None, "annealed": annealed, "loss_minus_bigram": worst,
            "regime_split": split_text, "regime": regime, "regime_detail": "; ".join(parts), "gate": gate}
