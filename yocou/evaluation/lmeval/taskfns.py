"""Functions the task pack's YAMLs reference with ``!function yocou.evaluation.lmeval.taskfns.<name>``."""

from __future__ import annotations

import os
import re

from yocou.evaluation.lmeval.sandbox import code_exec_allowed, run_program

__all__ = ["build_predictions", "pass_at_1", "math_answer_filter", "extract_math_answer"]


def build_predictions(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    """HumanEval: the program is the prompt followed by the completion (lm-eval's ``build_predictions``)."""
    return [[doc["prompt"] + r for r in resp] for resp, doc in zip(resps, docs)]


def pass_at_1(references: list[str], predictions: list[list[str]], **kwargs) -> float:
    """pass@1 of one HumanEval problem with greedy decoding: 1.0 if the program passes its tests.

    Runs the program with :func:`yocou.evaluation.lmeval.sandbox.run_program` (limits from ``YOCOU_EXEC_TIMEOUT_S``
    and ``YOCOU_EXEC_MEMORY_MB``).

    Raises:
        RuntimeError: code execution is not enabled (``YOCOU_ALLOW_CODE_EXEC=1``); the runner never
            schedules HumanEval in that case.
    """
    if not code_exec_allowed():
        raise RuntimeError("HumanEval runs model-generated code: opt in with eval.downstream.code_exec: true "
                           "(sets YOCOU_ALLOW_CODE_EXEC=1)")
    timeout = float(os.environ.get("YOCOU_EXEC_TIMEOUT_S", "10"))
    mem = int(os.environ.get("YOCOU_EXEC_MEMORY_MB", "1024"))
    ref, cands = references[0], predictions[0]
    return float(run_program(cands[0] + "\n\n" + ref + "\n", timeout_s=timeout, memory_mb=mem).passed)


def _last_boxed(s: str) -> str | None:
    i = s.rfind("\\boxed")
    if i < 0:
        return None
    j = s.find("{", i)
    if j < 0:
        return None
    depth = 0
    for k in range(j, len(s)):
        depth += {"{": 1, "}": -1}.get(s[k], 0)
        if depth == 0:
            return s[j + 1:k]
    return None


def extract_math_answer(text: str) -> str:
    """The final answer of a MATH-style solution: ``The final answer is X`` (Minerva's format), else the
    last ``\\boxed{X}``, else the last number, else the stripped text."""
    m = re.search(r"[Tt]he final answer is\s*\$?(.+?)\$?\s*(?:\.\s*I hope|$)", text)
    if m:
        return m.group(1).strip()
    b = _last_boxed(text)
    if b is not None:
        return b.strip()
    nums = re.findall(r"-?\d+(?:\.\d+)?(?:/\d+)?", text)
    return nums[-1] if nums else text.strip()


def math_answer_filter(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    """lm-eval custom filter: map each generation to its extracted final answer."""
    return [[extract_math_answer(r) for r in resp] for resp in resps]
