"""The report's HTML pages of the tables, the 2 MiB ``data:`` URL limit, and captions that say what the figures draw.

Independent references: Snakemake's own ``data_uri_from_file`` for the URL a single-file report embeds; the axis
labels of the rendered figures (matplotlib objects) for the metric a caption names; the committed tiny results
for the report Snakemake builds from them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from yocou.results.render import pages
from yocou.results.render.labels import drawn, heldout_logged

ROOT = Path(__file__).resolve().parents[1]


def test_a_markdown_table_becomes_an_html_table_without_images(tmp_path: Path) -> None:
    md = tmp_path / "t.md"
    md.write_text("### Title `x`\n\n| a | b |\n|---|---:|\n| 1 | 2.5 |\n\n- note with `code`\n\n"
                  "![Figure 2: loss (ours; figures/tiny/fig2.png)](../fig2.png)\n", encoding="utf-8")
    page = pages.page_html(md)
    assert "<table>" in page and "<td>1</td>" in page and "2.5" in page
    assert "<code>x</code>" in page and "<code>code</code>" in page and "`" not in page
    assert "<img" not in page and "[figure: Figure 2: loss (ours; figures/tiny/fig2.png); in the report" in page


def test_a_csv_table_becomes_an_html_table(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    pd.DataFrame({"run": ["yoco", "yocou<1>"], "loss": [4.9, 5.0]}).to_csv(csv, index=False)
    page = pages.page_html(csv)
    assert "2 rows, 2 columns" in page and "<td>yoco</td>" in page and "yocou&lt;1&gt;" in page


@pytest.mark.parametrize("name, text, match", [("gone.md", None, "no such table file"),
                                               ("empty.md", "  \n", "empty table file"),
                                               ("t.txt", "x", "expected a .md or .csv")])
def test_a_bad_table_file_fails_naming_it(tmp_path: Path, name: str, text: str | None, match: str) -> None:
    f = tmp_path / name
    if text is not None:
        f.write_text(text)
    with pytest.raises((FileNotFoundError, ValueError), match=match) as e:
        pages.page_html(f)
    assert name in str(e.value)


def test_the_data_url_length_is_snakemakes_and_the_limit_is_enforced(tmp_path: Path) -> None:
    """The URL length equals that of the data URI Snakemake's report builds; a file whose URL would pass
    Chromium's 2 MiB is refused naming it, one just below passes."""
    from snakemake.report.common import data_uri_from_file

    small = tmp_path / "p.html"
    small.write_text("<p>é</p>" * 100, encoding="utf-8")
    assert pages.check_embeddable(small) == len(data_uri_from_file(small))
    head = len(data_uri_from_file(small)) - len(__import__("base64").b64encode(small.read_bytes()))
    fits = (pages.DATA_URL_LIMIT - head) // 4 * 3  # bytes whose base64 fills the limit
    ok = tmp_path / "ok.png"
    ok.write_bytes(b"\0" * fits)
    assert len(data_uri_from_file(ok)) <= pages.DATA_URL_LIMIT
    pages.check_embeddable(ok)
    big = tmp_path / "big.png"
    big.write_bytes(b"\0" * (fits + 3))
    assert len(data_uri_from_file(big)) > pages.DATA_URL_LIMIT
    with pytest.raises(ValueError, match="big.png.*2097152"):
        pages.check_embeddable(big)


def test_the_cli_writes_pages_and_refuses_a_bad_pair(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    md = tmp_path / "a.md"
    md.write_text("| a |\n|---|\n| 1 |\n")
    assert pages.main([f"{md}={tmp_path / 'html' / 'a.html'}"]) == 0
    assert "<table>" in (tmp_path / "html" / "a.html").read_text()
    with pytest.raises(ValueError, match="TABLE=PAGE"):
        pages.main([str(md)])
    with pytest.raises(ValueError, match="named twice"):
        pages.main([f"{md}={tmp_path / 'x.html'}", f"{md}={tmp_path / 'x.html'}"])


def _caption(item: str, config: dict, **params: object) -> str:
    """The caption ``workflows/report/<item>.rst`` as Snakemake renders it (Jinja2, ``snakemake.config`` and
    ``snakemake.params``), tags and markup stripped."""
    import jinja2

    text = (ROOT / "workflows" / "report" / f"{item}.rst").read_text(encoding="utf-8")
    out = jinja2.Template(text).render(snakemake=SimpleNamespace(config=config, params=SimpleNamespace(**params)))
    return " ".join(out.replace("``", "").replace("*", "").split())


def _tiny_config(eval_every: int | None = None) -> dict:
    from yocou.workflow.wfconfig import read_scale_file, resolve_config

    cfg = resolve_config(read_scale_file(ROOT / "workflows/config/tiny.yaml"), root=ROOT)
    if eval_every is not None:
        cfg["train"]["eval_every"] = eval_every
    return cfg


def _fig2_curves(held: bool) -> pd.DataFrame:
    rows = []
    for v in ("yoco", "yocou"):
        for step in (1, 2, 3):
            rows.append({"variant": v, "step": step, "tokens": 100.0 * step, "train_flops": 1e9 * step,
                         "loss": 6.0 - 0.1 * step, "seed_min": 5.9 - 0.1 * step, "seed_max": 6.1 - 0.1 * step,
                         "n": 3 if held else 1})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("eval_every", [25, 0])
def test_figure_2s_caption_names_the_loss_its_axes_draw(eval_every: int) -> None:
    """With a held-out loss logged (tiny) the figure draws it, mean across seeds with a min-max band, and the
    caption says so; without one both say training loss. The caption's words come from the rule's params, the
    axis label from the renderer: they must agree."""
    import matplotlib.pyplot as plt

    from yocou.results.render.fig2 import plot

    cfg = _tiny_config(eval_every)
    held = heldout_logged(cfg)
    assert held == (eval_every > 0)
    fig = plot(_fig2_curves(held), drawn("fig2", held), "tiny", held)
    ylabel = fig.axes[0].get_ylabel()
    plt.close(fig)
    cap = _caption("fig2", cfg, drawn=drawn("fig2", cfg))
    assert ylabel in cap, (ylabel, cap)
    assert ("held-out" in ylabel) == held
    if held:
        assert "mean across seeds, band min-max across seeds" in cap and "EMA" not in cap
    else:
        assert "training loss (nats/token, EMA-smoothed)" in cap


def test_figure_6s_caption_names_both_axes_of_the_committed_figure(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """Figure 6 re-rendered from the committed tiny tables: its two y labels appear in the caption rendered with
    the rule's params."""
    from yocou.results.render import scaling
    from yocou.results.render.fig6 import render

    got = {}
    monkeypatch.setattr(scaling, "save_figure", lambda fig, stem, config=None: got.setdefault("fig", fig))
    render(ROOT / "results/tiny/tidy/fig6.json", ROOT / "results/tiny/tidy/runs.json", out=tmp_path / "f.png",
           data=tmp_path / "d.csv", scale="tiny")
    labels = [ax.get_ylabel() for ax in got["fig"].axes[:2]]
    cfg = _tiny_config()
    cap = _caption("fig6", cfg, drawn=drawn("fig6", cfg))
    for lab in labels:
        assert lab in cap, (lab, cap)
    assert "held-out" in labels[0]  # tiny logs a held-out loss: the left panel draws it


def test_table_4s_caption_describes_the_multiple_choice_its_heatmap_shows() -> None:
    from yocou.results.evaldefs import protocol

    n = protocol("niah")["n_choices"]
    cap = _caption("table4", _tiny_config(), n_choices=n)
    assert "multiple-choice accuracy" in cap and f"{n} choices" in cap and f"{n - 1} seeded distractor" in cap


def _report_results(page: str) -> dict:
    m = re.search(r"^\s*var results = (\{.*\});\s*$", page, re.M)
    assert m, "no 'var results' in the report"
    return json.loads(m.group(1))


@pytest.mark.slow
def test_the_tiny_report_embeds_every_item_under_the_browser_limit(tmp_path: Path) -> None:
    """`snakemake --report` on a scratch copy of the committed tiny results: every item's data: URL fits in
    Chromium's 2 MiB, every table item (.md, .csv) has its HTML page in the report, the audit is shown as its
    HTML page (the 3 MB standalone page with inline figures is not an item), and the pages' captions are the
    captions of their tables."""
    from conftest import workflow_copy

    wd = workflow_copy(tmp_path)
    for name in ("results/tiny", "figures/tiny", "results/paper_shape", "figures/paper_shape", "eval"):
        shutil.copytree(ROOT / name, wd / name)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--report", "r.html", "--config",
                          "scale=tiny"], cwd=wd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    results = _report_results((wd / "r.html").read_text(encoding="utf-8"))
    too_big = {p: len(r["data_uri"]) for p, r in results.items() if len(r["data_uri"]) > pages.DATA_URL_LIMIT}
    assert not too_big, too_big
    tables = [p for p in results if p.endswith((".md", ".csv"))]
    assert len(tables) >= 20, tables
    for p in tables:
        folder, name = p.rsplit("/", 1)
        page = f"{folder}/html/{name.rsplit('.', 1)[0]}.html"
        assert page in results, p
        assert results[page]["caption"] == results[p]["caption"], p
    assert "results/tiny/audit/html/report.html" in results
    assert "results/tiny/audit/report.html" not in results
    steps = yaml.safe_load((ROOT / "workflows/config/tiny.yaml").read_text())["train"]["steps"]
    assert str(steps) in results["results/tiny/html/table2.html"]["caption"]
