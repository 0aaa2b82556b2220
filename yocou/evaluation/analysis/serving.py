"""Decode as serving sees it: batch B, and the largest batch a fixed memory budget holds (paper Tables 8-9, Figure 7).

At batch 1 a decode step reads the weights once for one token, which hides what a small KV cache buys. A server
decodes B sequences per step: the weights are read once per step and each sequence's keys and values once, so

- bytes per step ``= weights + B · kv_read(N)`` (:func:`yocou.evaluation.bench.hardware.decode_read_bytes`; a looped stage's
  weights read at each of its applications, since no cache holds them, or once as a lower bound);
- FLOPs per step ``= B · (2 · active matrix parameters + Σ_applications 4 · H · d_h · keys(N))``
  (:func:`decode_flops`; keys ``N + 1`` for a global or cross application, ``min(W, N) + 1`` for a window);
- seconds per step ``= max(bytes / (bandwidth · f_bw), FLOPs / (peak · f_flop))``, tokens/s ``= B / seconds``
  (:func:`decode_model`), a roofline: the larger of the memory time and the compute time;
- the largest batch a memory budget holds: ``floor((budget − weight bytes) / kv_cache_bytes(N))``
  (:func:`max_batch`; every parameter stored once, the KV cache of docs/design.md section 5 per sequence).

The machines (:class:`Machine`) are this CPU, from the bandwidth and matmul peak the paper-shape study measured, and an
80 GB accelerator from its vendor's data-sheet figures (an assumption, named so wherever it is used). With ``f_bw``
the fraction of bandwidth a batch-1 decode step reached in the measurement (0.36-0.53 on this CPU), the model is
calibrated to what was measured; at ``f = 1`` it is the roofline bound.

Sources: the paper's Table 9 (decode tokens/s, 1.3B, by length) and Table 10 (KV bytes); the formulas of
docs/design.md section 5 (verified against real caches: ``results/tiny/table10_measured.md``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from yocou.evaluation.bench.hardware import decode_read_bytes
from yocou.model.accounting import (
    active_params_per_token,
    dtype_bytes,
    kv_cache_bytes,
    param_count,
)
from yocou.model.config import ModelConfig, expand_plan

__all__ = ["Machine", "decode_flops", "decode_model", "fit_batch", "max_batch"]


@dataclass(frozen=True)
class Machine:
    """What a decode step runs on.

    Attributes:
        name: a label (says whether the figures are measured or a data sheet's).
        bandwidth: memory bandwidth, bytes/s.
        peak_flops: matmul throughput, FLOP/s, in ``dtype``.
        memory_bytes: the budget for weights and KV caches, bytes (headroom already taken off).
        dtype: the storage dtype of weights and caches (``fp32``, ``bf16``).
        bw_fraction: the fraction of ``bandwidth`` a decode step reaches (1: the roofline bound).
        flop_fraction: the fraction of ``peak_flops`` a decode step reaches.
    """

    name: str
    bandwidth: float
    peak_flops: float
    memory_bytes: int
    dtype: str = "bf16"
    bw_fraction: float = 1.0
    flop_fraction: float = 1.0

    def __post_init__(self) -> None:
        for f in ("bandwidth", "peak_flops", "memory_bytes", "bw_fraction", "flop_fraction"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise ValueError(f"Machine {self.name!r}: {f} must be a finite number > 0, got {v!r}")
        dtype_bytes(self.dtype)  # raises on an unknown dtype


def decode_flops(cfg: ModelConfig, n_ctx: int, batch: int = 1) -> float:
    """FLOPs of one decode step of ``batch`` sequences with ``n_ctx`` tokens cached each.

    ``batch · (2 · active_params_per_token + Σ 4 · n_heads · head_dim · keys)`` over the self and cross applications,
    keys ``n_ctx + 1`` (global self-attention, cross-attention) or ``min(window, n_ctx) + 1`` (sliding window).

    Raises:
        ValueError: ``n_ctx`` below 0 or ``batch`` below 1.
    """
    if n_ctx < 0 or batch < 1:
        raise ValueError(f"decode_flops: n_ctx must be >= 0 and batch >= 1, got {n_ctx}, {batch}")
    hd = cfg.n_heads * cfg.head_dim
    attn = 0.0
    for a in expand_plan(cfg):
        if a.kind == "cross" or (a.kind == "self" and a.window is None):
            attn += 4 * hd * (n_ctx + 1)
        elif a.kind == "self":
            attn += 4 * hd * (min(a.window, n_ctx) + 1)
    return batch * (2.0 * active_params_per_token(cfg) + attn)


def decode_model(cfg: ModelConfig, n_ctx: int, batch: int, machine: Machine,
                 weights: str = "per_application") -> dict[str, float | str]:
    """Modelled decode step of ``batch`` sequences at context ``n_ctx`` on ``machine`` (module docstring).

    ``weights``: ``per_application`` (default) reads a looped stage's weights at every application, as a machine
    whose caches cannot hold them must (a 1.3B model's stage is gigabytes, far above any last-level cache: the
    CPU measurement follows this reading); ``once`` is the lower bound of reading them once per step.

    Returns:
        ``bytes`` (read per step), ``flops`` (per step), ``memory_s`` and ``compute_s`` (their times), ``seconds``
        (the larger), ``bound`` (``memory`` or ``compute``) and ``tokens_per_s`` (``batch / seconds``).
    """
    nbytes = float(decode_read_bytes(cfg, n_ctx, dtype=machine.dtype, batch_size=batch, weights=weights)["total"])
    flops = decode_flops(cfg, n_ctx, batch)
    mem_s = nbytes / (machine.bandwidth * machine.bw_fraction)
    cmp_s = flops / (machine.peak_flops * machine.flop_fraction)
    secs = max(mem_s, cmp_s)
    return {"bytes": nbytes, "flops": flops, "memory_s": mem_s, "compute_s": cmp_s, "seconds": secs,
            "bound": "memory" if mem_s >= cmp_s else "compute", "tokens_per_s": batch / secs}


def weight_bytes(cfg: ModelConfig, dtype: str) -> int:
    """Bytes of every parameter stored once (embedding and LM head included) in ``dtype``."""
    return param_count(cfg) * dtype_bytes(dtype)


def max_batch(cfg: ModelConfig, n_ctx: int, machine: Machine) -> int:
    """The largest batch whose weights and KV caches (``n_ctx`` tokens each) fit ``machine.memory_bytes``; 0 when
    the weights and one cache do not."""
    free = machine.memory_bytes - weight_bytes(cfg, machine.dtype)
    per_seq = kv_cache_bytes(cfg, n_ctx, dtype=machine.dtype)
    return max(0, int(free // per_seq))


def fit_batch(cfgs: Mapping[str, ModelConfig], machine: Machine, paper: Mapping[tuple[str, str, int], float],
              batches: Sequence[int], absolute: Mapping[tuple[str, int], float] | None = None
              ) -> list[dict[str, float]]:
    """How well each batch reproduces the paper's decode ratios under the model.

    Args:
        cfgs: variant -> config.
        paper: ``(numerator, denominator, n_ctx) -> ratio`` of decode tokens/s (e.g. the paper's Table 9).
        batches: the batches to try.
        absolute: ``(variant, n_ctx) -> tokens/s`` (the paper's Table 9 itself), to compare absolute throughputs.

    Returns:
        One row per batch: ``batch``, ``rms_log_error`` (root mean square of ``log(model / paper)`` over the
        ratios), and ``worst`` (the largest ``|log(model / paper)|``), in the order of ``batches``; with
        ``absolute`` also ``abs_median_ratio``: the median over its entries of modelled over reported tokens/s.
    """
    import statistics

    out = []
    for b in batches:
        errs = []
        for (a, c, n), want in paper.items():
            got = (decode_model(cfgs[a], n, b, machine)["tokens_per_s"]
                   / decode_model(cfgs[c], n, b, machine)["tokens_per_s"])
            errs.append(math.log(got / want))
        row = {"batch": b, "rms_log_error": math.sqrt(sum(e * e for e in errs) / len(errs)),
               "worst": max(abs(e) for e in errs)}
        if absolute:
            row["abs_median_ratio"] = statistics.median(
                decode_model(cfgs[v], n, b, machine)["tokens_per_s"] / t for (v, n), t in absolute.items())
        out.append(row)
    return out


# --------------------------------------------------------------------------------------------- the study

#: An 80 GB accelerator from its vendor's data sheet (NVIDIA H100 SXM: 3.35 TB/s HBM3, 989 TFLOP/s dense bf16): an
#: assumption, not a measurement; the paper's decode throughputs are from GPUs it does not name.
ACCELERATOR = {"name": "80 GB accelerator (H100 SXM data sheet, not measured)", "bandwidth": 3.35e12,
               "peak_flops": 989e12, "memory_bytes": 80 * 10**9, "dtype": "bf16"}
PAIRS = (("yocou", "yoco"), ("yoco", "transformer"), ("rins", "transformer"))
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def measured_cpu(raw: Mapping, memory_bytes: int) -> tuple[Machine, Machine]:
    """This CPU from the paper-shape study's ``raw.json``: its median triad bandwidth and matmul peak (fp32), the
    memory budget ``memory_bytes``; returned at the roofline (fractions 1) and calibrated (``bw_fraction`` the median,
    over the measured batch-1 decode rows, of the modelled over the measured seconds per token).

    Raises:
        ValueError: no limits or no measured decode row in ``raw`` (naming the field).
    """
    import statistics

    lim = raw.get("limits") or []
    if not lim:
        raise ValueError("raw.json: limits: expected the measured bandwidth and matmul peak")
    bw = statistics.median(x["triad"]["bytes_per_s"] for x in lim)
    peak = statistics.median(x["matmul"]["flop_per_s"] for x in lim)
    roof = Machine("this CPU (measured triad and matmul peak, fp32), roofline", bw, peak, memory_bytes, "fp32")
    cfgs = _raw_models(raw)
    # batch-1 rows only: the batched ones are what the calibrated model is compared with
    fr = [decode_model(cfgs[r["variant"]], r["seq_len"] - r["n_decode"] // 2, 1, roof)["seconds"] * r["tokens_per_s"]
          for r in raw.get("rows") or [] if r.get("kind") == "decode" and r.get("status") == "measured"
          and r.get("batch", 1) == 1]
    if not fr:
        raise ValueError("raw.json: rows: expected measured batch-1 decode rows (kind decode, status measured)")
    f = statistics.median(fr)
    return roof, Machine(f"this CPU, calibrated to the measured decode ({f:.2f} of the roofline)", bw, peak,
                         memory_bytes, "fp32", bw_fraction=f, flop_fraction=f)


def _raw_models(raw: Mapping) -> dict[str, ModelConfig]:
    from yocou.model.config import config_from_dict

    return {k: config_from_dict(v) for k, v in raw["provenance"]["config"]["models"].items()}


def study(cfgs: Mapping[str, ModelConfig], machines: Sequence[Machine], lens: Sequence[int],
          batches: Sequence[int] = BATCHES) -> list[dict]:
    """Modelled decode for every machine, variant, context length and batch (those that fit the machine's
    memory), plus one row per (machine, variant, N) at the largest batch that fits (``at_budget``)."""
    rows = []
    for m in machines:
        for v, cfg in cfgs.items():
            for n in lens:
                top = max_batch(cfg, n, m)
                for b in sorted({*batches, top} - {0}):
                    if b > top:
                        continue
                    d = decode_model(cfg, n, b, m)
                    rows.append({"machine": m.name, "variant": v, "seq_len": n, "batch": b, "at_budget": b == top,
                                 "max_batch": top, "tokens_per_s": d["tokens_per_s"], "bound": d["bound"],
                                 "read_gb_per_step": d["bytes"] / 1e9, "gflop_per_step": d["flops"] / 1e9,
                                 "kv_gib_per_seq": kv_cache_bytes(cfg, n, dtype=m.dtype) / 2**30,
                                 "weights_gib": weight_bytes(cfg, m.dtype) / 2**30})
    return rows


def paper_ratios(table9: str | Path | None = None) -> dict[tuple[str, str, int], float]:
    """The paper's decode ratios of :data:`PAIRS` at every N of its Table 9 (:func:`paper_throughput`).

    Raises:
        ValueError: the table lacks a column, or no N has both sides of a pair (naming the table).
    """
    val = paper_throughput(table9)
    out = {(a, b, n): val[(a, n)] / val[(b, n)] for a, b in PAIRS for (v, n) in val if v == a and (b, n) in val}
    if not out:
        raise ValueError(f"{table9 or 'Table 9'}: no N with both sides of {PAIRS}")
    return out


def paper_throughput(table9: str | Path | None = None) -> dict[tuple[str, int], float]:
    """The paper's Table 9 as ``(variant, N) -> decode tokens/s``: ``yocou/results/reported/table09.csv``, or the file
    ``table9`` in its format (columns model, seq_len, value).

    Raises:
        ValueError: the table lacks one of those columns (naming the table).
    """
    import pandas as pd

    from yocou.results.reported import load_table

    df = load_table(9) if table9 is None else pd.read_csv(table9, comment="#")
    if missing := {"model", "seq_len", "value"} - set(df.columns):
        raise ValueError(f"{table9 or 'Table 9'}: missing columns {sorted(missing)}")
    names = {"Transformer": "transformer", "YOCO": "yoco", "RINS": "rins", "YOCO-U": "yocou"}
    return {(names.get(str(r.model), str(r.model)), int(r.seq_len)): float(r.value) for r in df.itertuples()}


def measured_batched(raw: Mapping, model: Machine) -> tuple[list[dict], list[dict]]:
    """The batched decode rows of a paper-shape measurement (``decode_batches``: rows with ``batch``) beside the
    model at the same N and B on ``model`` (the calibrated CPU).

    Returns:
        ``rows``: per variant, N and B: measured tokens/s with its half range over the repeats, the triad bandwidth
        measured beside its block (mean of before and after) and the fraction of it the step reached (the bytes a
        step must read, a looped stage's weights at each application), and the modelled tokens/s; ``ratios``: per
        pair of :data:`PAIRS`, N and B, measured in the same block of the same run, with a half range by the delta
        method, ``same_block`` (both measured interleaved in one block) and ``measured_per_bandwidth`` (across
        blocks: each side's tokens/s over the triad bandwidth measured beside it, which takes out the drift of the
        machine between blocks), beside the model's.

    Raises:
        ValueError: a measured decode row lacks a field the table reads (naming it).
    """
    from yocou.results.summarize.paper_shape import decode_rate

    cfgs = _raw_models(raw)
    rows: dict[tuple[str, int, int], dict] = {}
    for r in raw.get("rows") or []:
        if r.get("kind") != "decode" or r.get("status") != "measured":
            continue
        try:
            v, n, b = r["variant"], r["seq_len"], r.get("batch", 1)
            rate = decode_rate(r)
        except KeyError as e:
            raise ValueError(f"raw.json: a measured decode row lacks {e}") from None
        rows[(v, n, b)] = {"variant": v, "seq_len": n, "batch": b, "tokens_per_s": rate["tokens_per_s"],
                           "half_range": rate["half_range"], "block": rate["block"],
                           "triad_beside_gb_s": rate["triad_beside_gb_s"],
                           "of_bandwidth_beside": rate["of_bandwidth_beside"],
                           "model_tokens_per_s": decode_model(cfgs[v], n - r.get("n_decode", 0) // 2, b,
                                                              model)["tokens_per_s"]}
    ratios = []
    for a, c in PAIRS:
        for (v, n, b), ra in sorted(rows.items()):
            if v != a or (c, n, b) not in rows:
                continue
            rc = rows[(c, n, b)]
            x = ra["tokens_per_s"] / rc["tokens_per_s"]
            same = ra["block"] == rc["block"]
            ratios.append({"ratio": f"{a} / {c}", "seq_len": n, "batch": b, "measured": x,
                           "half_range": x * math.hypot(ra["half_range"] / ra["tokens_per_s"],
                                                        rc["half_range"] / rc["tokens_per_s"]),
                           "same_block": same,
                           # across blocks: each side over the bandwidth measured beside it (drift taken out)
                           "measured_per_bandwidth": x if same else x * rc["triad_beside_gb_s"] / ra["triad_beside_gb_s"],
                           "model": ra["model_tokens_per_s"] / rc["model_tokens_per_s"]})
    return list(rows.values()), ratios


def render(rows: list[dict], fit: list[dict], paper: Mapping[tuple[str, str, int], float],
           cfgs: Mapping[str, ModelConfig], machines: Sequence[Machine], *, out: str | Path, figure: str | Path,
           config: Mapping | None = None, measured: Sequence[Mapping] | None = None) -> None:
    """Write ``<out>.{csv,md,json}`` (every modelled row), ``<out>_fit.{csv,md,json}`` (the batch against the
    paper's ratios) and the figure ``<figure>`` (.png and .pdf). ``measured``: the rows of :func:`measured_batched`,
    drawn in a fourth panel (tokens/s against B on this CPU, beside the calibrated model) when given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import pandas as pd

    from yocou.results.names import COLORS, label
    from yocou.results.render.common import save_figure, stem_of, write_table

    df = pd.DataFrame(rows)
    best = min(fit, key=lambda r: r["rms_log_error"])
    acc, cpu = machines[0], machines[-1]
    lens = sorted({n for _, _, n in paper})
    ratio_rows = []
    for a, b in PAIRS:
        for n in lens:
            r = {"ratio": f"{label(a)} / {label(b)}", "seq_len": n, "paper": paper.get((a, b, n), math.nan)}
            for bb in (1, best["batch"]):
                r[f"model_B{bb}"] = (decode_model(cfgs[a], n, bb, acc)["tokens_per_s"]
                                     / decode_model(cfgs[b], n, bb, acc)["tokens_per_s"])
            ratio_rows.append(r)
    notes = [f"Modelled, not measured: a roofline of bytes read and FLOPs per decode step (yocou.evaluation.analysis.serving); "
             f"machines: {'; '.join(m.name for m in machines)}.",
             "Weights read once per step, a looped stage's at each of its applications; KV caches per sequence by the "
             "formulas of docs/design.md section 5 (verified against real caches).",
             f"The paper's Table 9 ratios are best matched at batch {best['batch']} on the accelerator (RMS log error "
             f"{best['rms_log_error']:.3f}; at batch 1: {fit[0]['rms_log_error']:.3f}). abs_median_ratio: the "
             "median of modelled over reported tokens/s over Table 9's cells (1: the paper's absolute throughput)."]
    write_table(df, out, title="Decode at batch B and at a fixed memory budget, 1.3B shape (modelled)", notes=notes,
                config=dict(config or {}))
    write_table(pd.DataFrame(ratio_rows), f"{stem_of(out)}_ratios",
                title="Decode ratios: the paper's Table 9 beside the model at batch 1 and the best-matching batch",
                notes=notes, config=dict(config or {}))
    write_table(pd.DataFrame(fit), f"{stem_of(out)}_fit", title="Which batch reproduces the paper's decode ratios",
                notes=notes, config=dict(config or {}))

    fig, ax = plt.subplots(1, 4 if measured else 3, figsize=(18.5 if measured else 14, 4))
    n_mid = 32768 if 32768 in set(df["seq_len"]) else int(df["seq_len"].median())
    for v in cfgs:
        g = df[(df["machine"] == acc.name) & (df["variant"] == v) & (df["seq_len"] == n_mid)].sort_values("batch")
        ax[0].plot(g["batch"], g["tokens_per_s"], marker="o", ms=3, color=COLORS.get(v), label=label(v))
    ax[0].set(xscale="log", yscale="log", xlabel="batch B", ylabel="decode tokens/s (modelled)",
              title=f"{acc.name.split(' (')[0]}, N = {n_mid // 1024}K")
    ax[0].legend(frameon=False, fontsize=8)
    styles = {("yocou", "yoco"): "#d62728", ("yoco", "transformer"): "#1f77b4", ("rins", "transformer"): "#2ca02c"}
    for (a, b), c in styles.items():
        rr = [r for r in ratio_rows if r["ratio"] == f"{label(a)} / {label(b)}"]
        ax[1].plot([r["seq_len"] for r in rr], [r["paper"] for r in rr], ls="--", color=c, marker="s", ms=3,
                   label=f"{label(a)} / {label(b)}: paper")
        ax[1].plot([r["seq_len"] for r in rr], [r[f"model_B{best['batch']}"] for r in rr], color=c, marker="o",
                   ms=3, label=f"model, B = {best['batch']}")
        ax[1].plot([r["seq_len"] for r in rr], [r["model_B1"] for r in rr], color=c, ls=":", lw=1,
                   label="model, B = 1")
    ax[1].set(xscale="log", xlabel="context N (tokens)", ylabel="decode tokens/s ratio",
              title="Table 9's ratios (dashed) against the model")
    ax[1].legend(frameon=False, fontsize=6, ncol=1)
    for m, ls in ((acc, "-"), (cpu, "--")):
        for v in cfgs:
            g = df[(df["machine"] == m.name) & (df["variant"] == v) & df["at_budget"]].sort_values("seq_len")
            ax[2].plot(g["seq_len"], g["tokens_per_s"], ls=ls, marker="o", ms=3, color=COLORS.get(v),
                       label=f"{label(v)}" if m is acc else None)
    ax[2].set(xscale="log", yscale="log", xlabel="context N (tokens)",
              ylabel="decode tokens/s at the largest batch that fits",
              title=f"at a fixed memory budget: {acc.memory_bytes / 1e9:.0f} GB (solid),\n"
                    f"this CPU's {cpu.memory_bytes / 2**30:.0f} GiB, calibrated (dashed)")
    ax[2].legend(frameon=False, fontsize=8)
    if measured:
        m = pd.DataFrame(list(measured))
        n_meas = int(m.groupby("seq_len").size().idxmax())   # the N with the most (variant, B) rows
        for v in cfgs:
            g = m[(m["variant"] == v) & (m["seq_len"] == n_meas)].sort_values("batch")
            if g.empty:
                continue
            ax[3].errorbar(g["batch"], g["tokens_per_s"], yerr=g["half_range"], marker="o", ms=4, capsize=2,
                           color=COLORS.get(v), label=label(v))
            ax[3].plot(g["batch"], g["model_tokens_per_s"], ls="--", lw=1, color=COLORS.get(v))
        ax[3].set(xscale="log", yscale="log", xlabel="batch B", ylabel="decode tokens/s (this CPU, fp32)",
                  title=f"measured on this CPU, N = {n_meas // 1024}K (points: half range)\n"
                        "dashed: the model calibrated at batch 1")
        ax[3].set_xticks(sorted(set(m["batch"])), [str(b) for b in sorted(set(m["batch"]))])
        ax[3].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax[3].yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 2, 5)))
        ax[3].yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax[3].yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax[3].legend(frameon=False, fontsize=8)
    for a_ in ax:
        a_.grid(alpha=0.3, which="both")
    fig.suptitle("Figure 7 as serving sees it (1.3B shape; modelled from the verified byte and FLOP formulas"
                 + ("; the last panel measured)" if measured else ")"), fontsize=10)
    fig.tight_layout()
    save_figure(fig, stem_of(figure), config=dict(config or {}))
    plt.close(fig)


def _read_measurement(path: Path, flag: str) -> dict:
    """A paper-shape measurement (``raw.json``), or ValueError naming ``flag`` and the file."""
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{flag} {path}: not a paper-shape study's raw.json ({e})") from None


def _table_files(stem: str, a: argparse.Namespace) -> list[str]:
    """The tables ``main`` writes under the stem ``--out``."""
    parts = ("_measured", "_measured_ratios") if a.measured_only else ("", "_ratios", "_fit", "_measured",
                                                                        "_measured_ratios")
    return [f"{stem}{p}{x}" for p in parts for x in (".csv", ".md", ".json")]


def _figure_files(png: str, a: argparse.Namespace) -> list[str]:
    """The figure ``main`` draws (none with ``--measured-only``)."""
    return [] if a.measured_only else [str(Path(png).with_suffix(x)) for x in (".png", ".pdf")]


def main(argv: list[str] | None = None) -> int:
    """``python -m yocou.evaluation.analysis.serving``: the serving model at the paper's 1.3B shape (module docstring)."""
    from yocou.utils.guard import reads, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.analysis.serving", description=__doc__.splitlines()[0])
    ap.add_argument("--raw", default="results/paper_shape/raw.json", type=reads(),
                    help="the paper-shape study's measurement (its models, bandwidth, matmul peak, decode rows)")
    ap.add_argument("--batched", default=None, type=reads(),
                    help="a batched paper-shape measurement (workflows/studies/paper_shape_batched.yaml): its rows "
                         "beside the model in <out>_measured.{csv,md,json}")
    ap.add_argument("--panel-batched", default=None, type=reads(),
                    help="a batched paper-shape measurement drawn as the figure's fourth panel (measured tokens/s "
                         "against B beside the calibrated model); the tables stay --batched's")
    ap.add_argument("--measured-only", action="store_true",
                    help="with --batched: write only <out>_measured*.{csv,md,json}, not the model's tables and figure")
    ap.add_argument("--table9", default=None, type=reads(), help="the paper's Table 9 (default yocou/results/reported/table09.csv)")
    ap.add_argument("--cpu-memory-gib", type=float, default=22.0,
                    help="this machine's budget for weights and caches, GiB (default 22: 24 GiB less 2 GiB headroom)")
    ap.add_argument("--out", default="results/paper_shape/serving", type=writes(paths=_table_files), help="table stem")
    ap.add_argument("--figure", default="figures/paper_shape/fig7_serving.png", type=writes(paths=_figure_files), help="figure path (.png)")
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    raw_path = Path(a.raw)
    raw = _read_measurement(raw_path, "--raw")
    if not (a.cpu_memory_gib > 0 and math.isfinite(a.cpu_memory_gib)):
        raise ValueError(f"--cpu-memory-gib: expected a number > 0, got {a.cpu_memory_gib}")
    if a.measured_only and not a.batched:
        ap.error("--measured-only needs --batched")
    cfgs = _raw_models(raw)
    roof, cal = measured_cpu(raw, int(a.cpu_memory_gib * 2**30))
    acc = Machine(**ACCELERATOR)
    paper = paper_ratios(a.table9)
    lens = sorted({n for _, _, n in paper})
    fit = fit_batch(cfgs, acc, paper, BATCHES, absolute=paper_throughput(a.table9))
    rows = study(cfgs, (acc, cal), lens)
    if not a.measured_only:
        panel = None
        if a.panel_batched:
            praw = _read_measurement(Path(a.panel_batched), "--panel-batched")
            panel = measured_batched(praw, measured_cpu(praw, int(a.cpu_memory_gib * 2**30))[1])[0]
        render(rows, fit, paper, cfgs, (acc, cal), out=a.out, figure=a.figure, measured=panel,
               config={"raw": str(raw_path), "accelerator": ACCELERATOR, "cpu_memory_gib": a.cpu_memory_gib,
                       "cpu_bandwidth": roof.bandwidth, "cpu_peak_flops": roof.peak_flops,
                       "cpu_fraction": cal.bw_fraction, **({"panel_batched": a.panel_batched} if panel else {})})
    if a.batched:
        import pandas as pd

        from yocou.results.render.common import write_table

        bpath = Path(a.batched)
        braw = _read_measurement(bpath, "--batched")
        _, bcal = measured_cpu(braw, int(a.cpu_memory_gib * 2**30))
        mrows, mratios = measured_batched(braw, bcal)
        notes = ["Measured on this CPU (fp32, 1.3B shape, random weights): B sequences decoded per step from caches "
                 "filled to N; the triad bandwidth measured right before and after each block; model: the roofline "
                 f"calibrated to this run's decode ({bcal.bw_fraction:.2f} of it)."]
        write_table(pd.DataFrame(mrows), f"{a.out}_measured", title="Batched decode, measured on this CPU",
                    notes=notes, config={"batched": str(bpath)})
        write_table(pd.DataFrame(mratios), f"{a.out}_measured_ratios",
                    title="Batched decode ratios, measured in one block each, beside the model", notes=notes,
                    config={"batched": str(bpath)})
    best = min(fit, key=lambda r: r["rms_log_error"])
    print(f"serving: {len(rows)} modelled rows; Table 9's ratios best matched at batch {best['batch']} "
          f"(RMS log error {best['rms_log_error']:.3f}); CPU calibrated at {cal.bw_fraction:.2f} of its roofline")
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
