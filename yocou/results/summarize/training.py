"""Training-side studies: runs, Figure 2, Figures 5 and 6, the held-out perplexity table, Figures 4 and 8 → tidy
tables (:mod:`yocou.results.tidy`). Every number the renderers show is made here (smoothing, Figure 2's token saving and
loss gap, Figure 5's parameter saving, ratios to the Transformer); the renderers only select, format and draw.

Inputs (raw, per run): ``runs/<scale>/models/<run>/{summary.json, run_config.json, metrics.jsonl}``,
``results/<scale>/ppl/<run>.json`` (:mod:`yocou.evaluation.ppl`), ``results/<scale>/longppl/<run>.json``
(:mod:`yocou.evaluation.longctx.longppl`), ``results/<scale>/angular/<run>.json`` (:mod:`yocou.evaluation.analysis.angular`).

Tidy rows written (``study`` = the function's study; ``role`` from the config's ``studies:``; ``seed`` = the run's
training seed, :func:`run_seed`):

=================  ==================================================================================================
``runs``           per run (role = run): ``params``, ``activated_params`` (active matrix parameters per token, when the
                   summary has them), ``tokens``, ``train_flops``, ``steps``, ``seq_len`` (the training length, from
                   ``run_config.json``), ``final_train_loss`` (nats, the last
                   logged raw training loss; for an ``*_eqflops`` snapshot the last row of its base run's log at or
                   before the snapshot step, ``detail`` says which)
``fig2``           per core role: ``train_loss`` (raw) and ``train_loss_smoothed`` (EMA, ``detail``) on axis
                   ``tokens`` and again on axis ``train_flops``, one row per logged step (extra column ``step``);
                   derived role ``yocou|yoco``: ``reference_final_loss``, ``reference_tokens``,
                   ``reference_train_flops``, ``tokens_to_reach`` and ``token_saving`` (omitted when never reached),
                   ``reached_reference_loss`` (1/0, unit ``flag``), ``loss_gap_at_equal_flops`` (``detail``: where
                   it was taken)
``fig5``           per ladder run: ``final_loss`` (held-out loss: mean of the book and code NLL, nats/token) on axis
                   ``params`` and on axis ``activated_params``, ``book.loss`` and ``code.loss``; derived role
                   ``yocou|yoco`` per YOCO-U rung (axis ``params`` = the rung's parameters, run = the rung, then the
                   YOCO ladder, :func:`fig5_derived_run`): ``reached_reference_loss`` (1/0: its loss lies inside
                   YOCO's range),
                   ``yoco_params_at_loss`` and ``param_saving`` (omitted when outside)
``fig6``           per role T1..T5: ``final_loss``, ``book.loss``, ``code.loss`` on axis ``T`` (= the run's loop count
                   from its run config, :func:`run_loops`), ``train_loss`` and ``train_loss_smoothed`` on axis
                   ``tokens`` (``step``); derived role ``<b>|<a>`` per consecutive pair in order of T:
                   ``final_loss_change`` (final_loss at b minus at a, axis ``T`` = b's)
``heldout_ppl``    per core run (seed replicas included, under their base run's role) and held-out split:
                   ``<split>.ppl`` (ppl), ``loss.<split>`` (nats/token, stderr = ``stderr_nats``), ``bpb.<split>``
                   (bits/byte, where the ppl JSON has bytes), n = tokens scored (extra columns ``split``,
                   ``n_docs``, ``seq_len``, ``max_tokens`` (the per-split cap), ``max_tokens_per_doc``, ``n_bytes``;
                   ``detail``: the documents); derived role ``<role>|transformer``: ``<split>.ppl_ratio`` (ppl /
                   the Transformer's of the same replica index, unit ``ratio``); baseline roles ``unigram`` and
                   ``bigram_kn`` (seed NO_SEED, :mod:`yocou.evaluation.baselines`): ``<split>.ppl``, ``loss.<split>``,
                   ``bpb.<split>``; ``<split>`` is the ppl JSON's split without ``heldout_`` (``book``, ``code``)
``fig4``           per core role and split: ``<split>.cum_ppl`` and ``<split>.span_ppl`` on axis ``seq_len``, n =
                   documents (extra columns ``split``, ``extrapolated``, ``train_seq_len``, ``span``; ``detail``: the
                   documents)
``fig8``           per fig8 role: ``angular_distance`` (token-weighted mean over the splits) and
                   ``<split>.angular_distance`` on axis ``application`` (1, 2, ...), unit ``angle/pi``, n = tokens,
                   ``detail`` = the application (kind, stage, loop, layer); extra columns ``split``, ``kind``,
                   ``stage``, ``loop``, ``layer`` (1-based), ``window``, ``seq_len``, ``device``, ``n_windows``,
                   ``n_docs``, ``docs``; per (stage, loop): ``stage_mean_angular_distance`` (mean of
                   ``angular_distance`` over its applications; axis ``stage``, ``axis2`` = ``loop``, n =
                   applications, extra ``stage_loops``)
=================  ==================================================================================================
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from yocou.results.readers import (
    ResultFileError,
    read_angular,
    read_json,
    read_longppl,
    read_metrics,
    read_ppl,
    read_summary,
)
from yocou.results.summarize import run_seed
from yocou.results.tidy import NO_SEED, tidy_frame
from yocou.workflow.studies import figure2_numbers, smoothed
from yocou.workflow.wfconfig import replicas

__all__ = ["STUDIES", "replicas", "read_heldout_curve", "seed_mean_rows", "SEED_MEAN", "summarize_study", "FIG2_SMOOTHING", "run_seed", "run_loops", "read_curve", "params_at_loss",
           "fig5_derived_run", "paper_wiki_ppl",
           "summarize_runs", "summarize_fig2", "summarize_fig5", "summarize_fig6", "summarize_heldout_ppl",
           "summarize_fig4", "summarize_fig8"]

#: EMA alpha of the training-loss curves of Figures 2 and 6 (display smoothing and Figure 2's numbers).
FIG2_SMOOTHING = 0.3

Pathish = str | Path


# ----------------------------------------------------------------------------------------------- run facts
def _run_config(run_dir: Path) -> dict | None:
    p = run_dir / "run_config.json"
    if not p.is_file():
        return None
    rc = read_json(p, what="run config")
    if not isinstance(rc, dict):
        raise ResultFileError(p, "top level", f"expected an object, got {type(rc).__name__}")
    return rc


def _get(d: Any, *path: str) -> Any:
    for k in path:
        d = d.get(k) if isinstance(d, Mapping) else None
    return d


def run_loops(run_dir: Pathish) -> int:
    """The loop count T of the run in ``run_dir``: the largest ``n_loops`` over the stages of its model, read from
    ``run_config.json`` (``model.stages``), else from the provenance of its ``summary.json``.

    Raises:
        ValueError: neither file records the model's stages.
    """
    d = Path(run_dir)
    sm = read_summary(d / "summary.json") if (d / "summary.json").is_file() else {}
    for stages in (_get(_run_config(d), "model", "stages"), _get(sm, "provenance", "config", "model", "stages")):
        if isinstance(stages, list) and stages and all(isinstance(_get(s, "n_loops"), int) for s in stages):
            return max(int(s["n_loops"]) for s in stages)
    raise ValueError(f"{d}: neither run_config.json nor summary.json records model.stages[].n_loops "
                     "(train the run with the pipeline)")


def read_curve(run_dir: Pathish) -> pd.DataFrame:
    """The run's training log as ``step, tokens, train_flops, loss`` (validated by
    :func:`yocou.results.readers.read_metrics`; FileNotFoundError when the run has no ``metrics.jsonl``)."""
    p = Path(run_dir) / "metrics.jsonl"
    if not p.is_file():
        raise FileNotFoundError(f"{p} not found (train the run first)")
    return pd.DataFrame(read_metrics(p))[["step", "tokens", "train_flops", "loss"]]


def _dirs(runs: Mapping[str, Pathish] | Iterable[Pathish]) -> dict[str, Path]:
    """run name → run folder: a mapping as given, or folders (the folder's name is the run)."""
    if isinstance(runs, Mapping):
        return {str(k): Path(v) for k, v in runs.items()}
    return {Path(p).name: Path(p) for p in runs}


def _reps(run: str, reps: Mapping[str, list[str]] | None) -> list[str]:
    """The replicas of ``run`` from ``reps`` (run → [run, run_seed1, ...]); ``[run]`` when none are given."""
    return list((reps or {}).get(run) or [run])


def read_heldout_curve(run_dir: Pathish) -> pd.DataFrame:
    """The run's train-time held-out evaluations (``metrics.jsonl`` rows with ``heldout_loss``, :class:`yocou.training.train.
    HeldoutEval`) as ``step, tokens, train_flops, book, code, loss`` (``loss``: the mean of the splits); empty when
    the run logged none."""
    rows = [r for r in read_metrics(Path(run_dir) / "metrics.jsonl") if "heldout_loss" in r]
    out = [{"step": r["step"], "tokens": r["tokens"], "train_flops": r["train_flops"],
            "book": r["heldout_loss"].get("book", math.nan), "code": r["heldout_loss"].get("code", math.nan)}
           for r in rows]
    df = pd.DataFrame(out, columns=["step", "tokens", "train_flops", "book", "code"])
    df["loss"] = (df["book"] + df["code"]) / 2
    return df


#: Metrics that get a mean across seeds: ``<metric>.seed_mean`` (:func:`seed_mean_rows`).
SEED_MEAN = "seed_mean"


def seed_mean_rows(rows: Iterable[Mapping[str, Any]], metrics: Iterable[str], run_of: Mapping[str, str],
                   study: str) -> list[dict[str, Any]]:
    """Per role, metric (one of ``metrics``) and axis value, the mean over seeds of the per-seed rows as metric
    ``<metric>.seed_mean``: ``seed`` = NO_SEED, ``n`` = seeds, ``stderr`` = std (ddof 1) / sqrt(n) (NaN for one
    seed), extra columns ``seed_std``, ``seed_min``, ``seed_max`` (the band the figures draw) and ``seeds``;
    ``run`` = the base run (``run_of``: replica → base)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    want = set(metrics)
    for r in rows:
        if r["metric"] in want:
            av = r.get("axis_value", math.nan)
            key = (r["role"], r["metric"], r.get("axis", ""), None if pd.isna(av) else float(av))
            groups.setdefault(key, []).append(r)
    out = []
    for (role, metric, axis, av), g in groups.items():
        v = np.array([float(r["value"]) for r in g])
        n = len(v)
        std = float(v.std(ddof=1)) if n > 1 else math.nan
        extra = {k: g[0][k] for k in ("step",) if k in g[0]}
        out.append(dict(study=study, run=run_of.get(g[0]["run"], g[0]["run"]), role=role, seed=NO_SEED,
                        metric=f"{metric}.{SEED_MEAN}", axis=axis, axis_value=math.nan if av is None else av, value=float(v.mean()),
                        stderr=std / math.sqrt(n) if n > 1 else math.nan, n=n, unit=g[0]["unit"], seed_std=std,
                        seed_min=float(v.min()), seed_max=float(v.max()),
                        seeds=",".join(str(r["seed"]) for r in g), **extra,
                        detail=f"mean over {n} seed{'s' if n != 1 else ''}; band min-max across seeds"))
    return out


# ----------------------------------------------------------------------------------------------------- runs
def summarize_runs(run_dirs: Mapping[str, Pathish] | Iterable[Pathish]) -> pd.DataFrame:
    """Study ``runs``: per run its budget and final training loss (module docstring).

    ``run_dirs``: run folders (``runs/<scale>/models/<run>``), or run → folder. A folder without
    ``metrics.jsonl`` whose summary has ``equal_flops.of`` (an ``*_eqflops`` snapshot, :mod:`yocou.workflow.studies`)
    takes its loss from the base run's log next to it; otherwise the run has no ``final_train_loss`` row.
    """
    rows: list[dict[str, Any]] = []
    for run, d in _dirs(run_dirs).items():
        sm = read_summary(d / "summary.json", require=("params",))
        seed = run_seed(d)
        base = dict(study="runs", run=run, role=run, seed=seed)
        rows += [{**base, "metric": "params", "value": sm["params"], "unit": "params"},
                 {**base, "metric": "tokens", "value": sm["tokens"], "unit": "tokens"},
                 {**base, "metric": "train_flops", "value": sm["train_flops"], "unit": "flops"},
                 {**base, "metric": "steps", "value": sm["steps"], "unit": "steps"}]
        seq_len = _get(_run_config(d) or {}, "train", "seq_len")
        if isinstance(seq_len, int) and not isinstance(seq_len, bool):  # the training length (the audit's Figure 4 rows)
            rows.append({**base, "metric": "seq_len", "value": seq_len, "unit": "tokens"})
        if "active_params_per_token" in sm:
            rows.append({**base, "metric": "activated_params", "value": sm["active_params_per_token"],
                         "unit": "params", "detail": "active matrix parameters per token, loops counted"})
        of = _get(sm, "equal_flops", "of")
        if (d / "metrics.jsonl").is_file():
            c = read_curve(d)
            last = c.iloc[-1]
            detail = f"last logged step {int(last['step'])}"
        elif isinstance(of, str) and (d.parent / of / "metrics.jsonl").is_file():
            c = read_curve(d.parent / of)
            c = c[c["step"] <= sm["steps"]]
            if c.empty:
                continue
            last = c.iloc[-1]
            detail = (f"logged step {int(last['step'])} of {of}, the last at or before this equal-FLOPs snapshot "
                      f"(step {sm['steps']})")
        else:
            continue
        rows.append({**base, "metric": "final_train_loss", "value": float(last["loss"]), "unit": "nats",
                     "detail": detail})
    return tidy_frame(rows, where="tidy runs")


# -------------------------------------------------------------------------------------------------- Figure 2
def _curve_rows(study: str, run: str, role: str, seed: int, c: pd.DataFrame, alpha: float,
                axes: Iterable[str]) -> list[dict[str, Any]]:
    c = c.sort_values("step")
    sm = smoothed(c["loss"], alpha)
    how = f"EMA alpha {alpha:g}" if alpha < 1 else "no smoothing"
    rows = []
    for axis in axes:
        for (_, r), s in zip(c.iterrows(), sm):
            base = dict(study=study, run=run, role=role, seed=seed, axis=axis, axis_value=float(r[axis]),
                        unit="nats", step=int(r["step"]))
            rows.append({**base, "metric": "train_loss", "value": float(r["loss"])})
            rows.append({**base, "metric": "train_loss_smoothed", "value": float(s), "detail": how})
    return rows


HELDOUT_CURVE_METRICS = ("heldout_loss", "heldout_loss.book", "heldout_loss.code")


def _heldout_rows(study: str, run: str, role: str, seed: int, c: pd.DataFrame, axes: Iterable[str]) -> list[dict]:
    """Per train-time evaluation of ``c`` (:func:`read_heldout_curve`): ``heldout_loss.book``, ``.code`` and their
    mean ``heldout_loss`` (nats/token) on each axis (extra column ``step``)."""
    rows = []
    for axis in axes:
        for r in c.itertuples():
            base = dict(study=study, run=run, role=role, seed=seed, axis=axis, axis_value=float(getattr(r, axis)),
                        unit="nats", step=int(r.step))
            rows += [{**base, "metric": "heldout_loss", "value": float(r.loss),
                      "detail": "train-time held-out NLL, mean of book and code"},
                     {**base, "metric": "heldout_loss.book", "value": float(r.book)},
                     {**base, "metric": "heldout_loss.code", "value": float(r.code)}]
    return rows


def _fig2_number_rows(base: dict, n: Mapping[str, Any], ref: str, new: str, how: str, suffix: str = "") -> list[dict]:
    """Figure 2's numbers (:func:`yocou.workflow.studies.figure2_numbers`) as tidy rows, metric names + ``suffix``."""
    rows = [{**base, "metric": "reference_final_loss" + suffix, "value": n["reference_final_loss"], "unit": "nats",
             "detail": f"{ref}'s final loss, {how}"},
            {**base, "metric": "reference_tokens" + suffix, "value": n["reference_tokens"], "unit": "tokens",
             "detail": f"{ref}'s last row"},
            {**base, "metric": "reference_train_flops" + suffix, "value": n["reference_train_flops"], "unit": "flops",
             "detail": f"{ref}'s last row"},
            {**base, "metric": "reached_reference_loss" + suffix, "value": float(n["tokens_to_reach"] is not None),
             "unit": "flag", "detail": f"whether {new}'s curve ({how}) falls to reference_final_loss"}]
    if n["tokens_to_reach"] is not None:
        rows += [{**base, "metric": "tokens_to_reach" + suffix, "value": n["tokens_to_reach"], "unit": "tokens",
                  "detail": f"first tokens at which {new} reaches reference_final_loss, linear between rows"},
                 {**base, "metric": "token_saving" + suffix, "value": n["token_saving"], "unit": "fraction",
                  "detail": "1 - tokens_to_reach / reference_tokens"}]
    rows.append({**base, "metric": "loss_gap_at_equal_flops" + suffix, "value": n["loss_gap_at_equal_flops"],
                 "unit": "nats", "detail": f"at the {n['loss_gap_at']} ({n['reference_train_flops']:.3g}), {how}"})
    return rows


def summarize_fig2(runs: Mapping[str, Pathish], *, ref: str = "yoco", new: str = "yocou",
                   alpha: float = FIG2_SMOOTHING, replicas: Mapping[str, list[str]] | None = None) -> pd.DataFrame:
    """Study ``fig2``: per role (``runs``: role → base run folder; ``replicas``: run → [run, run_seed1, ...], its
    seed replicas beside it) and seed the training curves (``train_loss``, ``train_loss_smoothed``) and the
    train-time held-out curves (``heldout_loss``, ``heldout_loss.book``, ``heldout_loss.code``, every
    ``train.eval_every`` steps) on axes ``tokens`` and ``train_flops``, with their means across seeds
    (:func:`seed_mean_rows`). Figure 2's numbers (:func:`yocou.workflow.studies.figure2_numbers`, role ``<new>|<ref>``) come
    from the held-out curves (mean of book and code, unsmoothed) when every run logged them, else from the
    smoothed training loss (``detail`` says which): per seed pair (the k-th replica of each, seed = new's seed)
    under today's metric names, and on the curves averaged over seeds as ``<metric>.seed_mean_curve``
    (seed NO_SEED)."""
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[tuple[str, int, pd.DataFrame, pd.DataFrame]]] = {}
    run_of: dict[str, str] = {}
    for role, d in runs.items():
        d = Path(d)
        for name in _reps(d.name, replicas):
            rd, run_of[name] = d.parent / name, d.name
            c, h, seed = read_curve(rd), read_heldout_curve(rd), run_seed(rd)
            curves.setdefault(role, []).append((name, seed, c, h))
            rows += _curve_rows("fig2", name, role, seed, c, alpha, ("tokens", "train_flops"))
            rows += _heldout_rows("fig2", name, role, seed, h, ("tokens", "train_flops"))
    rows += seed_mean_rows(rows, ("train_loss", *HELDOUT_CURVE_METRICS), run_of, "fig2")
    if ref in curves and new in curves:
        rows += _fig2_numbers(curves[ref], curves[new], ref, new, alpha)
    return tidy_frame(rows, where="tidy fig2")


def _fig2_numbers(ref_c: list, new_c: list, ref: str, new: str, alpha: float) -> list[dict[str, Any]]:
    """Figure 2's numbers per seed pair and on the seed-mean curves (:func:`summarize_fig2`)."""
    heldout = all(not h.empty for _, _, _, h in ref_c + new_c)
    pick, a = (lambda x: x[3], 1.0) if heldout else (lambda x: x[2], alpha)
    how = ("on the train-time held-out loss (mean of book and code), unsmoothed" if heldout else
           f"on the training loss smoothed by an EMA (alpha {alpha:g}) over the logged rows (no held-out curve)")
    rows = []
    for r, n in zip(ref_c, new_c):
        base = dict(study="fig2", run=f"{n[0]}|{r[0]}", role=f"{new}|{ref}", seed=n[1] if n[1] == r[1] else NO_SEED)
        rows += _fig2_number_rows(base, figure2_numbers(pick(r), pick(n), a), ref, new, how)

    def mean_curve(cs: list) -> pd.DataFrame:
        k = min(len(pick(c)) for c in cs)  # the shared schedule (replicas log the same steps)
        frames = [pick(c).sort_values("step").iloc[:k].reset_index(drop=True) for c in cs]
        out = frames[0][["step", "tokens", "train_flops"]].copy()
        out["loss"] = np.mean([f["loss"].to_numpy(float) for f in frames], axis=0)
        return out

    base = dict(study="fig2", run=f"{new_c[0][0]}|{ref_c[0][0]}", role=f"{new}|{ref}", seed=NO_SEED,
                n=min(len(ref_c), len(new_c)))
    nm = figure2_numbers(mean_curve(ref_c), mean_curve(new_c), a)
    return rows + _fig2_number_rows(base, nm, ref, new, f"{how}, curves averaged over seeds", ".seed_mean_curve")


# ------------------------------------------------------------------------------------------ Figures 5 and 6
def _heldout(ppl_path: Pathish) -> dict[str, Any]:
    """``{"book", "code", "loss", "docs"}``: held-out NLL (nats/token) per split, their mean, and the document
    ids per split, from a ppl JSON."""
    splits = read_ppl(ppl_path)["splits"]
    missing = [s for s in ("heldout_book", "heldout_code") if s not in splits]
    if missing:
        raise ResultFileError(ppl_path, "splits", f"expected heldout_book and heldout_code, missing {missing}")
    book, code = (float(splits[k].get("nats_per_token", splits[k]["nll"])) for k in ("heldout_book", "heldout_code"))
    return {"book": book, "code": code, "loss": (book + code) / 2,
            "docs": {k: [d["id"] for d in s.get("docs", [])] for k, s in splits.items()}}


def _describe_heldout(docs: Mapping[str, list[str]]) -> str:
    """``"book (1 document: milton/paradise_lost) and code (3 documents: stdlib/a.py, ...)"``."""
    parts = []
    for split in ("heldout_book", "heldout_code"):
        ids = list(docs.get(split, []))
        shown = ", ".join(ids[:4]) + (", …" if len(ids) > 4 else "")
        parts.append(f"{split.removeprefix('heldout_')} ({len(ids)} document{'s' if len(ids) != 1 else ''}"
                     f"{': ' + shown if ids else ''})")
    return " and ".join(parts)


def _union_docs(results: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per split the union of the document ids over runs (every run is evaluated on the same documents; a
    count never understates what was held out)."""
    out: dict[str, list[str]] = {}
    for r in results:
        for split, ids in r["docs"].items():
            have = out.setdefault(split, [])
            have += [i for i in ids if i not in have]
    return out


def params_at_loss(ladder: pd.DataFrame, loss: float) -> float | None:
    """Parameters at which the ladder (columns ``params``, ``loss``) reaches ``loss``, interpolated linearly in
    log P between neighbouring rungs; ``None`` outside its range."""
    y = ladder.sort_values("params")
    lp, ls = np.log(y["params"].to_numpy(float)), y["loss"].to_numpy(float)
    for i in range(len(ls) - 1):
        lo, hi = sorted((ls[i], ls[i + 1]))
        if lo <= loss <= hi and ls[i] != ls[i + 1]:
            return float(math.exp(lp[i] + (lp[i + 1] - lp[i]) * (ls[i] - loss) / (ls[i] - ls[i + 1])))
    return None


def fig5_derived_run(rung: str, ref_runs: Iterable[str]) -> str:
    """The ``run`` of Figure 5's derived rows of one rung: the rung, then the reference ladder, joined by ``|``."""
    return "|".join([rung, *ref_runs])


def summarize_fig5(families: Mapping[str, list[str]], *, run_root: Pathish, ppl_root: Pathish,
                   ref: str = "yoco", new: str = "yocou", replicas: Mapping[str, list[str]] | None = None) -> pd.DataFrame:
    """Study ``fig5``: ``families`` is ``studies.fig5`` (role → its ladder of runs; ``replicas``: run → its seed
    replicas); per run and seed the held-out loss (the ppl JSON's full-split ``nats_per_token``, mean of book and
    code) against parameters and activated parameters, its mean across seeds (:func:`seed_mean_rows`), and per
    ``new`` rung and seed k the parameter saving against the ``ref`` ladder of the k-th replicas:
    ``1 − P_new / P_ref(L)``, ``P_ref(L)`` the ``ref`` parameters reaching the same loss (:func:`params_at_loss`)."""
    run_root, ppl_root = Path(run_root), Path(ppl_root)
    info: dict[str, dict[str, Any]] = {}
    run_of: dict[str, str] = {}
    for role, runs in families.items():
        for base in runs:
            for k, r in enumerate(_reps(base, replicas)):
                sm = read_summary(run_root / r / "summary.json", require=("params", "active_params_per_token"))
                run_of[r] = base
                info[r] = {"role": role, "params": sm["params"], "active": sm["active_params_per_token"], "k": k,
                           "seed": run_seed(run_root / r), **_heldout(ppl_root / f"{r}.json")}
    where = "held-out " + _describe_heldout(_union_docs(info.values()))
    rows: list[dict[str, Any]] = []
    for r, x in info.items():
        base = dict(study="fig5", run=r, role=x["role"], seed=x["seed"], unit="nats")
        rows += [{**base, "metric": "final_loss", "axis": "params", "axis_value": x["params"], "value": x["loss"],
                  "detail": f"mean of the NLL on the {where}"},
                 {**base, "metric": "final_loss", "axis": "activated_params", "axis_value": x["active"],
                  "value": x["loss"], "detail": f"mean of the NLL on the {where}"},
                 {**base, "metric": "book.loss", "value": x["book"]},
                 {**base, "metric": "code.loss", "value": x["code"]}]
    rows += seed_mean_rows(rows, ("final_loss", "book.loss", "code.loss"), run_of, "fig5")
    for r, x in info.items():
        ladder = pd.DataFrame([{"params": y["params"], "loss": y["loss"]} for y in info.values()
                               if y["role"] == ref and y["k"] == x["k"]])
        if x["role"] != new or not len(ladder):
            continue
        ref_runs = [y for y, z in info.items() if z["role"] == ref and z["k"] == x["k"]]
        p = params_at_loss(ladder, x["loss"])
        base = dict(study="fig5", run=fig5_derived_run(r, ref_runs), role=f"{new}|{ref}", seed=x["seed"], axis="params",
                    axis_value=x["params"])
        rows.append({**base, "metric": "reached_reference_loss", "value": float(p is not None), "unit": "flag",
                     "detail": f"whether {r}'s held-out loss lies inside the {ref} ladder's range"})
        if p is not None:
            rows += [{**base, "metric": "yoco_params_at_loss", "value": p, "unit": "params",
                      "detail": f"{ref} parameters at {r}'s loss, linear in log P along its ladder"},
                     {**base, "metric": "param_saving", "value": 1 - x["params"] / p, "unit": "fraction",
                      "detail": "1 - params / yoco_params_at_loss"}]
    return tidy_frame(rows, where="tidy fig5")


def summarize_fig6(roles: Mapping[str, str], *, run_root: Pathish, ppl_root: Pathish,
                   alpha: float = FIG2_SMOOTHING, replicas: Mapping[str, list[str]] | None = None) -> pd.DataFrame:
    """Study ``fig6``: ``roles`` is ``studies.fig6`` (T1, T2, ... → run; ``replicas``: run → its seed replicas);
    per run and seed the held-out loss (the ppl JSON's full-split ``nats_per_token``) on axis ``T`` (the run's own
    loop count, :func:`run_loops`), its training curve and its train-time held-out curve against tokens, the
    means across seeds (:func:`seed_mean_rows`) and ``final_loss_change`` per consecutive T per seed k."""
    run_root, ppl_root = Path(run_root), Path(ppl_root)
    rows: list[dict[str, Any]] = []
    run_of: dict[str, str] = {}
    for role, base_run in roles.items():
        for k, r in enumerate(_reps(base_run, replicas)):
            d, run_of[r] = run_root / r, base_run
            t, seed, h = run_loops(d), run_seed(d), _heldout(ppl_root / f"{r}.json")
            base = dict(study="fig6", run=r, role=role, seed=seed, axis="T", axis_value=t, unit="nats", k=k)
            rows += [{**base, "metric": "final_loss", "value": h["loss"],
                      "detail": "mean of the held-out book and code NLL (ppl JSON, whole splits)"},
                     {**base, "metric": "book.loss", "value": h["book"]},
                     {**base, "metric": "code.loss", "value": h["code"]}]
            rows += _curve_rows("fig6", r, role, seed, read_curve(d), alpha, ("tokens",))
            rows += _heldout_rows("fig6", r, role, seed, read_heldout_curve(d), ("tokens",))
    rows += seed_mean_rows(rows, ("final_loss", "book.loss", "code.loss", "train_loss", *HELDOUT_CURVE_METRICS),
                           run_of, "fig6")
    final = sorted(((x["axis_value"], x) for x in rows if x["metric"] == "final_loss"), key=lambda tx: tx[0])
    for k in sorted({x["k"] for _, x in final}):
        fk = [(t, x) for t, x in final if x["k"] == k]
        for (_, a), (t, b) in zip(fk, fk[1:]):
            rows.append(dict(study="fig6", run=f"{b['run']}|{a['run']}", role=f"{b['role']}|{a['role']}",
                             seed=b["seed"] if a["seed"] == b["seed"] else NO_SEED, metric="final_loss_change",
                             axis="T", axis_value=t, value=b["value"] - a["value"], unit="nats",
                             detail=f"final_loss at T = {t:g} minus at T = {a['axis_value']:g}"))
    return tidy_frame([{k: v for k, v in r.items() if k != "k"} for r in rows], where="tidy fig6")


# ----------------------------------------------------------------------------------- held-out perplexity
def paper_wiki_ppl() -> dict[str, dict[str, float]]:
    """The paper's Wiki. ppl by printed model label (Table 3, then Table 5 for rows Table 3 does not print):
    ``{label: {"ppl": value, "ratio": value / Transformer's}}`` (no ``ratio`` when no Transformer row)."""
    from yocou.results.reported import load_table

    vals: dict[str, float] = {}
    for n in (3, 5):
        t = load_table(n)
        for _, r in t[t["column"] == "Wiki. ppl"].iterrows():
            vals.setdefault(str(r["model"]), float(r["value"]))
    base = vals.get("Transformer")
    return {m: {"ppl": v, **({"ratio": v / base} if base else {})} for m, v in vals.items()}


#: The trivial baselines of ``results/<scale>/ppl/baselines.json`` (:mod:`yocou.evaluation.baselines`), as tidy roles.
BASELINE_ROLES = ("unigram", "bigram_kn", "bigram_kn_budget")
#: Baselines a ``baselines.json`` must have (``bigram_kn_budget`` only when it was fitted with the budget).
REQUIRED_BASELINES = ("unigram", "bigram_kn")


def _ppl_split_rows(base: dict[str, Any], m: str, s: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of one split ``m`` (``book``, ``code``) of one ppl result ``s`` (a run's or a baseline's)."""
    loss = s.get("nats_per_token", s["nll"])
    se = s.get("stderr_nats")
    rows = [{**base, "metric": f"{m}.ppl", "value": s["ppl"], "unit": "ppl"},
            {**base, "metric": f"loss.{m}", "value": loss, "unit": "nats",
             "stderr": float("nan") if se is None else se}]
    if s.get("bits_per_byte") is not None:
        rows.append({**base, "metric": f"bpb.{m}", "value": s["bits_per_byte"], "unit": "bits/byte",
                     "stderr": float("nan") if se is None else se / math.log(2) * s["n_tokens"] / s["n_bytes"],
                     "n_bytes": s["n_bytes"]})
    return rows


def summarize_heldout_ppl(runs: Mapping[str, Pathish | Iterable[Pathish]], *, ppl_root: Pathish,
                          baseline: str = "transformer", baselines: Pathish | None = None) -> pd.DataFrame:
    """Study ``heldout_ppl``: ``runs`` is role → run folder, or role → its run folders (the base run and its seed
    replicas, in that order; the core roles). Per run and split of its ppl JSON: ``<split>.ppl`` (unit ``ppl``),
    ``loss.<split>`` (nats/token, stderr = the JSON's ``stderr_nats``, unit ``nats``) and, where the JSON has
    bytes, ``bpb.<split>`` (bits/byte, stderr = stderr_nats / ln 2 · n_tokens / n_bytes, unit ``bits/byte``);
    n = tokens scored, seed = the run's training seed (:func:`run_seed`). Derived role ``<role>|<baseline>``:
    ``<split>.ppl_ratio`` (ppl / the ``baseline`` role's run of the same replica index, unit ``ratio``).
    ``baselines`` (``ppl/baselines.json``, :mod:`yocou.evaluation.baselines`): the same rows for roles ``unigram`` and
    ``bigram_kn`` and, where fitted, ``bigram_kn_budget`` (run = the role, seed = NO_SEED). ``<split>`` is the
    JSON's split without ``heldout_``.
    """
    ppl_root = Path(ppl_root)
    rows: list[dict[str, Any]] = []
    res: dict[str, list[tuple[str, int, dict]]] = {}  # role -> [(run, seed, splits)] in replica order
    for role, ds in runs.items():
        for d in ([ds] if isinstance(ds, (str, Path)) else list(ds)):
            d = Path(d)
            seed = run_seed(d)
            splits = read_ppl(ppl_root / f"{d.name}.json")["splits"]
            res.setdefault(role, []).append((d.name, seed, splits))
            for split, s in splits.items():
                ids = [x["id"] for x in s.get("docs", [])]
                base = dict(study="heldout_ppl", run=d.name, role=role, seed=seed, n=s["n_tokens"], split=split,
                            n_docs=len(ids), seq_len=s["seq_len"], max_tokens_per_doc=s.get("max_tokens_per_doc"),
                            max_tokens=s.get("max_tokens"),
                            detail=", ".join(ids[:3]) + (", ..." if len(ids) > 3 else ""))
                rows += _ppl_split_rows(base, split.removeprefix("heldout_"), s)
    if baseline in res:
        for role, reps in res.items():
            for k, (run, seed, splits) in enumerate(reps):
                if k >= len(res[baseline]):
                    continue
                brun, _, bsplits = res[baseline][k]
                for split, s in splits.items():
                    b = bsplits.get(split)
                    if b is None:
                        continue
                    rows.append(dict(study="heldout_ppl", run=f"{run}|{brun}", role=f"{role}|{baseline}",
                                     seed=seed, metric=f"{split.removeprefix('heldout_')}.ppl_ratio",
                                     value=s["ppl"] / b["ppl"], unit="ratio", split=split,
                                     detail=f"ppl / {baseline}'s ppl ({brun})"))
    if baselines is not None:
        bl = read_json(Path(baselines), what="baselines result")
        for split, sp in (bl.get("splits") or {}).items():
            for role in BASELINE_ROLES:
                s = sp.get(role)
                if s is None and role not in REQUIRED_BASELINES:
                    continue
                if not isinstance(s, Mapping):
                    raise ResultFileError(Path(baselines), f"splits.{split}", f"no {role!r} result")
                base = dict(study="heldout_ppl", run=role, role=role, seed=NO_SEED, n=s["n_tokens"], split=split,
                            n_docs=sp.get("n_docs"), seq_len=sp.get("seq_len"), max_tokens=sp.get("max_tokens"),
                            detail=_baseline_detail(bl, role))
                rows += _ppl_split_rows(base, split.removeprefix("heldout_"), {**s, "nll": s["nats_per_token"]})
    return tidy_frame(rows, where="tidy heldout_ppl")


def _baseline_detail(bl: Mapping[str, Any], role: str) -> str:
    d = (bl.get("models") or {}).get(role) or {}
    if role == "unigram":
        return "add-one unigram on train.bin"
    if role == "bigram_kn_budget":
        b = bl.get("budget") or {}
        return (f"interpolated Kneser-Ney bigram on one run's training windows ({d.get('n_windows', '?')} windows "
                f"of {b.get('seq_len', '?')} + 1 tokens, seed {b.get('seed', '?')}), D = "
                f"{d.get('discount', float('nan')):.3f}")
    return (f"interpolated Kneser-Ney bigram on train.bin, D = {d.get('discount', float('nan')):.3f} "
            f"(lower order {d.get('discount_lower', float('nan')):.3f}; Ney's n1/(n1+2 n2))")


# -------------------------------------------------------------------------------------------------- Figure 4
def summarize_fig4(runs: Mapping[str, Pathish | Iterable[Pathish]], *, longppl_root: Pathish) -> pd.DataFrame:
    """Study ``fig4``: ``runs`` is role → run folder, or role → its run folders (the base run and its seed
    replicas; the core roles); per split of each run's long-context result the cumulative and final-span
    perplexity against the input length (``span_ppl`` where a full span exists), seed = the run's training seed."""
    rows: list[dict[str, Any]] = []
    for role, d in ((role, Path(d)) for role, ds in runs.items()
                    for d in ([ds] if isinstance(ds, (str, Path)) else list(ds))):
        res = read_longppl(Path(longppl_root) / f"{d.name}.json")
        seed = run_seed(d)
        for split, s in res["splits"].items():
            ids = list(dict.fromkeys(x["id"] for x in s["docs"]))
            for c in s["curves"]:
                base = dict(study="fig4", run=d.name, role=role, seed=seed, axis="seq_len", axis_value=c["length"],
                            unit="ppl", n=c.get("n_docs", s["n_docs"]), extrapolated=bool(c["extrapolated"]),
                            train_seq_len=res["train_seq_len"], span=res["span"], split=split,
                            detail=", ".join(ids))
                rows.append({**base, "metric": f"{split}.cum_ppl", "value": c["cum_ppl"]})
                if c.get("span_ppl") is not None:
                    rows.append({**base, "metric": f"{split}.span_ppl", "value": c["span_ppl"]})
    return tidy_frame(rows, where="tidy fig4")


# -------------------------------------------------------------------------------------------------- Figure 8
def summarize_fig8(runs: Mapping[str, Pathish], *, angular_root: Pathish) -> pd.DataFrame:
    """Study ``fig8``: ``runs`` is role → run folder (the fig8 roles); per layer application of each run the
    angular distance, per held-out split and for their token-weighted mean (``angular_distance``)."""
    rows: list[dict[str, Any]] = []
    for role, d in runs.items():
        d = Path(d)
        res = read_angular(Path(angular_root) / f"{d.name}.json")
        seed = run_seed(d)
        for split, s in {**res["splits"], "all": res["all"]}.items():
            docs = s.get("docs", [])
            for app, dist in zip(res["applications"], s["distance"]):
                rows.append(dict(
                    study="fig8", run=d.name, role=role, seed=seed,
                    metric="angular_distance" if split == "all" else f"{split}.angular_distance",
                    axis="application", axis_value=app["index"], value=dist, n=s["n_tokens"], unit="angle/pi",
                    split=split,
                    detail=f"{app['kind']} stage {app['stage']} loop {app['loop'] + 1} layer {app['layer'] + 1}",
                    kind=app["kind"], stage=app["stage"], loop=app["loop"] + 1, layer=app["layer"] + 1,
                    window=app.get("window"), seq_len=res["seq_len"], device=str(res.get("device", "cpu")),
                    n_windows=s.get("n_windows"), n_docs=s.get("n_docs"),
                    docs=", ".join(docs[:4]) + (", …" if len(docs) > 4 else "")))
        # mean distance of each (stage, loop) stretch, on the token-weighted mean of the splits
        apps = pd.DataFrame([{"stage": a["stage"], "loop": a["loop"] + 1, "kind": a["kind"], "d": x}
                             for a, x in zip(res["applications"], res["all"]["distance"])])
        for (stage, loop), g in apps.groupby(["stage", "loop"], sort=False):
            rows.append(dict(study="fig8", run=d.name, role=role, seed=seed, metric="stage_mean_angular_distance",
                             axis="stage", axis_value=stage, axis2="loop", axis2_value=loop, value=float(g["d"].mean()),
                             n=len(g), unit="angle/pi", kind=g["kind"].iloc[0], stage=stage, loop=loop,
                             stage_loops=int(apps[apps["stage"] == stage]["loop"].max()),
                             detail=f"mean of angular_distance over the {len(g)} applications of stage {stage}, "
                                    f"loop {loop}"))
    return tidy_frame(rows, where="tidy fig8")


# ------------------------------------------------------------------------------------------------ dispatcher
#: The studies of this module, in the order the pipeline writes them.
STUDIES = ("runs", "fig2", "heldout_ppl", "fig4", "fig5", "fig6", "fig8")


def summarize_study(study: str, config: Mapping[str, Any], *, run_root: Pathish, ppl_root: Pathish | None = None,
                    longppl_root: Pathish | None = None, angular_root: Pathish | None = None,
                    baselines: Pathish | None = None) -> pd.DataFrame:
    """The tidy table of ``study`` (one of :data:`STUDIES`), its roles from ``config``
    (:func:`yocou.results.tidy.study_roles`: ``core`` for fig2, heldout_ppl and fig4; ``studies.fig8``, else ``core``, for
    fig8), its runs under ``run_root`` (``runs/<scale>/models``) and their results under the given roots. For
    ``runs`` the config lists the runs (``config["runs"]``). For ``heldout_ppl`` and ``fig4``,
    ``config["replicas"]`` (run → ``[run, run_seed1, ...]``, optional) adds each core run's seed replicas under its
    role; ``baselines`` (the ``ppl/baselines.json``, optional) adds the unigram and Kneser-Ney bigram rows.

    Raises:
        ValueError: an unknown study, or a root the study needs is not given.
    """
    from yocou.results.tidy import study_roles

    def need(root: Pathish | None, name: str) -> Path:
        if root is None:
            raise ValueError(f"summarize {study}: {name} is required")
        return Path(root)

    run_root = Path(run_root)

    def dirs(roles: Mapping[str, Any]) -> dict[str, Path]:
        return {role: run_root / str(run) for role, run in roles.items()}

    if study == "runs":
        return summarize_runs({r: run_root / r for r in config["runs"]})
    def reps(roles: Mapping[str, Any]) -> dict[str, list[str]]:
        runs = [r for v in roles.values() for r in ([v] if isinstance(v, str) else v)]
        return {r: replicas(config, r) for r in runs}

    if study == "fig2":
        return summarize_fig2(dirs(study_roles(config, "core")), replicas=reps(study_roles(config, "core")))

    def with_replicas(roles: Mapping[str, Any]) -> dict[str, list[Path]]:  # role -> its run and seed replicas
        listed = config.get("replicas") or {}
        return {role: [run_root / r for r in listed.get(str(run), [str(run)])] for role, run in roles.items()}

    if study == "heldout_ppl":
        return summarize_heldout_ppl(with_replicas(study_roles(config, "core")), ppl_root=need(ppl_root, "ppl_root"),
                                     baselines=baselines)
    if study == "fig4":
        return summarize_fig4(with_replicas(study_roles(config, "core")),
                              longppl_root=need(longppl_root, "longppl_root"))
    if study == "fig5":
        return summarize_fig5(study_roles(config, "fig5"), run_root=run_root, ppl_root=need(ppl_root, "ppl_root"),
                              replicas=reps(study_roles(config, "fig5")))
    if study == "fig6":
        return summarize_fig6(study_roles(config, "fig6"), run_root=run_root, ppl_root=need(ppl_root, "ppl_root"),
                              replicas=reps(study_roles(config, "fig6")))
    if study == "fig8":
        has = "fig8" in (config.get("studies") or {})
        return summarize_fig8(dirs(study_roles(config, "fig8" if has else "core")),
                              angular_root=need(angular_root, "angular_root"))
    raise ValueError(f"summarize: unknown training-side study {study!r}; expected one of {list(STUDIES)}")
