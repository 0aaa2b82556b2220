"""Tests of yocou.results.audit: the claims registry, the consistency checks, the verdicts and ``yocou audit``.

- Every table of the paper's page is in the registry (counted on the page independently, by its "Table N:"
  captions), every printed cell of each table is a claim, and every printed prose claim is quoted from the page.
- Changing any one reported cell (or quoted number) that a consistency check covers makes that check stop holding:
  each covered cell is multiplied by 10 and divided by 10 in a copy of the tables under tmp_path; an ``equality``
  check must break both ways, a ``bound`` check (an inequality) at least one way. Table 1's expressions are
  mutated by an extra factor N.
- The committed baseline equals the current check results; ``yocou audit`` exits 1 on a regression and 2 on a
  malformed baseline.

Only the tests that compare the registry with the paper's own text (arXiv 2604.01220 as a plain-text page) read
the page, from ../shared/paper/000_c190a1253fdf94ee.txt (beside the repository root) or $YOCOU_SHARED/paper/...;
they skip when it is absent. Everything else reads what the repository holds (yocou/results/reported, claims.yaml).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

from yocou.results.audit.arith import declared_checks
from yocou.results.audit.checks import (
    FAILS,
    HOLDS,
    RESULTS,
    UNCHECKABLE,
    build_checks,
    run_checks,
)
from yocou.results.audit.claims import (
    TABLE_LAYOUT,
    load_claims,
    load_registry,
    load_sources,
)
from yocou.results.audit.verdicts import (
    INCONCLUSIVE,
    NOT_RUN,
    OPPOSITE,
    SAME,
    SAME_SIZE,
    decide,
)
from yocou.results.reported import available_tables, load_table

ROOT = Path(__file__).resolve().parents[1]
PAGE_NAME = "000_c190a1253fdf94ee.txt"
BASELINE = ROOT / "results" / "audit" / "baseline.json"


def _page_path() -> Path | None:
    candidates = [ROOT.parent / "shared" / "paper" / PAGE_NAME]
    env = os.environ.get("YOCOU_SHARED")
    if env:
        candidates += [Path(env) / "paper" / PAGE_NAME, Path(env) / PAGE_NAME]
    return next((c for c in candidates if c.is_file()), None)


@pytest.fixture(scope="module")
def page() -> str:
    path = _page_path()
    if path is None:
        pytest.skip(f"paper page {PAGE_NAME} not found: put the paper's page at ../shared/paper/{PAGE_NAME} (beside "
                    f"the repository) or set YOCOU_SHARED to a folder holding paper/{PAGE_NAME}")
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def src():
    return load_sources()


@pytest.fixture(scope="module")
def base_results(src):
    return {r.id: r for r in run_checks(src)}


# --------------------------------------------------------------------------------------------- registry


def test_every_table_of_the_page_is_in_the_registry(page, src):
    on_page = sorted({int(n) for n in re.findall(r"^Table (\d+):", page, flags=re.M)})
    assert on_page, "no 'Table N:' caption found on the page"
    registered = sorted(t["table"] for t in src.registry["tables"])
    assert registered == on_page, f"page has tables {on_page}, registry {registered}"


def test_every_transcribed_table_is_in_the_registry_one_claim_per_cell(src):
    registered = sorted(t["table"] for t in src.registry["tables"])
    assert registered == available_tables(), f"reported CSVs {available_tables()}, registry {registered}"
    claims = load_claims(src)
    for n in registered:
        cells = claims[(claims["kind"] == "table_cell") & (claims["table"] == n)]
        df = load_table(n)
        expected = len(df) * (len(df.columns) - 1) if n == 7 else len(df)  # Table 7 is stored wide
        assert len(cells) == expected, f"Table {n}: {len(cells)} cell claims, {expected} printed cells"
    assert claims["id"].is_unique


def _norm(text: str) -> str:
    t = text.replace("\\mathcal{O}", "O").replace("{=}", "=").replace("\\Delta", "Δ").replace("\\ll", "<<")
    return re.sub(r"[\s$]", "", t)


def test_printed_prose_claims_are_quoted_from_the_page(page, src):
    body = _norm(page)
    for c in src.registry["claims"]:
        if c["printed"]:
            assert _norm(c["quote"]) in body, f"claim {c['id']}: quote not found on the page: {c['quote']!r}"
            if isinstance(c["value"], (int, float)):
                assert f"{c['value']:g}" in page, f"claim {c['id']}: value {c['value']} not on the page"


def test_registry_errors_name_the_field(tmp_path):
    reg = load_registry()
    bad = {"tables": reg["tables"], "claims": [dict(reg["claims"][0])]}
    del bad["claims"][0]["unit"]
    p = tmp_path / "claims.yaml"
    import yaml

    p.write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(ValueError, match=r"lacks field 'unit'"):
        load_registry(p)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_registry(tmp_path / "missing.yaml")


# --------------------------------------------------------------------------------------------- checks


def test_checks_results_and_baseline(src, base_results):
    assert all(r.result in RESULTS for r in base_results.values())
    groups = {r.group for r in base_results.values()}
    assert groups >= {"averages", "cross-table", "kv-formula", "throughput-vs-compute", "params-vs-shapes",
                      "quoted-numbers", "complexity"}
    # docs/design.md section 8's findings
    assert base_results["avg.T3.YOCO"].result == FAILS
    assert base_results["xt.T3_T5.YOCO.Avg."].result == HOLDS
    assert all(base_results[f"kv.T10.{m}.{n}"].result == HOLDS
               for m in ("Transformer", "RINS", "YOCO", "YOCO-U") for n in [8192 * 2 ** k for k in range(6)])
    assert base_results["quote.fig2.tokens_saved"].result == HOLDS
    assert base_results["params.T6.moe_activated"].result == FAILS
    assert base_results["unpublished.fig2.loss_gap_equal_flops"].result == UNCHECKABLE
    # "negligible" read both ways: YOCO-U's extra over YOCO's cache and over the Transformer's (the formula's bytes)
    from yocou.model.accounting import kv_cache_bytes
    from yocou.results.audit.checks import _paper_cfg

    for n in [8192 * 2 ** k for k in range(6)]:
        kv = {v: kv_cache_bytes(_paper_cfg(v), n) for v in ("transformer", "yoco", "yocou")}
        for cid, den in ((f"kv.negligible_overhead.{n}", kv["yoco"]),
                         (f"kv.negligible_overhead_of_transformer.{n}", kv["transformer"])):
            x = (kv["yocou"] - kv["yoco"]) / den
            assert base_results[cid].observed == pytest.approx(x), cid
            assert base_results[cid].result == (HOLDS if x <= 0.10 else FAILS), cid
    # the committed baseline is up to date
    committed = json.loads(BASELINE.read_text(encoding="utf-8"))["checks"]
    assert committed == {k: r.result for k, r in base_results.items()}, "rerun `yocou audit --write-baseline`"


def _copy_sources(dst: Path) -> tuple[Path, Path]:
    rep = dst / "reported"
    rep.mkdir()
    for n in available_tables():
        name = f"table{n:02d}.csv"
        (rep / name).write_text(resources.files("yocou.results.reported").joinpath(name).read_text("utf-8"), "utf-8")
    reg = dst / "claims.yaml"
    shutil.copy(resources.files("yocou.results.audit").joinpath("claims.yaml"), reg)
    return rep, reg


def _mutate_text(s: str, factor: float) -> str:
    x = float(s) * factor
    if re.fullmatch(r"-?\d+", s.strip()):
        return str(max(1, int(round(x))))
    return repr(x)


def _set_cell(rep: Path, reg: Path, ref: str, how) -> None:
    """Rewrite one cell of the copied table CSV (or one claim value of the copied registry)."""
    if ref.startswith("C:"):
        # edit the one "value:" line of the claim in the copied YAML (a full dump/load round trip is slow)
        lines = reg.read_text(encoding="utf-8").splitlines(keepends=True)
        start = next(i for i, l in enumerate(lines) if l.strip() == f"- id: {ref[2:]}")
        i = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("value:"))
        old = lines[i].split("value:", 1)[1].strip()
        lines[i] = lines[i].split("value:", 1)[0] + f"value: {float(how(old))!r}\n"
        reg.write_text("".join(lines), encoding="utf-8")
        return
    n = int(ref[1:ref.index(":")])
    row, col = ref.split(":", 1)[1].split("|", 1)
    path = rep / f"table{n:02d}.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    comments = "".join(l for l in lines if l.startswith("#"))
    df = pd.read_csv(path, comment="#", keep_default_na=False, dtype=str)
    rkey, ckey, vcol = TABLE_LAYOUT[n]
    if n == 7:
        mask, target = df[rkey] == row, col
    else:
        mask = (df[rkey] == row) & (df[ckey] == col) if ckey else df[rkey] == row
        target = vcol
    assert mask.sum() == 1, ref
    df.loc[mask, target] = how(df.loc[mask, target].iloc[0])
    path.write_text(comments + df.to_csv(index=False), encoding="utf-8")


def _covered(src) -> dict[str, list]:
    out: dict[str, list] = {}
    for c in build_checks(src):
        for ref in c.covers:
            out.setdefault(ref, []).append(c)
    return out


COVERED = sorted(_covered(load_sources()))


def test_every_checked_table_has_covered_cells():
    tables = {int(r[1:r.index(":")]) for r in COVERED if r.startswith("T")}
    assert tables >= {1, 2, 3, 5, 6, 7, 8, 9, 10}, tables
    assert len(COVERED) > 150


@pytest.mark.parametrize("ref", COVERED)
def test_changing_a_covered_cell_breaks_its_checks(ref, src, tmp_path):
    checks = _covered(src)[ref]
    if ref.startswith("T1:"):
        mutations = {"x N": lambda s: s.replace("\\mathcal{O}(", "\\mathcal{O}(N(", 1)[:-1] + ")$"}
    else:
        mutations = {"x 10": lambda s: _mutate_text(s, 10.0), "/ 10": lambda s: _mutate_text(s, 0.1)}
    broken: dict[str, set[str]] = {c.id: set() for c in checks}
    for name, how in mutations.items():
        d = tmp_path / name.replace(" ", "").replace("/", "div")
        d.mkdir()
        rep, reg = _copy_sources(d)
        _set_cell(rep, reg, ref, how)
        mutated = load_sources(rep, reg)
        assert mutated.text(ref) != src.text(ref)
        by_id = {c.id: c for c in build_checks(mutated)}
        for c in checks:
            if by_id[c.id].run(mutated).result != HOLDS:
                broken[c.id].add(name)
    for c in checks:
        need = set(mutations) if c.kind == "equality" else {"any"}
        ok = broken[c.id] == need if need != {"any"} else bool(broken[c.id])
        assert ok, f"{c.id} ({c.kind}) still holds after changing {ref} by {set(mutations) - broken[c.id]}"


def test_bad_cell_raises_naming_it(src, tmp_path):
    rep, reg = _copy_sources(tmp_path)
    _set_cell(rep, reg, "T2:YOCO|ARC-C", lambda s: "n/a")
    with pytest.raises(ValueError, match=r"T2:YOCO\|ARC-C.*expected a number"):
        run_checks(load_sources(rep, reg))


# --------------------------------------------------------------------------------------------- declared checks

DECLARED = [c.id for c in declared_checks(load_sources())]
CHECKS_YAML = ROOT / "eval" / "checks.yaml"


@pytest.mark.parametrize("check_id", DECLARED)
def test_every_declared_check_gives_its_baseline_result(check_id, src):
    """Each expanded row of eval/checks.yaml, run alone, gives the result the committed baseline records."""
    committed = json.loads(BASELINE.read_text(encoding="utf-8"))["checks"]
    assert check_id in committed, f"{check_id} is not in the baseline"
    c = next(c for c in declared_checks(src) if c.id == check_id)
    assert c.run(src).result == committed[check_id]


def test_declared_checks_are_table_arithmetic_over_covered_cells(src):
    """Every declared check reads printed cells or quoted numbers and covers at least one of them."""
    assert len(DECLARED) == len(set(DECLARED)) > 100
    for c in declared_checks(src):
        assert c.covers and all(r.startswith(("T", "C:")) for r in c.covers), c.id


@pytest.mark.parametrize("edit, says", [
    (lambda rows: rows[3].pop("op"), r"missing \['op'\]"),
    (lambda rows: rows[3].update(op="median"), r"op must be one of"),
    (lambda rows: rows[3].update(colour="red"), r"unknown field\(s\) \['colour'\]"),
    (lambda rows: rows[3].update(message="{nope}"), r"message names \['nope'\]"),
    (lambda rows: rows[3].update(id="xt.T3_T5.YOCO"), r"duplicate check id 'xt.T3_T5.YOCO' \(also made by row 3 "),
    (lambda rows: rows[3].pop("b"), r"needs \['b'\]"),
    (lambda rows: rows[3].update(a="T3:{nope}|x"), r"placeholder 'nope' names no var"),
    (lambda rows: rows[3].update(op="ratio", value="excess_of_c", at_most=0.1), r"value excess_of_c needs c"),
])
def test_a_malformed_declared_check_row_fails_in_one_line_naming_file_and_row(edit, says, src, tmp_path):
    import yaml

    rows = yaml.safe_load(CHECKS_YAML.read_text(encoding="utf-8"))
    assert rows[3]["id"] == "xt.T3_T5.YOCO.{col}"
    edit(rows)
    bad = tmp_path / "checks.yaml"
    bad.write_text(yaml.safe_dump(rows, sort_keys=False), encoding="utf-8")
    with pytest.raises(ValueError, match=says) as e:
        run_checks(src, bad)
    msg = str(e.value)
    assert "\n" not in msg and str(bad) in msg, msg
    assert f"{bad}: row 3 (" in msg, msg


# --------------------------------------------------------------------------------------------- verdicts


def test_decide_never_stronger_than_the_evidence():
    assert decide(1.0, None, evidence="eval") == (INCONCLUSIVE, NOT_RUN)
    assert decide(1.0, 0.5, evidence="eval", se=0.3)[0] == INCONCLUSIVE              # within 2 se
    assert decide(1.0, 1.2, evidence="eval", se=0.1, n_seeds=1) == (SAME, "one seed; size not judged with one seed")
    assert decide(1.0, 1.2, evidence="eval", se=0.1, n_seeds=3)[0] == SAME_SIZE
    assert decide(1.0, -1.2, evidence="eval", se=0.1, n_seeds=1)[0] == OPPOSITE
    assert decide(1.0, 5.0, evidence="training", n_seeds=1)[0] == INCONCLUSIVE        # one seed, no spread
    assert decide(1.0, 1.0, evidence="timing", se=0.1, scale="smoke")[0] == INCONCLUSIVE
    assert decide(1.0, 1.0, evidence="deterministic", scale="smoke")[0] == SAME_SIZE
    assert decide(1.0, 1.0, evidence="eval", floor=True)[0] == INCONCLUSIVE
    assert decide(1.0, 3.0, evidence="timing", se=0.1)[0] == SAME                     # 3x the paper's size
    with pytest.raises(ValueError):
        decide(0.0, 1.0, evidence="eval")


# --------------------------------------------------------------------------------------------- report and CLI


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "yocou.cli", "audit", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_yocou_audit_exit_codes_and_report(src, tmp_path):
    from yocou.cli import main

    # a results folder holding one table: the paper's own checks need none, the verdicts of the rest are "not run"
    empty = tmp_path / "results"
    (empty / "tidy").mkdir(parents=True)
    for x in ("csv", "json"):
        shutil.copy(ROOT / "results" / "tiny" / "tidy" / f"kv.{x}", empty / "tidy" / f"kv.{x}")
    common = ["--results", str(empty)]
    assert main(["audit", *common, "--baseline", str(BASELINE)]) == 0
    # a check that held in the baseline stops holding: the reported tables changed
    rep, reg = _copy_sources(tmp_path)
    _set_cell(rep, reg, "T10:YOCO|8192", lambda s: "27")
    assert main(["audit", *common, "--baseline", str(BASELINE), "--reported-dir", str(rep)]) == 1
    assert main(["audit", *common, "--baseline", str(BASELINE), "--reported-dir", str(rep), "--report-only"]) == 0
    # a baseline recording a hold that does not hold now
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"checks": {"avg.T3.YOCO": HOLDS}}), encoding="utf-8")
    assert main(["audit", *common, "--baseline", str(broken)]) == 1
    # a malformed baseline, through the real command line
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    proc = _run_cli(*common, "--baseline", str(bad), cwd=tmp_path)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr, proc.stderr
    bad.write_text(json.dumps({"checks": {"avg.T2.YOCO": "fine"}}), encoding="utf-8")
    assert main(["audit", *common, "--baseline", str(bad)]) == 2

    # the report: counts, every section, figures inline in the HTML
    import base64

    png = tmp_path / "fig2.png"
    png.write_bytes(base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="))
    out = tmp_path / "audit"
    assert main(["audit", *common, "--baseline", str(BASELINE), "--out", str(out), "--figures", str(png)]) == 0
    md = (out / "report.md").read_text(encoding="utf-8")
    html = (out / "report.html").read_text(encoding="utf-8")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    c = summary["claims"]
    assert c["checked"] == c["holding"] + c["failing"] + c["inconclusive"]
    assert c["checked"] + c["not audited"] == c["total"] == len(load_claims(src))
    assert c["tables"] == list(range(1, 11))
    assert summary["checks"]["total"] == len(json.loads(BASELINE.read_text())["checks"])
    assert f"claims checked {c['checked']}" in md and "Consistency checks that do not hold" in md
    assert "data:image/png;base64," in html and "<table>" in html
    for f in ("checks.csv", "verdicts.csv", "claims.csv"):
        assert len(pd.read_csv(out / f)) > 0
    # texts from data: a figure is captioned with what it is, Markdown code is HTML code, sizes from the runs table
    assert f"<figcaption>Figure 2: loss against training FLOPs and tokens (ours, tiny scale; {png})" in html
    assert "<code>" in html and not re.findall(r"<p>[^<]*`", html)
    assert "model sizes not recorded (no tidy runs table)" in html and "10M" not in html
    for x in ("csv", "json"):
        shutil.copy(ROOT / "results" / "tiny" / "tidy" / f"runs.{x}", empty / "tidy" / f"runs.{x}")
    main(["audit", *common, "--baseline", str(BASELINE), "--out", str(out), "--figures", str(png), "--report-only"])
    runs = pd.read_csv(ROOT / "results" / "tiny" / "tidy" / "runs.csv")
    p = runs.loc[runs["metric"] == "params", "value"]
    want = f"models of {p.min() / 1e6:.2f}M-{p.max() / 1e6:.2f}M parameters at this scale"
    assert want in (out / "report.html").read_text(encoding="utf-8") and want in (out / "report.md").read_text()


def test_yocou_audit_rejects_an_unknown_scale_naming_the_scales(tmp_path, monkeypatch, capsys):
    """`--scale nope` fails (status 2) naming it and the scales there are, instead of reporting every verdict
    "not run"; a scale with a config but no results yet is audited; a missing --results folder fails too."""
    from yocou.cli import main

    monkeypatch.delenv("YOCOU_TRACEBACK", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "workflows/config").mkdir(parents=True)
    (tmp_path / "workflows/config/mine.yaml").write_text("scale: mine\n", encoding="utf-8")
    (tmp_path / "results/theirs").mkdir(parents=True)
    (tmp_path / "results/audit").mkdir()  # the baseline's folder, not a scale
    assert main(["audit", "--scale", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("yocou audit: error: --scale 'nope'"), err
    assert "'mine'" in err and "'theirs'" in err and "'audit'" not in err
    assert main(["audit", "--scale", "../theirs"]) == 2
    assert "not a usable scale name" in capsys.readouterr().err
    assert main(["audit", "--results", str(tmp_path / "missing")]) == 2
    assert "missing: no such folder" in capsys.readouterr().err
    for scale in ("mine", "theirs"):
        assert main(["audit", "--scale", scale]) == 0
        assert f"audit ({scale})" in capsys.readouterr().out


@pytest.mark.slow
def test_an_audit_of_a_copied_results_folder_names_the_shared_study_it_cannot_read(tmp_path, capsys):
    """A results folder copied away from ``results/`` loses the studies read beside it (the paper-shape efficiency
    rows): the audit says which table it did not find and how many rows it leaves "not run", instead of turning them
    into "not run" silently; with that folder copied beside it, the note goes and those rows are read."""
    from yocou.cli import main
    from yocou.results.audit.report import load_comparisons

    shared = sorted({r["results"] for r in load_comparisons() if r.get("results")})
    assert shared, "the comparisons read no study beside the scale's folder"
    copy = tmp_path / "tiny"
    shutil.copytree(ROOT / "results" / "tiny" / "tidy", copy / "tidy")
    assert main(["audit", "--results", str(copy), "--baseline", str(BASELINE), "--report-only"]) == 0
    out = capsys.readouterr().out
    notes = [ln for ln in out.splitlines() if ln.strip().startswith("note:")]
    assert len(notes) == len(shared) and all("'not run'" in n for n in notes), out
    assert all(sum(f"{tmp_path / s / 'tidy'}{os.sep}" in n for n in notes) == 1 for s in shared), out
    present = [s for s in shared if (ROOT / "results" / s / "tidy").is_dir()]  # results/gpu only where a GPU ran
    assert "paper_shape" in present
    for s in present:
        shutil.copytree(ROOT / "results" / s / "tidy", tmp_path / s / "tidy")
    assert main(["audit", "--results", str(copy), "--baseline", str(BASELINE), "--report-only"]) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("note:")]
    assert len(notes) == len(shared) - len(present)
    assert all(f"{tmp_path / s / 'tidy'}{os.sep}" in n for s, n in zip(sorted(set(shared) - set(present)), notes))


@pytest.mark.slow
@pytest.mark.parametrize("edit, field", [
    (lambda c: [], "expected a mapping"),
    (lambda c: {**c, "config": {**c["config"], "seeds": {**c["config"]["seeds"], "core": "eleven"}}}, "seeds.core"),
    (lambda c: {**c, "config": {**c["config"], "seeds": {**c["config"]["seeds"], "core": 0}}}, "seeds.core"),
    (lambda c: {**c, "config": {**c["config"], "train": {**c["config"]["train"], "steps": -5}}}, "train.steps"),
    (lambda c: {**c, "config": {**c["config"], "seeds": {**c["config"]["seeds"],
                                                         "core": c["config"]["seeds"]["core"] + 2}}}, "seeds.core is"),
])
def test_a_results_config_that_is_malformed_or_contradicts_the_tables_is_refused(edit, field, tmp_path, capsys):
    """``results/<scale>/config.json`` is validated before the audit reads it: a list, a wrong type, or a seed count
    the tidy runs table contradicts (two more than the table has replicas of each core variant) fails in one line
    naming the file and the field, and writes nothing; the committed config passes."""
    from yocou.cli import main

    copy = tmp_path / "tiny"
    shutil.copytree(ROOT / "results" / "tiny" / "tidy", copy / "tidy")
    cfg = json.loads((ROOT / "results" / "tiny" / "config.json").read_text(encoding="utf-8"))
    if field == "expected a mapping":  # once: the copy with the committed config passes (the edit alone fails)
        (copy / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
        assert main(["audit", "--results", str(copy), "--baseline", str(BASELINE), "--report-only"]) == 0
        capsys.readouterr()
    (copy / "config.json").write_text(json.dumps(edit(cfg)), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["audit", "--results", str(copy), "--baseline", str(BASELINE), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(copy / "config.json") in err and field in err, err
    assert not out.exists()


@pytest.mark.slow
def test_while_computing_the_audit_reads_the_config_the_runs_started_with(tmp_path, capsys):
    """A compute run replaces ``results/<scale>/config.json`` only after its audit, so until then that file is the
    previous results' (here: two more core seeds than the tables have). The audit reads ``runs/<scale>/started.json``
    where it exists, and passes; without it the stale config is refused, naming that file."""
    from yocou.cli import main

    copy = tmp_path / "results" / "tiny"
    shutil.copytree(ROOT / "results" / "tiny" / "tidy", copy / "tidy")
    cfg = json.loads((ROOT / "results" / "tiny" / "config.json").read_text(encoding="utf-8"))
    stale = {**cfg, "config": {**cfg["config"], "seeds": {**cfg["config"]["seeds"],
                                                          "core": cfg["config"]["seeds"]["core"] + 2}}}
    (copy / "config.json").write_text(json.dumps(stale), encoding="utf-8")
    assert main(["audit", "--results", str(copy), "--baseline", str(BASELINE), "--report-only"]) == 2
    assert str(copy / "config.json") in capsys.readouterr().err
    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    (tmp_path / "runs" / "tiny" / "started.json").write_text(json.dumps(cfg), encoding="utf-8")
    assert main(["audit", "--results", str(copy), "--baseline", str(BASELINE), "--report-only"]) == 0
