"""Incomplete tables are errors, never smaller results.

A tidy table cut short (half its lines, only its header), a table whose rows lack a run its config names or a
seed whose curve is shorter than its role's other seeds, a table lost from a results folder the pipeline made,
and a reported-numbers CSV cut short all stop the reader (and so the audit) with one line naming the file, the
study and the first missing key. The expected rows are computed here from the committed full tables, not by the
code under test.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from yocou.results.readers import ResultFileError
from yocou.results.tidy import read_tidy, write_tidy

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "results" / "tiny"


def _copy(tmp_path: Path) -> Path:
    r = tmp_path / "r"
    shutil.copytree(TINY / "tidy", r / "tidy")
    shutil.copy(TINY / "config.json", r / "config.json")
    return r


def _audit(r: Path, capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, str]:
    from yocou.cli import main

    capsys.readouterr()
    rc = main(["audit", "--scale", "tiny", "--results", str(r), *extra])
    return rc, capsys.readouterr().err


def _key(msg: str) -> dict[str, str]:
    """The quoted fields of an error's ``first missing key: run='x', ..., metric='y'``."""
    m = re.search(r"first missing key: ([^)]*)\)", msg)
    assert m, msg
    return dict(re.findall(r"(\w+)='([^']*)'", m.group(1)))


@pytest.mark.slow
def test_every_committed_table_reads_complete() -> None:
    tables = sorted(ROOT.glob("results/*/tidy/*.csv"))
    assert len(tables) >= 15
    for t in tables:
        assert len(read_tidy(t)) > 0, t


@pytest.mark.slow
@pytest.mark.parametrize("keep", ["half", "header"])
def test_a_cut_tidy_table_stops_the_audit_naming_study_file_and_first_missing_key(
        keep: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    r = _copy(tmp_path)
    f = r / "tidy" / "heldout_ppl.csv"
    lines = f.read_text().splitlines(keepends=True)
    f.write_text("".join(lines[: len(lines) // 2] if keep == "half" else lines[:1]))
    rc, err = _audit(r, capsys)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert str(f) in err and "study heldout_ppl" in err and "rows missing" in err, err
    # the key it names is a row of the full table that the cut one lacks
    k = _key(err)
    full, cut = pd.read_csv(TINY / "tidy" / "heldout_ppl.csv"), pd.read_csv(f)
    sel = lambda df: df[(df["run"] == k["run"]) & (df["metric"] == k["metric"])]  # noqa: E731
    assert len(sel(full)) >= 1 and len(sel(cut)) == 0, k


def test_a_table_without_a_run_its_config_names_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """CSV and JSON agree (the summarize step wrote both) but a replica the config runs has no rows."""
    r = _copy(tmp_path)
    stem = r / "tidy" / "heldout_ppl"
    prov = json.loads(stem.with_suffix(".json").read_text())["provenance"]["config"]
    rep = prov["replicas"]["yoco"][-1]   # the config's last seed replica of YOCO
    assert rep.startswith("yoco_seed")
    df = read_tidy(stem.with_suffix(".csv"))
    assert (df["run"] == rep).any()
    write_tidy(df[df["run"] != rep], stem, config={k: v for k, v in prov.items() if k != "inputs"})
    with pytest.raises(ResultFileError, match=rf"study heldout_ppl: no rows for run '{rep}', which the config "
                                              rf"runs \(replicas\.yoco\).*first missing key: run='{rep}'"):
        read_tidy(stem.with_suffix(".csv"))
    rc, err = _audit(r, capsys)
    assert rc == 2 and "heldout_ppl.csv" in err and rep in err, err


def test_a_seed_with_a_shorter_curve_is_refused(tmp_path: Path) -> None:
    stem = tmp_path / "fig2"
    shutil.copy(TINY / "tidy" / "fig2.json", stem.with_suffix(".json"))
    prov = json.loads(stem.with_suffix(".json").read_text())["provenance"]["config"]
    df = read_tidy(TINY / "tidy" / "fig2.csv")
    curve = df[(df["run"] == "yoco_seed2") & (df["metric"] == "heldout_loss")]
    last = curve["axis_value"].astype(float).max()
    assert len(curve) >= 3
    drop = (df["run"] == "yoco_seed2") & (df["metric"] == "heldout_loss") & (df["axis_value"].astype(float) == last)
    write_tidy(df[~drop], stem, config={k: v for k, v in prov.items() if k != "inputs"})
    with pytest.raises(ResultFileError) as e:
        read_tidy(stem.with_suffix(".csv"))
    msg = str(e.value)
    assert "study fig2: run 'yoco_seed2' (role 'yoco') lacks a heldout_loss row" in msg, msg
    assert f"axis_value='{df[drop]['axis_value'].iloc[0]}'" in msg, msg


def test_a_csv_without_its_json_is_refused(tmp_path: Path) -> None:
    shutil.copy(TINY / "tidy" / "kv.csv", tmp_path / "kv.csv")
    with pytest.raises(ResultFileError, match=r"kv\.csv: study kv: kv\.json is missing beside it"):
        read_tidy(tmp_path / "kv.csv")


@pytest.mark.slow
def test_a_lost_table_is_an_error_where_the_pipeline_made_the_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    r = _copy(tmp_path)
    for x in (".csv", ".json"):
        (r / "tidy" / f"table4{x}").unlink()
    rc, err = _audit(r, capsys)
    assert rc == 2 and f"{r / 'tidy' / 'table4.csv'} not found: study table4 is run by the config" in err, err
    # without the resolved config the folder is a partial one (made by hand or by some targets): "not run"
    (r / "config.json").unlink()
    rc, err = _audit(r, capsys, "--out", str(tmp_path / "audit"))
    assert rc == 0, err
    v = pd.read_csv(tmp_path / "audit" / "verdicts.csv")
    t4 = v[v["files"].astype(str).str.contains("table4")]
    assert len(t4) > 0 and (t4["qualifier"] == "not run at this scale").all()


@pytest.mark.parametrize("cut", ["comments", "mid_row", "header"])
def test_a_reported_table_cut_short_names_its_file(cut: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rep = tmp_path / "rep"
    shutil.copytree(ROOT / "yocou" / "results" / "reported", rep, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    f = rep / "table08.csv"
    text = f.read_text()
    lines = text.splitlines(keepends=True)
    body = [i for i, x in enumerate(lines) if not x.startswith("#")]
    f.write_text({"comments": "".join(lines[: body[0]]), "mid_row": text[: len(text) - 5],
                  "header": "".join(lines[: body[0] + 1])}[cut])
    rc, err = _audit(TINY, capsys, "--reported-dir", str(rep))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert f"reported table {f}" in err, err
