"""Result files read back by the renderers are validated: a corrupt number, a duplicated or missing row or a
truncated file fails in one line naming the file and the row, never renders silently."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest


def _profile(path: Path, **bad: float) -> Path:
    """A small valid profile.json; ``bad`` overrides fields of rows[2] (``yocou`` at 1024)."""
    rows = []
    for v in ("yoco", "yocou"):
        for n in (1024, 2048):
            rows.append({"variant": v, "seq_len": n, "prompt_len": n - 8, "n_decode": 8, "chunk_size": 512,
                         "dtype": "bf16", "batch_size": 1, "device": "cpu", "n_threads": 2, "prefill_s": n * 1e-5,
                         "prefill_tokens_per_s": (n - 8) / (n * 1e-5), "ttft_s": n * 1e-5, "decode_s": 1e-3,
                         "decode_tokens_per_s": 8e3, "decode_ms_per_token": 0.125, "kv_bytes_measured": 4 * n,
                         "kv_bytes_analytic": 4 * n, "kv_equal": True, "peak_mem_bytes": 1, "peak_mem_delta_bytes": 0,
                         "mem_kind": "cpu_rss_sampled", "n_repeats": 1, "repeats": [], "loadavg_1m_before": 0.5,
                         "loadavg_1m_after": 0.7})
    rows[2].update(bad)
    path.write_text(json.dumps({"rows": rows, "provenance": {"device": {"cpu_model": "test", "n_cpus": 2}}}))
    return path


def _fig7(tmp_path: Path, prof: Path) -> int:
    """Figure 7 the pipeline's way: the profile summarized into tidy/efficiency (which validates it), then drawn."""
    from yocou.results.render import fig7
    from yocou.results.summarize.efficiency import summarize_efficiency
    from yocou.results.tidy import write_tidy

    tidy = write_tidy(summarize_efficiency(prof, {"yoco": "yoco", "yocou": "yocou"}),
                      tmp_path / "tidy" / "efficiency")["csv"]
    fig7.render(tidy, tmp_path / "fig7.png", tmp_path / "fig7_data.csv")
    return 0


def _metrics_rows(n: int = 12, offset: float = 0.0) -> list[dict]:
    return [{"step": s, "tokens": 64 * s, "train_flops": 64e6 * s, "loss": 6.0 - 0.2 * s + offset, "lr": 1e-3}
            for s in range(1, n + 1)]


def _runs(tmp_path: Path, yocou_lines: list[str] | None = None) -> list[str]:
    """Run folders ``yoco`` (valid) and ``yocou`` (``yocou_lines`` as its metrics.jsonl, else valid)."""
    out = []
    for v, off in (("yoco", 0.0), ("yocou", -0.05)):
        d = tmp_path / "runs" / v
        d.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(r) for r in _metrics_rows(offset=off)] if v == "yoco" or yocou_lines is None \
            else yocou_lines
        (d / "metrics.jsonl").write_text("".join(ln + "\n" for ln in lines))
        out.append(str(d))
    return out


def _fig2(tmp_path: Path, runs: list[str], summary: bool = True) -> int:
    """Summarize (yocou.results.summarize.training, which reads the logs) → tidy → render, as the workflow does."""
    from yocou.results.render import fig2
    from yocou.results.summarize.training import summarize_fig2
    from yocou.results.tidy import write_tidy

    tidy = write_tidy(summarize_fig2({Path(r).name: r for r in runs}), tmp_path / "tidy" / "fig2")["json"]
    fig2.render(tidy, out=tmp_path / "fig2", data=tmp_path / "fig2_data",
                summary=tmp_path / "fig2_summary" if summary else None)
    return 0


def _ppl(path: Path, ppl: float = 40.0) -> Path:
    split = {"ppl": ppl, "nll": math.log(40.0), "n_tokens": 1000, "n_docs": 1, "seq_len": 64,
             "max_tokens_per_doc": 1024, "dtype": "fp32", "docs": [{"id": "book/0", "n_tokens": 1000, "nll": 3.7}]}
    path.write_text(json.dumps({"model": "m.pt", "splits": {"heldout_book": split,
                                                            "heldout_code": {**split, "ppl": 40.0}},
                                "provenance": {}}, indent=2))
    return path


def _heldout_ppl(tmp_path: Path, ppl: Path, run: Path | None = None) -> int:
    """Summarize (reads the ppl JSON ``ppl``, named after its run) → tidy → render, as the workflow does."""
    from yocou.results.render import heldout_ppl
    from yocou.results.summarize.training import summarize_heldout_ppl, summarize_runs
    from yocou.results.tidy import write_tidy

    if run is None:
        run = tmp_path / "runs" / ppl.stem
        run.mkdir(parents=True, exist_ok=True)
        (run / "summary.json").write_text(json.dumps({"name": ppl.stem, "steps": 10, "tokens": 640,
                                                      "train_flops": 6.4e8, "params": 1000,
                                                      "active_params_per_token": 900, "train_flops_per_token": 1e6}))
    tidy = write_tidy(summarize_heldout_ppl({ppl.stem: run}, ppl_root=ppl.parent), tmp_path / "tidy" / "ppl")["json"]
    runs = write_tidy(summarize_runs([run]), tmp_path / "tidy" / "runs")["json"]
    heldout_ppl.render(tidy, runs, out=tmp_path / "ppl_table")
    return 0


def test_valid_files_render(tmp_path: Path) -> None:
    """The fixtures the other tests corrupt are valid as written."""
    assert _fig7(tmp_path, _profile(tmp_path / "profile.json")) == 0
    assert _fig2(tmp_path, _runs(tmp_path)) == 0
    assert _heldout_ppl(tmp_path, _ppl(tmp_path / "yocou.json")) == 0


def _names(e: pytest.ExceptionInfo, path: Path, where: str, field: str | None) -> None:
    """The error is a one-line ResultFileError naming the file, the place and the field."""
    from yocou.results.readers import ResultFileError

    assert isinstance(e.value, ResultFileError), repr(e.value)
    assert (e.value.path, e.value.where, e.value.field) == (path, where, field), str(e.value)
    assert str(e.value).startswith(f"{path}: {where}: ") and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("field, value", [
    ("prefill_tokens_per_s", float("nan")),   # not finite
    ("decode_tokens_per_s", -8000.0),         # not > 0
    ("kv_bytes_measured", -1),                # not > 0
    ("kv_bytes_measured", 4.5),               # not an integer
    ("kv_equal", 1),                          # not true or false
])
def test_fig7_rejects_a_corrupt_throughput_naming_file_and_row(tmp_path: Path, field: str, value: float) -> None:
    """NaN or negative throughput used to vanish from the log-scale panels without a word."""
    prof = _profile(tmp_path / "profile.json", **{field: value})
    with pytest.raises(ValueError) as e:
        _fig7(tmp_path, prof)
    _names(e, prof, "rows[2]", field)
    assert not (tmp_path / "fig7.png").exists()


def test_fig7_rejects_a_duplicated_profile_row(tmp_path: Path) -> None:
    prof = _profile(tmp_path / "profile.json", variant="yoco")  # rows[2] becomes a second (yoco, 1024)
    with pytest.raises(ValueError) as e:
        _fig7(tmp_path, prof)
    _names(e, prof, "rows[2]", "variant")
    assert "rows[0]" in str(e.value)  # the row it repeats


@pytest.mark.parametrize("case", ["nan_loss", "duplicated_rows", "empty"])
def test_fig2_rejects_a_corrupt_training_log_naming_file_and_line(tmp_path: Path, case: str) -> None:
    """A NaN loss went through, duplicated rows changed the Figure 2 summary silently, an empty log gave
    "['step', ...] not in index"."""
    rows = [json.dumps(r) for r in _metrics_rows(offset=-0.05)]
    if case == "nan_loss":
        rows[4] = rows[4].replace('"loss": ' + json.dumps(_metrics_rows(offset=-0.05)[4]["loss"]), '"loss": NaN')
        where, field = "line 5", "loss"
    elif case == "duplicated_rows":
        rows = rows[:8] + rows[5:]  # rows of steps 6..8 logged twice, as a botched resume would
        where, field = "line 9", "step"
    else:
        rows = []
        where, field = "", None
    runs = _runs(tmp_path, rows)
    path = Path(runs[1]) / "metrics.jsonl"
    with pytest.raises(ValueError) as e:
        _fig2(tmp_path, runs)
    if where:
        _names(e, path, where, field)
    else:
        assert str(e.value).startswith(f"{path}: no rows"), str(e.value)
    assert not (tmp_path / "fig2_summary.csv").exists()


def test_fig2_empty_log_is_a_one_line_error_naming_the_file(tmp_path: Path) -> None:
    """The summarize step (a Snakemake script now, no CLI) fails in one line naming the file."""
    runs = _runs(tmp_path, [])
    with pytest.raises(ValueError) as e:
        _fig2(tmp_path, runs)
    assert "\n" not in str(e.value)
    assert str(e.value).startswith(f"{Path(runs[1]) / 'metrics.jsonl'}: no rows"), str(e.value)
    assert not (tmp_path / "tidy" / "fig2.csv").exists()


def test_heldout_ppl_rejects_a_negative_perplexity(tmp_path: Path) -> None:
    ppl = _ppl(tmp_path / "yocou.json", ppl=-40.0)
    with pytest.raises(ValueError) as e:
        _heldout_ppl(tmp_path, ppl)
    _names(e, ppl, "splits.heldout_book", "ppl")
    assert not (tmp_path / "ppl_table.csv").exists()


@pytest.mark.parametrize("kind", ["profile", "metrics", "ppl"])
def test_a_truncated_result_file_names_the_file(tmp_path: Path, kind: str) -> None:
    """A truncated file gave "Expecting ',' delimiter" naming no file."""
    if kind == "profile":
        path = _profile(tmp_path / "profile.json")
        run = lambda: _fig7(tmp_path, path)  # noqa: E731
    elif kind == "metrics":
        runs = _runs(tmp_path)
        path = Path(runs[1]) / "metrics.jsonl"
        run = lambda: _fig2(tmp_path, runs)  # noqa: E731
    else:
        path = _ppl(tmp_path / "yocou.json")
        run = lambda: _heldout_ppl(tmp_path, path)  # noqa: E731
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # cut inside a row
    with pytest.raises(ValueError, match=rf"^{path}: line \d+ column \d+: not valid JSON \(") as e:
        run()
    assert "\n" not in str(e.value)


def test_readers_accept_what_the_writers_write(tmp_path: Path) -> None:
    from yocou.results.readers import (
        ResultFileError,
        read_metrics,
        read_ppl,
        read_profile,
    )

    assert issubclass(ResultFileError, ValueError)
    assert len(read_metrics(Path(_runs(tmp_path)[0]) / "metrics.jsonl")) == 12
    rows, prov = read_profile(_profile(tmp_path / "profile.json"))
    assert len(rows) == 4 and prov["device"]["cpu_model"] == "test"
    assert read_ppl(_ppl(tmp_path / "p.json"))["splits"]["heldout_book"]["ppl"] == 40.0


def test_readers_accept_real_training_and_ppl_outputs(tmp_path: Path, token_dir: Path) -> None:
    """What train() and `yocou ppl` write passes the readers, and Figure 2 and the ppl table render from it."""
    from yocou.cli import main as cli
    from yocou.model.config import preset
    from yocou.results.readers import read_metrics, read_ppl, read_summary
    from yocou.training.train import TrainConfig, train

    run = tmp_path / "runs" / "yocou"
    train(preset("yocou-smoke", vocab_size=304), TrainConfig(steps=3, batch_size=2, seq_len=8, log_every=1),
          token_dir / "train.bin", run, progress=False)
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2, 3]
    read_summary(run / "summary.json", require=("params", "active_params_per_token", "train_flops_per_token"))
    ppl = tmp_path / "yocou.json"
    assert cli(["ppl", "--model", str(run / "model.pt"), "--data", str(token_dir), "--seq-len", "8",
                "--max-tokens", "64", "--out", str(ppl)]) == 0
    assert read_ppl(ppl)["splits"]["heldout_book"]["ppl"] > 1
    assert _fig2(tmp_path, [str(run)], summary=False) == 0
    assert _heldout_ppl(tmp_path, ppl, run) == 0
    assert (tmp_path / "fig2.png").is_file() and (tmp_path / "ppl_table.md").is_file()


RESULTS = Path(__file__).resolve().parents[1] / "results" / "tiny"


@pytest.mark.parametrize("src, reader, corrupt, where, field", [
    ("longppl/yocou.json", "read_longppl", lambda d: d["splits"]["book"]["curves"][1].update(cum_ppl=-1.0),
     "splits.book.curves[1]", "cum_ppl"),
    ("longppl/yocou.json", "read_longppl", lambda d: d["splits"]["code"]["curves"].append(
        d["splits"]["code"]["curves"][0]), "splits.code.curves[6]", "length"),       # lengths must increase
    ("longppl/yocou.json", "read_longppl", lambda d: d["splits"]["book"].pop("docs"), "splits.book", "docs"),
    ("angular/yocou.json", "read_angular", lambda d: d["all"]["distance"].__setitem__(2, float("nan")),
     "all.distance[2]", "distance"),
    ("angular/yocou.json", "read_angular", lambda d: d["splits"]["book"]["distance"].pop(),
     "splits.book", "distance"),                                                       # one per application
    ("niah/yocou_niah.json", "read_niah", lambda d: d["cells"][3].update(acc=1.5), "cells[3]", "acc"),
    ("kv_measure.json", "read_kv_measure", lambda d: d["rows"][0].update(measured_bytes=-4), "rows[0]",
     "measured_bytes"),
    ("kv_measure.json", "read_kv_measure", lambda d: d.update(rows=[]), "top level", "rows"),
])
def test_long_context_angular_niah_and_kv_readers_name_file_and_row(tmp_path: Path, src: str, reader: str,
                                                                    corrupt, where: str, field: str) -> None:
    import yocou.results.readers as R

    d = json.loads((RESULTS / src).read_text())
    getattr(R, reader)(RESULTS / src)  # the committed result is valid
    corrupt(d)
    path = tmp_path / Path(src).name
    path.write_text(json.dumps(d))
    with pytest.raises(R.ResultFileError) as e:
        getattr(R, reader)(path)
    _names(e, path, where, field)


@pytest.mark.parametrize("corrupt, where, field", [
    (lambda r: r.update(choice_correct=0), "records[0]", "choice_correct"),   # disagrees with the log-probabilities
    (lambda r: r.update(logp_choices=[-1.0, float("nan")], n_choices=3), "records[0].logp_choices[1]", "logp_choices"),
    (lambda r: r.update(logp_choices=[-9.0, -9.0]), "records[0]", "logp_choices"),  # not n_choices - 1 of them
    (lambda r: r.pop("n_choices"), "records[0]", "n_choices"),
])
def test_niah_reader_checks_the_multiple_choice(tmp_path: Path, corrupt, where: str, field: str) -> None:
    from yocou.results.readers import ResultFileError, read_niah

    rec = {"task": "s_niah_1", "correct": 0, "logp_value": -2.0, "logp_distractor": -5.0, "logp_choices": [-5.0],
           "n_choices": 2, "choice_correct": 1}
    cell = {"task": "s_niah_1", "length": 64, "depth": 0.0, "n": 1, "acc": 0.0, "choice_acc": 1.0,
            "logp_value": -2.0, "logp_distractor": -5.0, "gain": 3.0}
    path = tmp_path / "n.json"
    path.write_text(json.dumps({"records": [rec], "cells": [cell]}))
    read_niah(path)
    corrupt(rec)
    path.write_text(json.dumps({"records": [rec], "cells": [cell]}))
    with pytest.raises(ResultFileError) as e:
        read_niah(path)
    _names(e, path, where, field)
