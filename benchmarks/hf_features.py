"""The transformers feature table of the exported folders: which of transformers' features work on each export kind,
each with the check that says so.

It runs the checks themselves (``tests/test_export_hf.py``, random-init exports of every kind, each compared token
for token or logit for logit with an independent reference) under pytest, reads pytest's JUnit XML and writes one
row per feature and one column per export kind: ``works`` (the check passed), ``FAILS`` (it failed) or ``-`` (not
checked for that kind). Exits 1 when a check failed.

Run (about a minute on 2 cores)::

    python benchmarks/hf_features.py --out benchmarks/results/hf_features
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yocou.utils.io import atomic_write_json, atomic_write_text, provenance  # noqa: E402

TEST_FILE = "tests/test_export_hf.py"

#: test function -> (feature, the check it makes); parametrised over the export kind (``name``) where it applies
FEATURES = {
    "test_exported_logits_equal_yocou_forward": (
        "load with `from_pretrained`, fp32 logits",
        "equal to yocou's forward: exactly (the same code) for the remote kinds, within 1e-5 for the Llama"),
    "test_exported_greedy_generate_equals_yocou_generate": (
        "greedy `generate` (default settings)", "tokens equal yocou.model.generate"),
    "test_the_remote_cache_gives_the_full_forwards_logits_token_by_token": (
        "cached decoding token by token, left padding, `logits_to_keep`",
        "logits equal the full forward's past several windows (atol 1e-5)"),
    "test_remote_generate_with_the_cache_equals_without_it_and_yocou": (
        "greedy `generate(use_cache=True)`", "tokens equal `use_cache=False` and yocou.model.generate"),
    "test_beam_search_with_the_cache_equals_without_it": (
        "beam search (`num_beams=3`, `num_return_sequences=2`)", "sequences equal the same search with `use_cache=False`"),
    "test_generate_continues_from_a_returned_cache": (
        "continuing `generate` from a returned cache", "tokens equal one generation of both lengths"),
    "test_assisted_and_prompt_lookup_decoding_equal_plain_greedy[assistant": (
        "assisted decoding (`assistant_model=` another export)", "tokens equal plain greedy"),
    "test_assisted_and_prompt_lookup_decoding_equal_plain_greedy[prompt_lookup": (
        "prompt-lookup decoding (`prompt_lookup_num_tokens=3`)", "tokens equal plain greedy"),
    "test_a_yoco_family_assistant_drafts_for_a_llama_export": (
        "an exported YOCO-U as the assistant of the Llama export", "tokens equal the Llama's plain greedy"),
    "test_text_generation_pipeline_gives_yocous_greedy_tokens": (
        "`pipeline('text-generation')` with the exported tokenizer", "text equals yocou.model.generate's (YOCO-U)"),
    "test_remote_model_padding_gives_the_unpadded_logits": (
        "left-padded batches (`attention_mask`)", "padded rows' logits equal the unpadded ones"),
    "test_exported_folder_loads_where_yocou_cannot_be_imported": (
        "load offline with yocou not importable", "a fresh process without yocou loads and generates"),
    "test_lm_eval_hf_model_scores_as_yocoulm": (
        "lm-eval's `hf` model on the folder", "log-likelihoods equal YocouLM's"),
    "test_an_edited_config_json_is_refused_at_load": (
        "an edited `config.json` refused at load", "ValueError naming the field"),
    "test_crop_refuses_what_it_cannot_undo": (
        "`crop` after `activate_past_recording`; refused without it",
        "logits after a crop equal the full forward's; a refused crop changes nothing"),
    "test_what_the_wrapper_does_not_do_is_refused_naming_it_and_the_rest_follows_transformers": (
        "`logits_to_keep` positions, `return_dict=False`, `resize_token_embeddings`; unsupported inputs refused",
        "equal to yocou's logits; ValueError naming `inputs_embeds`, `output_hidden_states`, a mask of other rows"),
    "test_the_llama_export_learns_the_document_separator": (
        "fine-tuning learns `<|endoftext|>` (no `padding_idx`)", "a training step reaches the separator's row"),
}


#: checks run on one export kind only (not parametrised over kinds): the kind they use
SINGLE_KIND = {"test_a_yoco_family_assistant_drafts_for_a_llama_export": "transformer",
               "test_text_generation_pipeline_gives_yocous_greedy_tokens": "yocou",
               "test_remote_model_padding_gives_the_unpadded_logits": "yocou",
               "test_exported_folder_loads_where_yocou_cannot_be_imported": "yocou",
               "test_lm_eval_hf_model_scores_as_yocoulm": "yocou",
               "test_an_edited_config_json_is_refused_at_load": "yocou",
               "test_crop_refuses_what_it_cannot_undo": "yocou",
               "test_what_the_wrapper_does_not_do_is_refused_naming_it_and_the_rest_follows_transformers": "yocou",
               "test_the_llama_export_learns_the_document_separator": "transformer"}


def _feature_and_kind(case_name: str) -> tuple[str, str]:
    """``test_x[assistant-yoco]`` -> (``test_x[assistant``, ``yoco``); ``test_y[rins]`` -> (``test_y``, ``rins``)."""
    base, _, params = case_name.partition("[")
    parts = params.rstrip("]").split("-") if params else []
    if len(parts) == 2:
        return f"{base}[{parts[0]}", parts[1]
    return base, parts[0] if parts else SINGLE_KIND.get(base, "")


def run_checks(junit: Path) -> list[dict[str, str]]:
    """Run the feature checks under pytest; one row per test case: ``test``, ``feature``, ``kind``, ``outcome``."""
    names = sorted({k.split("[")[0] for k in FEATURES})
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST_FILE,
                           "-k", " or ".join(names), f"--junitxml={junit}"], cwd=ROOT, capture_output=True,
                          text=True)
    if not junit.is_file():
        raise RuntimeError(f"pytest wrote no report (exit {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = ("FAILS" if case.find("failure") is not None or case.find("error") is not None else
                   "skipped" if case.find("skipped") is not None else "works")
        feature, kind = _feature_and_kind(case.get("name", ""))
        if feature in FEATURES:
            rows.append({"test": case.get("name", ""), "feature": feature, "kind": kind, "outcome": outcome})
    return rows


def table(rows: list[dict[str, str]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the feature table: feature, check, then one cell per export kind."""
    kinds = sorted({r["kind"] for r in rows if r["kind"]}, key=lambda k: (k != "transformer", k))
    out = []
    for key, (feature, check) in FEATURES.items():
        mine = {r["kind"]: r["outcome"] for r in rows if r["feature"] == key}
        if mine:
            out.append([feature, check, *[mine.get(k, "-") for k in kinds]])
    return ["feature", "check", *kinds], out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output stem: writes <out>.md and <out>.json")
    a = ap.parse_args(argv)
    import transformers

    with tempfile.TemporaryDirectory() as d:
        rows = run_checks(Path(d) / "junit.xml")
    header, body = table(rows)
    md = [f"# transformers features of the exported folders (transformers {transformers.__version__})", "",
          "Each cell: the check of `tests/test_export_hf.py` on a random-init export of that kind (`works`: it "
          "passed; `-`: not checked for that kind). `transformer` is exported as a plain Llama folder "
          "(transformers' own code); every other kind is the folder's remote code with `trust_remote_code=True`.",
          "Written by `python benchmarks/hf_features.py --out benchmarks/results/hf_features`.", "",
          "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(r) + " |" for r in body]
    failed = [r for r in rows if r["outcome"] == "FAILS"]
    md += ["", f"{len(rows)} checks run, {len(failed)} failed."]
    atomic_write_text(Path(a.out + ".md"), "\n".join(md) + "\n")
    atomic_write_json(Path(a.out + ".json"), {"header": header, "rows": body, "cases": rows,
                                             "provenance": provenance({"hf_features": {"test_file": TEST_FILE}}, None)})
    print("\n".join(md))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
