"""No command writes over its own inputs, and every command checks that it can write before it works
(yocou.utils.guard): the table of every command's inputs and outputs is complete, each refusal is one line naming both
arguments, the input is left byte for byte as it was, and a refused command creates nothing."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
from pathlib import Path

import pytest
import yaml

from yocou.utils import guard
from yocou.utils.entry import error_message, run_main

ROOT = Path(__file__).resolve().parents[1]


def _module_commands() -> dict[str, str]:
    """``python -m`` module -> its source, for every module of the package that runs as a program."""
    out = {}
    for p in sorted((ROOT / "yocou").rglob("*.py")):
        src = p.read_text()
        if 'if __name__ == "__main__"' not in src or p.name == "guard.py":
            continue
        mod = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        if mod == "yocou.cli":
            continue
        if p.name == "__main__.py":
            mod = mod.removesuffix(".__main__")
        out[mod] = src
    return out


#: Options that name a file or folder wherever they occur: each must be declared with a path role.
PATH_OPTIONS = {"--out", "--model", "--data", "--tokenizer", "--run-config", "--run-configs", "--corpus", "--heldout",
                "--train", "--init-from", "--results", "--baseline", "--write-baseline", "--figure", "--book",
                "--prompts", "--tokens-dir", "--pack", "--study", "--points", "--rules", "--bench", "--raw"}


def test_every_yocou_subcommand_declares_its_paths_where_it_parses_them() -> None:
    """Every path option of every ``yocou`` subcommand is a reads/writes/replaces argument (guard), so the
    check sees it: one declaration per path, beside its help."""
    from yocou.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    undeclared = [f"yocou {name} {opt}" for name, p in sub.choices.items() for a in p._actions
                  for opt in a.option_strings if opt in PATH_OPTIONS and getattr(a.type, "__name__", "") != "path"]
    assert not undeclared, f"declare these with type=guard.reads()/writes()/replaces(): {undeclared}"


def test_every_module_entry_point_checks_its_paths() -> None:
    mods = _module_commands()
    assert len(mods) >= 14, sorted(mods)
    for mod, src in mods.items():
        if mod == "yocou.results.audit":  # python -m yocou.results.audit runs yocou.results.audit.report.main
            src = (ROOT / "yocou/results/audit/report.py").read_text()
        assert "check_args(" in src, f"{mod}: main() must call yocou.utils.guard.check_args after parse_args"
        for line in re.findall(r"add_argument\((\"--[a-z-]+\".*)", src):
            opt = line.split('"')[1]
            if opt in PATH_OPTIONS:
                assert "type=" in line, f"{mod}: {opt} is not declared with type=guard.reads()/writes()/replaces()"


def test_path_roles_are_collected_from_the_parsed_arguments(tmp_path: Path) -> None:
    """io_paths: each declared argument under its option (or its label), expanded to the files it stands for;
    an if_exists input only where the path exists; undeclared strings are not paths."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=guard.reads())
    ap.add_argument("--data", type=guard.reads(paths=guard.inside(lambda a: [f"{s}.bin" for s in a.splits])))
    ap.add_argument("--splits", nargs="+", default=["book", "code"])
    ap.add_argument("--config", type=guard.reads(if_exists=True))
    ap.add_argument("--out", type=guard.writes(paths=guard.suffixed(".csv", ".md")))
    ap.add_argument("out_dir", type=guard.replaces("OUT_DIR"))
    a = ap.parse_args(["--model", "m.pt", "--data", "tok", "--config", '{"inline": 1}', "--out", "t/x", "dir"])
    io = guard.io_paths(a)
    assert io.inputs == {"--model": ["m.pt"], "--data": [os.path.join("tok", "book.bin"), os.path.join("tok", "code.bin")]}
    assert io.outputs == {"--out": ["t/x.csv", "t/x.md"]} and io.out_dirs == {"OUT_DIR": ["dir"]}
    cfg = tmp_path / "c.yaml"
    cfg.write_text("x: 1")
    assert guard.io_paths(ap.parse_args(["--config", str(cfg), "d"])).inputs == {"--config": [str(cfg)]}
    with pytest.raises(ValueError, match="--out .* is the input --model"):
        guard.check_args(ap.parse_args(["--model", str(cfg.with_suffix(".csv")), "--out", str(cfg), "d"]))
    checked = ap.parse_args(["--model", "m.pt", "--data", "tok", "--out", str(tmp_path / "t"), str(tmp_path / "o")])
    guard.check_args(checked)  # passes, and leaves plain strings behind (YAML cannot write a str subclass)
    assert all(type(v) is str for v in (checked.model, checked.data, checked.out, checked.out_dir)), vars(checked)
    assert yaml.safe_dump({"out": checked.out}).startswith("out: ")


def test_every_pipeline_script_starts_with_the_check() -> None:
    for p in sorted((ROOT / "workflows/scripts").glob("*.py")):
        src = p.read_text()
        assert "from yocou.utils.guard import start_script" in src and "start_script(sm)" in src, p.name
        assert "open(sm.log[0]" not in src, f"{p.name}: start_script opens the log"


def _run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """Run one command line in-process: ``yocou <sub> ...`` or ``python -m <module> ...``."""
    if argv[0] == "yocou":
        from yocou.cli import main

        rc = main(argv[1:])
    else:
        assert argv[:2] == ["python", "-m"], argv
        mod = importlib.import_module(argv[2] if argv[2] != "yocou.results.audit" else "yocou.results.audit.report")
        rc = run_main(getattr(mod, "main", None) or mod._main, argv[3:], prog=" ".join(argv[:3]))
    cap = capsys.readouterr()
    return rc, cap.err


# (command line with {x} for the input file, label of the output, label of the input). The output is the input,
# or (for a folder output) the folder that holds it.
CASES = [
    ("yocou ppl --model {x} --data {d} --seq-len 8 --out {x}", "--out", "--model"),
    ("yocou ppl --model {m} --data {d} --seq-len 8 --tokenizer {x} --out {x}", "--out", "--tokenizer"),
    ("yocou baselines --train {x} --data {d} --seq-len 8 --out {x}", "--out", "--train"),
    ("yocou kv-measure --run-configs {x} --seq-lens 8 --out {x}", "--out", "--run-configs"),
    ("yocou tokenizer --corpus {d} --out {d}/train.jsonl", "--out", "--corpus"),
    ("yocou tokenize --corpus {d} --tokenizer {d}/train.json --out {d}", "--out", "--tokenizer"),
    ("yocou corpus --config {d}/manifest.json --out {d}", "--out", "--config"),
    ("yocou train --run-config {x} --data {d}/train.bin --heldout {d}/summary.json --out {d}", "--out", "--heldout"),
    ("yocou export-hf {d} {d}", "OUT_DIR", "RUN_DIR"),
    ("yocou export-hf {d}/run {d}", "OUT_DIR", "RUN_DIR"),
    ("yocou audit --results {d} --out {d}/tidy", "--out", "--results"),
    ("yocou audit --results {d} --out {d}", "--out", "--results"),
    ("yocou audit --results {d} --baseline {x} --write-baseline {x}", "--write-baseline", "--baseline"),
    ("python -m yocou.results.audit --results {d} --out {d}/tidy/sub/..", "--out", "--results"),
    ("python -m yocou.workflow.pipeline --config {x} --variant yoco --out {x}", "--out", "--config"),
    ("python -m yocou.workflow.committed --config-json {x} --out {x}", "--out", "--config-json"),
    ("python -m yocou.workflow.studies eqflops --run {d} --out {d}", "--out", "--run"),
    ("python -m yocou.evaluation.lmeval.pack --tasks t --heldout-book {d}/book.bin --out {d}", "--out", "--heldout-book"),
    ("python -m yocou.evaluation.lmeval.run --model {d}/m.pt --tokenizer {x} --downstream {x} --variant y --out {d}",
     "--out", "--model"),
    ("python -m yocou.evaluation.longctx.niah prompts --tokenizer {m} --book {x} --lengths 8 --out {x}", "--out", "--book"),
    ("python -m yocou.evaluation.longctx.niah eval --model {m} --tokenizer {m} --prompts {x} --out {x}", "--out", "--prompts"),
    ("python -m yocou.evaluation.longctx.longppl --model {x} --tokens-dir {d} --lengths 8 --out {x}", "--out", "--model"),
    ("python -m yocou.evaluation.analysis.angular --model {x} --data {d} --max-tokens 8 --seq-len 8 --out {x}",
     "--out", "--model"),
    ("python -m yocou.evaluation.bench.profile --run-configs {x} --out {x}", "--out", "--run-configs"),
    ("python -m yocou.results.render.pages {m}={d}/p.html {x}={x}", "PAGE 2", "TABLE 2"),
]


@pytest.mark.parametrize(("line", "out_label", "in_label"), CASES, ids=[c[0][:60] for c in CASES])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(
        line: str, out_label: str, in_label: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    d = tmp_path / "d"
    (d / "tidy").mkdir(parents=True)
    (d / "run").mkdir()
    x, m = tmp_path / "input.bin", tmp_path / "model.pt"
    for p in (x, m, d / "train.jsonl", d / "train.json", d / "manifest.json", d / "summary.json", d / "book.bin",
              d / "m.pt"):
        p.write_bytes(b"precious " + p.name.encode())
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    rc, err = _run(line.format(x=x, d=d, m=m).split(), capsys)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"{out_label} " in lines[0] and f"the input {in_label}" in lines[0], lines[0]
    assert "refusing to write over an input" in lines[0] or "would replace it" in lines[0], lines[0]
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before  # nothing written, nothing removed, nothing created


def test_an_output_folder_snakemake_made_beforehand_is_allowed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Snakemake creates the folders of a job's outputs before it starts the job: a command whose ``--out`` is a
    folder (the equal-FLOPs model, a run) or a file stem (timing) must accept that empty folder: each command
    passes its check and fails later, on its missing inputs, writing nothing."""
    run, out = tmp_path / "yocou_moe", tmp_path / "yocou_moe_eqflops"
    run.mkdir()
    out.mkdir()
    (tmp_path / "timing").mkdir()
    for line in (["python", "-m", "yocou.workflow.studies", "eqflops", "--run", str(run), "--out", str(out)],
                 ["yocou", "train", "--run-config", str(tmp_path / "none.json"), "--data", str(tmp_path / "t.bin"),
                  "--out", str(out)]):
        rc, err = _run(line, capsys)
        assert rc == 2 and "refusing" not in err and "would replace" not in err and "cannot write" not in err, err
    guard.check_args(argparse.Namespace(out=guard.writes(paths=guard.suffixed(".csv", replace=False))(
        str(tmp_path / "timing"))))
    assert sorted(p.name for p in out.iterdir()) == []


def test_a_symlink_or_dotdot_to_the_input_is_the_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    x = tmp_path / "model.pt"
    x.write_bytes(b"weights")
    (tmp_path / "link.pt").symlink_to(x)
    (tmp_path / "sub").mkdir()
    for out in (tmp_path / "link.pt", tmp_path / "sub" / ".." / "model.pt"):
        rc, err = _run(["yocou", "ppl", "--model", str(x), "--data", str(tmp_path), "--seq-len", "8",
                        "--out", str(out)], capsys)
        assert rc == 2 and "is the input --model" in err, err
    os.link(x, tmp_path / "hard.pt")
    with pytest.raises(ValueError, match="is the input --model"):
        guard.check_paths(guard.IOPaths({"--model": x}, {"--out": tmp_path / "hard.pt"}))
    assert x.read_bytes() == b"weights"


def test_a_new_file_beside_the_input_is_allowed(tmp_path: Path) -> None:
    x = tmp_path / "model.pt"
    x.write_bytes(b"w")
    guard.check_paths(guard.IOPaths({"--model": x}, {"--out": tmp_path / "ppl.json"}, {"--dir": tmp_path / "new"}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]  # the write probe leaves nothing


def test_outputs_that_cannot_be_written_are_refused_before_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    f = tmp_path / "a_file"
    f.write_text("x")
    rc, err = _run(["python", "-m", "yocou.evaluation.bench.gpu_check", "--dry", "--out", str(f / "sub")], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "a_file is a file, not a folder" in err, err
    rc, err = _run(["python", "-m", "yocou.workflow.committed", "--config-json", str(f), "--out", str(tmp_path)], capsys)
    assert rc == 2 and "is a folder; expected a file path" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
def test_an_unwritable_folder_is_one_line_naming_it(code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    """A read-only file system, a full disk or no permission (this test runs as root, so all are simulated at the
    probe) is refused before any work, in one line naming the argument, the folder and the errno."""
    def refuse(*a, **k):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(guard.tempfile, "mkstemp", refuse)
    rc, err = _run(["python", "-m", "yocou.evaluation.bench.gpu_check", "--dry", "--out", str(tmp_path / "out")], capsys)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"--out {tmp_path / 'out'}: cannot write in {tmp_path}: {os.strerror(code)}" in err, err
    assert not (tmp_path / "out").exists()


def test_disk_errors_name_the_path_and_errno() -> None:
    msg = error_message(OSError(errno.ENOSPC, "No space left on device", "/x/model.pt"))
    assert msg.startswith("/x/model.pt: No space left on device (ENOSPC)") and "\n" not in msg
    assert "rerun" in msg and "atomic" in msg
    assert "(EROFS)" in error_message(OSError(errno.EROFS, "Read-only file system", "/ro/f"))


def test_snakemake_scripts_refuse_an_output_that_is_an_input(tmp_path: Path) -> None:
    """check_snakemake on Snakemake's own Namedlist (named and unnamed files)."""
    from snakemake.iocontainers import Namedlist

    a = tmp_path / "a.csv"
    a.write_text("x")
    inputs = Namedlist(fromdict={"tidy": str(a)})
    guard.check_snakemake(argparse.Namespace(input=inputs, output=Namedlist([str(tmp_path / "b.csv")])))
    with pytest.raises(ValueError, match=re.escape(f"output {a} is the input input tidy")):
        guard.check_snakemake(argparse.Namespace(input=inputs, output=Namedlist([str(a)])))
    with pytest.raises(ValueError, match="output png .* is the input input tidy"):
        guard.check_snakemake(argparse.Namespace(input=inputs, output=Namedlist(fromdict={"png": str(a)})))


def test_start_script_logs_one_line_and_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    a, log = tmp_path / "a.csv", tmp_path / "rule.log"
    a.write_text("x")
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    sm = argparse.Namespace(input={"tidy": str(a)}, output={"csv": str(a)}, log=[str(log)], rule="table9")
    with pytest.raises(SystemExit) as e:
        guard.start_script(sm)
    sys.stdout.flush()
    assert e.value.code == 2
    text = log.read_text().strip().splitlines()
    assert len(text) == 1 and text[0].startswith("rule table9: error: output csv") and a.read_text() == "x", text


@pytest.mark.parametrize("bug", [False, True])
def test_start_script_reports_later_bad_input_in_one_line(tmp_path: Path, bug: bool) -> None:
    """Bad input met after the start (a truncated result file the script reads) is one line in the log, naming the
    file, and status 2, as a refusal at the start is; a bug keeps its traceback and Python's status 1."""
    import subprocess
    import sys

    log, bad = tmp_path / "rule.log", tmp_path / "table3.json"
    bad.write_text('{"rows": [1, 2')
    body = "raise KeyError('x')" if bug else f"from yocou.results.readers import read_json; read_json({str(bad)!r})"
    script = ("import argparse; from yocou.utils import guard\n"
              f"sm = argparse.Namespace(input={{}}, output={{}}, log=[{str(log)!r}], rule='table3')\n"
              f"guard.start_script(sm)\n{body}\n")
    env = {k: v for k, v in os.environ.items() if k != "YOCOU_TRACEBACK"}
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    lines = log.read_text().splitlines()
    if bug:
        assert got.returncode == 1 and lines[0] == "Traceback (most recent call last):" and lines[-1] == "KeyError: 'x'"
    else:
        assert got.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"rule table3: error: {bad}: "), lines
