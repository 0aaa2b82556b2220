"""Summarize step of the paper-shape efficiency study (:mod:`yocou.evaluation.bench.paper_shape`): ``raw.json`` → the tidy
study ``efficiency_paper_shape`` (:mod:`yocou.results.tidy`), every number the renderer and the audit print.

Rows (run = role = the variant; seed -1; axis ``seq_len`` = N):

* decode, measured: ``decode_tokens_per_s`` (stderr: half the range of the repeats' throughputs; n: repeats),
  ``decode_ms_per_token``, ``decode_read_bytes`` (the bytes a step must read with a looped stage's weights read at
  every loop; :func:`yocou.evaluation.bench.hardware.decode_read_bytes`), ``decode_read_bytes_once`` (weights once),
  ``decode_bytes_per_s`` (read bytes x steps/s), ``decode_bandwidth_fraction`` and
  ``decode_bandwidth_fraction_once`` (over the run's triad bandwidth), ``kv_bytes`` (measured), ``kv_bytes_formula``
  (:func:`yocou.model.accounting.kv_cache_bytes`), ``kv_gib``, ``loadavg_1m_before``/``_after``;
* decode, not fitted in memory: ``decode_needs_bytes`` and ``decode_available_bytes`` (column ``status``);
* prefill: ``prefill_tokens_per_s`` (stderr as above), ``prefill_s``, ``prefill_flop`` (useful FLOPs with early
  exit, :func:`yocou.evaluation.bench.hardware.prefill_flops`), ``prefill_flop_per_s``, ``prefill_peak_fraction`` (over the
  run's fp32 matmul FLOP/s);
* the filled-against-prefilled check at one N: ``check_prefilled_ms_per_token``, ``check_filled_ms_per_token``
  (stderr: half ranges), ``check_filled_over_prefilled``, ``check_within_spread`` (1 when the two repeat ranges
  overlap), ``check_kv_bytes_equal`` (1 when both caches have the formula's bytes);
* ``decode_retained``: decode tokens/s at each N over the variant's own at the shortest N (stderr by the delta
  method): how steeply its decode falls with the context;
* ratios (role ``a|b``, run joined likewise): ``decode_ratio`` at each N both have, ``prefill_ratio`` at each
  prefill length (stderr by the delta method from the half ranges), and the paper's ``paper.decode_ratio`` (Table 9,
  at the same N) and ``paper.prefill_ratio`` (Table 8, every printed length; axis ``""``: their mean) under run
  ``paper``;
* the machine (run = role = ``machine``): ``triad_bytes_per_s`` and ``matmul_flop_per_s`` of each limit
  measurement (axis ``limit_measurement``, its index; ``detail``: when), and their medians
  ``bandwidth_bytes_per_s`` and ``peak_flop_per_s`` (axis ``""``; stderr half the range), which the fractions use.

Extra columns: ``status``, ``device_label``, ``dtype``, ``n_threads``, ``detail``.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from yocou.results.readers import read_json
from yocou.results.tidy import NO_SEED, tidy_frame

__all__ = ["BATCHED_STUDY", "RATIOS", "STUDY", "VARIANTS", "decode_rate", "read_raw", "summarize_batched",
           "summarize_paper_shape"]

STUDY = "efficiency_paper_shape"
BATCHED_STUDY = "efficiency_paper_shape_batched"
RATIOS = (("yocou", "yoco"), ("rins", "transformer"), ("yoco", "transformer"), ("yocou", "transformer"))
VARIANTS = ("transformer", "yoco", "rins", "yocou")
GIB = 2 ** 30


def _pos(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def read_raw(path: str | Path) -> dict[str, Any]:
    """``raw.json`` of :func:`yocou.evaluation.bench.paper_shape.run_study`, validated: rows with a known variant and kind,
    unique (variant, kind, N, cache); measured rows with positive finite seconds; limits with positive rates.

    Raises:
        ValueError: naming the file and the first bad entry.
    """
    d = read_json(path, what="paper-shape study result")
    if not isinstance(d, dict) or not isinstance(d.get("rows"), list) or not isinstance(d.get("limits"), list):
        raise ValueError(f"{path}: expected a mapping with 'rows' and 'limits' lists (python -m "  # noqa: TRY004
                         "yocou.evaluation.bench.paper_shape)")
    seen = set()
    for i, r in enumerate(d["rows"]):
        where = f"{path}: rows[{i}]"
        if not isinstance(r, dict) or r.get("variant") not in VARIANTS or r.get("kind") not in (
                "decode", "prefill", "decode_check"):
            raise ValueError(f"{where}: expected a variant of {list(VARIANTS)} and a kind decode/prefill/"
                             f"decode_check, got {r!r:.120}")
        if not isinstance(r.get("seq_len"), int) or r["seq_len"] < 1:
            raise ValueError(f"{where}: seq_len must be a positive integer, got {r.get('seq_len')!r}")
        if "batch" in r and (isinstance(r["batch"], bool) or not isinstance(r["batch"], int) or r["batch"] < 1):
            raise ValueError(f"{where}: batch must be a positive integer, got {r['batch']!r}")
        key = (r["variant"], r["kind"], r["seq_len"], r.get("cache"), r.get("batch", 1))
        if key in seen:
            raise ValueError(f"{where}: a second row for {key}")
        seen.add(key)
        if r.get("status") == "measured":
            secs = r.get("seconds")
            if not isinstance(secs, list) or not secs or not all(_pos(s) for s in secs) or not _pos(r.get("tokens")):
                raise ValueError(f"{where}: a measured row needs positive finite 'seconds' and 'tokens'")
        elif r.get("status") != "not_fitted" or r.get("kind") != "decode":
            raise ValueError(f"{where}: status must be 'measured' (or 'not_fitted' for decode), got "
                             f"{r.get('status')!r}")
    if not d["limits"]:
        raise ValueError(f"{path}: no limit measurements")
    for i, lim in enumerate(d["limits"]):
        if not (isinstance(lim, dict) and _pos((lim.get("triad") or {}).get("bytes_per_s"))
                and _pos((lim.get("matmul") or {}).get("flop_per_s"))):
            raise ValueError(f"{path}: limits[{i}]: expected triad.bytes_per_s and matmul.flop_per_s > 0")
    return d


def _half_range(v: list[float]) -> float:
    return (max(v) - min(v)) / 2 if len(v) >= 2 else math.nan


def _rate_se(r: dict[str, Any]) -> float:
    """Half the range of the repeats' throughputs (tokens per repeat / seconds)."""
    return _half_range([r["tokens"] / s for s in r["seconds"]])


def _setting(prov: dict[str, Any], key: str, default: str) -> str:
    return str(((prov.get("config") or {}).get("paper_shape") or {}).get(key) or default)


def _device_label(prov: dict[str, Any]) -> str:
    """``CPU (AMD EPYC, 2 threads, fp32)`` or ``GPU (NVIDIA H200, bf16)``: where the study ran, from its
    provenance (a result without the device and dtype settings ran on the CPU in fp32)."""
    dev, dtype = prov.get("device") or {}, _setting(prov, "dtype", "fp32")
    if _setting(prov, "device", "cpu").startswith("cuda"):
        return f"GPU ({dev.get('cuda') or 'unknown'}, {dtype})"
    return f"CPU ({dev.get('cpu_model') or 'unknown'}, {dev.get('n_threads')} threads, {dtype})"


def summarize_paper_shape(raw: str | Path) -> pd.DataFrame:
    """Tidy study ``efficiency_paper_shape`` from ``raw.json`` (module docstring).

    Raises:
        ValueError: the file is invalid (:func:`read_raw`), a core variant has no measured decode row, or a
            measured cache's bytes differ from the formula.
    """
    from yocou.results.names import PAPER_LENGTHS, paper_row
    from yocou.results.reported import load_table

    d = read_raw(raw)
    d = {**d, "rows": [r for r in d["rows"] if r.get("batch", 1) == 1]}  # batch 1: the rows Figure 7 reads
    prov = d.get("provenance") or {}
    extra = {"device_label": _device_label(prov), "dtype": _setting(prov, "dtype", "fp32"),
             "n_threads": int((prov.get("device") or {}).get("n_threads") or 0), "status": "measured", "detail": ""}
    out: list[dict[str, Any]] = []

    def add(run: str, metric: str, value: float, unit: str, *, axis: str = "seq_len", at: float = math.nan,
            se: float = math.nan, n: float = math.nan, **kw: Any) -> None:
        out.append({"study": STUDY, "run": run, "role": run, "seed": NO_SEED, "metric": metric, "axis": axis,
                    "axis_value": float(at), "value": float(value), "stderr": se, "n": n, "unit": unit,
                    **extra, **kw})

    bws = [lim["triad"]["bytes_per_s"] for lim in d["limits"]]
    pks = [lim["matmul"]["flop_per_s"] for lim in d["limits"]]
    for i, lim in enumerate(d["limits"]):
        add("machine", "triad_bytes_per_s", bws[i], "bytes/s", axis="limit_measurement", at=i,
            detail=str(lim.get("where", "")))
        add("machine", "matmul_flop_per_s", pks[i], "FLOP/s", axis="limit_measurement", at=i,
            detail=str(lim.get("where", "")))
    bw, pk = statistics.median(bws), statistics.median(pks)
    add("machine", "bandwidth_bytes_per_s", bw, "bytes/s", axis="", se=_half_range(bws), n=len(bws),
        detail="STREAM triad, median of the run's measurements")
    add("machine", "peak_flop_per_s", pk, "FLOP/s", axis="", se=_half_range(pks), n=len(pks),
        detail="fp32 matmul, median of the run's measurements")

    rate: dict[tuple[str, str, int], tuple[float, float]] = {}
    for r in d["rows"]:
        v, n = r["variant"], r["seq_len"]
        if r["status"] == "not_fitted":
            kw = {"status": "not_fitted", "detail": str(r.get("why", ""))}
            add(v, "decode_needs_bytes", r["needs_bytes"], "bytes", at=n, **kw)
            if _pos(r.get("available_bytes")):
                add(v, "decode_available_bytes", r["available_bytes"], "bytes", at=n, **kw)
            continue
        nrep = len(r["seconds"])
        tps, se = r["tokens"] / r["median_s"], _rate_se(r)
        if r["kind"] == "decode":
            if r["kv_bytes_measured"] != r["kv_bytes_formula"]:
                raise ValueError(f"{raw}: {v} at N={n}: cache of {r['kv_bytes_measured']} bytes, formula "
                                 f"{r['kv_bytes_formula']}")
            rate["decode", v, n] = (tps, se)
            kw = {"detail": "interleaved with " + (", ".join(r.get("interleaved_with") or []) or "none")
                  + ("; caches held" if r.get("caches_held") else "; each repeat allocates its cache")}
            add(v, "decode_tokens_per_s", tps, "tokens/s", at=n, se=se, n=nrep, **kw)
            add(v, "decode_ms_per_token", 1e3 / tps, "ms", at=n, n=nrep, **kw)
            for metric, key in (("decode_read_bytes", "read_bytes_per_application"),
                                ("decode_read_bytes_once", "read_bytes_once")):
                add(v, metric, r[key], "bytes", at=n, **kw)
            add(v, "decode_bytes_per_s", r["read_bytes_per_application"] * tps, "bytes/s", at=n, **kw)
            add(v, "decode_bandwidth_fraction", r["read_bytes_per_application"] * tps / bw, "fraction", at=n, **kw)
            add(v, "decode_bandwidth_fraction_once", r["read_bytes_once"] * tps / bw, "fraction", at=n, **kw)
            add(v, "kv_bytes", r["kv_bytes_measured"], "bytes", at=n, **kw)
            add(v, "kv_bytes_formula", r["kv_bytes_formula"], "bytes", at=n, **kw)
            add(v, "kv_gib", r["kv_bytes_measured"] / GIB, "GiB", at=n, **kw)
            for k in ("loadavg_1m_before", "loadavg_1m_after"):
                if isinstance(r.get(k), (int, float)):
                    add(v, k, r[k], "load", at=n, **kw)
        elif r["kind"] == "prefill":
            rate["prefill", v, n] = (tps, se)
            kw = {"detail": f"prompt {r['prompt_len']} tokens, chunks of {r['chunk_size']}, interleaved with "
                            + ", ".join(r.get("interleaved_with") or [])}
            add(v, "prefill_tokens_per_s", tps, "tokens/s", at=n, se=se, n=nrep, **kw)
            add(v, "prefill_s", r["median_s"], "s", at=n, se=_half_range(r["seconds"]), n=nrep, **kw)
            add(v, "prefill_flop", r["flop"], "FLOP", at=n, **kw)
            add(v, "prefill_flop_per_s", r["flop"] / r["median_s"], "FLOP/s", at=n, **kw)
            add(v, "prefill_peak_fraction", r["flop"] / r["median_s"] / pk, "fraction", at=n, **kw)
            for k in ("loadavg_1m_before", "loadavg_1m_after"):
                if isinstance(r.get(k), (int, float)):
                    add(v, f"prefill.{k}", r[k], "load", at=n, **kw)
    checks = {(r["variant"], r["cache"]): r for r in d["rows"] if r["kind"] == "decode_check"}
    for v in VARIANTS:
        p, f = checks.get((v, "prefilled")), checks.get((v, "filled"))
        if p is None or f is None:
            continue
        n = p["seq_len"]
        kw = {"detail": f"decode of {p['tokens']} tokens to N={n}, {len(p['seconds'])} interleaved repeats each"}
        mp, mf = 1e3 * p["median_s"] / p["tokens"], 1e3 * f["median_s"] / f["tokens"]
        add(v, "check_prefilled_ms_per_token", mp, "ms", at=n, se=1e3 * _half_range(p["seconds"]) / p["tokens"],
            n=len(p["seconds"]), **kw)
        add(v, "check_filled_ms_per_token", mf, "ms", at=n, se=1e3 * _half_range(f["seconds"]) / f["tokens"],
            n=len(f["seconds"]), **kw)
        add(v, "check_filled_over_prefilled", mf / mp, "ratio", at=n, **kw)
        overlap = min(p["max_s"], f["max_s"]) >= max(p["min_s"], f["min_s"])
        add(v, "check_within_spread", float(overlap), "bool", at=n, **kw)
        equal = p["kv_bytes_measured"] == f["kv_bytes_measured"] == p["kv_bytes_formula"]
        add(v, "check_kv_bytes_equal", float(equal), "bool", at=n, **kw)

    for kind, table in (("decode", 9), ("prefill", 8)):
        paper = load_table(table)
        for a, b in RATIOS:
            role = f"{a}|{b}"
            for n in sorted({n for (k, v, n) in rate if k == kind and v == a} & {n for (k, v, n) in rate
                                                                                  if k == kind and v == b}):
                (ra, sa), (rb, sb) = rate[kind, a, n], rate[kind, b, n]
                x = ra / rb
                se = x * math.hypot(sa / ra, sb / rb) if math.isfinite(sa) and math.isfinite(sb) else math.nan
                out.append({"study": STUDY, "run": role, "role": role, "seed": NO_SEED, "metric": f"{kind}_ratio",
                            "axis": "seq_len", "axis_value": float(n), "value": x, "stderr": se, "n": math.nan,
                            "unit": "ratio", **extra, "detail": f"{kind} tokens/s of {a} over {b}, ours"})
            pa, pb = paper_row(f"table{table}", a), paper_row(f"table{table}", b)
            va = {int(r.seq_len): float(r.value) for r in paper[paper["model"] == pa].itertuples()}
            vb = {int(r.seq_len): float(r.value) for r in paper[paper["model"] == pb].itertuples()}
            rs = {n: va[n] / vb[n] for n in PAPER_LENGTHS if n in va and n in vb}
            for n, x in rs.items():
                out.append({"study": STUDY, "run": "paper", "role": role, "seed": NO_SEED,
                            "metric": f"paper.{kind}_ratio", "axis": "seq_len", "axis_value": float(n), "value": x,
                            "stderr": math.nan, "n": math.nan, "unit": "ratio", **extra,
                            "status": "reported", "detail": f"Table {table}, {pa} over {pb}"})
            if rs:
                out.append({"study": STUDY, "run": "paper", "role": role, "seed": NO_SEED,
                            "metric": f"paper.{kind}_ratio", "axis": "", "axis_value": math.nan,
                            "value": statistics.mean(rs.values()), "stderr": math.nan, "n": len(rs), "unit": "ratio",
                            **extra, "status": "reported", "detail": f"Table {table}, mean over the printed lengths"})
    for v in VARIANTS:  # how much of its shortest-N decode rate each variant keeps at every longer N
        ns = sorted(n for (k, x, n) in rate if k == "decode" and x == v)
        for n in ns[1:]:
            (r1, s1), (r0, s0) = rate["decode", v, n], rate["decode", v, ns[0]]
            x = r1 / r0
            se = x * math.hypot(s1 / r1, s0 / r0) if math.isfinite(s1) and math.isfinite(s0) else math.nan
            out.append({"study": STUDY, "run": v, "role": v, "seed": NO_SEED, "metric": "decode_retained",
                        "axis": "seq_len", "axis_value": float(n), "value": x, "stderr": se, "n": math.nan,
                        "unit": "ratio", **extra, "detail": f"decode tokens/s at N over at N = {ns[0]}"})
    missing = [v for v in VARIANTS if ("decode", v, min((n for (k, _, n) in rate if k == "decode"), default=0))
               not in rate]
    if missing:
        raise ValueError(f"{raw}: no measured decode row at the shortest N for {missing}")
    return tidy_frame(out, where=f"{STUDY} from {raw}")


def decode_rate(r: dict[str, Any]) -> dict[str, Any]:
    """One measured decode row of a paper-shape ``raw.json`` as rates: ``tokens_per_s`` (B x tokens over the median
    seconds), ``half_range`` (half the range of the repeats' tokens/s), ``triad_beside_gb_s`` (mean of the STREAM
    triad bandwidths measured right before and after its block, GB/s; NaN where the row has none),
    ``of_bandwidth_beside`` (bytes a step must read, a looped stage's weights at each application, times steps/s,
    over that bandwidth) and ``block`` (the variants measured interleaved, joined by ``+``). Shared by the tidy
    study (:func:`summarize_batched`) and the serving tables (:func:`yocou.evaluation.analysis.serving.measured_batched`).
    """
    tps = r["tokens"] / statistics.median(r["seconds"])
    beside = r.get("triad_beside_bytes_per_s")
    gbs = statistics.mean(beside) / 1e9 if beside else math.nan
    return {"tokens_per_s": tps, "half_range": _rate_se(r), "triad_beside_gb_s": gbs,
            "of_bandwidth_beside": r["read_bytes_per_application"] * tps / r.get("batch", 1) / (gbs * 1e9),
            "block": "+".join(sorted([r["variant"], *(r.get("interleaved_with") or [])]))}


def summarize_batched(raw: str | Path) -> pd.DataFrame:
    """Tidy study ``efficiency_paper_shape_batched`` from a batched measurement's ``raw.json``
    (``workflows/studies/paper_shape_batched.yaml``: decode rows with ``batch`` and ``triad_beside_bytes_per_s``).

    Rows (run = role = the variant; seed -1; axis ``seq_len`` = N), one set per measured decode row at batch B:
    ``decode_tokens_per_s_b<B>`` (B sequences x tokens per second; stderr half the range of the repeats),
    ``decode_tokens_per_s_per_triad_b<B>`` (the same over the STREAM triad bandwidth measured right before and after
    its block, in GB/s: tokens/s per GB/s, so rows measured in different blocks compare with the machine's drift
    taken out) and ``decode_bandwidth_fraction_b<B>`` (bytes a step must read, a looped stage's weights at each
    application, times steps/s, over that bandwidth). ``detail`` names the block (the variants measured interleaved).

    Raises:
        ValueError: the file is invalid (:func:`read_raw`), a measured decode row lacks its triad beside it, or a
            measured cache's bytes differ from the formula.
    """
    d = read_raw(raw)
    prov = d.get("provenance") or {}
    extra = {"device_label": _device_label(prov), "dtype": _setting(prov, "dtype", "fp32"),
             "n_threads": int((prov.get("device") or {}).get("n_threads") or 0), "status": "measured"}
    out: list[dict[str, Any]] = []
    for i, r in enumerate(d["rows"]):
        if r["kind"] != "decode" or r["status"] != "measured":
            continue
        v, n, b = r["variant"], r["seq_len"], r.get("batch", 1)
        beside = r.get("triad_beside_bytes_per_s")
        if not (isinstance(beside, list) and beside and all(_pos(x) for x in beside)):
            raise ValueError(f"{raw}: rows[{i}] ({v}, N={n}, B={b}): triad_beside_bytes_per_s must list the "
                             f"bandwidths measured beside it (> 0), got {beside!r:.80}")
        if r.get("kv_bytes_measured") != r.get("kv_bytes_formula"):
            raise ValueError(f"{raw}: rows[{i}] ({v}, N={n}, B={b}): cache of {r.get('kv_bytes_measured')} bytes, "
                             f"formula {r.get('kv_bytes_formula')}")
        rate = decode_rate(r)
        tps, se, gbs, block = rate["tokens_per_s"], rate["half_range"], rate["triad_beside_gb_s"], rate["block"]
        kw = {"study": BATCHED_STUDY, "run": v, "role": v, "seed": NO_SEED, "axis": "seq_len",
              "axis_value": float(n), "n": len(r["seconds"]), **extra, "detail": f"block {block}, batch {b}"}
        out += [{**kw, "metric": f"decode_tokens_per_s_b{b}", "value": tps, "stderr": se, "unit": "tokens/s"},
                {**kw, "metric": f"decode_tokens_per_s_per_triad_b{b}", "value": tps / gbs, "stderr": se / gbs,
                 "unit": "tokens/s per GB/s"},
                {**kw, "metric": f"decode_bandwidth_fraction_b{b}", "stderr": math.nan, "unit": "fraction",
                 "value": rate["of_bandwidth_beside"]}]
    if not out:
        raise ValueError(f"{raw}: no measured decode row")
    return tidy_frame(out, where=f"{BATCHED_STUDY} from {raw}")
