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


def _as_gpu_run(smoke: Path, dest: Path, name: str = "synthetic-gpu") -> Path:
    """A synthetic GPU result (labelled so; nothing under results/): the CPU smoke's serving rows with their two
    lengths renamed 8K and 32K and an env.json naming a GPU."""
    d = json.loads((smoke / "serving.json").read_text())
    lens = sorted({r["seq_len"] for r in d["rows"]})
    rename = dict(zip(lens, (8192, 32768), strict=True))
    for r in d["rows"]:
        r["seq_len"] = rename[r["seq_len"]]
    d["mode"], d["device"] = "gpu", "cuda"
    out = dest / "gpu" / name
    out.mkdir(parents=True)
    (out / "serving.json").write_text(json.dumps(d))
    (out / "env.json").write_text(json.dumps({"step": "env", "env": {"device": "cuda", "name": name}}))
    return out / "serving.json"


def test_the_audit_judges_gpu_rows_at_the_batch_every_variant_measured(smoke: Path, tmp_path: Path) -> None:
    """The v.GPU rows read results/gpu/tidy (yocou.results.summarize.gpu): prefill at B = 1, decode at the largest
    static batch all four variants share, the log ratios recomputed here from the serving rows by hand; without the
    folder they are "not run"."""
    import math

    from yocou.results.audit.claims import load_sources
    from yocou.results.audit.verdicts import NOT_RUN, reproduce
    from yocou.results.summarize.gpu import summarize_gpu
    from yocou.results.tidy import write_tidy

    res = tmp_path / "results"
    serving = _as_gpu_run(smoke, res)
    df = summarize_gpu([serving])
    assert set(df["device_label"]) == {"GPU (synthetic-gpu, fp32)"}
    write_tidy(df, res / "gpu/tidy/efficiency_gpu")
    (res / "smoke/tidy").mkdir(parents=True)
    src = load_sources()
    got = {v.id: v for v in reproduce(src, res / "smoke", "smoke") if v.id.startswith("v.GPU.")}
    assert len(got) == 6 and all(v.qualifier != NOT_RUN and "GPU, 1.3B shape, bf16" in v.message for v in got.values())
    rows = json.loads(serving.read_text())["rows"]
    b_max = max(GS.SHAPES["cpu-smoke"]["batches"])

    def rate(v: str, phase: str, n: int, b: int, path: str) -> float:
        return next(r["tokens_per_s"] for r in rows if (r["variant"], r["phase"], r["seq_len"], r["batch_size"],
                                                         r["path"]) == (v, phase, n, b, path))

    assert got["v.GPU.T9.YOCO-U_over_YOCO.8192"].effect == pytest.approx(
        math.log(rate("yocou", "decode", 8192, b_max, "static") / rate("yoco", "decode", 8192, b_max, "static")))
    mean_log = [math.log(rate("rins", "prefill", n, 1, "chunked") / rate("transformer", "prefill", n, 1, "chunked"))
                for n in (8192, 32768)]
    assert got["v.GPU.T8.RINS_over_Transformer"].effect == pytest.approx(sum(mean_log) / 2)  # at: mean of the logs
    empty = tmp_path / "elsewhere" / "tiny"
    (empty / "tidy").mkdir(parents=True)
    assert all(v.qualifier == NOT_RUN for v in reproduce(src, empty, "tiny") if v.id.startswith("v.GPU."))


def test_gpu_summary_refuses_what_it_cannot_judge(smoke: Path, tmp_path: Path) -> None:
    from yocou.results.summarize.gpu import summarize_gpu

    a, b = _as_gpu_run(smoke, tmp_path, "gpu-a"), _as_gpu_run(smoke, tmp_path, "gpu-b")
    with pytest.raises(ValueError, match="one GPU"):
        summarize_gpu([a, b])
    with pytest.raises(ValueError, match="no serving.json"):
        summarize_gpu([])
    partial = tmp_path / "partial" / "serving.json"
    partial.parent.mkdir()
    partial.write_text(json.dumps({"step": "serving", "complete": False, "rows": []}))
    with pytest.raises(ValueError, match="partial/serving.json"):
        summarize_gpu([partial])
