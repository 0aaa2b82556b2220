"""Entry points: bad input prints `<prog>: error: <message>` (no traceback) and exits 2; bugs keep their traceback."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from yocou.utils.entry import EXIT_USER_ERROR, InputTypeError, run_main
from yocou.utils.validation import FieldError

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "YOCOU_TRACEBACK"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd or ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def _assert_user_error(res: subprocess.CompletedProcess, prog: str, *needles: str) -> None:
    assert res.returncode == EXIT_USER_ERROR, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith(f"{prog}: error: "), res.stderr[-2000:]
    for n in needles:
        assert n in lines[-1], (n, lines[-1])


@pytest.mark.parametrize("exc", [ValueError("bad value of x"), InputTypeError("x must be int"),
                                 FileNotFoundError("file f not found")])
def test_user_errors_print_one_line_and_exit_2(exc: Exception, capsys: pytest.CaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YOCOU_TRACEBACK", raising=False)

    def main(argv):
        raise exc

    assert run_main(main, [], prog="python -m yocou.x") == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("python -m yocou.x: error: ") and err.count("\n") == 1
    assert str(exc) in err


def test_bugs_keep_their_traceback_and_status_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YOCOU_TRACEBACK", raising=False)

    def bug(argv):
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        run_main(bug, [])
    for exc in (KeyError("k"), TypeError("unsupported operand")):  # bare, they are bugs too: validate instead

        def bare(argv, exc=exc):
            raise exc

        with pytest.raises(type(exc)):
            run_main(bare, [])
    assert run_main(lambda argv: None, []) == 0
    assert run_main(lambda argv: 1, []) == 1
    monkeypatch.setenv("YOCOU_TRACEBACK", "1")  # developers can still see where a user error came from

    def bad(argv):
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        run_main(bad, [])


@pytest.mark.slow
def test_pipeline_cli_bad_input(tmp_path: Path) -> None:
    res = _run("yocou.workflow.pipeline", "--config", str(tmp_path / "missing.yaml"), "--variant", "yocou",
               "--out", str(tmp_path / "run.json"))
    _assert_user_error(res, "python -m yocou.workflow.pipeline", "missing.yaml")
    cfg = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())
    cfg["variants"]["yocou"]["n_loop"] = 2
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    res = _run("yocou.workflow.pipeline", "--config", str(tmp_path / "cfg.json"), "--variant", "yocou",
               "--out", str(tmp_path / "run.json"))
    _assert_user_error(res, "python -m yocou.workflow.pipeline", "variants.yocou.n_loop")


def test_studies_cli_bad_input(tmp_path: Path) -> None:
    res = _run("yocou.workflow.studies", "eqflops", "--run", str(tmp_path / "no_run"), "--out", str(tmp_path / "out"))
    _assert_user_error(res, "python -m yocou.workflow.studies", "run_config.json")


def test_cluster_cli_bad_input(tmp_path: Path) -> None:
    res = _run("yocou.workflow.cluster", "resources", "--config", str(tmp_path / "missing.yaml"), "train")
    _assert_user_error(res, "python -m yocou.workflow.cluster", "missing.yaml")
    res = _run("yocou.workflow.cluster", "gpu-run", "--gpus", "1", "--slots", "0")
    _assert_user_error(res, "python -m yocou.workflow.cluster gpu-run", "after --")


def test_yocou_console_script_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same convention in `yocou`: one line `yocou <cmd>: error: ...`, status 2 (also where it used to exit 1)."""
    from yocou.cli import main

    monkeypatch.delenv("YOCOU_TRACEBACK", raising=False)
    rc = tmp_path / "rc.json"
    rc.write_text(json.dumps({"train": {}}))
    assert main(["train", "--run-config", str(rc), "--data", "x", "--out", str(tmp_path / "o")]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("yocou train: error: ") and "'model'" in err
    assert main(["kv-table", "--preset", "nope"]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.startswith("yocou kv-table: error: --preset 'nope'")


def test_tokenizer_inputs_are_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`yocou tokenizer` without a vocabulary size or with one below the byte alphabet, and a tokenizer file that
    is not a tokenizer.json (garbage, truncated), each fail in one line naming it, status 2."""
    from yocou.cli import main
    from yocou.data.tokenizer import load_tokenizer

    monkeypatch.delenv("YOCOU_TRACEBACK", raising=False)
    out = str(tmp_path / "tok.json")
    assert main(["tokenizer", "--corpus", str(tmp_path), "--out", out]) == EXIT_USER_ERROR
    assert "--vocab-size" in capsys.readouterr().err
    assert main(["tokenizer", "--corpus", str(tmp_path), "--out", out, "--vocab-size", "0"]) == EXIT_USER_ERROR
    assert "expected an integer in [256, 1048576] (the byte alphabet to 2^20 ids), got 0" in capsys.readouterr().err
    for i, text in enumerate(["garbage", '{"version": "1.0", "model": {"type": "BPE", "vocab": {"a"']):
        bad = tmp_path / f"bad{i}.json"
        bad.write_text(text)
        with pytest.raises(ValueError, match=f"tokenizer {bad}: not a readable tokenizer.json"):
            load_tokenizer(bad)


def _entry_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "yocou").rglob("*.py") if 'if __name__ == "__main__":' in p.read_text())


@pytest.mark.parametrize("path", _entry_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_m_entry_point_goes_through_run_main(path: Path) -> None:
    """Every `python -m yocou.<module>` reports bad input the same way: its __main__ block calls run_main (the
    console script and the audit, whose main() handles errors itself, call main())."""
    tree = ast.parse(path.read_text())
    blocks = [n for n in tree.body if isinstance(n, ast.If) and "__name__" in ast.unparse(n.test)]
    assert len(blocks) == 1
    calls = {ast.unparse(c.func) for c in ast.walk(blocks[0]) if isinstance(c, ast.Call)}
    handled_inside = path.relative_to(ROOT).as_posix() in ("yocou/cli.py", "yocou/results/audit/report.py")
    assert "run_main" in calls or (handled_inside and "main" in calls), (path, calls)


def test_missing_config_fields_are_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With KeyError/TypeError no longer caught wholesale, a config missing required fields is still reported
    as bad input naming them (validated, InputTypeError), not as a bare TypeError."""
    from yocou.cli import main
    from yocou.model.config import config_from_dict, preset
    from yocou.training.train import train_config_from_dict

    monkeypatch.delenv("YOCOU_TRACEBACK", raising=False)
    rc = tmp_path / "rc.json"
    rc.write_text(json.dumps({"model": preset("yocou-smoke").to_dict(), "train": {"steps": 1}}))
    assert main(["train", "--run-config", str(rc), "--data", "x", "--out", str(tmp_path / "o")]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("yocou train: error: TrainConfig.batch_size: missing") and "TrainConfig.seq_len" in err
    assert err.count("\n") == 1
    with pytest.raises(FieldError) as e:
        train_config_from_dict({})
    assert e.value.field == "TrainConfig.steps" and isinstance(e.value, InputTypeError)
    bad = preset("yocou-smoke").to_dict()
    del bad["stages"][0]["n_layers"]
    with pytest.raises(FieldError) as e:
        config_from_dict(bad)
    assert e.value.field == "ModelConfig.stages[0].n_layers"
