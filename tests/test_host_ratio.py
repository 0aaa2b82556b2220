"""benchmarks/host_ratio.py: per-job CPU seconds of two hosts, paired by rule and wildcards."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hr():
    spec = importlib.util.spec_from_file_location("host_ratio", ROOT / "benchmarks/host_ratio.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _csv(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path.write_text("group,rule,wildcards,wall_s,cpu_s\n" + "".join(f"training,{r},{w},1.0,{c}\n" for r, w, c in rows))
    return path


def test_pairs_jobs_by_rule_and_wildcards_and_sums_per_rule(hr, tmp_path: Path) -> None:
    here = _csv(tmp_path / "here.csv", [("train", "yoco", "300"), ("train", "rins", "150"), ("train", "only_here", "9"),
                                        ("tokens", "", "14"), ("ppl", "yoco", "NA"), ("fig2", "", "1")])
    ref = _csv(tmp_path / "ref.csv", [("train", "yoco", "200"), ("train", "rins", "100"), ("tokens", "", "7"),
                                      ("ppl", "yoco", "20"), ("fig2", "", "0.5")])
    assert hr.main(["--here", str(here), "--reference", str(ref), "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o.json").read_text())
    by = {r["rule"]: r for r in doc["by_rule"]}
    # fig2 is under --min-cpu-s on the reference, ppl has no CPU seconds here, only_here has no reference row
    assert sorted((j["rule"], j["wildcards"]) for j in doc["jobs"]) == [("tokens", ""), ("train", "rins"), ("train", "yoco")]
    assert by["train"]["jobs"] == 2 and by["train"]["ratio"] == pytest.approx(450 / 300)
    assert by["tokens"]["ratio"] == pytest.approx(2.0)
    assert by["all"]["ratio"] == pytest.approx(464 / 307, abs=1e-3)
    assert (by["all"]["min"], by["all"]["max"]) == (pytest.approx(1.5), pytest.approx(2.0))
    assert "| train | 2 | 450 | 300 | 1.500 |" in (tmp_path / "o.md").read_text()


def test_a_table_without_cpu_seconds_is_refused_naming_the_file_and_column(hr, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("rule,wildcards,wall_s\ntrain,yoco,3\n")
    ok = _csv(tmp_path / "ok.csv", [("train", "yoco", "200")])
    assert hr.main(["--here", str(ok), "--reference", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"host_ratio: {bad}: no column 'cpu_s'") and len(err.splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("text, says", [
    ("", "not a CSV table"),
    ('rule,wildcards,cpu_s\n"train,yoco,3\n', "not a CSV table"),
    ("rule,wildcards,cpu_s\ntrain,yoco,abc\n", "cpu_s 'abc': expected CPU seconds"),
])
def test_a_garbled_table_is_refused_in_one_line_naming_the_file(hr, tmp_path: Path, capsys, text: str,
                                                                  says: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    ok = _csv(tmp_path / "ok.csv", [("train", "yoco", "200")])
    for args in (["--here", str(bad), "--reference", str(ok)], ["--here", str(ok), "--reference", str(bad)]):
        assert hr.main([*args, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"host_ratio: {bad}: {says}") and len(err.splitlines()) == 1, err
    assert hr.main(["--here", str(tmp_path / "none.csv"), "--reference", str(ok), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == f"host_ratio: {tmp_path / 'none.csv'}: No such file or directory"


def test_a_reference_job_of_no_cpu_time_is_left_out(hr, tmp_path: Path) -> None:
    here = _csv(tmp_path / "here.csv", [("train", "yoco", "300"), ("train", "rins", "5")])
    ref = _csv(tmp_path / "ref.csv", [("train", "yoco", "200"), ("train", "rins", "0")])
    assert hr.main(["--here", str(here), "--reference", str(ref), "--min-cpu-s", "0", "--out", str(tmp_path / "o")]) == 0
    assert [j["wildcards"] for j in json.loads((tmp_path / "o.json").read_text())["jobs"]] == ["yoco"]
