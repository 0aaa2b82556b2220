"""Bad input found by trying the project as a new user would: each case is one line naming the field or file, exit
status 2, and nothing written. Every case here was a traceback, a misleading message or a wrong result before.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml

import yocou.model.config as C
from yocou.results.readers import ResultFileError
from yocou.results.tidy import read_tidy
from yocou.training.train import TrainConfig, check_device, read_checkpoint
from yocou.utils.validation import FieldError

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "results" / "tiny"


def _cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    from yocou.cli import main

    capsys.readouterr()
    rc = main(argv)
    return rc, capsys.readouterr().err.strip()


def _module(main, argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    from yocou.utils.entry import run_main

    capsys.readouterr()
    try:
        rc = run_main(main, argv)
    except SystemExit as e:  # argparse's errors
        rc = e.code
    return rc, capsys.readouterr().err.strip()


@pytest.mark.parametrize(("field", "value"), [
    ("lr", math.nan), ("grad_clip", math.nan), ("lr", math.inf), ("min_lr_ratio", 5.0), ("min_lr_ratio", -0.5),
    ("beta2", 1.5), ("beta1", 1.0), ("eps", 0.0), ("weight_decay", -0.1), ("lr", True), ("steps", 2.0),
])
def test_train_config_ranges(field: str, value: float) -> None:
    with pytest.raises(FieldError) as e:
        TrainConfig(**{"steps": 2, "batch_size": 1, "seq_len": 8, field: value})
    assert e.value.field == f"TrainConfig.{field}" and "\n" not in str(e.value)
    assert TrainConfig(steps=2, batch_size=1, seq_len=8, min_lr_ratio=1, beta1=0.0)  # the ends of the ranges


@pytest.mark.parametrize(("field", "value"), [("norm_eps", -1.0), ("init_std", 0.0), ("norm_eps", math.nan),
                                             ("rope_theta", 0.0), ("rope_theta", -5.0), ("d_model", True),
                                             ("n_heads", 0)])
def test_model_config_positive_floats(field: str, value: float) -> None:
    with pytest.raises(FieldError) as e:
        C.preset("yocou-smoke").replace(**{field: value})
    assert e.value.field == f"ModelConfig.{field}"


def test_an_unknown_top_level_run_config_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = {"model": C.preset("yocou-smoke").to_dict(), "train": {"steps": 1, "batch_size": 1, "seq_len": 8},
          "foo": 5}
    (tmp_path / "rc.json").write_text(json.dumps(rc))
    code, err = _cli(["train", "--run-config", str(tmp_path / "rc.json"), "--data", str(tmp_path / "x.bin"),
                      "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and "unknown top-level key(s) ['foo']" in err, err
    assert not (tmp_path / "run").exists()


def test_the_pipeline_config_refuses_nan_and_infinity() -> None:
    from yocou.workflow.wfconfig import ConfigError, read_scale_file, resolve_config

    for bad in (math.nan, math.inf):
        cfg = read_scale_file(ROOT / "workflows/config/smoke.yaml")
        cfg["train"]["lr"] = bad
        with pytest.raises(ConfigError, match=rf"train.lr: {bad!r} is not a finite number"):
            resolve_config(cfg, source="smoke.yaml", root=ROOT)


def test_a_json_with_nan_names_the_file_and_the_key(tmp_path: Path) -> None:
    from yocou.utils.io import atomic_write_json

    with pytest.raises(ValueError, match=r"r\.json: not written: splits\.book\.ppl is nan, not a finite number"):
        atomic_write_json(tmp_path / "r.json", {"splits": {"book": {"ppl": math.nan}}})
    assert list(tmp_path.iterdir()) == []


def test_checkpoint_readers_name_folders_devices_and_mismatched_weights(tmp_path: Path) -> None:
    (tmp_path / "dir.pt").mkdir()
    with pytest.raises(IsADirectoryError, match=r"dir\.pt is a folder; expected a checkpoint file"):
        read_checkpoint(tmp_path / "dir.pt")
    with pytest.raises(ValueError, match=r"device 'tpu' is not a torch device"):
        check_device("tpu")
    from yocou.model.lm import LM
    from yocou.training.train import load_model

    cfg = C.preset("yocou-smoke")
    torch.save({"model": LM(cfg).state_dict(), "model_config": cfg.replace(d_model=32, head_dim=16).to_dict()},
               tmp_path / "m.pt")
    with pytest.raises(ValueError, match=r"m\.pt: its weights do not fit its model_config \(size mismatch"):
        load_model(tmp_path / "m.pt")


def test_a_named_tokenizer_without_its_package_is_a_user_error() -> None:
    from yocou.utils.entry import USER_ERRORS, MissingPackage

    assert MissingPackage in USER_ERRORS and issubclass(MissingPackage, ImportError)


def test_ppl_refuses_a_tokenizer_other_than_the_streams(token_dir: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    from yocou.model.lm import LM

    cfg = C.preset("yocou-smoke").replace(vocab_size=300)
    torch.save({"model": LM(cfg).state_dict(), "model_config": cfg.to_dict()}, tmp_path / "model.pt")
    # another tokenizer file with the same vocabulary (the same merges, written compactly): another sha256
    tok = json.loads((token_dir.parent / "tokenizer.json").read_text())
    (tmp_path / "other.json").write_text(json.dumps(tok))
    argv = ["ppl", "--model", str(tmp_path / "model.pt"), "--data", str(token_dir), "--splits", "heldout_book",
            "--seq-len", "16", "--max-tokens", "64", "--out", str(tmp_path / "p.json")]
    code, err = _cli(argv + ["--tokenizer", str(tmp_path / "other.json")], capsys)
    assert code == 2 and "not the tokenizer that wrote" in err and "heldout_book.bin" in err, err
    assert not (tmp_path / "p.json").exists()
    code, err = _cli(argv + ["--tokenizer", str(token_dir.parent / "tokenizer.json")], capsys)
    assert code == 0, err


def test_a_garbage_offsets_file_is_named(token_dir: Path, tmp_path: Path) -> None:
    from yocou.data.tokens import TokenStream

    d = tmp_path / "tokens"
    shutil.copytree(token_dir, d)
    (d / "heldout_book.offsets.npy").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"offsets file .*heldout_book\.offsets\.npy is not a \.npy array"):
        TokenStream(d / "heldout_book.bin").offsets  # noqa: B018
    np_ok = TokenStream(token_dir / "heldout_book.bin").offsets
    import numpy as np

    np.save(d / "heldout_book.offsets.npy", np_ok[::-1].copy())  # decreasing
    with pytest.raises(ValueError, match="non-decreasing integer array"):
        TokenStream(d / "heldout_book.bin").offsets  # noqa: B018


def test_an_edited_tidy_json_no_longer_matches_its_csv(tmp_path: Path) -> None:
    for x in ("csv", "json"):
        shutil.copy(TINY / "tidy" / f"fig2.{x}", tmp_path / f"fig2.{x}")
    d = json.loads((tmp_path / "fig2.json").read_text())
    row = next(r for r in d["rows"] if r["run"] == "yocou" and r["metric"] == "train_loss")
    row["value"] -= 5
    (tmp_path / "fig2.json").write_text(json.dumps(d))
    for f in ("fig2.json", "fig2.csv"):
        with pytest.raises(ResultFileError, match=r"value of row \(.*run='yocou'.*metric='train_loss'.* is .* "
                                                  r"but .* in fig2\.(csv|json) \(one of them was edited\)"):
            read_tidy(tmp_path / f)


@pytest.mark.parametrize(("col", "value", "match"), [("seed", 0.5, "seed = 0.5, expected an integer"),
                                                     ("value", True, "expected a number, not a boolean")])
def test_a_tidy_row_with_a_float_seed_or_a_boolean_value_is_refused(tmp_path: Path, col: str, value, match: str
                                                                     ) -> None:
    shutil.copy(TINY / "tidy" / "kv.json", tmp_path / "kv.json")
    d = json.loads((tmp_path / "kv.json").read_text())
    d["rows"][0][col] = value
    (tmp_path / "kv.json").write_text(json.dumps(d))
    with pytest.raises(ResultFileError, match=match):
        read_tidy(tmp_path / "kv.json")


@pytest.mark.parametrize(("fault", "column"), [
    ({"value": math.inf}, "value"), ({"stderr": -0.5}, "stderr"), ({"n": 0}, "n"), ({"axis": "T"}, "axis_value"),
    ({"axis_value": 3.0}, "axis_value"), ({"run": ""}, "run"), ({"run": 3}, "run"), ({"value": "x"}, "value"),
    ({"seed": 1.5}, "seed"),
])
def test_the_tidy_schema_names_the_file_row_and_column(fault: dict, column: str) -> None:
    from yocou.results.tidy import tidy_frame

    base = {"study": "s", "run": "r", "role": "r", "metric": "m", "value": 1.0, "unit": "u"}
    with pytest.raises(ValueError) as e:
        tidy_frame([base, {**base, "metric": "m2", **fault}], where="t.csv")
    msg = str(e.value)
    assert msg.startswith(f"t.csv: row 1: {column}") and "expected" in msg and "\n" not in msg, msg
    ok = tidy_frame([base, {**base, "metric": "m2", "axis": "T", "axis_value": 2, "seed": 3.0, "n": 1}])
    assert list(ok["seed"]) == [-1, 3] and ok["axis_value"].isna().tolist() == [True, False]


def test_a_tidy_table_of_no_rows_is_valid_and_typed(tmp_path: Path) -> None:
    """A header-only file has no row to check; its numbers come back as numbers (it used to be refused for its
    untyped text columns, which stopped the audit's message about the rows it lacks)."""
    from yocou.results.tidy import COLUMNS, read_tidy

    (tmp_path / "t.csv").write_text(",".join(COLUMNS) + "\n")
    df = read_tidy(tmp_path / "t.csv", complete=False)
    assert df.empty and list(df.columns) == list(COLUMNS) and str(df["value"].dtype) == "float64"


def test_lmeval_task_options_are_checked_and_match_the_schema() -> None:
    from yocou.evaluation.lmeval.pack import TASK_OPTIONS, check_tasks

    schema = yaml.safe_load((ROOT / "workflows/schemas/config.schema.yaml").read_text())
    tasks = schema["properties"]["eval"]["properties"]["downstream"]["properties"]["tasks"]
    (opts,) = tasks["patternProperties"].values()
    assert {k: (v["minimum"], "null" in v["type"]) for k, v in opts["properties"].items()} == TASK_OPTIONS
    check_tasks({"arc_easy": {"n": 60, "shots": 0}, "mmlu": {"n_per_subject": None}})
    for bad, match in (({"arc_easy": {"n": -2}}, r"arc_easy\.n: expected an integer >= 1 or null, got -2"),
                       ({"arc_easy": {"n": "two"}}, r"arc_easy\.n: expected an integer"),
                       ({"arc_easy": {"shots": -1}}, r"arc_easy\.shots: expected an integer >= 0, got -1"),
                       ({"arc_easy": {"nn": 1}}, r"arc_easy: unknown option\(s\) \['nn'\]"),
                       (5, "expected a non-empty mapping"), ({"arc_easyy": {}}, "unknown task")):
        with pytest.raises(ValueError, match=match):
            check_tasks(bad)


def test_module_arguments_that_cannot_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from yocou.evaluation.analysis import angular
    from yocou.evaluation.lmeval import pack
    from yocou.evaluation.longctx import longppl, niah
    from yocou.results import timing

    (tmp_path / "folder").mkdir()
    m = str(tmp_path / "nope.pt")
    cases = [
        (timing.main, ["--scale", "smoke", "--bench", str(tmp_path), "--out", f"{tmp_path / 'folder'}/"],
         "is a folder; expected an output stem"),
        (longppl._main, ["--model", m, "--tokens-dir", str(tmp_path), "--lengths", "64", "32", "64", "--out",
                        str(tmp_path / "l.json")], "each length once"),
        (longppl._main, ["--model", m, "--tokens-dir", str(tmp_path), "--lengths", "64", "--book-docs", "0",
                        "--code-docs", "0", "--out", str(tmp_path / "l.json")], "at least one document"),
        (niah.main, ["prompts", "--tokenizer", m, "--book", m, "--lengths", "256", "--seed", "-1", "--out",
                     str(tmp_path / "p.jsonl")], "argument --seed: expected an integer >= 0"),
        (pack.main, ["--out", str(tmp_path / "P"), "--tasks", "arc_easy"], "--tasks: not JSON"),
        (angular.main, ["--model", m, "--data", str(tmp_path), "--max-tokens", "64", "--seq-len", "1000",
                        "--out", str(tmp_path / "a.json")], "seq_len 1000 is longer than max_tokens 64"),
        (angular.main, ["--model", m, "--data", str(tmp_path), "--max-tokens", "64", "--seq-len", "32",
                        "--device", "tpu", "--out", str(tmp_path / "a.json")], "--device 'tpu'"),
    ]
    for main, argv, match in cases:
        code, err = _module(main, argv, capsys)
        assert code == 2 and err.count("error:") == 1 and match in err.splitlines()[-1], (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_a_binary_config_file_is_named(tmp_path: Path) -> None:
    from yocou.utils.io import load_config_file
    from yocou.utils.yamlio import load_yaml

    (tmp_path / "g.json").write_bytes(bytes(range(128, 256)))
    with pytest.raises(ValueError, match=r"g\.json: not UTF-8 text"):
        load_config_file(tmp_path / "g.json")
    with pytest.raises(ValueError, match=r"g\.json: not a UTF-8 text file"):
        load_yaml(tmp_path / "g.json")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        load_config_file(tmp_path)


@pytest.mark.slow
def test_the_audit_refuses_an_empty_results_folder_and_bad_figures(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "empty").mkdir()
    code, err = _cli(["audit", "--results", str(tmp_path / "empty")], capsys)
    assert code == 2 and "no tidy tables in" in err, err
    for fig, match in ((tmp_path / "none.png", "figure not found"), (tmp_path / "empty", "is a folder")):
        code, err = _cli(["audit", "--results", str(TINY), "--out", str(tmp_path / "au"), "--figures", str(fig)],
                         capsys)
        assert code == 2 and match in err, err
    assert not (tmp_path / "au").exists()  # refused before its output folder was made


@pytest.mark.slow
def test_a_negative_reported_perplexity_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rep = tmp_path / "rep"
    shutil.copytree(ROOT / "yocou" / "results" / "reported", rep, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    t = rep / "table03.csv"
    text = t.read_text()
    assert "Transformer,Non-Recursive,Wiki. ppl,ppl,22.52" in text
    t.write_text(text.replace("Transformer,Non-Recursive,Wiki. ppl,ppl,22.52",
                              "Transformer,Non-Recursive,Wiki. ppl,ppl,-22.52"))
    code, err = _cli(["audit", "--results", str(TINY), "--reported-dir", str(rep)], capsys)
    assert code == 2 and "T3:Transformer|Wiki. ppl is -22.52" in err and "needs numbers > 0" in err, err


def test_the_niah_protocol_is_checked_when_used_not_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    from yocou.evaluation.longctx import niah

    monkeypatch.setattr(niah, "N_CHOICES", 1)
    with pytest.raises(ValueError, match=r"eval/protocols\.yaml: niah\.n_choices must be an integer >= 2"):
        niah.check_protocol()
    monkeypatch.setattr(niah, "N_CHOICES", 2)
    monkeypatch.setattr(niah, "_DIGITS", -3)
    with pytest.raises(ValueError, match=r"niah\.value_digits must be an integer in 1\.\.18"):
        niah.check_protocol()


@pytest.mark.parametrize("argv", [
    ["python", "-m", "yocou.utils.runlock", "/tmp/" + "x" * 300],
    ["python", "-m", "yocou.results.audit", "--scale", "tiny", "--out", "/tmp/" + "x" * 300 + "/audit"],
    ["yocou", "export-hf", "results/tiny", "/tmp/" + "y" * 300],
])
def test_a_path_component_over_255_bytes_is_one_line(argv: list[str]) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, *argv[1:]] if argv[0] == "python" else [sys.executable, "-m", "yocou.cli", *argv[1:]]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2, res.stderr[-2000:]
    assert len(res.stderr.strip().splitlines()) == 1 and "a component of 30" in res.stderr and "at most 255" in res.stderr


def test_runlock_refuses_a_file_and_passes_a_folder_not_made_yet(tmp_path: Path) -> None:
    """A run folder that does not exist yet is free (the train rule checks before its first run makes it)."""
    from yocou.utils.runlock import main

    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(NotADirectoryError, match="RUN_DIR .* is a file"):
        main([str(f)])
    assert main([str(tmp_path / "not_yet")]) == 0


def test_an_empty_comparisons_file_is_refused_naming_it(tmp_path: Path) -> None:
    from yocou.results.audit.verdicts import load_comparisons

    p = tmp_path / "comparisons.yaml"
    p.write_text("[]\n")
    with pytest.raises(ValueError, match=r"comparisons\.yaml: no comparison rows"):
        load_comparisons(p)


@pytest.mark.parametrize(("steps", "field"), [((-1,), "TrainConfig.snapshot_steps[0]"),
                                              ((100,), "TrainConfig.snapshot_steps"),
                                              (("a",), "TrainConfig.snapshot_steps[0]")])
def test_snapshot_steps_outside_the_run_are_refused(steps, field) -> None:
    """A snapshot step the run never reaches was accepted and wrote nothing."""
    with pytest.raises(FieldError) as e:
        TrainConfig(steps=6, batch_size=1, seq_len=8, snapshot_steps=steps)
    assert e.value.field == field
    assert TrainConfig(steps=6, batch_size=1, seq_len=8, snapshot_steps=(3, 6)).snapshot_steps == (3, 6)


def _run(args: list[str], cwd: Path = ROOT) -> tuple[int, str]:
    import subprocess
    import sys

    res = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    return res.returncode, res.stderr.strip()


def test_a_file_that_is_not_utf8_is_named_with_its_argument(tmp_path: Path) -> None:
    """A binary file where text is read ended in the codec's message alone ('utf-8' codec can't decode ...): the
    error now names the file and the argument it came from."""
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(200, 256)) * 4)
    for args in (["-m", "yocou.training.ladder", "runs", "--scale", "tiny", "--study", str(binary)],
                 ["-m", "yocou.workflow.cluster", "resources", "--config", str(binary), "train"]):
        rc, err = _run(args)
        assert rc == 2 and len(err.splitlines()) == 1, err
        opt = next(a for a in args if a.startswith("--") and a != "--scale")
        assert f"{binary} (argument {opt}): not UTF-8 text" in err, err


def test_a_run_config_without_a_tokenizer_names_it_instead_of_a_traceback(tmp_path: Path) -> None:
    """The scale's sizes do not set vocab_size (it is the tokenizer's): a run config made without --tokenizer was a
    TypeError traceback."""
    rc, err = _run(["-m", "yocou.workflow.pipeline", "--config", "workflows/config/tiny.yaml", "--variant", "yocou", "--out",
                    str(tmp_path / "rc.json")])
    assert rc == 2 and "--tokenizer" in err and "vocab_size" in err and "Traceback" not in err, err
    assert not (tmp_path / "rc.json").exists()


@pytest.mark.parametrize("cell", ["nan", "-1e400", "inf"])
def test_a_reported_table_with_a_non_finite_cell_is_refused_naming_it(cell: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    """A printed table holds no NaN or infinity: such a cell was a Decimal traceback in the consistency checks."""
    rep = tmp_path / "rep"
    shutil.copytree(ROOT / "yocou" / "results" / "reported", rep, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    lines = (rep / "table02.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    i = next(k for k, ln in enumerate(lines) if not ln.startswith("#") and k > 0 and "," in ln and
             not ln.startswith("model"))
    lines[i] = lines[i].rstrip("\n").rsplit(",", 1)[0] + f",{cell}\n"
    (rep / "table02.csv").write_text("".join(lines), encoding="utf-8")
    code, err = _cli(["audit", "--scale", "tiny", "--reported-dir", str(rep)], capsys)
    assert code == 2 and f"{rep / 'table02.csv'}" in err and f"{cell!r} is not a finite number" in err, err


def test_two_held_out_files_of_one_split_are_refused(tmp_path: Path, token_dir: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    """Two --heldout files named heldout_book.bin: the second silently replaced the first."""
    other = tmp_path / "alt" / "heldout_book.bin"
    other.parent.mkdir()
    shutil.copyfile(token_dir / "heldout_book.bin", other)
    rc = {"model": C.preset("yocou-smoke").replace(vocab_size=300).to_dict(),
          "train": {"steps": 1, "batch_size": 1, "seq_len": 8}}
    (tmp_path / "rc.json").write_text(json.dumps(rc))
    code, err = _cli(["train", "--run-config", str(tmp_path / "rc.json"), "--data", str(token_dir / "train.bin"),
                      "--out", str(tmp_path / "run"), "--heldout", str(token_dir / "heldout_book.bin"), str(other)],
                     capsys)
    assert code == 2 and "are both split 'book'" in err, err
    assert not (tmp_path / "run" / "model.pt").exists()


def test_held_out_perplexity_of_nan_weights_is_an_error_not_a_number(tmp_path: Path, token_dir: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    """NaN weights printed "ppl": NaN with exit 0 (only --out refused it)."""
    from yocou.model.lm import LM
    from yocou.training.train import _save_model

    cfg = C.preset("yocou-smoke").replace(vocab_size=300)
    model = LM(cfg)
    with torch.no_grad():
        next(model.parameters()).fill_(math.nan)
    _save_model(tmp_path / "model.pt", model.state_dict(), cfg, TrainConfig(steps=1, batch_size=1, seq_len=8), 1, {})
    code, err = _cli(["ppl", "--model", str(tmp_path / "model.pt"), "--data", str(token_dir), "--splits",
                      "heldout_book", "--seq-len", "16"], capsys)
    assert code == 2 and "held-out loss on heldout_book is nan" in err, err


def test_a_probe_result_out_of_range_is_refused_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Accuracy NaN or 7.5, or a seed 'zero', was summarized (or failed naming no field)."""
    from yocou.evaluation.probe.__main__ import main as probe_main

    good = {"variant": "yocou_t3", "preset": "yocou", "n_loops": 3, "seed": 0, "chance": {"mqar": 0.01},
            "accuracy": {"mqar": {"1": {"accuracy": 0.5, "correct": 16, "n": 32}}}, "params": 1000, "steps": 10,
            "train_flops": 1e9}
    for edit, field in ((lambda r: r["accuracy"]["mqar"]["1"].update(accuracy=7.5), "accuracy.mqar.1.accuracy"),
                        (lambda r: r["accuracy"]["mqar"]["1"].update(accuracy=math.nan), "accuracy.mqar.1.accuracy"),
                        (lambda r: r.update(seed="zero"), "seed")):
        r = json.loads(json.dumps(good))
        edit(r)
        (tmp_path / "r.json").write_text(json.dumps(r))
        code, err = _module(probe_main, ["summarize", "--out", str(tmp_path / "out"), str(tmp_path / "r.json")],
                            capsys)
        assert code == 2 and f"r.json: {field}:" in err, err
    assert not (tmp_path / "out").exists()


def test_generate_refuses_a_prompt_of_the_wrong_shape_type_or_ids() -> None:
    """An id past the vocabulary was an IndexError from the embedding, a 1-D prompt an unpacking error."""
    from yocou.model.generate import generate
    from yocou.model.lm import LM

    model = LM(C.preset("yocou-smoke")).eval()
    V = model.cfg.vocab_size
    for bad, match in ((torch.tensor([[1, 2, V]]), rf"outside \[0, vocab_size={V}\)"),
                       (torch.tensor([[-1, 2]]), "outside"), (torch.tensor([1, 2, 3]), "2-D integer tensor"),
                       ([[1, 2]], "got list"), (torch.ones(1, 3), "2-D integer tensor")):
        with pytest.raises(ValueError, match=match):
            generate(model, bad, 2)
    assert generate(model, torch.tensor([[1, 2, 3]]), 2).shape == (1, 2)


@pytest.mark.slow
def test_an_audit_figure_that_is_not_a_png_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fake = tmp_path / "fig.png"
    fake.write_bytes(b"not an image at all")
    code, err = _cli(["audit", "--results", str(TINY), "--out", str(tmp_path / "aud"), "--figures", str(fake)],
                     capsys)
    assert code == 2 and f"--figures {fake}: not a PNG image" in err, err
    assert not (tmp_path / "aud").exists()


def test_a_yaml_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """PyYAML's message spans three lines (problem, line, column): the error stays one line naming the file."""
    bad = tmp_path / "rc.yaml"
    bad.write_text("model: [1, 2\ntrain: 3\n", encoding="utf-8")
    code, err = _cli(["train", "--run-config", str(bad), "--data", str(tmp_path / "x.bin"), "--out",
                      str(tmp_path / "o")], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and str(bad) in err and "line 2" in err, err


def test_a_budget_bigram_past_memory_is_refused_before_allocating() -> None:
    """A budget of 10^8 steps x batch 10^5 grew to 23 GB until the kernel killed it."""
    from yocou.evaluation.baselines import budget_windows
    from yocou.utils.memory import MemoryRefusal

    with pytest.raises(MemoryRefusal, match="the budget bigram's training windows"):
        budget_windows(None, steps=100_000_000, batch_size=100_000, seq_len=32, seed=0)


def test_a_json_key_given_twice_is_refused_naming_it(tmp_path: Path) -> None:
    """A run config with a second "train" (the last would win silently) and a result file with a key twice:
    one line naming the file and the key, as the YAML loader does."""
    from yocou.results.readers import ResultFileError, read_json
    from yocou.utils.io import load_config_file

    rc = tmp_path / "rc.json"
    rc.write_text('{"model": {}, "train": {"lr": 1e-3}, "train": {"lr": 5.0}}')
    with pytest.raises(ValueError, match=r"rc\.json: duplicate key 'train'") as e:
        load_config_file(rc)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="inline JSON config: duplicate key 'a'"):
        load_config_file('{"a": 1, "b": {"c": 2}, "a": 3}')
    res = tmp_path / "r.json"
    res.write_text('{"splits": {"book": {"nats_per_token": 1.0, "nats_per_token": 9.0}}}')
    with pytest.raises(ResultFileError, match=r"r\.json: duplicate key 'nats_per_token'"):
        read_json(res)
    assert load_config_file('{"a": {"a": 1}}') == {"a": {"a": 1}}   # one key per object: nested reuse is fine


@pytest.mark.parametrize("name", ["../../../../x", "a/b", "x..y", "/abs", "Yoco"])
def test_a_variant_name_that_could_leave_the_tree_is_refused_naming_it(name: str) -> None:
    """A variant names runs/<scale>/<variant>/: a path separator or .. would put a run folder outside the
    checkout, so the config's schema refuses it before anything is planned."""
    from yocou.workflow.wfconfig import read_scale_file, resolve_config

    root = Path(__file__).resolve().parents[1]
    cfg = read_scale_file(root / "workflows/config/tiny.yaml")
    cfg["variants"][name] = {"preset": "yoco"}
    with pytest.raises(ValueError, match=r"variants: '.*' does not match"):
        resolve_config(cfg, root=root)


def test_a_vocabulary_beyond_2_to_the_20_is_refused_before_anything_is_allocated(tmp_path: Path) -> None:
    """--vocab-size 1000000000 used to abort in a 70 GB allocation inside the trainer: now one line naming the
    argument and the limit, and nothing written."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus/train.jsonl").write_text('{"text": "a b c"}\n', encoding="utf-8")
    for vocab in ("1000000000", str((1 << 20) + 1)):
        rc, err = _run(["-m", "yocou.cli", "tokenizer", "--corpus", str(tmp_path / "corpus"), "--vocab-size", vocab,
                        "--out", str(tmp_path / "tok.json")])
        assert rc == 2 and len(err.splitlines()) == 1 and "--vocab-size / data.vocab_size" in err, err
        assert f"[256, {1 << 20}]" in err and not (tmp_path / "tok.json").exists()


@pytest.mark.parametrize("change, field", [
    ({"seeds": {"core": 100000}}, "seeds.core"),
    ({"seeds": {"runs": {"yoco": 65}}}, "seeds.runs.yoco"),
    ({"data": {"vocab_size": 1 << 21}}, "data.vocab_size"),
])
def test_counts_that_would_plan_for_minutes_or_allocate_gigabytes_are_refused_naming_the_field(
        change: dict, field: str) -> None:
    from yocou.workflow.wfconfig import ConfigError, read_scale_file, resolve_config

    cfg = read_scale_file(ROOT / "workflows/config/tiny.yaml")
    for k, v in change.items():
        cfg[k] = {**cfg.get(k, {}), **v} if isinstance(v, dict) else v
    with pytest.raises(ConfigError, match=rf"{re.escape(field)}: .*(maximum|greater than)"):
        resolve_config(cfg, root=ROOT)


def test_training_on_a_held_out_split_is_refused_unless_asked_for(token_dir: Path, tmp_path: Path) -> None:
    """`yocou train --data heldout_*.bin` trained on a held-out split without a word: refused before anything is
    written, naming the split and the opt-in; with it, the run trains (and still scores the held-out streams)."""
    from yocou.training.train import train, train_config_from_dict

    cfg = C.preset("yocou-smoke").replace(vocab_size=300)
    tc = train_config_from_dict({"steps": 2, "batch_size": 2, "seq_len": 16})
    with pytest.raises(ValueError, match=r"--data .*heldout_book\.bin: a held-out split \('heldout_book'.*--allow-heldout"):
        train(cfg, tc, token_dir / "heldout_book.bin", tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    summary = train(cfg, tc, token_dir / "heldout_book.bin", tmp_path / "out", progress=False, allow_heldout=True)
    assert summary["steps"] == 2 and (tmp_path / "out/model.pt").is_file()
