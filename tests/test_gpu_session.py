"""The prepared GPU check (yocou.evaluation.bench.gpu_session) run by its --cpu-smoke mode: every step at tiny shapes
on the CPU, its session file valid against its schema, its results against values computed here; a step cut off by
its limit fails the session; the ratios against the paper's tables on synthetic rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from yocou.evaluation.bench import gpu_session as GS
from yocou.model.accounting import kv_cache_bytes
from yocou.results.reported import load_table

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu_session")
    res = subprocess.run([sys.executable, "-m", "yocou.evaluation.bench.gpu_session", "--cpu-smoke", "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def test_cpu_smoke_runs_every_step_and_the_session_validates(smoke: Path) -> None:
    session = json.loads((smoke / "session.json").read_text())
    jsonschema.validate(session, GS.SESSION_SCHEMA)
    assert [s["step"] for s in session["steps"]] == list(GS.STEPS)
    assert session["status"] == "passed" and all(s["status"] == "passed" for s in session["steps"])
    for s in session["steps"]:
        got = json.loads((smoke / s["result"]).read_text())
        assert got["complete"] is True and got["passed"] is True and got["step"] == s["step"]


def test_cpu_smoke_results_against_independent_values(smoke: Path) -> None:
    cfgs = GS.core_configs("cpu-smoke")
    exit_ = json.loads((smoke / "prefill_exit.json").read_text())
    for r in exit_["rows"]:  # the K̂V̂ maker on every chunk, each cross layer once, for one position
        n_cross = sum(st.n_layers for st in cfgs[r["variant"]].stages if st.kind == "cross")
        assert r["kv_maker_query_lens"] == [r["chunk"]] * r["n_chunks"] and r["cross_query_lens"] == [1] * n_cross
    serving = json.loads((smoke / "serving.json").read_text())
    shp = GS.SHAPES["cpu-smoke"]
    rows = serving["rows"]
    assert {(r["variant"], r["seq_len"]) for r in rows} == {(v, n) for v in cfgs for n in shp["seq_lens"]}
    for r in rows:
        assert r["kv_bytes_per_row"] == kv_cache_bytes(cfgs[r["variant"]], r["seq_len"], dtype=shp["dtype"])
        assert "skipped" in r or (r["tokens_per_s"] > 0 and r["mode"] == "eager")
    static = {(r["variant"], r["seq_len"], r["batch_size"]) for r in rows if r["path"] == "static"}
    assert static == {(v, n, b) for v in cfgs for n in shp["seq_lens"] for b in shp["batches"]}
    by = {(r["variant"], r["phase"], r["seq_len"], r["batch_size"], r["path"]): r["tokens_per_s"] for r in rows}
    for q in serving["ratios"]:
        a, b = q["ratio"].split("/")
        k = (q["phase"], q["seq_len"], q["batch_size"], q["path"])
        assert q["value"] == pytest.approx(by[(a, *k)] / by[(b, *k)])
    kernels = json.loads((smoke / "kernels.json").read_text())
    assert any("scaled_dot_product" in op for op in kernels["sites"]["sdpa/decode/static"]["aten_ops"])
    steps = json.loads((smoke / "train_step.json").read_text())["steps"]
    assert [s["mode"] for s in steps] == ["eager", "compiled"]


def test_serving_ratios_beside_the_papers_tables() -> None:
    """Synthetic rows (labelled so: no measurement) at the paper's 8K: the ratio and the paper's, computed here."""
    rows = [{"variant": v, "phase": ph, "seq_len": 8192, "batch_size": 1, "path": "x", "mode": "graphs",
             "tokens_per_s": t} for v, ph, t in [("yoco", "decode", 100.0), ("yocou", "decode", 60.0),
                                                 ("transformer", "prefill", 10.0), ("rins", "prefill", 4.0)]]
    got = {q["ratio"] + q["phase"]: q for q in GS.serving_ratios(rows)}
    t9, t8 = load_table(9), load_table(8)

    def paper(t, m):
        return float(t[(t.model == m) & (t.seq_len == 8192)].value.iloc[0])

    assert got["yocou/yocodecode"]["value"] == pytest.approx(0.6)
    assert got["yocou/yocodecode"]["paper"] == pytest.approx(paper(t9, "YOCO-U") / paper(t9, "YOCO"))
    assert got["rins/transformerprefill"]["value"] == pytest.approx(0.4)
    assert got["rins/transformerprefill"]["paper"] == pytest.approx(paper(t8, "RINS") / paper(t8, "Transformer"))


def test_a_step_past_its_limit_fails_the_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GS.STEPS, "train_step", (1, 1))
    monkeypatch.chdir(REPO)
    rc = GS.run_session("cpu-smoke", tmp_path, steps=["env", "train_step"], log=lambda s: None)
    session = json.loads((tmp_path / "session.json").read_text())
    jsonschema.validate(session, GS.SESSION_SCHEMA)
    assert rc == 1 and session["status"] == "failed"
    assert [(s["step"], s["status"]) for s in session["steps"]] == [("env", "passed"), ("train_step", "timeout")]


def test_bad_invocations_name_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="--out"):
        GS.main(["--cpu-smoke"])
    monkeypatch.setattr(GS.torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA"):
        GS.main(["--out", str(tmp_path)])
