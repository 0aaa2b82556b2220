"""The annealed token ladder and its learning-rate bracket: which runs, and each run's config.

The paper's Figure 2 asks whether YOCO-U overtakes YOCO at equal tokens and at equal FLOPs. A CPU can answer it
at fixed model size only if every compared point is an *annealed* model (its learning rate decayed at the end of
its own budget) trained at its variant's own, bracketed learning rate, past the trivial baselines. This module
plans those runs from ``workflows/studies/ladder.yaml`` (one section per scale, validated by :class:`LadderStudy`):

* the **bracket**: ``<variant>_lr<rate>`` (e.g. ``yoco_lr0p003``), each variant at every rate of
  ``bracket.rates`` for ``bracket.steps`` steps with the ladder's schedule;
* the **ladder**, per variant and seed ``k`` (``train.seed = seed + k``): stable segments ``<variant>_seed<k>_s<S>``
  at ``S = (1 - cooldown_fraction) * D`` for each budget ``D`` (warmup, then the peak rate; each starts from the
  previous segment's ``state.pt`` and keeps its own), and the cooldown branches ``<variant>_seed<k>_d<D>`` from the
  segment at ``S`` to ``D`` (a linear cooldown over ``D - S`` steps). A branch equals a run that follows its own
  warmup-stable-decay schedule from step 0 (:func:`yocou.training.train.branch_mismatch`; ``tests/test_wsd.py``).

Every run trains on the ladder's token stream (:func:`split_tokens`: the scale's, without ``heldout_plays``) with the
scale's ``train:`` settings (batch, sequence length, optimizer)
but the schedule, the learning rate and the needle mix (off). The ladder's rate is the variant's best rate in the
bracket (:func:`best_rates`), read when the run's config is written, so the bracket runs first.

Command line (what the rules of ``workflows/rules/ladder.smk`` call)::

    python -m yocou.training.ladder runs --scale tiny                    # the planned runs, one per line
    python -m yocou.training.ladder split-tokens --scale tiny --tokens runs/tiny/tokens --out runs/tiny/ladder/tokens
    python -m yocou.training.ladder run-config --config CFG --scale tiny --run yoco_seed0_d500 \\
        --tokenizer runs/tiny/tokenizer.json [--bracket runs/tiny/ladder/rates.json] --out run_config.json
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

#: The most seeds a variant of the study may have (as the scale config's ``seeds:``, its schema).
MAX_SEEDS = 64
#: The study file, relative to the repository root.
STUDY_FILE = "workflows/studies/ladder.yaml"
#: The held-out splits every ladder model is scored on: the scale's book and code (decided, eval/ladder.yaml) and the
#: plays held out of the ladder's training (reported); with ``train``, the streams of :func:`split_tokens`.
LADDER_SPLITS = ("heldout_book", "heldout_code", "heldout_plays")


class BracketSpec(BaseModel):
    """``bracket:`` of a scale's ladder section."""

    model_config = ConfigDict(extra="forbid")
    steps: PositiveInt
    rates: list[float] = Field(min_length=3)

    @field_validator("rates")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        if any(r <= 0 for r in v) or any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError("expected positive rates in increasing order")
        return v


class PlaysHoldout(BaseModel):
    """``heldout_plays:`` of a scale's ladder section: whole documents of one source of the scale's training stream
    held out of the ladder's training, as an in-distribution held-out split (``heldout_plays``) beside the book and
    code splits, which come from other sources.

    The rule (:func:`heldout_plays`): the training stream's documents ``<source>/<name>`` whose ``name`` is not in
    ``exclude`` (the poems, say), ordered by ``sha256(f"{seed}:{doc_id}")``, the first ``n``.
    """

    model_config = ConfigDict(extra="forbid")
    source: str = "shakespeare"
    exclude: list[str] = Field(default_factory=list)
    n: PositiveInt
    seed: int = Field(default=0, ge=0)


class CheckSpec(BaseModel):
    """One entry of ``checks:``: a single run from step 0 with its own warmup-stable-decay schedule to ``budget``
    (equal to the ladder's annealed branch at that budget: tests/test_wsd.py), at ``rate`` (None: the variant's best
    bracketed rate) and with ``assumptions`` overriding the scale's ``model.assumptions`` (e.g. ``cross_rope``)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9_]+$")
    variant: str
    budget: PositiveInt
    rate: float | None = Field(default=None, gt=0)
    assumptions: dict[str, Any] = Field(default_factory=dict)


class DepthControl(BaseModel):
    """``depth_control:`` of a scale's ladder section: the positive control for depth (eval/ladder.yaml
    ``depth_control``), an unshared variant trained by the ladder's protocol beside the ladder, apart from it.

    Attributes:
        variant: its run names' stem (e.g. ``yoco_deep9``), not one of the scale's ``variants`` (``reproduce_all``
            trains every one of those; the control is trained by the target ``depth_control`` only).
        model: its ``variants.<name>`` entry, as a scale config's (e.g. ``{preset: yoco, n_layers: 12,
            n_self_layers: 9}``: YOCO with 9 unshared self layers and 3 cross layers); checked as one.
        seeds: seeds 0..seeds-1, paired with the ladder's seeds of the same index.
        budgets: annealed budgets in optimizer steps, each one of the ladder's ``budgets``.
        rates: its own learning-rate bracket at the ladder's ``bracket.steps``; the best (lowest mean of the book and
            code losses) trains the control.
    """

    model_config = ConfigDict(extra="forbid")
    variant: str = Field(pattern=r"^[a-z0-9_]+$")
    model: dict[str, Any]
    seeds: int = Field(ge=1, le=MAX_SEEDS)
    budgets: list[PositiveInt] = Field(min_length=1)
    rates: list[float] = Field(min_length=3)

    @field_validator("rates")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        return BracketSpec._increasing(v)

    @field_validator("model")
    @classmethod
    def _a_variant(cls, v: dict[str, Any]) -> dict[str, Any]:
        from yocou.workflow.variants import check_variant

        if "equal_flops_to" in v or "train" in v:
            raise ValueError("expected a model only: no equal_flops_to or train (the ladder sets the training)")
        try:
            check_variant("model", v)
        except ValueError as e:
            raise ValueError(str(e).removeprefix("variants.model: ").removeprefix("variants.")) from None
        return v


class LadderStudy(BaseModel):
    """One scale's section of ``workflows/studies/ladder.yaml``.

    Attributes:
        variants: variant name (a key of the scale's ``variants``) -> number of seeds.
        budgets: the annealed budgets in optimizer steps, increasing.
        cooldown_fraction: the share of each budget spent in the linear cooldown; ``(1 - f) * D`` must be a whole
            step for every budget ``D``.
        warmup_steps, min_lr_ratio, ckpt_every: of every run (``yocou.training.train.TrainConfig``).
        bracket: the learning-rate grid (:class:`BracketSpec`).
        heldout_plays: the documents held out of the ladder's training stream (:class:`PlaysHoldout`).
        checks: single runs beside the ladder (:class:`CheckSpec`; target ``ladder_checks``, not in ``ladder``).
        depth_control: the positive control for depth (:class:`DepthControl`; target ``depth_control``, not in
            ``ladder``).
    """

    model_config = ConfigDict(extra="forbid")
    variants: dict[str, Annotated[int, Field(ge=1, le=MAX_SEEDS)]] = Field(min_length=1)
    budgets: list[PositiveInt] = Field(min_length=2)
    cooldown_fraction: float = Field(gt=0, lt=1)
    warmup_steps: int = Field(ge=0)
    min_lr_ratio: float = Field(ge=0, le=1)
    ckpt_every: PositiveInt
    bracket: BracketSpec
    heldout_plays: PlaysHoldout
    checks: list[CheckSpec] = Field(default_factory=list)
    depth_control: DepthControl | None = None

    @model_validator(mode="after")
    def _budgets(self) -> "LadderStudy":
        if any(b <= a for a, b in zip(self.budgets, self.budgets[1:])):
            raise ValueError("budgets: expected increasing step counts")
        for d in self.budgets:
            s = (1 - self.cooldown_fraction) * d
            if abs(s - round(s)) > 1e-9 or round(s) <= self.warmup_steps:
                raise ValueError(f"budgets: {d} x (1 - cooldown_fraction {self.cooldown_fraction:g}) = {s:g} is not a "
                                 f"whole step after warmup_steps ({self.warmup_steps})")
        b = self.bracket
        if b.steps * self.cooldown_fraction != round(b.steps * self.cooldown_fraction):
            raise ValueError(f"bracket.steps: {b.steps} x cooldown_fraction is not a whole step")
        if round((1 - self.cooldown_fraction) * b.steps) <= self.warmup_steps:
            raise ValueError(f"bracket.steps: {b.steps} leaves no stable phase after warmup_steps "
                             f"({self.warmup_steps}): the bracket would never train at its peak rate")
        for c in self.checks:
            if c.variant not in self.variants:
                raise ValueError(f"checks.{c.name}: variant {c.variant!r} is not one of the ladder's {sorted(self.variants)}")
            if (c.budget * self.cooldown_fraction) != round(c.budget * self.cooldown_fraction):
                raise ValueError(f"checks.{c.name}: budget {c.budget} x cooldown_fraction is not a whole step")
        if len({c.name for c in self.checks}) != len(self.checks):
            raise ValueError("checks: each name once")
        dc = self.depth_control
        if dc is not None:
            if dc.variant in self.variants:
                raise ValueError(f"depth_control.variant: {dc.variant!r} is one of the ladder's variants; the control "
                                 "is a variant apart from them")
            off = [d for d in dc.budgets if d not in self.budgets]
            if off or any(b <= a for a, b in zip(dc.budgets, dc.budgets[1:])):
                raise ValueError(f"depth_control.budgets: expected increasing budgets among the ladder's {self.budgets}, "
                                 f"got {dc.budgets}")
        return self

    def stable_step(self, budget: int) -> int:
        """The step at which the cooldown to ``budget`` starts (the stable segment it branches from)."""
        return round((1 - self.cooldown_fraction) * budget)


def load_study(scale: str, path: str | Path = STUDY_FILE, scales: list[str] | None = None,
               variants: Mapping[str, Any] | None = None) -> LadderStudy | None:
    """The ladder section of ``scale`` in ``path`` (None when the file has none).

    ``scales``: the configured scale names; a section named otherwise (a typo would drop the study silently) is
    refused. ``variants``: the scale's variants (its config's ``variants:``); a ladder variant not among them is
    refused.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not YAML (with the line and column) or is empty, a section is not a configured
            scale, or the section does not validate (or names a variant the scale does not have), naming the file,
            scale and field.
    """
    import yaml

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"ladder study file {p} not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{p}: not YAML ({str(e).splitlines()[0]}{where})") from None
    if not isinstance(data, Mapping) or not data:
        # an empty file would drop the study from every scale without a word
        raise ValueError(f"{p}: expected a mapping of scale names to ladder sections, got "
                         f"{'an empty file' if not data else type(data).__name__}")
    if scales is not None and (unknown := sorted(str(k) for k in data if k not in scales)):
        raise ValueError(f"{p}: {unknown[0]}: not a configured scale (one of {sorted(scales)})")
    if scale not in data:
        return None
    try:
        study = LadderStudy.model_validate(data[scale])
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        # a check across fields (LadderStudy._budgets) names its field at the start of its message
        raise ValueError(f"{p}: {scale}.{field}: {msg}" if field else f"{p}: {scale}.{msg}") from None
    if variants is not None and (missing := [v for v in study.variants if v not in variants]):
        raise ValueError(f"{p}: {scale}.variants: {missing[0]!r} is not a variant of the {scale} config "
                         f"(e.g. {', '.join(list(variants)[:4])})")
    dc = study.depth_control
    if variants is not None and dc is not None and dc.variant in variants:
        raise ValueError(f"{p}: {scale}.depth_control.variant: {dc.variant!r} is a variant of the {scale} config, "
                         "which reproduce_all trains; name the control apart (its model is depth_control.model)")
    return study


def heldout_plays(doc_ids: list[str], spec: PlaysHoldout) -> list[str]:
    """The ids of the documents :class:`PlaysHoldout` holds out of ``doc_ids`` (a training stream's), in the rule's
    order.

    Raises:
        ValueError: a name in ``spec.exclude`` that is not a document of ``spec.source`` (a misspelt name would
            leave its document a candidate without a word), or fewer than ``spec.n`` candidates; naming the field.
    """
    import hashlib

    prefix = f"{spec.source}/"
    names = {d[len(prefix):] for d in doc_ids if d.startswith(prefix)}
    if unknown := [x for x in spec.exclude if x not in names]:
        raise ValueError(f"heldout_plays.exclude: {unknown[0]!r} is not a document under {prefix} in the training "
                         f"stream (e.g. {', '.join(sorted(names)[:3])})")
    cands = [d for d in doc_ids if d.startswith(prefix) and d[len(prefix):] not in spec.exclude]
    if len(cands) < spec.n:
        raise ValueError(f"heldout_plays.n: {spec.n} documents asked for, but the training stream has {len(cands)} "
                         f"under {prefix} outside heldout_plays.exclude")
    return sorted(cands, key=lambda d: hashlib.sha256(f"{spec.seed}:{d}".encode()).hexdigest())[:spec.n]


def split_tokens(study: LadderStudy, tokens: str | Path, out: str | Path) -> dict[str, Any]:
    """The ladder's token streams in ``out``: ``train`` (the scale's training stream without the held-out plays),
    ``heldout_plays`` (those plays) and copies of the scale's ``heldout_book`` and ``heldout_code``; each as
    ``<split>.bin``, ``<split>.offsets.npy`` and ``<split>.json`` (:mod:`yocou.data.tokens`' format, the rule and the
    source stream recorded in the json).

    Returns:
        ``{"heldout_plays": [doc ids], "train_tokens": n, "heldout_plays_tokens": n}``.

    Raises:
        ValueError: ``out`` is the ``tokens`` folder (the streams would overwrite their source), or as
            :func:`heldout_plays`; before anything is written.
    """
    import shutil

    if Path(out).resolve() == Path(tokens).resolve():
        raise ValueError(f"--out {out}: is the --tokens folder; the ladder's streams go to a folder of their own "
                         "(runs/<scale>/ladder/tokens)")

    from yocou.data.tokens import TokenStream, write_documents

    src = TokenStream(Path(tokens) / "train.bin")
    held = heldout_plays(list(src.meta["doc_ids"]), study.heldout_plays)
    rule = {"heldout_plays": study.heldout_plays.model_dump(), "from": str(Path(tokens) / "train.bin"),
            "from_sha256": src.meta.get("bin_sha256"),
            "rule": "documents <source>/<name> of the training stream, name not in exclude, ordered by "
                    "sha256(f'{seed}:{doc_id}'), the first n"}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    keep = [i for i, d in enumerate(src.meta["doc_ids"]) if d not in held]
    take = [src.meta["doc_ids"].index(d) for d in held]
    n_train = write_documents(src, keep, out, "train", extra={"ladder_split": rule})
    n_plays = write_documents(src, take, out, "heldout_plays", extra={"ladder_split": rule})
    for split in LADDER_SPLITS[:2]:  # the scale's book and code, unchanged
        for suffix in (".bin", ".offsets.npy", ".json"):
            shutil.copyfile(Path(tokens) / f"{split}{suffix}", out / f"{split}{suffix}")
    return {"heldout_plays": held, "train_tokens": n_train, "heldout_plays_tokens": n_plays}


def rate_tag(rate: float) -> str:
    """``0.003`` -> ``0p003``: a learning rate in a run name."""
    return f"{rate:g}".replace(".", "p").replace("-", "m").replace("+", "")


@dataclass(frozen=True)
class PlannedRun:
    """One run of the study.

    Attributes:
        name: the run's folder name under ``runs/<scale>/ladder/``.
        kind: ``bracket``, ``stable``, ``anneal`` or ``check``; the depth control's ``depth_bracket``,
            ``depth_stable`` and ``depth``.
        variant: the scale's variant it trains.
        seed_index: k of ``train.seed = seed + k``.
        steps: its ``train.steps``; cooldown: its ``train.cooldown_steps``.
        rate: the bracket's learning rate (None: the variant's best bracketed rate).
        init_from: the run whose ``state.pt`` it starts from (None: step 0).
        assumptions: overrides of the scale's ``model.assumptions`` (a check's).
    """

    name: str
    kind: str
    variant: str
    seed_index: int
    steps: int
    cooldown: int
    rate: float | None = None
    init_from: str | None = None
    assumptions: tuple[tuple[str, Any], ...] = ()

    @property
    def save_state(self) -> bool:
        """Stable segments keep their final state for the next segment and the branches."""
        return self.kind in ("stable", "depth_stable")


def plan(study: LadderStudy) -> dict[str, PlannedRun]:
    """Every run of the study by name: the bracket, then per variant and seed the stable chain and the branches; the
    depth control's bracket, chains and branches; the checks."""
    runs: dict[str, PlannedRun] = {}
    b = study.bracket
    cool = round(b.steps * study.cooldown_fraction)
    for v in study.variants:
        for r in b.rates:
            name = f"{v}_lr{rate_tag(r)}"
            runs[name] = PlannedRun(name, "bracket", v, 0, b.steps, cool, rate=r)
    for v, n_seeds in study.variants.items():
        for k in range(n_seeds):
            prev = None
            for d in study.budgets:
                s = study.stable_step(d)
                stable = f"{v}_seed{k}_s{s}"
                runs[stable] = PlannedRun(stable, "stable", v, k, s, 0, init_from=prev)
                runs[f"{v}_seed{k}_d{d}"] = PlannedRun(f"{v}_seed{k}_d{d}", "anneal", v, k, d, d - s, init_from=stable)
                prev = stable
    dc = study.depth_control
    if dc is not None:
        for r in dc.rates:
            name = f"{dc.variant}_lr{rate_tag(r)}"
            runs[name] = PlannedRun(name, "depth_bracket", dc.variant, 0, b.steps, cool, rate=r)
        for k in range(dc.seeds):
            prev = None
            for d in dc.budgets:
                s = study.stable_step(d)
                stable = f"{dc.variant}_seed{k}_s{s}"
                runs[stable] = PlannedRun(stable, "depth_stable", dc.variant, k, s, 0, init_from=prev)
                runs[f"{dc.variant}_seed{k}_d{d}"] = PlannedRun(f"{dc.variant}_seed{k}_d{d}", "depth", dc.variant, k,
                                                               d, d - s, init_from=stable)
                prev = stable
    for c in study.checks:
        name = f"check_{c.name}"
        runs[name] = PlannedRun(name, "check", c.variant, 0, c.budget, round(c.budget * study.cooldown_fraction),
                                rate=c.rate, assumptions=tuple(sorted(c.assumptions.items())))
    return runs


#: The ``train`` keys :func:`run_config` sets for every ladder run, whatever the scale's ``train:`` says (the
#: pipeline leaves them out of what a ladder run's config depends on).
LADDER_TRAIN_KEYS = frozenset({"steps", "schedule", "cooldown_steps", "warmup_steps", "min_lr_ratio", "lr", "seed",
                               "needle_mix", "eval_every", "ckpt_every", "snapshot_steps", "stop_at_flops"})


def best_rates(bracket: Mapping[str, Any]) -> dict[str, float]:
    """``{variant: best rate}`` from the bracket's best rates (``runs/<scale>/ladder/rates.json``, or the bracket
    summary ``results/<scale>/ladder/bracket.json``: both have ``best``).

    Raises:
        ValueError: the summary has no ``best`` mapping of variant names to positive rates.
    """
    best = bracket.get("best") if isinstance(bracket, Mapping) else None
    if not isinstance(best, Mapping) or not all(isinstance(r, Mapping) and float(r.get("lr", 0)) > 0
                                                for r in best.values()):
        raise ValueError("bracket summary: expected 'best': {variant: {lr: <rate>, ...}}")
    return {v: float(r["lr"]) for v, r in best.items()}


def run_config(cfg: Mapping[str, Any], study: LadderStudy, run: str, vocab_size: int | None = None,
               rates: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The run config (:func:`yocou.workflow.pipeline.resolve_run`'s dict, plus ``ladder``) of study run ``run``.

    Args:
        cfg: the scale's resolved pipeline config (its ``variants``, ``model``, ``train``, ``seed``).
        study: the scale's ladder section.
        run: a name of :func:`plan`.
        vocab_size: the tokenizer's.
        rates: the bracketed best rate per variant; required for ladder runs.

    Raises:
        ValueError: ``run`` is not planned, its variant is not in ``cfg``, or a ladder run has no bracketed rate.
    """
    from yocou.workflow.pipeline import resolve_run

    runs = plan(study)
    if run not in runs:
        raise ValueError(f"--run {run!r} is not a run of the ladder study (e.g. {', '.join(list(runs)[:3])}, ...)")
    p = runs[run]
    dc = study.depth_control
    variants = {**cfg.get("variants", {}), **({dc.variant: dc.model} if dc is not None else {})}
    if p.variant not in variants:
        raise ValueError(f"{STUDY_FILE}: variant {p.variant!r} is not in the scale's variants")
    if p.rate is not None:
        lr = p.rate
    elif rates is None or p.variant not in rates:
        raise ValueError(f"--bracket: no bracketed learning rate for {p.variant!r} (run the bracket first)")
    else:
        lr = float(rates[p.variant])
    train = {"steps": p.steps, "schedule": "wsd", "cooldown_steps": p.cooldown, "warmup_steps": study.warmup_steps,
             "min_lr_ratio": study.min_lr_ratio, "lr": lr, "seed": int(cfg.get("seed", 0)) + p.seed_index,
             "needle_mix": None, "eval_every": 0, "ckpt_every": study.ckpt_every,
             "snapshot_steps": [], "stop_at_flops": 0.0}
    spec = {k: v for k, v in variants[p.variant].items() if k not in ("train", "equal_flops_to")}
    spec["train"] = {**(variants[p.variant].get("train") or {}), **train}
    model = dict(cfg["model"])
    if p.assumptions:
        model["assumptions"] = {**(model.get("assumptions") or {}), **dict(p.assumptions)}
    rc = resolve_run({**cfg, "model": model, "variants": {run: spec}}, run, vocab_size)
    rc["ladder"] = {"kind": p.kind, "variant": p.variant, "seed_index": p.seed_index, "init_from": p.init_from}
    return rc


def main(argv: list[str] | None = None) -> int:
    """``python -m yocou.training.ladder {runs,run-config}``: the study's runs, or one run's config."""
    from yocou.utils.guard import inside, reads, writes

    ap = argparse.ArgumentParser(prog="python -m yocou.training.ladder", description=main.__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("runs", help="the planned runs, one per line (kind, name)")
    r.add_argument("--scale", required=True)
    r.add_argument("--study", default=STUDY_FILE, type=reads())
    t = sub.add_parser("split-tokens", help="the ladder's token streams: the training stream without the held-out "
                                            "plays, the plays, the book and code splits")
    t.add_argument("--scale", required=True)
    t.add_argument("--study", default=STUDY_FILE, type=reads())
    t.add_argument("--tokens", required=True, type=reads(), help="the scale's token folder (runs/<scale>/tokens)")
    files = [f"{sp}{x}" for sp in ("train", *LADDER_SPLITS) for x in (".bin", ".offsets.npy", ".json")]
    t.add_argument("--out", required=True, type=writes(paths=inside(*files)), help="the ladder's token folder")
    rc = sub.add_parser("run-config", help="write one run's config")
    rc.add_argument("--config", required=True, type=reads(if_exists=True), help="the scale's resolved pipeline config: a file or inline JSON")
    rc.add_argument("--scale", required=True)
    rc.add_argument("--study", default=STUDY_FILE, type=reads())
    rc.add_argument("--run", required=True)
    rc.add_argument("--tokenizer", default=None, type=reads(), help="take vocab_size from this tokenizer")
    rc.add_argument("--bracket", default=None, type=reads(), help="the bracket's best rates (rates.json, or the summary bracket.json)")
    rc.add_argument("--out", required=True, type=writes())
    a = ap.parse_args(argv)
    from yocou.utils.guard import check_args

    check_args(a)
    study = load_study(a.scale, a.study)
    if study is None:
        raise ValueError(f"--scale {a.scale}: {a.study} has no section for this scale")
    if a.cmd == "runs":
        for p in plan(study).values():
            print(p.kind, p.name)
        return 0
    if a.cmd == "split-tokens":
        got = split_tokens(study, a.tokens, a.out)
        print(f"held out of the ladder's training: {', '.join(got['heldout_plays'])} ({got['heldout_plays_tokens']:,} "
              f"tokens); training stream {got['train_tokens']:,} tokens -> {a.out}")
        return 0
    from yocou.data import load_tokenizer
    from yocou.utils.io import atomic_write_json, load_config_file

    cfg = load_config_file(a.config)
    if a.bracket:
        from yocou.results.readers import read_json

        rates = best_rates(read_json(a.bracket, what="the bracket's best rates (--bracket)"))
    else:
        rates = None
    vocab = load_tokenizer(a.tokenizer).vocab_size if a.tokenizer else None
    atomic_write_json(a.out, run_config(cfg, study, a.run, vocab, rates))
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    raise SystemExit(run_main(main))
