"""Checks every command makes before any work: it never writes over its own inputs, and it can write where asked.

A command declares, per parsed arguments, the files and folders it reads (``inputs``), the files it writes
(``outputs``) and the folders whose contents it replaces (``out_dirs``: the audit's report folder, an exported
model folder, a corpus or token folder). :func:`check_paths` then refuses, in one line naming both arguments:

- an output file that is an input file: the same path, also through a symlink, ``..`` or a hard link;
- an output folder that is an input or holds one (writing it would replace or delete the input);
- an output whose folder cannot be written (a file where a folder is expected, a read-only file system, no
  permission): checked by creating and removing a temporary file in the nearest folder that exists, so that a
  refused command creates nothing.

Writing a new file beside the inputs stays allowed. :data:`COMMANDS` holds the declaration of every command line
the project has (``yocou <sub>`` and each ``python -m yocou.<module> [<sub>]``); the pipeline's Snakemake scripts
check their ``snakemake.input`` against ``snakemake.output`` through :func:`check_snakemake`. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["COMMANDS", "IOPaths", "check_command", "check_paths", "check_snakemake", "check_writable", "start_script"]

Pathish = str | os.PathLike


@dataclass
class IOPaths:
    """What one command reads and writes, each path under the argument (label) that names it.

    ``inputs``/``outputs``/``out_dirs``: label (``--model``) -> paths; ``None`` and empty values are skipped.
    """

    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    out_dirs: dict[str, Any] = field(default_factory=dict)


def _paths(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(v) for v in value if v is not None and v != ""]


def _real(p: str) -> str:
    return os.path.realpath(os.path.abspath(p))


def _same_file(a: str, b: str) -> bool:
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def _inside(path: str, folder: str) -> bool:
    rp, rf = _real(path), _real(folder)
    return rp == rf or rp.startswith(rf.rstrip(os.sep) + os.sep)


def check_writable(path: Pathish, label: str, *, folder: bool = False) -> None:
    """Refuse an output ``path`` (a file, or a folder with ``folder``) that cannot be written, creating nothing.

    Raises:
        IsADirectoryError: a file output names an existing folder.
        NotADirectoryError: a folder output, or a folder on the way, is an existing file.
        OSError: the nearest existing folder cannot be written (``EROFS``, ``EACCES``, ``ENOSPC``, ...); its
            ``filename`` is that folder and its message names ``label``.
    """
    p = Path(path)
    if not folder and p.is_dir():
        raise IsADirectoryError(f"{label} {p}: is a folder; expected a file path")
    if folder and p.exists() and not p.is_dir():
        raise NotADirectoryError(f"{label} {p}: is a file; expected a folder")
    probe = p if folder else p.parent
    probe = Path(os.path.abspath(probe))
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise NotADirectoryError(f"{label} {p}: {probe} is a file, not a folder")
    try:
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".yocou-write-check.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        err = OSError(e.errno, f"{label} {p}: cannot write in {probe}: {e.strerror}", str(probe))
        err.before_work = True  # type: ignore[attr-defined] - read by yocou.utils.entry.error_message
        raise err from None


def check_paths(io: IOPaths, *, writable: bool = True) -> None:
    """Refuse (one line, before any work) an output that would replace or delete an input, or that cannot be
    written; see the module docstring.

    Raises:
        ValueError: an output file is an input file, or an output folder is or holds an input (naming both).
        OSError and its subclasses: from :func:`check_writable`.
    """
    inputs = [(lab, p) for lab, v in io.inputs.items() for p in _paths(v)]
    for lab, out in ((lab, p) for lab, v in io.outputs.items() for p in _paths(v)):
        for ilab, inp in inputs:
            if _same_file(out, inp):
                raise ValueError(f"{lab} {out} is the input {ilab} ({inp}): refusing to write over an input; "
                                 f"choose another {lab}")
        if writable:
            check_writable(out, lab)
    for lab, out in ((lab, p) for lab, v in io.out_dirs.items() for p in _paths(v)):
        for ilab, inp in inputs:
            if _inside(inp, out):
                what = "is" if _real(inp) == _real(out) else "holds"
                raise ValueError(f"{lab} {out} {what} the input {ilab} ({inp}): writing that folder would replace "
                                 f"it; choose another {lab}")
        if writable:
            check_writable(out, lab, folder=True)


# --- the commands ---------------------------------------------------------------------------------------------

def _get(a: argparse.Namespace, name: str) -> Any:
    return getattr(a, name, None)


def _in_dir(folder: Any, names: Iterable[str]) -> list[str]:
    return [os.path.join(folder, n) for n in names] if folder else []


_TRAIN_FILES = ("model.pt", "ckpt.pt", "metrics.jsonl", "summary.json", "state.pt")
_AUDIT_FILES = ("report.md", "report.html", "checks.csv", "verdicts.csv", "claims.csv", "summary.json",
                "seed_spread.csv", "seed_spread.md", "power.csv", "power.md")
_SPLITS = ("train", "heldout_book", "heldout_code")


def _train(a: argparse.Namespace) -> IOPaths:
    ins = {"--run-config": a.run_config, "--data": a.data, "--heldout": a.heldout, "--tokenizer": a.tokenizer,
           "--init-from": _get(a, "init_from")}
    out = Path(a.out)
    snapshots = sorted(str(p) for p in out.glob("model_step*.pt")) if out.is_dir() else []
    return IOPaths(ins, {"--out": [str(out / n) for n in _TRAIN_FILES] + snapshots})


def _audit(a: argparse.Namespace) -> IOPaths:
    results = a.results or os.path.join("results", a.scale)
    ins = {"--results (tidy tables)": os.path.join(results, "tidy"), "--baseline": a.baseline,
           "--figures": a.figures, "--reported-dir": a.reported_dir, "--registry": a.registry}
    outs: dict[str, Any] = {"--write-baseline": a.write_baseline}
    if a.out:
        outs["--out"] = _in_dir(a.out, _AUDIT_FILES)
    return IOPaths(ins, outs, {"--out": a.out})


def _export(a: argparse.Namespace) -> IOPaths:
    return IOPaths({"RUN_DIR": a.run_dir, "--tokenizer": a.tokenizer,
                    "--model": os.path.join(a.run_dir, a.model) if a.model else None}, {}, {"OUT_DIR": a.out_dir})


#: Every command line: ``"yocou <sub>"`` and ``"python -m <module> [<sub>]"`` -> its paths from parsed arguments.
COMMANDS: dict[str, Callable[[argparse.Namespace], IOPaths]] = {
    "yocou kv": lambda a: IOPaths(),
    "yocou kv-table": lambda a: IOPaths(),
    "yocou train": _train,
    "yocou corpus": lambda a: IOPaths({"--config": a.config if os.path.isfile(a.config) else None},
                                      {"--out": _in_dir(a.out, [f"{s}.jsonl" for s in _SPLITS] + ["manifest.json"])}),
    "yocou tokenizer": lambda a: IOPaths({"--corpus": os.path.join(a.corpus, "train.jsonl"),
                                          "--config": a.config if a.config and os.path.isfile(a.config) else None,
                                          "--pretrained": a.pretrained if a.pretrained and os.path.exists(a.pretrained)
                                          else None},
                                         {"--out": a.out}),
    "yocou tokenize": lambda a: IOPaths({"--corpus": _in_dir(a.corpus, [f"{s}.jsonl" for s in _SPLITS]),
                                         "--tokenizer": a.tokenizer},
                                        {"--out": _in_dir(a.out, [f"{s}{x}" for s in _SPLITS
                                                                  for x in (".bin", ".offsets.npy", ".json")])}),
    "yocou kv-measure": lambda a: IOPaths({"--run-configs": a.run_configs}, {"--out": a.out}),
    "yocou ppl": lambda a: IOPaths({"--model": a.model, "--tokenizer": a.tokenizer,
                                    "--data": _in_dir(a.data, [f"{s}.bin" for s in a.splits])}, {"--out": a.out}),
    "yocou baselines": lambda a: IOPaths({"--train": a.train, "--tokenizer": a.tokenizer,
                                          "--data": _in_dir(a.data, [f"{s}.bin" for s in a.splits])},
                                         {"--out": a.out}),
    "yocou export-hf": _export,
    "yocou audit": _audit,
    "python -m yocou.results.audit": _audit,
    "python -m yocou.results.audit.report": _audit,
    "python -m yocou.workflow.pipeline": lambda a: IOPaths({"--config": a.config if os.path.isfile(a.config) else None,
                                                   "--tokenizer": a.tokenizer}, {"--out": a.out}),
    "python -m yocou.workflow.committed": lambda a: IOPaths({"--config-json": a.config_json}, {"--out": a.out}),
    "python -m yocou.workflow.studies eqflops": lambda a: IOPaths(
        {"--run": _in_dir(a.run, ["run_config.json", "summary.json"])},
        {"--out": _in_dir(a.out, ["model.pt", "summary.json", "run_config.json"])}),
    "python -m yocou.results.timing": lambda a: IOPaths({"--bench": a.bench}, {"--out": [
        f"{a.out or f'results/{a.scale}/timing'}.{x}" for x in ("csv", "md", "json")]}),
    "python -m yocou.utils.runlock": lambda a: IOPaths(),
    "python -m yocou.training.ladder runs": lambda a: IOPaths({"--study": a.study}),
    "python -m yocou.training.ladder run-config": lambda a: IOPaths({"--study": a.study, "--tokenizer": a.tokenizer,
                                                            "--bracket": a.bracket,
                                                            "--config": a.config if os.path.isfile(a.config)
                                                            else None}, {"--out": a.out}),
    "python -m yocou.results.summarize.ladder bracket": lambda a: IOPaths({"--study": a.study, "--ppl-root": a.ppl_root,
                                                                   "--baseline": a.baseline}, {"--out": [
        str(Path(a.out).with_suffix(x)) for x in (".json", ".csv", ".md")]}),
    "python -m yocou.results.summarize.ladder points": lambda a: IOPaths({"--study": a.study, "--run-root": a.run_root,
                                                                  "--res": a.res, "--data": a.data}, {"--out": [
        str(Path(a.out).with_suffix(x)) for x in (".json", ".csv", ".md")]}),
    "python -m yocou.results.summarize.ladder fits": lambda a: IOPaths({"--points": a.points, "--rules": a.rules}, {
        "--out": [str(Path(a.out).with_suffix(x)) for x in (".json", ".csv", ".md")],
        "--figure": [str(Path(a.figure).with_suffix(x)) for x in (".png", ".pdf")]}),
    "python -m yocou.evaluation.probe train": lambda a: IOPaths({"--settings": a.settings if a.settings and
                                                      os.path.isfile(a.settings) else None}, {"--out": a.out}),
    "python -m yocou.evaluation.probe summarize": lambda a: IOPaths({"RESULTS": a.results}, {}, {"--out": a.out}),
    "python -m yocou.results.resultsdoc": lambda a: IOPaths({"--root (results)": os.path.join(a.root, "results", a.scale)},
                                                    {} if a.check else
                                                    {"--root": [os.path.join(a.root, "RESULTS.md"),
                                                                os.path.join(a.root, "README.md")]}),
    "python -m yocou.workflow.cluster gpu-run": lambda a: IOPaths(),
    "python -m yocou.workflow.cluster check": lambda a: IOPaths(),
    "python -m yocou.workflow.cluster resources": lambda a: IOPaths({"--config": a.config if os.path.isfile(a.config)
                                                            else None}),
    "python -m yocou.evaluation.lmeval.pack": lambda a: IOPaths({"--heldout-book": a.heldout_book}, {}, {"--out": a.out}),
    "python -m yocou.evaluation.lmeval.run": lambda a: IOPaths({"--model": a.model, "--tokenizer": a.tokenizer,
                                                     "--pack": a.pack, "--downstream": a.downstream},
                                                    {}, {"--out": a.out}),
    "python -m yocou.evaluation.longctx.niah prompts": lambda a: IOPaths({"--tokenizer": a.tokenizer, "--book": a.book},
                                                              {"--out": a.out}),
    "python -m yocou.evaluation.longctx.niah eval": lambda a: IOPaths({"--model": a.model, "--tokenizer": a.tokenizer,
                                                            "--prompts": a.prompts}, {"--out": a.out}),
    "python -m yocou.evaluation.longctx.longppl": lambda a: IOPaths({"--model": a.model, "--tokens-dir": _in_dir(
        a.tokens_dir, [f"{s}{x}" for s in ("heldout_book", "heldout_code") for x in (".bin", ".offsets.npy")])},
        {"--out": [a.out, str(Path(a.out).with_suffix(".npz"))]}),
    "python -m yocou.evaluation.analysis.angular": lambda a: IOPaths({"--model": a.model,
                                                           "--data": _in_dir(a.data, [f"{s}.bin" for s in a.splits])},
                                                          {"--out": a.out}),
    "python -m yocou.evaluation.bench.profile": lambda a: IOPaths({"--run-configs": a.run_configs,
                                                        "--profile-config": a.profile_config}, {"--out": a.out}),
    "python -m yocou.evaluation.bench.gpu_check": lambda a: IOPaths({}, {}, {"--out": a.out}),
    "python -m yocou.results.render.pages": lambda a: IOPaths(  # TABLE=PAGE pairs, numbered from 1
        {f"TABLE {i}": p.partition("=")[0] for i, p in enumerate(a.pairs, 1)},
        {f"PAGE {i}": p.partition("=")[2] for i, p in enumerate(a.pairs, 1)}),
    "python -m yocou.evaluation.bench.paper_shape": lambda a: IOPaths({"--paper-config": a.paper_config,
                                                            "--study-config": a.study_config}, {"--out": a.out}),
    "python -m yocou.evaluation.analysis.serving": lambda a: IOPaths(
        {"--raw": a.raw, "--batched": a.batched, "--panel-batched": a.panel_batched, "--table9": a.table9},
        {"--out": [f"{a.out}{s}{x}" for s in (("_measured", "_measured_ratios") if a.measured_only else
                                             ("", "_ratios", "_fit", "_measured", "_measured_ratios"))
                   for x in (".csv", ".md", ".json")],
         "--figure": None if a.measured_only else [str(Path(a.figure).with_suffix(x)) for x in (".png", ".pdf")]}),
}


def check_command(command: str, args: argparse.Namespace) -> None:
    """:func:`check_paths` for one of :data:`COMMANDS` with its parsed arguments.

    Raises:
        KeyError: ``command`` is not declared in :data:`COMMANDS` (a new command must declare its paths).
        ValueError, OSError: as :func:`check_paths`.
    """
    if command not in COMMANDS:
        raise KeyError(f"command {command!r} does not declare its input and output paths in yocou.utils.guard.COMMANDS")
    check_paths(COMMANDS[command](args))


def check_snakemake(sm: Any) -> None:
    """For a pipeline script: refuse a ``snakemake.output`` file that is one of its ``snakemake.input`` files,
    or that cannot be written (:func:`check_paths`)."""
    check_paths(IOPaths(_labelled(sm.input, "input"), _labelled(sm.output, "output")))


def start_script(sm: Any) -> None:
    """The first line of every pipeline script: its stdout and stderr go to its log (``snakemake.log[0]``), then
    :func:`check_snakemake`; a refusal is one line in the log, ``<rule>: error: <message>``, and exit status 2."""
    from yocou.utils.entry import USER_ERRORS, disk_error, error_message

    sys.stdout = sys.stderr = open(sm.log[0], "w", encoding="utf-8")  # noqa: SIM115 - open for the process
    try:
        check_snakemake(sm)
    except (*USER_ERRORS, OSError) as e:
        if isinstance(e, OSError) and not isinstance(e, USER_ERRORS) and not disk_error(e):
            raise
        print(f"rule {getattr(sm, 'rule', '?')}: error: {error_message(e)}", flush=True)
        raise SystemExit(2) from None


def _labelled(files: Any, kind: str) -> dict[str, list[str]]:
    """``{"input <name>": paths}`` of a Snakemake ``input``/``output`` object (``items()`` gives the named ones;
    a mapping in tests); unnamed files go under ``kind`` alone."""
    if isinstance(files, Mapping):
        return {f"{kind} {k}": _paths(v) for k, v in files.items()}
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for k, v in files.items():
        out[f"{kind} {k}"] = _paths(v)
        seen.update(out[f"{kind} {k}"])
    rest = [p for p in _paths(list(files)) if p not in seen]
    if rest:
        out[kind] = rest
    return out

