"""Every evaluation entry point runs on its ``--device`` (yocou.utils.entry.resolve_device): the device and the
weights' dtype reach the model loader; a bad device is one line naming ``--device``. CUDA is mocked, never used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from yocou.model import config as C
from yocou.utils.entry import resolve_device


class _Stop(Exception):
    """Raised by the fake loaders once they have recorded what they were given."""


def _cuda(monkeypatch: pytest.MonkeyPatch, n: int = 1) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n)


def test_resolve_device_defaults_and_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    _cuda(monkeypatch, 0)
    assert resolve_device(None) == ("cpu", "fp32")
    assert resolve_device(None, "bf16") == ("cpu", "bf16")  # on CPU --dtype keeps its meaning (autocast)
    for bad in ("cuda", "cuda:0", "tpu", "gpu", "cuda:x", "cpu:0"):
        with pytest.raises(ValueError) as e:
            resolve_device(bad)
        assert "--device" in str(e.value) and "\n" not in str(e.value), bad
    _cuda(monkeypatch, 2)
    assert resolve_device(None) == ("cuda", "bf16")
    assert resolve_device("cuda:1", "fp32") == ("cuda:1", "fp32")
    assert resolve_device("cpu") == ("cpu", "fp32")
    with pytest.raises(ValueError, match="--device"):
        resolve_device("cuda:2")


def _files(tmp: Path) -> Path:
    """Empty stand-ins for the paths the entry points check before they load anything."""
    (tmp / "m.pt").write_bytes(b"")
    for s in ("heldout_book", "heldout_code"):
        for x in (".bin", ".offsets.npy"):
            (tmp / f"{s}{x}").write_bytes(b"")
    (tmp / "rc.json").write_text(json.dumps({"variant": "yocou", "model": C.preset("yocou-smoke").to_dict()}))
    return tmp


def _entry_points(tmp: Path, monkeypatch: pytest.MonkeyPatch, seen: list[dict[str, Any]]) -> dict[str, Any]:
    """name -> a call of that entry point (extra argv appended) that stops once the model is being loaded."""
    import yocou.data
    import yocou.model.limits
    import yocou.training.train as T
    from yocou import cli
    from yocou.evaluation.analysis import angular
    from yocou.evaluation.bench import profile
    from yocou.evaluation.lmeval import pack, run
    from yocou.evaluation.longctx import longppl, niah

    def load_model(path: Any, device: Any = "cpu", dtype: str = "fp32") -> None:
        seen.append({"device": str(device), "dtype": dtype})
        raise _Stop

    class Fake:  # kv-measure's new_model(cfg): the device and dtype it is moved to
        def to(self, device: Any, dtype: Any = None) -> None:
            seen.append({"device": str(device), "dtype": "bf16" if dtype == torch.bfloat16 else "fp32"})
            raise _Stop

    def profile_models(cfgs: Any, pc: Any, *, device: Any = "cpu", log: Any = None) -> None:
        seen.append({"device": str(device), "dtype": pc.dtype})
        raise _Stop

    monkeypatch.setattr(T, "load_model", load_model)
    monkeypatch.setattr(T, "read_checkpoint", lambda *a, **k: {})
    monkeypatch.setattr(yocou.model.limits, "new_model", lambda cfg: Fake())
    monkeypatch.setattr(yocou.data, "load_tokenizer", lambda p: None)
    monkeypatch.setattr(niah, "read_prompts", lambda p: ({}, []))
    monkeypatch.setattr(pack, "check_manifest", lambda p: {})
    monkeypatch.setattr(profile, "profile_models", profile_models)
    for var in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):  # what an offline downstream run sets
        monkeypatch.setenv(var, "1")
    import lm_eval.tasks

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", lambda **k: None)
    m, d, out = str(tmp / "m.pt"), str(tmp), str(tmp / "out.json")
    ds = json.dumps({"tasks": {"arc_easy": {"n": 2}}, "source": "offline"})
    return {
        "ppl": lambda *x: cli.main(["ppl", "--model", m, "--data", d, "--seq-len", "16", "--out", out, *x]),
        "kv-measure": lambda *x: cli.main(["kv-measure", "--run-configs", str(tmp / "rc.json"), "--seq-lens", "8",
                                           "--out", out, *x]),
        "longppl": lambda *x: longppl._main(["--model", m, "--tokens-dir", d, "--lengths", "64", "--out", out, *x]),
        "niah": lambda *x: niah.main(["eval", "--model", m, "--tokenizer", m, "--prompts", m, "--out", out, *x]),
        "downstream": lambda *x: run.main(["--model", m, "--tokenizer", m, "--pack", d, "--downstream", ds,
                                           "--variant", "yocou", "--out", str(tmp / "ds"), *x]),
        "angular": lambda *x: angular.main(["--model", m, "--data", d, "--max-tokens", "64", "--seq-len", "16",
                                            "--out", out, *x]),
        "profile": lambda *x: profile.main(["--run-configs", str(tmp / "rc.json"), "--seq-lens", "64", "--dtype",
                                            "bf16", "--out", out, *x]),
    }


@pytest.mark.parametrize("name", ["ppl", "kv-measure", "longppl", "niah", "downstream", "angular", "profile"])
def test_the_device_reaches_each_evaluation_entry_point(name: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """--device cpu loads on the CPU (fp32 weights, also under --dtype bf16 where the entry point has it); with CUDA
    (mocked) the default is cuda, the weights bf16 unless --dtype fp32 says otherwise."""
    seen: list[dict[str, Any]] = []
    call = _entry_points(_files(tmp_path), monkeypatch, seen)[name]
    on_cpu = "bf16" if name == "profile" else "fp32"  # profile's weights take its --dtype bf16 (given) everywhere
    cases = [(["--device", "cpu"], False, {"device": "cpu", "dtype": on_cpu}),
             ([], True, {"device": "cuda", "dtype": "bf16"}),
             (["--device", "cuda:0"], True, {"device": "cuda:0", "dtype": "bf16"})]
    if name not in ("downstream", "profile"):  # downstream's dtype is eval.downstream.dtype; profile's is given
        bf16_on_cpu = "fp32" if name == "kv-measure" else "bf16"  # kv-measure records the weights' dtype
        cases += [(["--device", "cpu", "--dtype", "bf16"], False, {"device": "cpu", "dtype": bf16_on_cpu}),
                  (["--dtype", "fp32"], True, {"device": "cuda", "dtype": "fp32"})]
    for argv, cuda, want in cases:
        _cuda(monkeypatch, 1 if cuda else 0)
        with pytest.raises(_Stop):
            call(*argv)
        assert seen.pop() == want, (name, argv)


@pytest.mark.parametrize("name", ["ppl", "kv-measure", "longppl", "niah", "downstream", "angular", "profile"])
def test_a_bad_device_is_one_line_naming_the_option(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    from yocou.utils.entry import run_main

    call = _entry_points(_files(tmp_path), monkeypatch, [])[name]
    _cuda(monkeypatch, 0)
    for device in ("tpu", "cuda"):
        assert run_main(lambda argv, d=device: call("--device", d)) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"--device '{device}'" in err, err


def test_kv_measure_records_the_device_it_ran_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from yocou import cli

    _cuda(monkeypatch, 0)
    _files(tmp_path)
    assert cli.main(["kv-measure", "--run-configs", str(tmp_path / "rc.json"), "--seq-lens", "8", "--dtype", "fp32",
                     "--device", "cpu", "--out", str(tmp_path / "kv.json")]) == 0
    prov = json.loads((tmp_path / "kv.json").read_text())["provenance"]
    assert prov["device"]["used"] == "cpu" and prov["config"]["device"] == "cpu"


def test_load_model_keeps_fp32_weights_on_cpu_under_bf16(tmp_path: Path) -> None:
    from yocou.model.lm import LM
    from yocou.training.train import load_model

    cfg = C.preset("yocou-smoke")
    torch.save({"model": LM(cfg).state_dict(), "model_config": cfg.to_dict()}, tmp_path / "m.pt")
    assert {p.dtype for p in load_model(tmp_path / "m.pt", "cpu", "bf16").parameters()} == {torch.float32}
