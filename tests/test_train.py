"""Training: exact resume after a kill, DDP on 2 CPU processes == 1 process, schedule, NaN stop."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from yocou.model import config as C
from yocou.training.train import TrainConfig, lr_at, train

_SHAPE = dict(n_layers=2, window=8, vocab_size=300, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, d_ff=64)
MODEL = C.yocou(**_SHAPE, n_loops=2)


def _run_config(tmp: Path, **train_kw) -> Path:
    tc = dict(seed=3, steps=12, batch_size=4, seq_len=32, lr=3e-3, warmup_steps=2, dtype="fp32", log_every=1,
              ckpt_every=3)
    tc.update(train_kw)
    p = tmp / "run_config.json"
    p.write_text(json.dumps({"model": MODEL.to_dict(), "train": tc}))
    return p


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "yocou.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _losses(run: Path) -> list[float]:
    return [json.loads(l)["loss"] for l in (run / "metrics.jsonl").read_text().splitlines()]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "model.pt", weights_only=False)["model"]


@pytest.mark.slow
def test_resume_after_kill_gives_identical_weights(tmp_path: Path, token_dir: Path) -> None:
    steps = 200  # long enough that the run cannot finish between the first checkpoint and the kill
    rc = _run_config(tmp_path, steps=steps, ckpt_every=5, log_every=5)
    data = str(token_dir / "train.bin")
    full = tmp_path / "full"
    subprocess.run(_cli("train", "--run-config", str(rc), "--data", data, "--out", str(full), "--no-progress"),
                   check=True, env=_env(), capture_output=True)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cli("train", "--run-config", str(rc), "--data", data, "--out", str(killed),
                                 "--no-progress"), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while not (killed / "ckpt.pt").exists():
        assert proc.poll() is None, "training finished before a checkpoint could be interrupted"
        assert time.time() - t0 < 120
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # right after the first checkpoint (written atomically)
    proc.wait()
    assert not (killed / "model.pt").exists(), "the run was not interrupted"
    ck_step = torch.load(killed / "ckpt.pt", weights_only=False)["step"]
    assert 0 < ck_step < steps
    (killed / "metrics.jsonl").unlink()  # as Snakemake does with an incomplete job's outputs
    res = subprocess.run(_cli("train", "--run-config", str(rc), "--data", data, "--out", str(killed),
                              "--no-progress"), check=True, env=_env(), capture_output=True, text=True)
    assert f"resuming from step {ck_step}" in res.stderr
    a, b = _weights(full), _weights(killed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert _losses(full) == _losses(killed)  # the log is rebuilt from the checkpoint
    assert not (killed / "ckpt.pt").exists()


@pytest.mark.slow
def test_ddp_two_processes_equal_one_process(tmp_path: Path, token_dir: Path) -> None:
    rc = _run_config(tmp_path, steps=8)
    data = str(token_dir / "train.bin")
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run(_cli("train", "--run-config", str(rc), "--data", data, "--out", str(one), "--no-progress"),
                   check=True, env=_env(), capture_output=True)
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "yocou.cli", "train", "--run-config", str(rc), "--data", data, "--out", str(two),
                          "--no-progress"], env=_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((two / "summary.json").read_text())
    assert summary["provenance"]["world_size"] == 2
    l1, l2 = _losses(one), _losses(two)
    assert len(l1) == len(l2) == 8
    for x, y in zip(l1, l2):
        assert abs(x - y) < 1e-5, (l1, l2)
    a, b = _weights(one), _weights(two)
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-5)


def test_grad_accum_equals_full_batch(tmp_path: Path, token_dir: Path) -> None:
    base = dict(seed=1, steps=4, batch_size=4, seq_len=16, lr=1e-3, dtype="fp32", log_every=1)
    s1 = train(MODEL, TrainConfig(**base), token_dir / "train.bin", tmp_path / "a", progress=False)
    s2 = train(MODEL, TrainConfig(**base, grad_accum=2), token_dir / "train.bin", tmp_path / "b", progress=False)
    assert s1["tokens"] == s2["tokens"]
    for x, y in zip(_losses(tmp_path / "a"), _losses(tmp_path / "b")):
        assert abs(x - y) < 1e-5


def test_lr_schedule_by_hand() -> None:
    tc = TrainConfig(steps=110, batch_size=1, seq_len=4, lr=1.0, min_lr_ratio=0.1, warmup_steps=10)
    assert lr_at(0, tc) == pytest.approx(0.1)
    assert lr_at(9, tc) == pytest.approx(1.0)
    assert lr_at(10, tc) == pytest.approx(1.0)
    assert lr_at(60, tc) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))
    assert lr_at(110, tc) == pytest.approx(0.1)


def test_metrics_rows_and_flops(tmp_path: Path, token_dir: Path) -> None:
    from yocou.model.accounting import train_flops_per_token
    tc = TrainConfig(steps=3, batch_size=2, seq_len=16, dtype="bf16", log_every=1)
    train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)
    rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert set(r) >= {"step", "tokens", "train_flops", "loss", "lr", "tokens_per_s"}
        assert r["tokens"] == r["step"] * 32
        assert r["train_flops"] == pytest.approx(r["tokens"] * train_flops_per_token(MODEL, 16))
    summ = json.loads((tmp_path / "summary.json").read_text())
    assert {"config", "git_commit", "versions", "device", "seed"} <= set(summ["provenance"])


def test_nan_loss_stops_with_clear_error(tmp_path: Path, token_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yocou.training.train as T

    real = T._loss

    def poisoned(*a, **k):
        loss, ce = real(*a, **k)
        return loss * float("nan"), ce * float("nan")

    monkeypatch.setattr(T, "_loss", poisoned)
    with pytest.raises(FloatingPointError, match="step 0"):
        train(MODEL, TrainConfig(steps=2, batch_size=2, seq_len=8), token_dir / "train.bin", tmp_path, progress=False)


def test_resume_refuses_a_different_config(tmp_path: Path, token_dir: Path) -> None:
    tc = TrainConfig(steps=4, batch_size=2, seq_len=8, ckpt_every=2, dtype="fp32")
    train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)
    # Fake an interrupted run of another config: a checkpoint with other settings.
    ck = torch.load(tmp_path / "model.pt", weights_only=False)
    ck["optimizer"] = {}
    ck["train_config"] = {**ck["train_config"], "lr": 0.5}
    torch.save(ck, tmp_path / "ckpt.pt")
    with pytest.raises(ValueError, match="different config"):
        train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)


def test_a_finished_run_of_another_config_is_not_replaced(tmp_path: Path, token_dir: Path) -> None:
    """Training into a folder that holds a finished run (model.pt, no ckpt.pt) of another model or train config
    stops before touching it, naming the folder; the same configs retrain in place."""
    tc = TrainConfig(steps=2, batch_size=2, seq_len=8, ckpt_every=2, dtype="fp32")
    train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    other = C.yoco(n_layers=2, window=8, vocab_size=300, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, d_ff=64)
    for m, t, what in ((other, tc, "model"), (MODEL, TrainConfig(**{**tc.__dict__, "lr": 0.5}), "train")):
        with pytest.raises(ValueError, match=f"holds a finished run .* another {what} config"):
            train(m, t, token_dir / "train.bin", tmp_path, progress=False)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)  # same configs: retrains
    old = torch.load(io.BytesIO(before["model.pt"]), weights_only=False)["model"]
    assert all(torch.equal(v, old[k]) for k, v in _weights(tmp_path).items())  # deterministic: the same weights


def test_bad_train_config_names_the_field() -> None:
    from yocou.training.train import train_config_from_dict
    with pytest.raises(ValueError, match="stepz"):
        train_config_from_dict({"stepz": 3, "steps": 1, "batch_size": 1, "seq_len": 4})
    with pytest.raises(ValueError, match="warmup_steps"):
        TrainConfig(steps=3, batch_size=1, seq_len=4, warmup_steps=5)
    with pytest.raises(TypeError, match="lr"):
        TrainConfig(steps=3, batch_size=1, seq_len=4, lr="big")


def test_corrupt_checkpoints_fail_naming_the_file(tmp_path: Path, token_dir: Path) -> None:
    """A truncated or foreign ckpt.pt / model.pt fails with a ValueError naming the file and what to do
    (it used to surface torch's RuntimeError from the zip reader, or a bare KeyError), and through the CLI
    as one line with status 2."""
    from yocou.training.train import load_model

    tc = TrainConfig(steps=2, batch_size=2, seq_len=8, ckpt_every=1, dtype="fp32")
    train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)
    good = (tmp_path / "model.pt").read_bytes()
    (tmp_path / "ckpt.pt").write_bytes(good[: len(good) // 2])  # an interrupted copy, say
    with pytest.raises(ValueError, match=r"ckpt\.pt cannot be read.*remove it to restart"):
        train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)
    (tmp_path / "ckpt.pt").unlink()
    (tmp_path / "model.pt").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"model\.pt cannot be read"):
        load_model(tmp_path / "model.pt")
    torch.save([1, 2], tmp_path / "model.pt")
    with pytest.raises(ValueError, match=r"model\.pt is not a yocou checkpoint"):
        load_model(tmp_path / "model.pt")
    env = {k: v for k, v in _env().items() if k != "YOCOU_TRACEBACK"}
    res = subprocess.run(_cli("ppl", "--model", str(tmp_path / "model.pt"), "--data", str(token_dir),
                              "--splits", "train", "--seq-len", "8"), env=env, capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).parents[1])
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "model.pt" in res.stderr.strip().splitlines()[-1]


def _tb_scalars(run: Path) -> dict[str, list]:
    """Every scalar of the run folder's TensorBoard event files, by tag, read back with TensorBoard's reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    return {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}


def test_tensorboard_events_equal_the_metrics_rows(tmp_path: Path, token_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """train.tensorboard: true writes loss, lr, grad norm and tokens/s of every metrics.jsonl row (same step and
    wall time; values as TensorBoard stores them, float32) to event files beside metrics.jsonl; off (the
    default) writes none. A run resumed from its checkpoint with tensorboard switched on (it changes no result)
    replaces older event files and holds each row exactly once: the rows kept at the checkpoint, then the new."""
    import numpy as np

    import yocou.training.train as T

    base = dict(seed=2, steps=6, batch_size=2, seq_len=16, dtype="fp32", log_every=2, ckpt_every=2)
    assert TrainConfig(**base).tensorboard is False
    ckpts: dict[int, bytes] = {}
    real_save = T._save_ckpt

    def keep(path, model, opt, step, *a, **k):  # the resume state at each checkpoint (a finished run deletes it)
        real_save(path, model, opt, step, *a, **k)
        ckpts[step] = path.read_bytes()

    monkeypatch.setattr(T, "_save_ckpt", keep)
    off = tmp_path / "off"
    train(MODEL, TrainConfig(**base), token_dir / "train.bin", off, progress=False)
    assert not list(off.glob("events.out.tfevents.*"))
    assert sorted(ckpts) == [2, 4]
    ck4 = ckpts[4]  # written with tensorboard off

    def check(run: Path) -> list[dict]:
        rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [2, 4, 6]
        assert len(list(run.glob("events.out.tfevents.*"))) == 1
        scalars = _tb_scalars(run)
        assert sorted(scalars) == sorted(f"train/{k}" for k in T.TB_SCALARS)
        for key in T.TB_SCALARS:
            events = scalars[f"train/{key}"]
            assert [e.step for e in events] == [r["step"] for r in rows], key
            assert [e.value for e in events] == [float(np.float32(r[key])) for r in rows], key
            assert [e.wall_time for e in events] == pytest.approx([r["wall_time"] for r in rows], abs=1e-6), key
        return rows

    on = tmp_path / "on"
    train(MODEL, TrainConfig(**base, tensorboard=True), token_dir / "train.bin", on, progress=False)
    rows = check(on)
    assert [r["loss"] for r in rows] == _losses(off)  # logging changes nothing

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    (resumed / "ckpt.pt").write_bytes(ck4)  # as if the run "off" had been interrupted after step 4
    stale = resumed / "events.out.tfevents.0.stale"  # an earlier attempt's events: replaced, not appended to
    stale.write_bytes(b"")
    train(MODEL, TrainConfig(**base, tensorboard=True), token_dir / "train.bin", resumed, progress=False)
    assert not stale.exists()
    check_rows = check(resumed)
    assert [r["loss"] for r in check_rows] == _losses(off)
    off_rows = [json.loads(l) for l in (off / "metrics.jsonl").read_text().splitlines()]
    assert check_rows[:2] == off_rows[:2]  # the checkpoint's rows (with their wall times), replayed into the events


def test_tensorboard_missing_is_one_line_naming_the_key(tmp_path: Path, token_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    """Without the tensorboard package, train.tensorboard: true stops before training with one line naming
    train.tensorboard (status 2 through the CLI); tensorboard off never imports it."""
    from yocou import cli
    from yocou.utils.entry import run_main

    for mod in ("tensorboard", "torch.utils.tensorboard"):
        monkeypatch.setitem(sys.modules, mod, None)  # `import` raises ImportError
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"^train\.tensorboard is true but TensorBoard cannot be imported"):
        train(MODEL, TrainConfig(steps=2, batch_size=2, seq_len=8, tensorboard=True), token_dir / "train.bin",
              out, progress=False)
    assert not out.exists()  # nothing was done
    rc = _run_config(tmp_path, steps=2, tensorboard=True)
    status = run_main(cli.main, ["train", "--run-config", str(rc), "--data", str(token_dir / "train.bin"),
                                 "--out", str(out), "--no-progress"], prog="yocou")
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "error: train.tensorboard is true" in err[0], err
    train(MODEL, TrainConfig(steps=2, batch_size=2, seq_len=8), token_dir / "train.bin", out, progress=False)
    assert (out / "model.pt").is_file() and not list(out.glob("events.out.tfevents.*"))


def test_resumed_run_equals_the_uninterrupted_run(tmp_path: Path, token_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture) -> None:
    """A run resumed from its step-2 checkpoint (with gradient accumulation and a snapshot after the resume)
    writes the uninterrupted run's metrics.jsonl row by row: the checkpoint's rows verbatim (wall times
    included), then the same step, tokens, FLOPs, loss, lr and grad norm (only the timings differ); and the
    same later checkpoint, snapshot, final weights and summary. A stale metrics.jsonl is replaced."""
    import yocou.training.train as T

    tc = TrainConfig(seed=4, steps=6, batch_size=4, seq_len=16, lr=3e-3, warmup_steps=1, dtype="fp32",
                     log_every=1, ckpt_every=2, grad_accum=2, snapshot_steps=(5,))
    ckpts: dict[tuple[str, int], bytes] = {}
    real_save = T._save_ckpt

    def keep(path, model, opt, step, *a, **k):
        real_save(path, model, opt, step, *a, **k)
        ckpts[path.parent.name, step] = path.read_bytes()

    monkeypatch.setattr(T, "_save_ckpt", keep)
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    s_full = train(MODEL, tc, token_dir / "train.bin", full, progress=False)
    assert sorted(ckpts) == [("full", 2), ("full", 4)]
    resumed.mkdir()
    (resumed / "ckpt.pt").write_bytes(ckpts["full", 2])
    (resumed / "metrics.jsonl").write_text((full / "metrics.jsonl").read_text())  # rows past the checkpoint
    capsys.readouterr()
    s_res = train(MODEL, tc, token_dir / "train.bin", resumed, progress=False)
    assert "resuming from step 2" in capsys.readouterr().err
    assert sorted(ckpts) == [("full", 2), ("full", 4), ("resumed", 4)]

    timing = ("tokens_per_s", "wall_time")
    a = [json.loads(l) for l in (full / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(l) for l in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in a] == [r["step"] for r in b] == [1, 2, 3, 4, 5, 6]
    assert a[:2] == b[:2]
    for x, y in zip(a, b):
        assert list(x) == list(y)
        assert {k: v for k, v in x.items() if k not in timing} == {k: v for k, v in y.items() if k not in timing}

    def load(blob: bytes) -> dict:
        import io
        return torch.load(io.BytesIO(blob), weights_only=False)

    def assert_same_tensors(x, y) -> None:
        flat_x, flat_y = torch.utils._pytree.tree_flatten(x), torch.utils._pytree.tree_flatten(y)
        assert flat_x[1] == flat_y[1]  # the same structure and keys
        for p, q in zip(flat_x[0], flat_y[0]):
            assert torch.equal(p, q) if isinstance(p, torch.Tensor) else p == q

    c_full, c_res = load(ckpts["full", 4]), load(ckpts["resumed", 4])
    assert list(c_full) == list(c_res) == ["model", "optimizer", "step", "model_config", "train_config",
                                           "metrics_rows", "data"]
    for k in ("model", "optimizer", "step", "model_config", "train_config", "data"):
        assert_same_tensors(c_full[k], c_res[k])
    assert c_full["metrics_rows"][:2] == c_res["metrics_rows"][:2] == [json.dumps(r) for r in a[:2]]
    for name in ("model_step5.pt", "model.pt"):
        w_full, w_res = (torch.load(d / name, weights_only=False) for d in (full, resumed))
        assert_same_tensors(w_full["model"], w_res["model"])
        assert w_full["step"] == w_res["step"] == (5 if name != "model.pt" else 6)
    assert {k: v for k, v in s_full.items() if k != "provenance"} == \
        {k: v for k, v in s_res.items() if k != "provenance"}
    assert not (resumed / "ckpt.pt").exists()


def test_metrics_log_rows_and_ranks(tmp_path: Path) -> None:
    """MetricsLog: opening rewrites metrics.jsonl with the checkpoint's rows; a row every log_every steps and
    at the last step, with tokens and FLOPs of that step; ranks other than 0 write nothing."""
    from yocou.training.train import MetricsLog

    tc = TrainConfig(steps=5, batch_size=2, seq_len=4, log_every=2)
    (tmp_path / "metrics.jsonl").write_text("stale\n")
    log = MetricsLog(tmp_path, tc, 0, ['{"step": 2}'], flops_per_token=10.0)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 2}\n'
    log.start(2)
    assert log.log(3, 1.5, 0.1, torch.tensor(2.0)) is None
    row = log.log(4, 1.25, 0.01, torch.tensor(0.5))
    assert row is not None and log.log(5, 1.0, 0.001, torch.tensor(0.25)) is not None
    log.close()
    rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 4, 5] and rows[1] == row
    assert list(row) == ["step", "tokens", "train_flops", "loss", "lr", "grad_norm", "tokens_per_s", "wall_time"]
    assert (row["tokens"], row["train_flops"], row["loss"], row["lr"], row["grad_norm"]) == (32, 320.0, 1.25, 0.01, 0.5)
    other = tmp_path / "rank1"
    other.mkdir()
    log1 = MetricsLog(other, tc, 1, ['{"step": 2}'], flops_per_token=10.0)
    assert log1.log(4, 1.0, 0.1, torch.tensor(1.0)) is None
    assert not list(other.iterdir())


def test_no_function_in_train_py_is_over_60_lines() -> None:
    """yocou/training/train.py stays in small pieces (setup, Checkpointer, MetricsLog, train_step, the loop): no function
    or method longer than 60 lines, docstring included."""
    import ast

    import yocou.training.train as T

    tree = ast.parse(Path(T.__file__).read_text(encoding="utf-8"))
    lengths = {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert {"train", "train_step", "_save_ckpt"} <= set(lengths)
    too_long = {name: n for name, n in lengths.items() if n > 60}
    assert not too_long, too_long


@pytest.mark.slow
def test_two_trainers_on_one_folder_the_second_refuses_naming_the_pid(tmp_path: Path, token_dir: Path) -> None:
    """Real processes: while one trainer runs, a second on the same --out refuses in one line naming the holder's
    PID (and `python -m yocou.utils.runlock` says the same, as the train rule of a second snakemake does); the first
    trainer's metrics.jsonl, deleted meanwhile (as snakemake --rerun-incomplete does), is whole again at its next row;
    after a SIGKILL the lock is gone with the process, a third trainer resumes and the log holds each step once."""
    steps = 400
    rc = _run_config(tmp_path, steps=steps, ckpt_every=5, log_every=1)
    data = str(token_dir / "train.bin")
    run = tmp_path / "run"
    cmd = _cli("train", "--run-config", str(rc), "--data", data, "--out", str(run), "--no-progress")
    first = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while not (run / "ckpt.pt").exists():
            assert first.poll() is None, "the first trainer ended before its first checkpoint"
            assert time.time() - t0 < 120
            time.sleep(0.01)
        second = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr[-2000:]
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert f"is being trained by PID {first.pid}" in lines[0] and f"kill {first.pid}" in lines[0], lines[0]
        check = subprocess.run([sys.executable, "-m", "yocou.utils.runlock", str(run)], capture_output=True, text=True)
        assert check.returncode == 2 and f"PID {first.pid}" in check.stderr, check.stderr
        (run / "metrics.jsonl").unlink()
        t0 = time.time()
        while not (run / "metrics.jsonl").exists():
            assert first.poll() is None and time.time() - t0 < 60
            time.sleep(0.01)
        steps_seen = [json.loads(l)["step"] for l in (run / "metrics.jsonl").read_text().splitlines()]
        assert steps_seen == list(range(1, len(steps_seen) + 1)), steps_seen[:10]  # rebuilt whole, not restarted
        assert first.poll() is None, "the first trainer finished; the test needs it running"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert not (run / "model.pt").exists()
    free = subprocess.run([sys.executable, "-m", "yocou.utils.runlock", str(run)], capture_output=True, text=True)
    assert free.returncode == 0, free.stderr  # the kernel dropped the lock with the killed process
    ck_step = torch.load(run / "ckpt.pt", weights_only=False)["step"]
    third = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr[-2000:]
    assert f"resuming from step {ck_step}" in third.stderr
    assert [json.loads(l)["step"] for l in (run / "metrics.jsonl").read_text().splitlines()] == \
        list(range(1, steps + 1))


def test_a_refused_train_leaves_no_folder(tmp_path: Path, token_dir: Path, capsys: pytest.CaptureFixture) -> None:
    from yocou.cli import main

    rc = _run_config(tmp_path)
    (tmp_path / "bad.bin").write_bytes(b"not a token stream")
    for data in (tmp_path / "bad.bin", tmp_path / "missing.bin"):
        out = tmp_path / "new_run"
        assert main(["train", "--run-config", str(rc), "--data", str(data), "--out", str(out)]) == 2
        assert not out.exists(), capsys.readouterr().err


def test_metrics_log_survives_its_file_being_deleted_or_cut(tmp_path: Path) -> None:
    from yocou.training.train import MetricsLog

    tc = TrainConfig(steps=10, batch_size=2, seq_len=8, log_every=1)
    log = MetricsLog(tmp_path, tc, 0, ['{"step": 1}'], flops_per_token=1.0)
    log.log(2, 1.0, 1e-3, torch.tensor(0.5))
    (tmp_path / "metrics.jsonl").unlink()
    log.log(3, 1.0, 1e-3, torch.tensor(0.5))
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    log.log(4, 1.0, 1e-3, torch.tensor(0.5))
    assert [json.loads(l)["step"] for l in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    assert [json.loads(r)["step"] for r in log.rows] == [1, 2, 3, 4]


def test_a_window_at_least_seq_len_is_noted_once_at_the_start(tmp_path: Path, token_dir: Path, capsys) -> None:
    """window >= seq_len is valid (the self-decoder then attends to every earlier token) but is not the paper's
    set-up: training says so in one note naming both numbers; a window below seq_len gets no note."""
    import dataclasses

    from yocou.training.train import global_window_note

    wide = C.yocou(**{**_SHAPE, "window": 100_000})
    assert global_window_note(MODEL, 32) is None and global_window_note(C.transformer(**{
        k: v for k, v in _SHAPE.items() if k != "window"}), 32) is None
    tc = TrainConfig(steps=1, batch_size=2, seq_len=16, dtype="fp32", log_every=1)
    train(wide, tc, token_dir / "train.bin", tmp_path / "wide", progress=False)
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1 and "window 100000 >= seq_len 16" in notes[0], notes
    train(dataclasses.replace(MODEL), tc, token_dir / "train.bin", tmp_path / "narrow", progress=False)
    assert not [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note:")]


class _Payload:
    """Unpickling this object writes a marker file (what a hostile checkpoint would do)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_checkpoint_with_a_pickle_payload_never_runs_it(tmp_path) -> None:
    """read_checkpoint and a run folder's model.pt are loaded with weights_only=True: the payload is refused (one
    line naming the file) and its marker never written."""
    import torch

    from yocou.training import train as T

    marker = tmp_path / "pwned"
    bad = tmp_path / "model.pt"
    torch.save({"model": {}, "model_config": {}, "x": _Payload(str(marker))}, bad)
    with pytest.raises(ValueError, match="model.pt"):
        T.read_checkpoint(bad)
    assert not marker.exists()


def test_a_run_records_its_token_stream_and_refuses_to_resume_on_another(tmp_path: Path, token_dir: Path) -> None:
    """model.pt's provenance names the training stream (its .json's bin_sha256); a checkpoint of a run on another
    stream is refused on resume, naming both digests, where it was silently continued on the new data."""
    import json

    tc = TrainConfig(steps=4, batch_size=2, seq_len=8, ckpt_every=2, dtype="fp32")
    train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)
    ck = torch.load(tmp_path / "model.pt", weights_only=False)
    want = json.loads((token_dir / "train.json").read_text())["bin_sha256"]
    assert ck["provenance"]["data"] == {"bin_sha256": want, "split": "train",
                                        "n_tokens": json.loads((token_dir / "train.json").read_text())["n_tokens"]}
    ck["optimizer"], ck["data"] = {}, {"bin_sha256": "f" * 64, "split": "train"}
    torch.save(ck, tmp_path / "ckpt.pt")
    with pytest.raises(ValueError, match=r"ckpt\.pt was trained on another token stream \(bin_sha256 ffffffffffff, "
                                         rf"this --data {want[:12]}\)"):
        train(MODEL, tc, token_dir / "train.bin", tmp_path, progress=False)
