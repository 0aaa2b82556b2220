"""Summarize steps of the efficiency area (paper Figure 7, Tables 1, 8, 9, 10): the profile JSON
(:mod:`yocou.evaluation.bench.profile`), the KV measurement (``yocou kv-measure``) and the paper's 1.3B configuration →
tidy rows (:mod:`yocou.results.tidy`). Every number the renderers print is computed here: throughputs and their spread
over repeats, ratios between variants (ours and the paper's), growth exponents (Table 1) and the KV formula.

Studies (tidy tables, :mod:`yocou.results.tidy`):

* ``efficiency`` (:func:`summarize_efficiency`): per core role and N (axis ``seq_len``), seed -1 (random-init
  weights): ``prefill_tokens_per_s``, ``decode_tokens_per_s`` (stderr: half the range over repeats, n: repeats),
  ``kv_mib``; also the raw ``prefill_s``, ``decode_s``, ``ttft_s``, ``prefill_cpu_s``, ``decode_cpu_s`` (s),
  ``kv_bytes`` (measured), ``kv_bytes_formula`` (docs/design.md section 5), ``peak_mem_bytes`` (bytes) and
  ``loadavg_1m_before``/``loadavg_1m_after`` (unit ``load``). Extra columns: ``loaded`` (a 1-minute load average
  above the machine's CPU count), ``device``, ``device_kind`` (``CPU``/``GPU``), ``device_label``, ``dtype``,
  ``n_threads``, ``n_cpus``, ``mem_kind``, ``prompt_len``, ``n_decode``, ``kv_equal``. Each repeat's seconds
  of :data:`REPEATED` as ``<metric>.repeat`` (``axis2`` = ``repeat``, its index). Rows profiled at the largest
  batch that fits (``batch_rule`` ``max``) as ``max_batch.<metric>`` for ``batch_size``, the two throughputs and
  ``peak_mem_bytes``; extra columns ``decode_mode`` (``eager``/``graphs``) and ``batch_size`` on every row.
* ``efficiency_derived`` (:func:`summarize_efficiency_derived`): ``prefill_ratio``, ``decode_ratio``,
  ``kv_ratio`` (role ``a|b``, axis ``seq_len``; axis ``""``: the mean over the measured lengths), the paper's
  ``paper.prefill_ratio``/``paper.decode_ratio``/``paper.kv_ratio`` (run ``paper``, Tables 8-10) likewise, and per
  core role ``exponent.prefill``, ``exponent.decode``, ``exponent.kv``, ``exponent.prefill_cpu`` (axis ``""``,
  ``detail`` the fit range, extra columns ``fit_lo``/``fit_hi``; stderr: half the range of the same fit on each
  repeat's seconds, when there are two or more) plus the linear KV fit ``kv_bytes_per_token``
  and ``kv_fixed_bytes`` over every N.
* ``kv`` (:func:`summarize_kv`): ``kv_bytes`` measured and ``kv_bytes_formula`` per core role and N.
* ``table10`` (:func:`summarize_table10`): ``kv_mib_formula`` at the paper's 1.3B configuration over
  :data:`yocou.results.names.PAPER_LENGTHS`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from yocou.results.names import PAPER_LENGTHS, paper_row
from yocou.results.readers import read_json, read_kv_measure, read_profile
from yocou.results.tidy import NO_SEED, read_tidy, role_of, select, tidy_frame

__all__ = ["MIB", "RATIOS", "summarize_efficiency", "summarize_efficiency_derived", "summarize_kv",
           "summarize_table10", "device_label", "fit_range"]

MIB = 2 ** 20
# (a, b): throughput or bytes of role a over role b (Tables 8-10's comparisons; docs/design.md section 8)
RATIOS = (("yocou", "yoco"), ("rins", "transformer"), ("yoco", "transformer"), ("yocou", "transformer"))
# tidy ratio metric -> (efficiency metric it divides, the paper's table)
RATIO_METRICS = {"prefill_ratio": ("prefill_tokens_per_s", 8), "decode_ratio": ("decode_tokens_per_s", 9),
                 "kv_ratio": ("kv_bytes", 10)}
# Table 1 exponent metric -> efficiency metric fitted against N
REPEATED = ("prefill_s", "decode_s", "prefill_cpu_s")  # metrics also written per repeat (``<metric>.repeat``)
EXPONENTS = {"exponent.prefill": "prefill_s", "exponent.decode": "decode_s", "exponent.kv": "kv_bytes",
             "exponent.prefill_cpu": "prefill_cpu_s"}


def _core_runs(roles: Mapping[str, Any]) -> dict[str, str]:
    """run -> role of a ``{role: run}`` mapping (:func:`yocou.results.tidy.study_roles` of ``core``)."""
    return role_of(roles)


def device_label(row: Mapping[str, Any], prov: Mapping[str, Any]) -> str:
    """``"CPU (model, 2 threads, bf16)"`` or ``"GPU (name, bf16)"`` of a profile row and the profile's provenance."""
    dev, dtype = str(row["device"]), str(row["dtype"])
    if dev.startswith("cuda"):
        return f"GPU ({(prov.get('device') or {}).get('cuda') or dev}, {dtype})"
    cpu = (prov.get("device") or {}).get("cpu_model", "")
    return f"CPU ({cpu}, {int(row['n_threads'])} threads, {dtype})"


def _half_range(vals: list[float]) -> float:
    """Half the range of ``vals``; NaN for fewer than two (one repeat estimates no spread)."""
    return (max(vals) - min(vals)) / 2 if len(vals) >= 2 else math.nan


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def summarize_efficiency(profile: str | Path, roles: Mapping[str, Any]) -> pd.DataFrame:
    """Tidy study ``efficiency`` from ``profile.json`` (validated by :func:`yocou.results.readers.read_profile`).

    Args:
        profile: the profile JSON.
        roles: ``{role: run}`` of the core roles (``study_roles(config, "core")``); profile rows of other runs
            are left out.

    Raises:
        ValueError: a role's run has no row in the profile (naming the file).
    """
    rows, prov = read_profile(profile)
    run_role = _core_runs(roles)
    missing = sorted(set(run_role) - {r["variant"] for r in rows})
    if missing:
        raise ValueError(f"{profile}: no profile rows for run(s) {missing} of the core roles")
    n_cpus_prov = (prov.get("device") or {}).get("n_cpus")
    n_cpus = int(n_cpus_prov or max(int(r["n_threads"]) for r in rows))
    order = {run: i for i, run in enumerate(run_role)}
    out: list[dict[str, Any]] = []
    for r in sorted((r for r in rows if r["variant"] in run_role), key=lambda r: (order[r["variant"]], r["seq_len"])):
        run = r["variant"]
        if r.get("batch_rule", "fixed") == "max":
            for metric, unit in (("batch_size", "sequences"), ("prefill_tokens_per_s", "tokens/s"),
                                 ("decode_tokens_per_s", "tokens/s"), ("peak_mem_bytes", "bytes")):
                out.append({"study": "efficiency", "run": run, "role": run_role[run], "seed": NO_SEED,
                            "metric": f"max_batch.{metric}", "axis": "seq_len", "axis_value": float(r["seq_len"]),
                            "value": float(r[metric]), "unit": unit, "device": str(r["device"]),
                            "device_label": device_label(r, prov), "dtype": str(r["dtype"]),
                            "decode_mode": str(r.get("decode_mode", "eager")),
                 **({"batch_size": int(r["batch_size"])} if "batch_size" in r else {})})
            continue
        reps = r.get("repeats") or []
        loads = [r.get(k) for k in ("loadavg_1m_before", "loadavg_1m_after") if _finite(r.get(k))]
        extra = {"loaded": bool(loads and max(loads) > n_cpus), "device": str(r["device"]),
                 "device_kind": "GPU" if str(r["device"]).startswith("cuda") else "CPU",
                 "device_label": device_label(r, prov), "dtype": str(r["dtype"]), "n_threads": int(r["n_threads"]),
                 "n_cpus": n_cpus, "mem_kind": str(r["mem_kind"]), "prompt_len": int(r["prompt_len"]),
                 "n_decode": int(r["n_decode"]), "kv_equal": bool(r["kv_equal"]),
                 "decode_mode": str(r.get("decode_mode", "eager")),
                 **({"batch_size": int(r["batch_size"])} if "batch_size" in r else {})}
        nrep = float(r["n_repeats"])

        def rep(key: str, scale: float | None = None) -> list[float]:
            """Each repeat's ``key`` (seconds), or with ``scale`` the throughput scale / seconds."""
            vals = [x.get(key) for x in reps]
            if not vals or not all(_finite(v) and v > 0 for v in vals):
                return []
            return [scale / v for v in vals] if scale is not None else list(vals)

        metrics = [
            ("prefill_tokens_per_s", r["prefill_tokens_per_s"],
             _half_range(rep("prefill_s", r["prefill_tokens_per_s"] * r["prefill_s"])), nrep, "tokens/s"),
            ("decode_tokens_per_s", r["decode_tokens_per_s"],
             _half_range(rep("decode_s", r["decode_tokens_per_s"] * r["decode_s"])), nrep, "tokens/s"),
            ("kv_mib", r["kv_bytes_measured"] / MIB, math.nan, math.nan, "MiB"),
            ("kv_bytes", r["kv_bytes_measured"], math.nan, math.nan, "bytes"),
            ("kv_bytes_formula", r["kv_bytes_analytic"], math.nan, math.nan, "bytes"),
            ("prefill_s", r["prefill_s"], _half_range(rep("prefill_s")), nrep, "s"),
            ("decode_s", r["decode_s"], _half_range(rep("decode_s")), nrep, "s"),
            ("ttft_s", r["ttft_s"], _half_range(rep("ttft_s")), nrep, "s"),
            ("peak_mem_bytes", r["peak_mem_bytes"], math.nan, nrep, "bytes"),
        ]
        for k in ("prefill_cpu_s", "decode_cpu_s"):
            if _finite(r.get(k)):
                metrics.append((k, r[k], _half_range(rep(k)), nrep, "s"))
        for k in ("loadavg_1m_before", "loadavg_1m_after"):
            if _finite(r.get(k)):
                metrics.append((k, r[k], math.nan, math.nan, "load"))
        for metric, value, se, n, unit in metrics:
            out.append({"study": "efficiency", "run": run, "role": run_role[run], "seed": NO_SEED, "metric": metric,
                        "axis": "seq_len", "axis_value": float(r["seq_len"]), "value": float(value), "stderr": se,
                        "n": n, "unit": unit, **extra})
        for k in REPEATED:  # each repeat's seconds: the spread of Table 1's fitted exponents over repeats
            for i, v in enumerate(rep(k)):
                out.append({"study": "efficiency", "run": run, "role": run_role[run], "seed": NO_SEED,
                            "metric": f"{k}.repeat", "axis": "seq_len", "axis_value": float(r["seq_len"]),
                            "axis2": "repeat", "axis2_value": float(i), "value": float(v), "unit": "s", **extra})
    return tidy_frame(out, where=f"efficiency from {profile}")


def _frame(efficiency: pd.DataFrame | str | Path) -> pd.DataFrame:
    return efficiency if isinstance(efficiency, pd.DataFrame) else read_tidy(efficiency)


def fit_range(lengths: Iterable[float], lo: int, hi: int) -> tuple[int, int]:
    """The ``[lo, hi]`` of the Table 1 fit inside the measured lengths: ``hi`` capped at the largest N; ``lo``
    kept when some N reaches it and it is below ``hi``, else the second-largest N (as Table 1 always did)."""
    ns = sorted({int(n) for n in lengths})
    hi = min(int(hi), ns[-1])
    lo = int(lo) if any(n >= lo for n in ns) and lo < hi else ns[-2]
    return lo, hi


def summarize_efficiency_derived(efficiency: pd.DataFrame | str | Path, fit: Mapping[str, int]) -> pd.DataFrame:
    """Tidy study ``efficiency_derived``: ratios between roles (:data:`RATIOS`; ours and the paper's Tables 8-10)
    and Table 1's growth exponents (:func:`yocou.evaluation.bench.profile.fit_exponent` over :func:`fit_range` of
    ``fit = {lo, hi}``, the config's ``eval.profile.fit``) with the linear KV fit
    (:func:`yocou.evaluation.bench.profile.fit_linear`).

    Args:
        efficiency: the tidy ``efficiency`` table (a frame or its file).
        fit: ``{"lo": N, "hi": N}``.
    """
    from yocou.evaluation.bench.profile import fit_exponent, fit_linear
    from yocou.results.reported import load_table

    eff_all = _frame(efficiency)
    eff_all = eff_all[eff_all["axis"] == "seq_len"]
    eff = eff_all[~eff_all["metric"].str.endswith(".repeat")]
    role_run = dict(zip(eff["role"], eff["run"]))
    out: list[dict[str, Any]] = []

    def ratio_rows(metric: str, run: str, role: str, by_n: dict[float, float], detail: str) -> None:
        for n in sorted(by_n):
            out.append({"study": "efficiency_derived", "run": run, "role": role, "metric": metric,
                        "axis": "seq_len", "axis_value": float(n), "value": by_n[n], "unit": "ratio"})
        if by_n:
            out.append({"study": "efficiency_derived", "run": run, "role": role, "metric": metric, "axis": "",
                        "value": sum(by_n.values()) / len(by_n), "n": float(len(by_n)), "unit": "ratio",
                        "detail": detail})

    for metric, (src, table) in RATIO_METRICS.items():
        paper = load_table(table)
        for a, b in RATIOS:
            if a in role_run and b in role_run:
                va = select(eff, role=a, metric=src).set_index("axis_value")["value"]
                vb = select(eff, role=b, metric=src).set_index("axis_value")["value"]
                ratio_rows(metric, f"{role_run[a]}|{role_run[b]}", f"{a}|{b}",
                           {n: float(va[n] / vb[n]) for n in va.index if n in vb.index},
                           "mean over the measured lengths")
            pa, pb = paper_row(f"table{table}", a), paper_row(f"table{table}", b)
            if pa and pb:
                ga = paper[paper["model"] == pa].set_index("seq_len")["value"]
                gb = paper[paper["model"] == pb].set_index("seq_len")["value"]
                ratio_rows(f"paper.{metric}", "paper", f"{a}|{b}",
                           {float(n): float(ga[n] / gb[n]) for n in ga.index if n in gb.index},
                           f"the paper's Table {table} (GPU, 1.3B), mean over its lengths")
    if eff.empty:
        return tidy_frame(out, where="efficiency_derived")
    lo, hi = fit_range(eff["axis_value"], int(fit["lo"]), int(fit["hi"]))
    for role, run in role_run.items():
        for metric, src in EXPONENTS.items():
            g = select(eff, role=role, metric=src).sort_values("axis_value")
            n_all = len(select(eff, role=role, metric="prefill_s"))
            if g.empty or len(g) < n_all:  # e.g. CPU seconds not recorded at every N: no fit
                continue
            n_in = int(((g["axis_value"] >= lo) & (g["axis_value"] <= hi)).sum())
            # the spread: the same fit on each repeat's seconds (half the range of the fitted exponents)
            reps = select(eff_all, role=role, metric=f"{src}.repeat")
            slopes = [fit_exponent(list(x["axis_value"]), list(x["value"]), lo=lo, hi=hi)
                      for _, x in reps.sort_values("axis_value").groupby("axis2_value")
                      if len(x) == len(g)] if len(reps) else []
            out.append({"study": "efficiency_derived", "run": run, "role": role, "metric": metric, "axis": "",
                        "value": fit_exponent(list(g["axis_value"]), list(g["value"]), lo=lo, hi=hi),
                        "stderr": _half_range(slopes) if len(slopes) >= 2 else math.nan,
                        "n": float(n_in), "unit": "exponent", "detail": f"least-squares slope of log {src} against "
                        f"log N for N in [{lo}, {hi}]" + (f"; stderr: half the range of the same fit on each of "
                                                         f"{len(slopes)} repeats" if len(slopes) >= 2 else ""),
                        "fit_lo": lo, "fit_hi": hi})
        g = select(eff, role=role, metric="kv_bytes").sort_values("axis_value")
        slope, icpt = fit_linear(list(g["axis_value"]), list(g["value"]))
        for metric, v in (("kv_bytes_per_token", slope), ("kv_fixed_bytes", icpt)):
            out.append({"study": "efficiency_derived", "run": run, "role": role, "metric": metric, "axis": "",
                        "value": float(v), "n": float(len(g)), "unit": "bytes",
                        "detail": "least-squares kv_bytes = kv_fixed_bytes + kv_bytes_per_token * N over every "
                                  "measured N",
                        "fit_lo": int(g["axis_value"].min()), "fit_hi": int(g["axis_value"].max())})
    return tidy_frame(out, where="efficiency_derived")


def _model_config(run_config: str | Path):
    from yocou.model.config import config_from_dict

    rc = read_json(run_config, what="run config")
    if not isinstance(rc, dict) or "model" not in rc:
        raise ValueError(f"{run_config}: missing top-level key 'model' (a run_config.json of the pipeline)")
    return config_from_dict(rc["model"])


def summarize_kv(kv_measure: str | Path, roles: Mapping[str, Any],
                 run_configs: Mapping[str, str | Path] | None = None) -> pd.DataFrame:
    """Tidy study ``kv``: measured cache bytes after a prefill of N tokens (``kv_measure.json``) and the
    formula of docs/design.md section 5 (:func:`yocou.model.accounting.kv_cache_bytes`) per core role and N.

    Args:
        kv_measure: ``kv_measure.json`` (:func:`yocou.results.readers.read_kv_measure`).
        roles: ``{role: run}`` of the core roles.
        run_configs: ``{run: run_config.json}``: the formula is evaluated from the run's model config; a run
            without one takes the file's ``analytic_bytes``.

    Raises:
        ValueError: a role's run has no row in the file.
    """
    from yocou.model.accounting import kv_cache_bytes

    rows = read_kv_measure(kv_measure)
    run_role = _core_runs(roles)
    missing = sorted(set(run_role) - {r["variant"] for r in rows})
    if missing:
        raise ValueError(f"{kv_measure}: no rows for run(s) {missing} of the core roles")
    cfgs = {run: _model_config(p) for run, p in (run_configs or {}).items() if run in run_role}
    order = {run: i for i, run in enumerate(run_role)}
    out = []
    for r in sorted((r for r in rows if r["variant"] in run_role), key=lambda r: (order[r["variant"]], r["seq_len"])):
        run, n = r["variant"], int(r["seq_len"])
        formula = (kv_cache_bytes(cfgs[run], n, dtype=r["dtype"]) if run in cfgs else int(r["analytic_bytes"]))
        for metric, v in (("kv_bytes", int(r["measured_bytes"])), ("kv_bytes_formula", formula)):
            out.append({"study": "kv", "run": run, "role": run_role[run], "seed": NO_SEED, "metric": metric,
                        "axis": "seq_len", "axis_value": float(n), "value": float(v), "unit": "bytes",
                        "dtype": str(r["dtype"]), "equal": int(r["measured_bytes"]) == formula})
    return tidy_frame(out, where=f"kv from {kv_measure}")


def summarize_table10(roles: Mapping[str, Any], presets: Mapping[str, str], *, size: str = "paper-1.3b",
                      dtype: str = "bf16", lengths: Iterable[int] = PAPER_LENGTHS) -> pd.DataFrame:
    """Tidy study ``table10``: KV MiB per sequence from the formula (docs/design.md section 5) at the paper's 1.3B
    configuration (preset ``<preset>-paper-1.3b``: L = 20, 4 KV heads x 128, W = 512, T = 3, RINS A^3 B) over
    the paper's lengths.

    Args:
        roles: ``{role: run}`` of the core roles.
        presets: ``{run: preset}`` (the config's ``variants.<run>.preset``).
    """
    from yocou.model.accounting import kv_cache_bytes
    from yocou.model.config import preset

    out = []
    for run, role in _core_runs(roles).items():
        name = f"{presets[run]}-{size}"
        cfg = preset(name)
        for n in lengths:
            out.append({"study": "table10", "run": run, "role": role, "seed": NO_SEED, "metric": "kv_mib_formula",
                        "axis": "seq_len", "axis_value": float(n),
                        "value": kv_cache_bytes(cfg, int(n), dtype=dtype) / MIB, "unit": "MiB",
                        "config": name, "dtype": dtype})
    return tidy_frame(out, where="table10")
