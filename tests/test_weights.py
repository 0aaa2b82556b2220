"""Committed weights (yocou.training.weights): a .safetensors file loads as its model.pt does, and a damaged or
edited one is refused on load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from yocou.model import config as C
from yocou.model.lm import LM
from yocou.training.train import TrainConfig, _save_model, load_model
from yocou.training.weights import main, read_weights, tensors_sha256, write_weights


def _model_pt(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    m = LM(C.preset("yocou-smoke").replace(vocab_size=64))
    path = tmp_path / "run" / "model.pt"
    path.parent.mkdir()
    _save_model(path, m.state_dict(), m.cfg, TrainConfig(steps=3, batch_size=1, seq_len=16), 3, {})
    return path


def test_safetensors_weights_give_the_model_pts_logits(tmp_path: Path) -> None:
    pt = _model_pt(tmp_path)
    out = tmp_path / "w" / "m.safetensors"
    assert main(["--model", str(pt), "--out", str(out)]) == 0
    ids = torch.randint(0, 64, (2, 20), generator=torch.Generator().manual_seed(1))
    a, b = load_model(pt)(ids).logits_BNV, load_model(out)(ids).logits_BNV
    assert torch.equal(a, b)
    state, mc = read_weights(out)
    ck = torch.load(pt, weights_only=True)
    assert C.config_from_dict(mc) == C.config_from_dict(ck["model_config"]) and tensors_sha256(state) == tensors_sha256(ck["model"])
    assert [p.name for p in out.parent.iterdir()] == ["m.safetensors"]   # no temporary left
    assert out.stat().st_mode & 0o044 == 0o044                            # readable by all


def test_a_damaged_or_edited_weights_file_is_refused_naming_it(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    pt = _model_pt(tmp_path)
    out = tmp_path / "m.safetensors"
    meta = write_weights(pt, out)
    data = bytearray(out.read_bytes())
    for i in range(len(data) - 64, len(data)):   # flip the last 64 bytes (tensor values)
        data[i] ^= 0xFF
    bad = tmp_path / "flipped.safetensors"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"weights {bad}: its tensors do not match the digest"):
        load_model(bad)
    state, _ = read_weights(out)
    drop = sorted(state)[-1]
    edited = tmp_path / "edited.safetensors"
    save_file({k: v for k, v in state.items() if k != drop}, str(edited), metadata=meta)
    with pytest.raises(ValueError, match="do not match the digest"):
        load_model(edited)
    plain = tmp_path / "plain.safetensors"
    save_file(state, str(plain))
    with pytest.raises(ValueError, match=rf"weights {plain}: no yocou-weights-v1 metadata"):
        load_model(plain)
    (tmp_path / "junk.safetensors").write_text(json.dumps({"a": 1}))
    with pytest.raises(ValueError, match="cannot be read as safetensors"):
        load_model(tmp_path / "junk.safetensors")


ROOT = Path(__file__).resolve().parents[1]
COMMITTED = "yoco_deep9_seed0_d2000"


@pytest.mark.slow
def test_the_committed_weights_reproduce_their_committed_held_out_loss(tmp_path: Path) -> None:
    """The committed top-rung weights of the depth control, scored on the ladder's held-out splits rebuilt from
    scratch (the corpus, tokenizer and token streams the pipeline makes), give the held-out losses committed in
    results/tiny/ladder/ppl/ (written when the model was trained): no retraining needed for a new evaluation."""
    import subprocess
    import sys

    from conftest import workflow_copy

    weights = ROOT / f"results/tiny/ladder/weights/{COMMITTED}.safetensors"
    want = json.loads((ROOT / f"results/tiny/ladder/ppl/{COMMITTED}.json").read_text())["splits"]
    wd = workflow_copy(tmp_path)
    tok = "runs/tiny/ladder/tokens"
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", f"{tok}/heldout_book.bin",
                    f"{tok}/heldout_code.bin", "runs/tiny/tokenizer.json", "--config", "mode=compute"],
                   cwd=wd, check=True, capture_output=True, text=True, timeout=900)
    s = want["heldout_book"]
    out = tmp_path / "ppl.json"
    subprocess.run([sys.executable, "-m", "yocou.cli", "ppl", "--model", str(weights), "--data", str(wd / tok),
                    "--seq-len", str(s["seq_len"]), "--max-tokens", str(s["max_tokens"]), "--tokenizer",
                    str(wd / "runs/tiny/tokenizer.json"), "--dtype", s["dtype"], "--splits", "heldout_book",
                    "heldout_code", "--out", str(out)], check=True, capture_output=True, text=True, timeout=900)
    got = json.loads(out.read_text())["splits"]
    for split in ("heldout_book", "heldout_code"):
        assert got[split]["n_tokens"] == want[split]["n_tokens"]
        assert got[split]["nats_per_token"] == pytest.approx(want[split]["nats_per_token"], rel=1e-5), split
