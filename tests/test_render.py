"""Renderers draw what the data say: labelled ticks, limits that hold every plotted point,
legends clear of the data, labels that tell blocks apart, the paper's values where it has them (on axes of
their own), load marked on timings, and notes that say what our averages and the paper's rows cover.

Every expectation is computed here from the synthetic inputs, not copied from a rendered output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
import yaml

from yocou.results import reported
from yocou.results.evaldefs import columns
from yocou.results.render import downstream, fig2, fig7, fig8, scaling
from yocou.results.summarize.downstream import summarize_fig3, summarize_table
from yocou.results.tidy import write_tidy

ROOT = Path(__file__).resolve().parents[1]


def _ema(x: np.ndarray, alpha: float) -> np.ndarray:
    """Adjusted exponential moving average, written out: y_t = sum_i (1-a)^(t-i) x_i / sum_i (1-a)^(t-i)."""
    out = []
    for t in range(len(x)):
        w = (1 - alpha) ** np.arange(t, -1, -1)
        out.append(float((w * x[:t + 1]).sum() / w.sum()))
    return np.array(out)


def _curve(n: int, start: float, end: float, seed: int) -> np.ndarray:
    """A loss curve falling from ``start`` to ``end`` with noise: its early points lie far above its tail."""
    rng = np.random.default_rng(seed)
    return end + (start - end) * np.exp(-np.arange(n) / 4) + rng.normal(0, 0.05, n)


def _capture(monkeypatch, module) -> list:
    """Replace ``module.save_figure`` by a recorder of the figures it is given."""
    figs: list = []
    monkeypatch.setattr(module, "save_figure", lambda fig, *a, **k: figs.append(fig))
    return figs


def _labelled_ticks(ax, which: str = "x") -> list[str]:
    """Texts of the tick labels (major and minor) drawn inside the axis range."""
    ax.figure.canvas.draw()
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    out = []
    for minor in (False, True):
        for tick in axis.get_major_ticks() if not minor else axis.get_minor_ticks():
            loc, text = tick.get_loc(), tick.label1.get_text()
            if lo <= loc <= hi and text.strip() and tick.label1.get_visible():
                out.append(text)
    return out


def _contains(lim: tuple[float, float], values) -> bool:
    lo, hi = sorted(lim)
    v = np.asarray(values, float)
    return bool(lo <= v.min() and v.max() <= hi)


def _assert_legends_clear(fig) -> None:
    """No legend of the figure covers a vertex of any plotted line, nor a point along its segments."""
    fig.canvas.draw()
    boxes = [ax.get_legend().get_window_extent() for ax in fig.axes if ax.get_legend()]
    assert boxes
    s = np.linspace(0, 1, 21)[:, None]
    for ax in fig.axes:
        for line in ax.get_lines():
            pts = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))
            along = np.vstack([pts[:1]] + [a + s * (b - a) for a, b in zip(pts[:-1], pts[1:])])
            for box in boxes:
                assert not any(box.contains(x, y) for x, y in along), f"a legend covers {line.get_label()}"


# --------------------------------------------------------------------------------------------------- Figure 2
def _fig2_curves(n: int = 30) -> pd.DataFrame:
    """Two runs whose tokens stay inside one decade (2e4 .. 9e4: no power of ten to label)."""
    frames = []
    for k, v in enumerate(("yoco", "yocou")):
        tokens = np.linspace(2e4, 9e4, n).round().astype(int)  # integer token counts, as training logs them
        frames.append(pd.DataFrame({"variant": v, "step": np.arange(1, n + 1), "tokens": tokens,
                                    "train_flops": tokens * (6e6 + 3e6 * k), "loss": _curve(n, 9.0, 4.0, k)}))
    return pd.concat(frames, ignore_index=True)


def _tidy_json(tmp: Path, study: str, df: pd.DataFrame) -> Path:
    """A training-side summarize step's output (what the fig2/fig5/fig6/fig8 rules read)."""
    from yocou.results.tidy import write_tidy

    return write_tidy(df, tmp / "tidy" / study)["json"]


def test_fig2_token_axis_is_labelled_and_y_holds_every_curve(tmp_path: Path, monkeypatch) -> None:
    from yocou.results.summarize.training import summarize_fig2

    df, alpha = _fig2_curves(), 0.3
    for v, g in df.groupby("variant"):
        (tmp_path / v).mkdir()
        (tmp_path / v / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in
                                                           g.drop(columns="variant").to_dict("records")))
    tidy = _tidy_json(tmp_path, "fig2", summarize_fig2({v: tmp_path / v for v in ("yoco", "yocou")}, alpha=alpha))
    figs = _capture(monkeypatch, fig2)
    fig2.render(tidy, out=tmp_path / "fig2.png", data=tmp_path / "fig2_data.csv",
                summary=tmp_path / "fig2_summary.csv", scale="t")
    fig = figs[0]
    for ax in fig.axes:
        assert len(_labelled_ticks(ax, "x")) >= 2, ax.get_xlabel()
        for v, g in df.groupby("variant"):
            assert _contains(ax.get_ylim(), _ema(g.sort_values("step")["loss"].to_numpy(), alpha)), v
    # the data table: the final logged (raw) point per run; the summary: the paper's numbers beside ours
    final = pd.read_csv(tmp_path / "fig2_data.csv")
    want = df.sort_values("step").groupby("variant").tail(1).set_index("variant")
    assert list(final["variant"]) == ["yoco", "yocou"]
    for r in final.itertuples():
        assert (r.step, r.tokens, r.loss) == (want.loc[r.variant, "step"], want.loc[r.variant, "tokens"],
                                              pytest.approx(want.loc[r.variant, "loss"]))
    summ = pd.read_csv(tmp_path / "fig2_summary.csv")
    assert list(summ["paper"]) == [0.62, 0.033]


# --------------------------------------------------------------------------------------------------- Figure 3
def _lmeval_files(tmp: Path, values: dict[str, dict[tuple[str, str, str], float]], n_items: int = 20) -> list[Path]:
    """Each run's lm-eval ``downstream/<run>/tidy.csv`` (offline task names); ``values``: run -> (task key,
    metric, filter) -> value; stderr binomial (0.05 at 0 and 1)."""
    paths = []
    for v, cells in values.items():
        rows = []
        for (task, metric, filt), val in cells.items():
            se = float(np.sqrt(val * (1 - val) / n_items)) if 0 < val < 1 else 0.05
            rows.append({"variant": v, "task": f"yocou_{task}", "metric": metric, "filter": filt, "value": val,
                         "stderr": se, "n_items": n_items, "n_shots": 0, "source": "offline"})
        p = tmp / "downstream" / v / "tidy.csv"
        p.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(p, index=False)
        paths.append(p)
    return paths


def _tidy(tmp: Path, study: str, df: pd.DataFrame) -> Path:
    """The summarize step's output file (what the render rules read)."""
    return write_tidy(df, tmp / "tidy" / study)["csv"]


def test_fig3_accuracy_axis_starts_at_zero(tmp_path: Path, monkeypatch) -> None:
    specs = columns("fig3")
    keys = [(s["task"], s["metric"], s["filter"]) for s in specs]
    vals = {"yoco": {k: (0.0 if i % 2 else 0.1) for i, k in enumerate(keys)},
            "yocou": {k: (0.05 if i % 2 else 0.0) for i, k in enumerate(keys)}}
    paths = _lmeval_files(tmp_path, vals)
    cfg = {"seed": 0, "core_variants": ["yoco", "yocou"], "studies": {}}
    tidy = _tidy(tmp_path, "fig3", summarize_fig3(paths, cfg))
    figs = _capture(monkeypatch, downstream)
    data = downstream.render_fig3(tidy, out=tmp_path / "fig3", data_out=tmp_path / "fig3_data", scale="t")
    (ax,) = figs[0].axes
    assert ax.get_ylim()[0] >= 0
    values = np.array([x for v in vals.values() for x in v.values()])
    ses = np.array([np.sqrt(x * (1 - x) / 20) if 0 < x < 1 else 0.05 for x in values])
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == pytest.approx(sorted(100 * values))
    assert _contains(ax.get_ylim(), 100 * np.clip(values + ses, None, 1))
    figs[0].canvas.draw()
    box = ax.get_legend().get_window_extent()
    assert not any(box.overlaps(p.get_window_extent()) for p in ax.patches if p.get_height() > 0)
    # the data table: one row per benchmark x run, in percent, as the audit reads it
    assert len(data) == len(specs) * 2 and list(data.benchmark.unique()) == [s["label"] for s in specs]
    back = pd.read_csv(tmp_path / "fig3_data.csv")
    assert back[back.variant == "yoco"]["value"].tolist() == pytest.approx([100 * vals["yoco"][k] for k in keys])


# --------------------------------------------------------------------------------------------------- Figures 5, 6
def _write_run(tmp: Path, run: str, params: int, book: float, code: float, code_docs: list[str],
               curve: np.ndarray | None = None) -> None:
    d = tmp / "models" / run
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_text(json.dumps({"params": params, "active_params_per_token": params // 2,
                                                "steps": 30, "tokens": 30 * 512, "train_flops": 6.0 * params}))
    if curve is not None:
        (d / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, "tokens": (i + 1) * 512,
                                                             "train_flops": 6.0 * params * (i + 1) * 512, "loss": l})
                                                 + "\n" for i, l in enumerate(curve)))
    (tmp / "ppl").mkdir(exist_ok=True)
    def split(nll: float, docs: list[dict]) -> dict:  # what yocou ppl writes (yocou.results.readers.read_ppl checks it)
        return {"nll": nll, "ppl": float(np.exp(nll)), "n_tokens": sum(d["n_tokens"] for d in docs), "seq_len": 64,
                "docs": docs}

    splits = {"heldout_book": split(book, [{"id": "milton/paradise_lost", "n_tokens": 100, "nll": book}]),
              "heldout_code": split(code, [{"id": i, "n_tokens": 50, "nll": code} for i in code_docs])}
    (tmp / "ppl" / f"{run}.json").write_text(json.dumps({"splits": splits}))


def _runs_tidy(tmp: Path, runs: list[str]) -> Path:
    from yocou.results.summarize.training import summarize_runs

    return _tidy_json(tmp, "runs", summarize_runs([tmp / "models" / r for r in runs]))


def test_fig5_data_counts_the_held_out_documents_it_was_given(tmp_path: Path) -> None:
    from yocou.results.summarize.training import summarize_fig5

    code_docs = [f"stdlib/m{i}.py" for i in range(3)]
    runs = {"yoco": ["yoco_s", "yoco"], "yocou": ["yocou_s", "yocou"]}
    for k, r in enumerate(runs["yoco"] + runs["yocou"]):
        _write_run(tmp_path, r, 1_000_000 * (1 + k % 2), 6.0 - 0.1 * k, 5.0 - 0.1 * k, code_docs)
    tidy = _tidy_json(tmp_path, "fig5", summarize_fig5(runs, run_root=tmp_path / "models", ppl_root=tmp_path / "ppl"))
    scaling.fig5_render(tidy, _runs_tidy(tmp_path, runs["yoco"] + runs["yocou"]), out=tmp_path / "fig5.png",
                        data=tmp_path / "fig5_data.csv", scale="t")
    md = (tmp_path / "fig5_data.md").read_text(encoding="utf-8")
    found = re.search(r"code \((\d+) documents?", md)
    assert found, md
    ppl = json.loads((tmp_path / "ppl" / "yoco.json").read_text())
    given = {d["id"] for d in ppl["splits"]["heldout_code"]["docs"]}
    assert int(found.group(1)) == len(given)
    # the data table holds the tidy numbers: loss = mean of book and code, the budgets of tidy/runs
    data = pd.read_csv(tmp_path / "fig5_data.csv").set_index("run")
    for k, r in enumerate(runs["yoco"] + runs["yocou"]):
        assert data.loc[r, "loss"] == pytest.approx((6.0 - 0.1 * k + 5.0 - 0.1 * k) / 2)
        assert data.loc[r, "params"] == 1_000_000 * (1 + k % 2) and data.loc[r, "steps"] == 30
        assert data.loc[r, "family"] == ("yoco" if r in runs["yoco"] else "yocou")


def test_fig5_axis_is_non_embedding_parameters_from_the_model_config(tmp_path: Path) -> None:
    """With the config's embedding sizes the left axis is params - 2·V·D per run (counted independently here from
    the module's own parameters), and a table whose parameters the config does not give is refused."""
    from yocou.model.limits import new_model
    from yocou.results.summarize.training import summarize_fig5
    from yocou.workflow.pipeline import embedding_params, resolve_model
    from yocou.workflow.wfconfig import resolve_config

    cfg = resolve_config(yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text()), root=ROOT)
    runs = cfg["studies"]["fig5"]
    emb = {r: embedding_params(cfg, r) for rs in runs.values() for r in rs}
    for k, r in enumerate(runs["yoco"] + runs["yocou"]):
        model = new_model(resolve_model(cfg, r, vocab_size=cfg["data"]["vocab_size"]))
        n_all = sum(p.numel() for p in model.parameters())
        n_emb = sum(p.numel() for name, p in model.named_parameters() if name.split(".")[0] in ("embed", "lm_head"))
        assert emb[r] == {"params": n_all, "embedding": n_emb}, (r, emb[r], n_all, n_emb)
        _write_run(tmp_path, r, n_all, 6.0 - 0.1 * k, 5.0 - 0.1 * k, ["stdlib/a.py"])
    tidy = _tidy_json(tmp_path, "fig5", summarize_fig5(runs, run_root=tmp_path / "models", ppl_root=tmp_path / "ppl"))
    run_table = _runs_tidy(tmp_path, runs["yoco"] + runs["yocou"])
    scaling.fig5_render(tidy, run_table, out=tmp_path / "fig5.png", data=tmp_path / "fig5_data.csv", scale="t",
                        embedding=emb)
    data = pd.read_csv(tmp_path / "fig5_data.csv").set_index("run")
    for r, e in emb.items():
        assert data.loc[r, "non_embedding_params"] == e["params"] - e["embedding"] < data.loc[r, "params"]
    assert "non_embedding_params" in (tmp_path / "fig5_data.md").read_text(encoding="utf-8")
    wrong = {**emb, runs["yoco"][0]: {**emb[runs["yoco"][0]], "params": 1}}
    with pytest.raises(ValueError, match=f"run {runs['yoco'][0]}: "):
        scaling.fig5_render(tidy, run_table, out=tmp_path / "x.png", data=tmp_path / "x.csv", embedding=wrong)


def test_fig6_limits_hold_every_curve_and_legends_leave_the_data_clear(tmp_path: Path, monkeypatch) -> None:
    from yocou.results.summarize.training import summarize_fig6

    ts = (1, 2, 3)
    roles, curves, rows = {}, {}, {}
    for t in ts:
        loss = _curve(30, 9.0, 4.5 - 0.2 * t, t)
        run = f"r{t}"
        _write_run(tmp_path, run, 1_000_000, 5.0 - 0.1 * t, 4.0 - 0.1 * t, ["stdlib/a.py"], curve=loss)
        (tmp_path / "models" / run / "run_config.json").write_text(json.dumps(
            {"model": {"stages": [{"n_loops": t}, {"n_loops": 1}]}}))
        roles[f"T{t}"], curves[t] = run, loss
        rows[t] = {"book": 5.0 - 0.1 * t, "code": 4.0 - 0.1 * t, "loss": 4.5 - 0.1 * t}
    tidy = _tidy_json(tmp_path, "fig6", summarize_fig6(roles, run_root=tmp_path / "models",
                                                       ppl_root=tmp_path / "ppl", alpha=0.3))
    figs = _capture(monkeypatch, scaling)
    df = scaling.fig6_render(tidy, _runs_tidy(tmp_path, list(roles.values())), out=tmp_path / "fig6.png",
                             data=tmp_path / "fig6_data.csv", scale="t")
    assert list(df["T"]) == list(ts) and list(df["loss"]) == pytest.approx([rows[t]["loss"] for t in ts])
    left, right = figs[0].axes[:2]
    for t in ts:
        assert _contains(left.get_ylim(), _ema(curves[t], 0.3)), t
    assert _contains(right.get_ylim(), [v for r in rows.values() for v in r.values()])
    assert left.get_legend() and right.get_legend()
    _assert_legends_clear(figs[0])


# --------------------------------------------------------------------------------------------------- Figure 7
def _profile(path: Path, loads: dict[int, tuple[float, float]], n_cpus: int) -> pd.DataFrame:
    rows = []
    for v, speed in (("transformer", 1.0), ("yoco", 3.0), ("rins", 0.5), ("yocou", 1.2)):
        for n, (l0, l1) in loads.items():
            rows.append({"variant": v, "seq_len": n, "prompt_len": n - 8, "n_decode": 8, "dtype": "bf16",
                         "device": "cpu", "n_threads": 2, "prefill_tokens_per_s": speed * 1e6 / n,
                         "decode_tokens_per_s": speed * 1e4 / n ** 0.5, "ttft_s": n / (speed * 1e6),
                         "prefill_s": (n - 8) / (speed * 1e6), "decode_s": 8 / (speed * 1e4 / n ** 0.5),
                         "kv_bytes_measured": 1024 * n, "kv_bytes_analytic": 1024 * n, "kv_equal": True,
                         "peak_mem_bytes": 1, "mem_kind": "cpu_rss_sampled", "n_repeats": 1, "repeats": [],
                         "loadavg_1m_before": l0, "loadavg_1m_after": l1})
    path.write_text(json.dumps({"rows": rows, "provenance": {"device": {"cpu_model": "test", "n_cpus": n_cpus}}}))
    return pd.DataFrame(rows)


def test_fig7_draws_the_papers_values_apart_and_rings_points_under_load(tmp_path: Path, monkeypatch) -> None:
    n_cpus = 2
    loads = {1024: (0.5, 0.9), 2048: (0.9, n_cpus + 1.5), 4096: (n_cpus + 1.5, n_cpus + 0.1)}
    rows = _profile(tmp_path / "profile.json", loads, n_cpus)
    figs = _capture(monkeypatch, fig7)
    from yocou.results.summarize.efficiency import summarize_efficiency
    from yocou.results.tidy import write_tidy

    core = {v: v for v in rows["variant"].unique()}
    write_tidy(summarize_efficiency(tmp_path / "profile.json", core), tmp_path / "tidy/efficiency")
    fig7.render(tmp_path / "tidy/efficiency.csv", tmp_path / "fig7.png", tmp_path / "fig7_data.csv")
    fig = figs[0]
    ours = {label for label in ("Transformer", "YOCO", "RINS", "YOCO-U")}
    paper_axes = []
    for ax in fig.axes:
        labels = [ln.get_label() for ln in ax.get_lines()]
        has_paper = any(lab.endswith("(paper)") for lab in labels)
        assert not (has_paper and ours & set(labels)), "the paper's values share axes with ours"
        if has_paper:
            paper_axes.append(ax)
    assert len(paper_axes) == 3
    for ax, t in zip(paper_axes, (8, 9, 10)):
        rep = reported.load_table(t)
        for ln in ax.get_lines():
            m = ln.get_label().removesuffix(" (paper)")
            want = rep[rep["model"] == m].sort_values("seq_len")
            assert list(ln.get_xdata()) == list(want["seq_len"]) and list(ln.get_ydata()) == list(want["value"])
        assert {ln.get_label().removesuffix(" (paper)") for ln in ax.get_lines()} == set(rep["model"])
    # rings on the timing panels exactly where a load average exceeded the CPU count
    loaded_n = sorted(n for n, (l0, l1) in loads.items() if max(l0, l1) > n_cpus)
    timing_axes = [ax for ax in fig.axes if ax not in paper_axes][:2]
    for ax in timing_axes:
        rings = [ln for ln in ax.get_lines() if ln.get_label() == "_loaded"]
        assert len(rings) == rows["variant"].nunique()
        for ln in rings:
            assert sorted(ln.get_xdata()) == loaded_n
    _assert_legends_clear(fig)
    texts = " ".join(t.get_text() for t in fig.texts)
    lo = min(min(v) for v in loads.values())
    hi = max(max(v) for v in loads.values())
    assert f"{lo:.2f}" in texts and f"{hi:.2f}" in texts and f"{len(loaded_n) * 4} of {len(rows)}" in texts


# --------------------------------------------------------------------------------------------------- Figure 8
def test_fig8_labels_rins_block_b_unlike_its_looped_block_a(tmp_path: Path) -> None:
    from yocou.results.summarize.training import summarize_fig8

    n_layers, n_loops = 2, 3
    apps = [{"index": 0, "kind": "self", "stage": 0, "loop": t, "layer": k, "window": None}
            for t in range(n_loops) for k in range(n_layers)]
    apps += [{"index": 0, "kind": "self", "stage": 1, "loop": 0, "layer": k, "window": None} for k in range(n_layers)]
    for i, a in enumerate(apps):
        a["index"] = i + 1
    dist = list(np.linspace(0.5, 0.1, len(apps)))
    split = {"distance": dist, "n_tokens": 10, "n_windows": 1, "n_docs": 1, "docs": ["d"]}
    (tmp_path / "angular").mkdir()
    (tmp_path / "angular" / "rins.json").write_text(json.dumps(
        {"applications": apps, "splits": {"book": split}, "all": split, "seq_len": 16}))
    tidy = _tidy_json(tmp_path, "fig8", summarize_fig8({"rins": tmp_path / "models" / "rins"},
                                                       angular_root=tmp_path / "angular"))
    from yocou.results.tidy import read_tidy

    fig = fig8.plot(fig8.table(read_tidy(tidy)), "t")
    ax = fig.axes[0]
    ticks = dict(zip(ax.get_xticks(), (t.get_text() for t in ax.get_xticklabels())))
    a_labels = {ticks[a["index"]] for a in apps if a["stage"] == 0}
    b_labels = {ticks[a["index"]] for a in apps if a["stage"] == 1}
    assert len(b_labels) == n_layers and not a_labels & b_labels


# --------------------------------------------------------------------------------------------------- Tables 2, 3
def _notes(md: str) -> list[str]:
    return [line[2:] for line in md.splitlines() if line.startswith("- ")]


def _budget_tidy(tmp: Path, budgets: dict[str, dict[str, float]]) -> Path:
    """A stand-in for ``tidy/runs.csv`` (study ``runs``, written by the training summaries)."""
    units = {"params": "params", "tokens": "tokens", "train_flops": "flops", "steps": "steps"}
    rows = [{"study": "runs", "run": r, "role": r, "seed": 0, "metric": m, "value": v, "unit": units[m]}
            for r, b in budgets.items() for m, v in b.items()]
    return write_tidy(rows, tmp / "tidy" / "runs")["csv"]


def test_table2_notes_which_columns_our_average_covers(tmp_path: Path) -> None:
    cols = columns("table2")
    measured = {c: s for c, s in cols.items() if "task" in s and s["task"] not in ("humaneval", "drop")}
    vals = {(s["task"], s["metric"], s.get("filter", "none")): 0.2 + 0.01 * i for i, s in enumerate(measured.values())}
    runs = ["yoco_moe", "yocou_moe", "yocou_moe_eqflops"]
    paths = _lmeval_files(tmp_path, {r: vals for r in runs})
    cfg = {"seed": 0, "core_variants": [], "studies": {"table2": dict(zip(["yoco", "equal_steps", "equal_flops"], runs))}}
    tidy = _tidy(tmp_path, "table2", summarize_table("table2", paths, cfg))
    budgets = {"yoco_moe": {"steps": 30, "tokens": 30 * 2048, "train_flops": 3.0e12, "params": 5.0e6},
               "yocou_moe": {"steps": 30, "tokens": 30 * 2048, "train_flops": 4.5e12, "params": 5.0e6},
               "yocou_moe_eqflops": {"steps": 20, "tokens": 20 * 2048, "train_flops": 3.0e12, "params": 5.0e6}}
    downstream.render_table("table2", tidy, out=tmp_path / "table2.csv", scale="t",
                            runs=_budget_tidy(tmp_path, budgets),
                            snapshots={"yocou_moe_eqflops": ("yocou_moe", "yoco_moe")})
    avg_col = next(c for c, s in cols.items() if "average" in s)
    want = cols[avg_col]["average"]
    notes = _notes((tmp_path / "table2.md").read_text(encoding="utf-8"))
    note = [n for n in notes if n.startswith(avg_col)]
    assert note, "no note on the Average of our rows"
    assert f"{len(measured)} column" in note[0] and f"paper's {len(want)}" in note[0]
    for c in want:
        assert c in note[0], c
    wide = pd.read_csv(tmp_path / "table2.csv")
    ours = wide[wide["model"].str.contains("ours")]
    assert ours[avg_col].astype(float).tolist() == pytest.approx([100 * np.mean(list(vals.values()))] * 3, abs=0.006)
    # the budgets from tidy/runs.csv, and where the equal-FLOPs snapshot was taken
    assert "Budget of YOCO (MoE): 30 steps, 0.06M tokens, 3e+12 training FLOPs, 5.00M parameters." in notes
    assert any(n.startswith("Budget of YOCO-U (MoE, Equal FLOPS): 20 steps") and "the snapshot of yocou_moe at "
               "step 20, where its training FLOPs reach yoco_moe's full run (3e+12)" in n for n in notes)
    assert any(n.startswith("BBH: ") for n in notes) and any("Humaneval: not run" in n for n in notes)
    # the cells: one row per run x column, in percent, derived from the tidy rows
    cells = pd.read_csv(tmp_path / "table2_cells.csv")
    assert len(cells) == len(runs) * len(cols)
    arc = cells[(cells.variant == "yocou_moe") & (cells.column == "ARC-C")].iloc[0]
    assert arc["value"] == pytest.approx(100 * vals[("arc_challenge", "acc_norm", "none")])
    assert arc["role"] == "equal_steps" and arc["status"] == "measured" and arc["n_items"] == 20
    assert set(cells[cells.column == "BBH"].status) == {"unavailable"}
    assert json.loads((tmp_path / "table2.json").read_text())["rows"]


def test_table3_says_which_caption_models_the_paper_prints_no_row_for(tmp_path: Path) -> None:
    cols = columns("table3")
    variants = ["transformer", "yoco", "loop", "rins", "yocou"]
    vals = {(s["task"], s["metric"], "none"): 0.3 for s in cols.values() if "task" in s}
    paths = _lmeval_files(tmp_path, {v: vals for v in variants})
    cfg = {"seed": 0, "core_variants": [], "studies": {"table3": variants}}
    tidy = _tidy(tmp_path, "table3", summarize_table("table3", paths, cfg))
    downstream.render_table("table3", tidy, out=tmp_path / "table3", scale="t")
    printed = list(dict.fromkeys(reported.load_table(3)["model"]))
    caption = reported.table_meta(3)["caption"]
    ours = [downstream.label(v) for v in variants]
    lacking = [m for m in ours if m not in printed]
    assert lacking and all(m in caption for m in lacking)  # what the note is about holds on the paper's page
    notes = _notes((tmp_path / "table3.md").read_text(encoding="utf-8"))
    note = [n for n in notes if "no paper row" in n]
    assert len(note) == 1
    for m in printed + lacking:
        assert m in note[0], m
    elsewhere = [m for m in lacking if m in set(reported.load_table(5)["model"])]
    assert elsewhere  # YOCO-U
    for m in elsewhere:
        assert f"Table 5 prints a {m} row" in note[0]
    assert not any(n.startswith("Budget of") for n in notes)  # no runs.csv given: no budget notes
