"""Needle in a haystack: S-NIAH-1 and S-NIAH-2 (paper Table 4; docs/design.md section 7).

Written by us after RULER's definitions (Hsieh et al., 2024, ``synthetic.yaml``: ``niah_single_1``,
``niah_single_2``); no RULER code is used.

* **S-NIAH-1**: one needle in a *noise* haystack, RULER's repeated block of plain sentences
  (:data:`NOISE_BLOCK`).
* **S-NIAH-2**: one needle in *real book prose*. RULER uses Paul Graham's essays, which are not
  available offline; we use the held-out book stream (``heldout_book.bin``: Milton's *Paradise Lost*,
  never trained on), an excerpt starting at a seeded offset.

A prompt is ``PREFIX + haystack[:p] + NEEDLE + haystack[p:] + QUESTION`` in the evaluated model's
tokens, exactly ``length`` tokens long; ``p`` is the sentence/line boundary of the haystack nearest to
``depth`` percent of it (0 = first, 100 = last). The needle says that one special magic number for a
key word (an adjective-noun pair) is a 7-digit value; the prompt ends with the answer prefix
``"... mentioned in the provided text is"`` so that a base model completes it with ``" <value>"``.
Every sample is seeded by ``(seed, task, length, depth, sample)``. The template, key words, haystacks, depths,
the tasks Table 4 runs and ``max_new_tokens`` are the protocol of ``eval/protocols.yaml`` (``niah``), shared
by every scale; the scale config sets lengths, depths and samples per cell, chunk size, batch and dtype.

Scoring (all through the KV cache: chunked prefill with YOCO's early exit, then cached decode):

* ``correct``: the value's digits appear in the greedy continuation (``max_new_tokens`` tokens);
* ``logp_value``: teacher-forced log-probability (nats) of the value's tokens after the prompt;
* ``logp_distractor``: the same for another seeded 7-digit number that is *not* in the prompt.
  ``logp_value - logp_distractor`` is the retrieval gain, graded where accuracy is zero.
* ``choice_correct``: multiple choice among the value and ``n_choices - 1`` seeded distractors (the first is
  ``logp_distractor``'s; ``eval/protocols.yaml`` ``niah.n_choices``): 1 when the value's teacher-forced
  log-probability is strictly the highest. Value and distractors are independent draws of the same
  distribution, so a model that does not use the needle scores ``1 / n_choices`` in expectation (chance).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from yocou.model.limits import plan_eval_batch
from yocou.results.evaldefs import protocol
from yocou.results.names import NIAH_TASKS

# Every task this module implements; a task's seed index is its place here (so it never moves). What Table 4 runs,
# the prompt template and the greedy budget are the protocol of eval/protocols.yaml (niah), shared by every scale.
TASKS = ("s_niah_1", "s_niah_2")
TASK_LABELS = NIAH_TASKS
PROTOCOL = protocol("niah")
HAYSTACK_KIND = dict(PROTOCOL["haystack"])
if sorted(HAYSTACK_KIND) != sorted(TASKS) or set(HAYSTACK_KIND.values()) - {"noise", "book"} \
        or set(PROTOCOL["tasks"]) - set(TASKS):
    raise ValueError(f"eval/protocols.yaml: niah.haystack must map each of {TASKS} to noise or book, and niah.tasks "
                     f"name some of them; got {HAYSTACK_KIND}, {PROTOCOL['tasks']}")

# RULER's noise haystack (niah.py, ``haystack == 'noise'``).
NOISE_BLOCK = PROTOCOL["noise_block"]
# RULER's niah template and single-needle format, with "numbers" as the value type.
PREFIX = PROTOCOL["prefix"]
NEEDLE = PROTOCOL["needle"]
# In book prose (verse lines) the needle is a line of its own.
NEEDLE_BOOK = PROTOCOL["needle_book"]
QUESTION = PROTOCOL["question"]
ANSWER = PROTOCOL["answer"]
# Key words: adjective-noun pairs as RULER's (which draws them with ``wonderwords``), from fixed lists.
_ADJ = tuple(PROTOCOL["key_adjectives"])
_NOUN = tuple(PROTOCOL["key_nouns"])
_BOUNDARY_CHARS = tuple(PROTOCOL["boundary_chars"])
N_CHOICES = PROTOCOL.get("n_choices", 2)
_DIGITS = PROTOCOL.get("value_digits")


def check_protocol() -> None:
    """Refuse the niah protocol of ``eval/protocols.yaml`` where a value cannot work (checked by every entry point
    before it generates a prompt; not at import, so that a bad file is a one-line error).

    Raises:
        ValueError: naming the key and what it must be.
    """
    if isinstance(N_CHOICES, bool) or not isinstance(N_CHOICES, int) or N_CHOICES < 2:
        raise ValueError(f"eval/protocols.yaml: niah.n_choices must be an integer >= 2 (the value and at least one "
                         f"distractor), got {N_CHOICES!r}")
    if isinstance(_DIGITS, bool) or not isinstance(_DIGITS, int) or not 1 <= _DIGITS <= 18:
        raise ValueError(f"eval/protocols.yaml: niah.value_digits must be an integer in 1..18 (the digits of the "
                         f"needle's value), got {_DIGITS!r}")


_VALUE_RANGE = ((10 ** (_DIGITS - 1), 10 ** _DIGITS) if isinstance(_DIGITS, int) and not isinstance(_DIGITS, bool)
                and 1 <= _DIGITS <= 18 else (0, 0))


def depths_percent(n_depths: int) -> list[float]:
    """``n_depths`` depths spread evenly from 0 to 100 percent (one depth: 50): the protocol's
    ``depths_percent`` (``from``, ``to``, ``single``).

    Raises:
        ValueError: ``n_depths < 1``.
    """
    if n_depths < 1:
        raise ValueError(f"eval.niah.n_depths must be >= 1, got {n_depths}")
    d = PROTOCOL["depths_percent"]
    if n_depths == 1:
        return [float(d["single"])]
    lo, hi = float(d["from"]), float(d["to"])
    return [round(lo + (hi - lo) * i / (n_depths - 1), 4) for i in range(n_depths)]


def boundary_token_ids(tok: Any) -> set[int]:
    """Ids whose text ends a sentence or a line (``. ! ? ; \\n``): where a needle may go."""
    out = set()
    for i in range(tok.vocab_size):
        try:
            s = tok.decode([i]).rstrip(" ")
        except Exception:  # noqa: BLE001 - ids without text (holes in a vocabulary)
            continue
        if s.endswith(_BOUNDARY_CHARS):
            out.add(i)
    return out


def _rng(seed: int, task: str, length: int, depth: float, sample: int) -> np.random.Generator:
    return np.random.default_rng([seed, TASKS.index(task), length, int(round(depth * 100)), sample])


def make_sample(tok: Any, task: str, length: int, depth: float, sample: int, *, seed: int,
                book_ids: np.ndarray | None = None, book_name: str = "",
                boundary_ids: set[int] | None = None,
                key_words: tuple[Sequence[str], Sequence[str]] | None = None) -> dict[str, Any]:
    """One S-NIAH prompt of exactly ``length`` tokens with the needle at ``depth`` percent.

    Args:
        tok: a :class:`yocou.data.TokenizerAdapter` (the evaluated model's tokenizer).
        task: ``"s_niah_1"`` (noise haystack) or ``"s_niah_2"`` (book haystack).
        length: prompt length in tokens, answer prefix included.
        depth: needle depth in percent of the haystack, 0..100.
        sample: sample index (seeds the key, value, distractor and book offset).
        seed: global seed.
        book_ids: token ids of the haystack book (required for ``s_niah_2``).
        book_name: name of the book, recorded in the sample.
        boundary_ids: from :func:`boundary_token_ids` (computed if ``None``).
        key_words: (adjectives, nouns) the key is drawn from; ``None``: the eval's (``niah.key_adjectives``,
            ``niah.key_nouns``). A diagnostic passes the training needles' lists
            (:data:`yocou.data.needles.TRAIN_KEY_ADJECTIVES`, ``TRAIN_KEY_NOUNS``): retrieval without new key words.

    Returns:
        dict with ``task, length, depth, sample, key, value, distractor, input_ids, answer_ids,
        distractor_ids, distractors`` (the ``n_choices - 1`` distractors, ``distractor`` first),
        ``distractors_ids, needle_start, needle_len, haystack_start, haystack_len, depth_actual``
        (needle position / haystack length), ``haystack`` (source name) and ``haystack_offset``
        (token offset of the book excerpt; 0 for noise).

    Raises:
        ValueError: unknown task, depth outside 0..100, ``length`` shorter than the template, or a
            book too short for the haystack.
    """
    check_protocol()
    if task not in TASKS:
        raise ValueError(f"eval.niah.tasks: unknown task {task!r}, expected one of {TASKS}")
    if not 0.0 <= depth <= 100.0:
        raise ValueError(f"niah depth must be in 0..100 percent, got {depth}")
    rng = _rng(seed, task, length, depth, sample)
    adj, noun = key_words if key_words is not None else (_ADJ, _NOUN)
    key = f"{adj[rng.integers(len(adj))]}-{noun[rng.integers(len(noun))]}"
    value = str(int(rng.integers(*_VALUE_RANGE)))
    distractor = value
    while distractor == value:
        distractor = str(int(rng.integers(*_VALUE_RANGE)))
    # the further choices from a stream of their own, so that adding them moved no earlier draw
    rng_c = np.random.default_rng([seed, TASKS.index(task), length, int(round(depth * 100)), sample, 1])
    distractors = [distractor]
    while len(distractors) < N_CHOICES - 1:
        d = str(int(rng_c.integers(*_VALUE_RANGE)))
        if d != value and d not in distractors:
            distractors.append(d)
    prefix = tok.encode(PREFIX)
    needle_fmt = NEEDLE if HAYSTACK_KIND[task] == "noise" else NEEDLE_BOOK
    needle = tok.encode(needle_fmt.format(key=key, value=value))
    question = tok.encode(QUESTION.format(key=key))
    H = length - len(prefix) - len(needle) - len(question)
    if H < 0:
        raise ValueError(f"eval.niah.lengths: {length} tokens is shorter than the prompt template "
                         f"({length - H} tokens without haystack)")
    if HAYSTACK_KIND[task] == "noise":
        block = tok.encode(" " + NOISE_BLOCK)
        reps = H // max(1, len(block)) + 1
        hay = (block * reps)[:H]
        offset, source = 0, "noise: RULER's repeated block of plain sentences"
    else:
        if book_ids is None:
            raise ValueError("s_niah_2 needs the held-out book tokens (book_ids)")
        n = len(book_ids)
        if n < H:
            raise ValueError(f"held-out book {book_name!r} has {n} tokens, fewer than the {H} the "
                             f"haystack of length {length} needs")
        bset = boundary_token_ids(tok) if boundary_ids is None else boundary_ids
        offset = int(rng.integers(0, n - H + 1))
        # start the excerpt at a line or sentence start where one follows closely
        for o in range(offset, min(offset + 64, n - H + 1)):
            if o == 0 or int(book_ids[o - 1]) in bset:
                offset = o
                break
        hay = [int(t) for t in book_ids[offset:offset + H]]
        source = f"book: {book_name}" if book_name else "book"
    bset = boundary_token_ids(tok) if boundary_ids is None else boundary_ids
    # the needle goes at the start, after a sentence or line end, or at the very end if that is one
    cands = [0] + [p for p in range(1, H + 1) if hay[p - 1] in bset]
    target = depth / 100.0 * H
    p = min(cands, key=lambda c: (abs(c - target), c))
    ids = prefix + hay[:p] + needle + hay[p:] + question
    assert len(ids) == length
    return {
        "task": task, "length": length, "depth": float(depth), "sample": sample, "key": key, "value": value,
        "distractor": distractor, "input_ids": ids, "answer_ids": tok.encode(ANSWER.format(value=value)),
        "distractor_ids": tok.encode(ANSWER.format(value=distractor)),
        "distractors": distractors, "distractors_ids": [tok.encode(ANSWER.format(value=d)) for d in distractors],
        "needle_start": len(prefix) + p, "needle_len": len(needle), "haystack_start": len(prefix),
        "haystack_len": H, "depth_actual": (p / H) if H else 0.0, "haystack": source,
        "haystack_offset": offset,
    }


def make_prompts(tok: Any, *, tasks: Sequence[str], lengths: Sequence[int], n_depths: int, n_samples: int,
                 seed: int, book_ids: np.ndarray | None = None, book_name: str = "",
                 key_words: tuple[Sequence[str], Sequence[str]] | None = None) -> list[dict[str, Any]]:
    """Every (task, length, depth, sample) prompt of :func:`make_sample` (``key_words`` passed on), in that
    nesting order.

    Raises:
        ValueError: as :func:`make_sample`, or ``n_samples < 1`` / empty ``lengths``.
    """
    if n_samples < 1:
        raise ValueError(f"eval.niah.n_samples must be >= 1, got {n_samples}")
    if not lengths:
        raise ValueError("eval.niah.lengths must list at least one length")
    bset = boundary_token_ids(tok)
    out = []
    for task in tasks:
        for L in lengths:
            for d in depths_percent(n_depths):
                for s in range(n_samples):
                    out.append(make_sample(tok, task, int(L), d, s, seed=seed, book_ids=book_ids,
                                           book_name=book_name, boundary_ids=bset, key_words=key_words))
    return out


def _autocast(model: torch.nn.Module, dtype: str):
    dev = next(model.parameters()).device
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"eval.niah.dtype must be 'fp32' or 'bf16', got {dtype!r}")
    return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype == "bf16")


@torch.no_grad()
def teacher_forced_logprob(model: torch.nn.Module, last_logits_BV: torch.Tensor, cache: Any,
                           conts: Sequence[Sequence[int]]) -> list[float]:
    """Summed log-probability (nats) of each row's continuation after a prefilled prompt.

    Args:
        model: the LM (or anything with its ``forward(ids, cache=...)`` contract).
        last_logits_BV: logits of the prompt's last position ``[B, V]`` (from ``prefill``).
        cache: the cache holding the prompts; it is advanced (pass a copy to keep it).
        conts: per row, the continuation's token ids (at least one each; lengths may differ).

    Returns:
        ``B`` floats, ``Σ_j log p(cont[j] | prompt, cont[:j])``.
    """
    B = last_logits_BV.shape[0]
    if len(conts) != B or any(len(c) == 0 for c in conts):
        raise ValueError("teacher_forced_logprob needs one non-empty continuation per row")
    A = max(len(c) for c in conts)
    dev = last_logits_BV.device
    x_BA = torch.tensor([list(c) + [c[-1]] * (A - len(c)) for c in conts], dtype=torch.long, device=dev)
    logits = last_logits_BV[:, None].float()
    if A > 1:
        more = model(x_BA[:, :-1], cache=cache).logits_BNV.float()
        logits = torch.cat([logits, more], dim=1)
    lp_BA = torch.log_softmax(logits, dim=-1).gather(-1, x_BA[..., None])[..., 0]
    valid = torch.arange(A, device=dev)[None, :] < torch.tensor([len(c) for c in conts], device=dev)[:, None]
    return [float(v) for v in (lp_BA * valid).sum(1).double()]


@torch.no_grad()
def score_batch(model: torch.nn.Module, input_ids_BN: torch.Tensor, answers: Sequence[Sequence[int]],
                distractors: Sequence[Sequence[int]], *, max_new_tokens: int, chunk_size: int = 512,
                dtype: str = "fp32", choices: Sequence[Sequence[Sequence[int]]] | None = None) -> dict[str, list]:
    """Prefill a batch of equal-length prompts once, then greedy-decode and teacher-force.

    Args:
        model: the LM (:class:`yocou.model.lm.LM` or a stand-in with its contract).
        input_ids_BN: prompts ``[B, N]`` (int64), all of length N.
        answers / distractors: per row, the value's / distractor's token ids.
        max_new_tokens: greedy tokens to generate.
        chunk_size: prefill chunk (tokens).
        dtype: ``fp32`` or ``bf16`` (autocast).
        choices: per row, the token ids of every distractor of the multiple choice (``distractors`` first);
            ``None``: only ``distractors``.

    Returns:
        ``{"generated": [[ids]], "logp_value": [...], "logp_distractor": [...], "logp_choices": [[...]]}``
        (``logp_choices``: per row, the log-probability of each of ``choices``; ``[]`` without them).
    """
    from yocou.model.generate import decode_step, prefill
    from yocou.model.limits import new_cache

    if max_new_tokens < 1:
        raise ValueError(f"eval.niah.max_new_tokens must be >= 1, got {max_new_tokens}")
    B, N = input_ids_BN.shape
    if choices is not None and (len(choices) != B or len({len(c) for c in choices}) > 1):
        raise ValueError("score_batch: choices needs one list of the same number of continuations per row")
    n_more = len(choices[0]) if choices is not None else 0
    extra = max(max_new_tokens, max(len(a) for a in answers), max(len(d) for d in distractors),
                max((len(c) for cs in (choices or []) for c in cs), default=1))
    cache = new_cache(model, B, N + extra)
    with _autocast(model, dtype):
        last = prefill(model, input_ids_BN, cache, chunk_size=chunk_size)
        lp_v = teacher_forced_logprob(model, last, copy.deepcopy(cache), answers)
        lp_d = teacher_forced_logprob(model, last, copy.deepcopy(cache), distractors)
        # the first choice is the distractor already scored (make_sample), so its pass is not repeated
        same0 = n_more > 0 and all(list(c[0]) == list(d) for c, d in zip(choices, distractors))
        per_choice = [lp_d if k == 0 and same0 else
                      teacher_forced_logprob(model, last, copy.deepcopy(cache), [c[k] for c in choices])
                      for k in range(n_more)]
        toks, logits = [], last
        for i in range(max_new_tokens):
            tok = logits.argmax(-1)
            toks.append(tok)
            if i + 1 < max_new_tokens:
                logits = decode_step(model, tok, cache)
    gen = torch.stack(toks, 1).tolist()
    lp_c = [[per_choice[k][b] for k in range(n_more)] for b in range(B)] if n_more else [[] for _ in range(B)]
    return {"generated": gen, "logp_value": lp_v, "logp_distractor": lp_d, "logp_choices": lp_c}


def evaluate(model: torch.nn.Module, tok: Any, prompts: Sequence[dict[str, Any]], *,
             max_new_tokens: int = PROTOCOL["max_new_tokens"],
             chunk_size: int = 512, batch: int = 16, dtype: str = "fp32",
             progress: bool = False) -> list[dict[str, Any]]:
    """Score every prompt of :func:`make_prompts`; prompts of one length are batched.

    Returns one record per prompt: ``task, length, depth, depth_actual, sample, value, output``
    (greedy text), ``correct`` (value in output), ``logp_value``, ``logp_distractor`` (nats),
    ``n_value_tokens``; with the prompts' ``distractors_ids`` also ``logp_choices`` (nats, per distractor),
    ``n_choices`` and ``choice_correct`` (1: the value has the highest log-probability of the choices).
    """
    if batch < 1:
        raise ValueError(f"eval.niah.batch must be >= 1, got {batch}")
    dev = next(model.parameters()).device
    groups: dict[int, list[int]] = defaultdict(list)
    for i, p in enumerate(prompts):
        groups[len(p["input_ids"])].append(i)
    recs: list[dict[str, Any] | None] = [None] * len(prompts)
    for N in sorted(groups):
        idx = groups[N]
        n_rows = plan_eval_batch(model, batch, seq_len=N + max_new_tokens, chunk_size=chunk_size, dtype=dtype)
        for b in range(0, len(idx), n_rows):
            rows = [prompts[i] for i in idx[b:b + n_rows]]
            t0 = time.perf_counter()
            x = torch.tensor([r["input_ids"] for r in rows], dtype=torch.long, device=dev)
            multi = all(r.get("distractors_ids") for r in rows)
            res = score_batch(model, x, [r["answer_ids"] for r in rows], [r["distractor_ids"] for r in rows],
                              max_new_tokens=max_new_tokens, chunk_size=chunk_size, dtype=dtype,
                              choices=[r["distractors_ids"] for r in rows] if multi else None)
            for j, r in enumerate(rows):
                text = tok.decode(res["generated"][j])
                recs[idx[b + j]] = {
                    "task": r["task"], "length": r["length"], "depth": r["depth"],
                    "depth_actual": r["depth_actual"], "sample": r["sample"], "value": r["value"],
                    "output": text, "correct": int(r["value"] in text),
                    "logp_value": res["logp_value"][j], "logp_distractor": res["logp_distractor"][j],
                    "n_value_tokens": len(r["answer_ids"]),
                }
                if multi:
                    lpc = res["logp_choices"][j]
                    recs[idx[b + j]].update(logp_choices=lpc, n_choices=1 + len(lpc),
                                            choice_correct=int(res["logp_value"][j] > max(lpc)))
            if progress:
                print(f"niah N={N} rows {b}..{b + len(rows) - 1}: {time.perf_counter() - t0:.1f} s", flush=True)
    return [r for r in recs if r is not None]


def summarise(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, length, depth) cell: ``n``, ``acc``, mean ``logp_value``, ``logp_distractor``, ``gain``; with
    multiple-choice records also ``choice_acc`` and ``n_choices``."""
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        cells[(r["task"], r["length"], r["depth"])].append(r)
    out = []
    for (task, L, d), rs in sorted(cells.items()):
        lv = float(np.mean([r["logp_value"] for r in rs]))
        ld = float(np.mean([r["logp_distractor"] for r in rs]))
        cell = {"task": task, "length": L, "depth": d, "n": len(rs),
                "acc": float(np.mean([r["correct"] for r in rs])), "logp_value": lv,
                "logp_distractor": ld, "gain": lv - ld}
        if all("choice_correct" in r for r in rs):
            cell.update(choice_acc=float(np.mean([r["choice_correct"] for r in rs])), n_choices=rs[0]["n_choices"])
        out.append(cell)
    return out


# -- command line (used by workflows/rules/longctx.smk) ---------------------------------------------

def _cmd_prompts(a: argparse.Namespace) -> int:
    from yocou.data import TokenStream, load_tokenizer
    from yocou.utils.io import atomic_write_text, provenance

    tok = load_tokenizer(a.tokenizer)
    book, name = None, ""
    if "s_niah_2" in a.tasks:
        stream = TokenStream(a.book)
        book = stream.document(0)
        name = stream.doc_ids[0] if stream.doc_ids else Path(a.book).stem
    key_words = None
    if a.train_keys:
        from yocou.data.needles import TRAIN_KEY_ADJECTIVES, TRAIN_KEY_NOUNS
        key_words = (TRAIN_KEY_ADJECTIVES, TRAIN_KEY_NOUNS)
    prompts = make_prompts(tok, tasks=a.tasks, lengths=a.lengths, n_depths=a.n_depths, n_samples=a.n_samples,
                           seed=a.seed, book_ids=book, book_name=name, key_words=key_words)
    head = {"kind": "niah_prompts", "n_prompts": len(prompts), "book": name,
            "provenance": provenance({k: v for k, v in vars(a).items() if k != "func"}, a.seed)}
    lines = [json.dumps(head)] + [json.dumps(p) for p in prompts]
    atomic_write_text(a.out, "\n".join(lines) + "\n")
    print(f"{len(prompts)} prompts -> {a.out}")
    return 0


def read_prompts(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, prompts) of a prompts JSONL written by ``python -m yocou.evaluation.longctx.niah prompts``."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"niah prompts {p} not found (run the niah_prompts rule)")
    from yocou.results.readers import ResultFileError, read_jsonl

    lines = read_jsonl(p, what="niah prompts")  # each line a JSON object, naming the line otherwise
    if not lines or lines[0][1].get("kind") != "niah_prompts":
        raise ResultFileError(p, "line 1", "expected the header {\"kind\": \"niah_prompts\", ...} (rerun the "
                                           "niah_prompts rule)")
    if len(lines) < 2:
        raise ResultFileError(p, "", "no prompts after the header (rerun the niah_prompts rule)")
    return lines[0][1], [x for _, x in lines[1:]]


def _cmd_eval(a: argparse.Namespace) -> int:
    from yocou.data import load_tokenizer
    from yocou.training.train import load_model, read_checkpoint
    from yocou.utils.entry import resolve_device
    from yocou.utils.io import atomic_write_json, provenance

    a.device, a.dtype = resolve_device(a.device, a.dtype)
    torch.manual_seed(0)
    tok = load_tokenizer(a.tokenizer)
    head, prompts = read_prompts(a.prompts)
    model = load_model(a.model, a.device, a.dtype)
    ck_train = read_checkpoint(a.model).get("train_config", {})
    t0 = time.perf_counter()
    recs = evaluate(model, tok, prompts, max_new_tokens=a.max_new_tokens, chunk_size=a.chunk_size,
                    batch=a.batch, dtype=a.dtype, progress=True)
    wall = time.perf_counter() - t0
    cfg = {k: v for k, v in vars(a).items() if k != "func"}
    res = {"model": a.model, "variant": Path(a.model).parent.name, "train_seq_len": ck_train.get("seq_len"),
           "book": head.get("book"), "wall_s": wall, "n_prompts": len(recs), "cells": summarise(recs),
           "records": recs, "prompts_provenance": head.get("provenance"), "provenance": provenance(cfg, None, a.device)}
    atomic_write_json(a.out, res)
    for task in dict.fromkeys(r["task"] for r in recs):
        rs = [r for r in recs if r["task"] == task]
        mc = (f"  choice acc {np.mean([r['choice_correct'] for r in rs]):.3f} of {rs[0]['n_choices']} "
              f"(chance {1 / rs[0]['n_choices']:.3f})" if all("choice_correct" in r for r in rs) else "")
        print(f"{task}: acc {np.mean([r['correct'] for r in rs]):.3f}{mc}  logp_value "
              f"{np.mean([r['logp_value'] for r in rs]):.2f}  logp_distractor "
              f"{np.mean([r['logp_distractor'] for r in rs]):.2f}  (n={len(rs)})")
    print(f"wall {wall:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    from yocou.utils.entry import DEVICE_HELP, DTYPE_HELP, int_at_least

    check_protocol()
    from yocou.utils.guard import reads, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.longctx.niah", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prompts", help="generate the S-NIAH prompts (JSONL)")
    p.add_argument("--tokenizer", required=True, type=reads())
    p.add_argument("--book", required=True, type=reads(), help="heldout_book.bin (haystack of S-NIAH-2)")
    p.add_argument("--tasks", nargs="+", default=list(PROTOCOL["tasks"]), choices=TASKS)
    p.add_argument("--lengths", nargs="+", type=int, required=True)
    p.add_argument("--n-depths", type=int, default=5)
    p.add_argument("--n-samples", type=int, default=2)
    p.add_argument("--seed", type=int_at_least(0), default=0)
    p.add_argument("--train-keys", action="store_true",
                   help="diagnostic, not Table 4: keys from the training needles' word lists (yocou.data.needles)")
    p.add_argument("--out", required=True, type=writes())
    p.set_defaults(func=_cmd_prompts)
    e = sub.add_parser("eval", help="score one model on the prompts")
    e.add_argument("--model", required=True, type=reads())
    e.add_argument("--tokenizer", required=True, type=reads())
    e.add_argument("--prompts", required=True, type=reads())
    e.add_argument("--max-new-tokens", type=int, default=PROTOCOL["max_new_tokens"])
    e.add_argument("--chunk-size", type=int, default=512)
    e.add_argument("--batch", type=int, default=16)
    e.add_argument("--dtype", default=None, choices=["fp32", "bf16"], help=DTYPE_HELP)
    e.add_argument("--device", default=None, help=DEVICE_HELP)
    e.add_argument("--out", required=True, type=writes())
    e.set_defaults(func=_cmd_eval)
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    return a.func(a)


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
