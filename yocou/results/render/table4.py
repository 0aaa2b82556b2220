"""Table 4: needle in a haystack (S-NIAH-1, S-NIAH-2), ours beside the paper's, and a
length-by-depth heatmap per model.

Input: the tidy ``table4`` table (:func:`yocou.results.summarize.niah.summarize_table4`).
Outputs: ``<out>.{csv,md,json}`` (per run, that is per model and training seed, and task: accuracy, multiple-choice accuracy with its 95% Wilson
interval beside the chance level, teacher-forced log-probability of the value, its gain over a distractor),
``<out>_by_length.{csv,md,json}`` (per run and length, both tasks: where each model fails),
``<out>_seeds.{csv,md,json}`` (per model: the two-choice accuracy of each training seed, their mean and its 95%
t interval across seeds beside chance),
``<out>_cells.{csv,md,json}`` (per model, task, length, depth) and the heatmap figure ``<fig>.{png,pdf}``. Paper values: :func:`yocou.results.reported.load_table` (4). The renderer only
selects, pivots and formats.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from yocou.results.audit.decision import above_chance, t_interval
from yocou.results.names import NIAH_TASKS, label, paper_row
from yocou.results.render.common import save_figure, stem_of, write_table
from yocou.results.reported import load_table
from yocou.results.tidy import one, read_tidy


def _ci(r: pd.Series | dict, chance: float) -> tuple[str, bool]:
    """(``"0.80 [0.70, 0.87]"``, above chance) of a tidy accuracy row (value, n) against ``chance``."""
    n = int(r["n"])
    a = above_chance(int(round(float(r["value"]) * n)), n, chance)
    return f"{a['acc']:.2f} [{a['lo']:.2f}, {a['hi']:.2f}]", bool(a["above"])


def chance_of(t4: pd.DataFrame, run: str) -> float | None:
    """The multiple choice's chance level of ``run`` (tidy ``choice_chance``), or None without it."""
    r = one(t4[t4["run"] != "paper"], run=run, metric="choice_chance", axis="")
    return None if r is None else float(r["value"])


def runs_of(t4: pd.DataFrame) -> dict[str, tuple[str, int, str]]:
    """``{run: (role, seed, model label)}`` of the measured runs in table order; the label names the seed where the
    role has several (seed replicas, ``niah_train.seeds``)."""
    ours = t4[t4["run"] != "paper"]
    first = ours.drop_duplicates("run")
    n = first.groupby("role")["run"].nunique()
    return {str(r.run): (str(r.role), int(r.seed), label(r.role) + (f" (seed {int(r.seed)})" if n[r.role] > 1 else ""))
            for r in first.itertuples()}


def by_length(t4: pd.DataFrame) -> pd.DataFrame:
    """Per model and prompt length, both tasks pooled: exact-match and multiple-choice accuracy with its 95%
    Wilson interval and whether it is above chance (where each model fails); empty without the multiple choice."""
    ours = t4[(t4["run"] != "paper") & (t4["axis"] == "seq_len") & (t4["axis2"] == "")]
    rows = []
    for run, (_, _, name) in runs_of(t4).items():
        chance = chance_of(t4, run)
        if chance is None:
            continue
        g = ours[ours["run"] == run]
        for length, gl in g.groupby("axis_value", sort=True):
            ch = gl[gl["metric"].str.endswith(".choice_acc")]
            ex = gl[gl["metric"].str.endswith(".acc")]
            n = int(ch["n"].sum())
            k = int(round(float((ch["value"] * ch["n"]).sum())))
            a = above_chance(k, n, chance)
            rows.append({"model": name, "variant": run, "length": int(length), "n": n,
                         "acc": float((ex["value"] * ex["n"]).sum() / ex["n"].sum()),
                         "choice acc": a["acc"], "choice 95% CI": f"[{a['lo']:.2f}, {a['hi']:.2f}]",
                         "chance": chance, "p (> chance)": a["p_value"],
                         "above chance": "yes" if a["above"] else "no",
                         "extrapolated": bool(gl["extrapolated"].any())})
    return pd.DataFrame(rows)


def build(t4: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, cells) from the tidy ``table4`` rows."""
    paper = load_table(4)
    paper = {(r.model, r.column): float(r.value) for r in paper.itertuples()}
    ours = t4[t4["run"] != "paper"]
    top = ours[ours["axis"] == ""]
    rows, cells = [], []
    for run, (v, seed, name) in runs_of(t4).items():
        row = {"model": name, "variant": run, "seed": seed}

        def val(metric: str, frame: pd.DataFrame = top, **eq):
            return one(frame, run=run, metric=metric, **eq)

        for task, t in NIAH_TASKS.items():
            acc = val(f"{task}.acc")
            if acc is None:
                continue
            row[f"{t} acc"] = acc["value"]
            row[f"{t} acc (paper)"] = paper.get((paper_row("table4", v) or label(v), t), np.nan)
            ch, chance = val(f"{task}.choice_acc"), chance_of(t4, run)
            if ch is not None and chance is not None:
                row[f"{t} choice acc [95% CI]"] = _ci(ch, chance)[0]
            row[f"{t} logp value"] = val(f"{task}.logp_value")["value"]
            row[f"{t} gain"] = val(f"{task}.gain")["value"]
            row[f"{t} n"] = int(acc["n"])
        row["mean acc"] = val("all_tasks.acc")["value"]
        pm = one(t4, run="paper", role=v, metric="paper.all_tasks.acc")
        row["mean acc (paper)"] = np.nan if pm is None else pm["value"]
        inside, chance = val("in_train_len.choice_acc"), chance_of(t4, run)
        if inside is not None and chance is not None:
            text, above = _ci(inside, chance)
            row["choice acc ≤ train len [95% CI]"] = text
            row["chance"] = chance
            row["above chance ≤ train len"] = "yes" if above else "no"
        tok = val("train_tokens")
        if tok is not None:
            row["train tokens (M)"] = tok["value"] / 1e6
        rows.append(row)
        g = ours[(ours["run"] == run) & (ours["axis2"] == "depth")]
        for task, t in NIAH_TASKS.items():
            gt = g[g["metric"].str.startswith(f"{task}.")]
            if gt.empty:
                continue
            w = gt.pivot_table(index=["axis_value", "axis2_value"], columns="metric", values="value", sort=True)
            n = gt[gt["metric"] == f"{task}.acc"].set_index(["axis_value", "axis2_value"])
            for (length, depth), c in w.iterrows():
                cells.append({"model": name, "variant": run, "task": t, "length": int(length),
                              "depth": round(depth * 100.0, 6), "n": int(n.loc[(length, depth), "n"]),
                              "acc": c[f"{task}.acc"],
                              "choice_acc": c[f"{task}.choice_acc"] if f"{task}.choice_acc" in c else np.nan,
                              "logp_value": c[f"{task}.logp_value"],
                              "logp_distractor": c[f"{task}.logp_distractor"], "gain": c[f"{task}.gain"],
                              "extrapolated": bool(n.loc[(length, depth), "extrapolated"])})
    return pd.DataFrame(rows), pd.DataFrame(cells)


def across_seeds(t4: pd.DataFrame) -> pd.DataFrame:
    """Per model (role): the two-choice accuracy up to the training length and over every length of each training
    seed, their mean and its 95% Student-t interval across seeds (df = seeds − 1; :func:`yocou.results.audit.decision.
    t_interval`), and whether the interval lies above chance ("one seed" without an interval); empty without the
    multiple choice. The prompts are the same for every seed, so the spread is that of training alone."""
    rows = []
    runs = runs_of(t4)
    for role in dict.fromkeys(r[0] for r in runs.values()):
        mine = [run for run, r in runs.items() if r[0] == role]
        chance = chance_of(t4, mine[0])
        if chance is None:
            continue
        row: dict = {"model": label(role), "runs": " ".join(mine), "n seeds": len(mine),
                     "seeds": " ".join(str(runs[r][1]) for r in mine), "chance": chance}
        for metric, what in (("in_train_len.choice_acc", "≤ train len"), ("all_tasks.choice_acc", "all lengths")):
            got = {runs[r][1]: one(t4, run=r, metric=metric, axis="") for r in mine}
            v = pd.Series({seed: float(x["value"]) for seed, x in got.items() if x is not None}, dtype=float)
            if v.empty:
                continue
            ci = t_interval(float(v.mean()), [(role, metric, v, 1.0)])
            row[f"choice acc {what} by seed"] = " ".join(f"{x:.2f}" for x in v)
            row[f"mean {what}"] = float(v.mean())
            row[f"sd {what}"] = float(v.std(ddof=1)) if len(v) > 1 else np.nan
            row[f"95% t CI {what}"] = "" if ci is None else f"[{ci['lo']:.2f}, {ci['hi']:.2f}]"
            row[f"above chance across seeds ({what})"] = ("one seed" if ci is None else
                                                          "yes" if ci["lo"] > chance else
                                                          "below" if ci["hi"] < chance else "no")
        rows.append(row)
    return pd.DataFrame(rows)


def heatmap(cells: pd.DataFrame, title: str, chance: float | None = None):
    """Rows: models; columns: per task, exact-match accuracy, then the multiple-choice accuracy (``chance``: its
    chance level, for the title) where the cells have it, else the retrieval gain; each length (y) by depth (x)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(cells["model"]))
    tasks = list(dict.fromkeys(cells["task"]))
    # exact match, then the multiple choice where measured (else the retrieval gain), per task
    second = "choice_acc" if "choice_acc" in cells and cells["choice_acc"].notna().all() else "gain"
    panels = [(t, "acc") for t in tasks] + [(t, second) for t in tasks]
    gmax = max(1.0, float(np.nanmax(np.abs(cells["gain"])))) if len(cells) else 1.0
    fig, axes = plt.subplots(len(models), len(panels), figsize=(3.0 * len(panels), 2.3 * len(models)),
                             squeeze=False, constrained_layout=True)
    for i, m in enumerate(models):
        for j, (t, q) in enumerate(panels):
            ax = axes[i][j]
            g = cells[(cells["model"] == m) & (cells["task"] == t)]
            piv = g.pivot(index="length", columns="depth", values=q).sort_index()
            kw = dict(vmin=0, vmax=1, cmap="RdYlGn") if q != "gain" else dict(vmin=-gmax, vmax=gmax, cmap="PuOr")
            im = ax.imshow(piv.values, aspect="auto", origin="lower", **kw)
            ax.set_xticks(range(len(piv.columns)), [f"{d:g}" for d in piv.columns], fontsize=7)
            ax.set_yticks(range(len(piv.index)), [str(n) for n in piv.index], fontsize=7)
            for (a, b), val in np.ndenumerate(piv.values):
                ax.text(b, a, f"{val:.2f}" if q != "gain" else f"{val:+.1f}", ha="center", va="center", fontsize=6)
            if i == 0:
                what = {"acc": "exact-match accuracy", "gain": "log p(value) − log p(distractor)",
                        "choice_acc": "choice accuracy" + (f" (chance {chance:.2f})" if chance else "")}[q]
                ax.set_title(f"{t}: {what}", fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{m}\nlength (tokens)", fontsize=8)
            if i == len(models) - 1:
                ax.set_xlabel("needle depth (%)", fontsize=8)
            if i == len(models) - 1 and j in (0, len(tasks)):
                fig.colorbar(im, ax=axes[:, j], shrink=0.6, location="bottom")
    fig.suptitle(title, fontsize=10)
    return fig


def needle_mix_note(t4: pd.DataFrame) -> tuple[str, str]:
    """(note, title tag) saying that the models were trained with a synthetic needle mix (the tidy rows
    ``train_needle_mix.fraction``, :mod:`yocou.data.needles`), a protocol that differs from the paper's; ``("", "")``
    when no model was."""
    rows = t4[(t4["metric"] == "train_needle_mix.fraction") & (t4["run"] != "paper")]
    on = rows[rows["value"] > 0]
    if on.empty:
        return "", ""
    fracs = sorted(set(float(v) for v in on["value"]))
    f = "/".join(f"{v:g}" for v in fracs)
    off = sorted(set(rows["role"]) - set(on["role"]))
    who = "every model" if not off else ", ".join(label(r) for r in dict.fromkeys(on["role"]))
    detail = str(on["detail"].iloc[0]) if "detail" in on and isinstance(on["detail"].iloc[0], str) else ""
    note = (f"PROTOCOL DIFFERS FROM THE PAPER'S: {who} trained with a synthetic needle mix at fraction {f} "
            f"(train.needle_mix, yocou.data.needles: a labelled substitute so that small models learn retrieval; the "
            f"paper's models see no synthetic needles in training)" + (f": {detail}" if detail else "")
            + (f". Without the mix: {', '.join(label(r) for r in off)}." if off else "."))
    return note, f"; substitute protocol: trained with a synthetic needle mix at fraction {f}"


def render(table4: str | Path, out: str | Path, fig: str | Path, *, scale: str = "", seed: int | None = None) -> None:
    """Table 4 (``out``: ``.csv/.md/.json`` and ``<out>_cells``) and the heatmap ``fig`` (``.png/.pdf``) from
    the tidy ``table4`` table; ``seed``: the prompts' seed (the config's ``seed``) for the notes."""
    cfg = {"table4": str(table4), "scale": scale, "seed": seed}
    out, fig = stem_of(out), stem_of(fig)
    t4 = read_tidy(table4)
    df, cells = build(t4)
    first = cells[cells["variant"] == cells["variant"].iloc[0]]
    lengths = sorted(set(first["length"]))
    depths = sorted(set(first["depth"]))
    n_cell = sorted(set(first["n"]))
    tl = t4[(t4["metric"] == "train_seq_len") & (t4["run"] == cells["variant"].iloc[0])]["value"]
    train_len = int(tl.iloc[0]) if len(tl) else None
    books = t4[t4["metric"].str.startswith("s_niah_2.") & (t4["run"] == cells["variant"].iloc[0])]["haystack"]
    n_task = int(df.iloc[0][next(f"{t} n" for t in NIAH_TASKS.values() if f"{t} n" in df)])
    protocol_note, title_tag = needle_mix_note(t4)
    summary = "; ".join(
        f"{r['model']}: " + ", ".join(f"{t} acc {r[f'{t} acc']:.2f} (paper {r[f'{t} acc (paper)']:.2f}), "
                                      f"log p(value) {r[f'{t} logp value']:.1f} nats, gain {r[f'{t} gain']:+.2f}"
                                      for t in NIAH_TASKS.values() if f"{t} acc" in r)
        for r in df.to_dict("records"))
    context = [
        f"{scale} scale, evaluated on CPU; the paper's models are 1.3B-parameter YOCO family models on GPUs: "
        "compare the ordering of variants, not absolute values.",
        f"Samples per cell (task, length, depth): {', '.join(map(str, n_cell))}; lengths {lengths} tokens "
        f"(prompt, in the models' own tokenizer); depths {[f'{d:g}%' for d in depths]}; "
        f"{n_task} samples per task and model; seed "
        f"{seed}.",
        f"Training length {train_len} tokens: lengths above it are extrapolation.",
        "S-NIAH-1: noise haystack (RULER's repeated 'The grass is green. ...' block). S-NIAH-2: real book prose, "
        f"the held-out book {books.iloc[0] if len(books) else '?'} (never trained on) excerpted at a seeded offset; RULER's Paul Graham essays are not available offline.",
    ]
    tok = sorted(set(df["train tokens (M)"])) if "train tokens (M)" in df else []
    runs = runs_of(t4)
    n_seeds = df.groupby(df["variant"].map({run: r[0] for run, r in runs.items()}), sort=False)["variant"].count()
    seeds_text = ("one seed each" if n_seeds.max() == 1 else
                  "training seeds: " + ", ".join(f"{label(r)} {n}" for r, n in n_seeds.items()))
    context.insert(0, "Models: " + ", ".join(f"{r['model']} = {r['variant']}" for r in df.to_dict("records"))
                   + (f", trained on {'/'.join(f'{t:.3g}' for t in tok)}M tokens each" if tok else "")
                   + f" ({seeds_text}).")
    if protocol_note:
        context.insert(0, protocol_note)
    acc_note = ("acc: the 7-digit value appears in the greedy continuation (12 tokens, cached early-exit prefill and "
                "decode). logp value: teacher-forced log-probability of ' <value>' after the answer prefix (nats, "
                "summed over its tokens; uniform digits would give 7·ln 10 = −16.1); gain: the same minus that of a "
                "seeded distractor number that is not in the prompt (> 0: the model uses the needle).")
    choice_note = []
    chances = sorted({c for c in (chance_of(t4, r) for r in runs) if c is not None})
    if chances:
        k = round(1 / chances[0])
        inside = "; ".join(f"{r['model']} {r['choice acc ≤ train len [95% CI]']} ({'above' if r['above chance ≤ train len'] == 'yes' else 'not above'} chance)"
                           for r in df.to_dict("records") if isinstance(r.get("choice acc ≤ train len [95% CI]"), str))
        against = "a seeded distractor number" if k == 2 else f"{k - 1} seeded distractor numbers"
        choice_note = [f"choice acc (ours, graded; not the paper's metric): the value against {against}, none in "
                       f"the prompt, drawn like the value; correct when the value's teacher-forced "
                       f"log-probability is the highest of the {k}. Chance {chances[0]:.2f}: a model that ignores "
                       f"the needle. 95% Wilson interval; 'above chance' when its lower end is above chance and "
                       f"the exact one-sided binomial test gives p < 0.025. Lengths up to the training length "
                       f"{train_len}: {inside or 'none evaluated'}. By length: table4_by_length.md."]
    write_table(df, out, title=f"Table 4: needle in a haystack ({scale} scale, CPU{title_tag})",
                notes=context + [acc_note] + choice_note + [f"Measured: {summary}."], config=cfg)
    seeds = across_seeds(t4)
    write_table(seeds, str(out) + "_seeds", config=cfg, floatfmt=".3f",
                title=f"Table 4 across training seeds: two-choice accuracy ({scale} scale, CPU{title_tag})",
                notes=context + choice_note + (
                    ["Each seed is one training run of the model, scored on the same prompts; mean and 95% "
                     "Student-t interval across seeds (df = seeds − 1). 'yes': the interval lies above chance; "
                     "'below': below it; 'no': it contains chance; 'one seed': no interval. The per-seed rows are "
                     "in table4.md."] if not seeds.empty else
                    ["No multiple-choice records in these results (rerun the niah rule)."]))
    write_table(cells, str(out) + "_cells", title=f"Table 4 cells: S-NIAH per length and depth ({scale}{title_tag})",
                notes=context, config=cfg)
    bl = by_length(t4)
    write_table(bl, str(out) + "_by_length", config=cfg,
                title=f"Table 4 by length: where each model fails ({scale} scale, CPU{title_tag})",
                notes=context + choice_note
                + (["Both tasks pooled per length; acc: exact match (the value's digits in the greedy output)."]
                   if not bl.empty else ["No multiple-choice records in these results (rerun the niah rule)."]))
    figure = heatmap(cells, f"S-NIAH by length and depth ({scale} scale, CPU; {n_cell[0]} samples per cell"
                            f"{title_tag})", chance=chances[0] if chances else None)
    save_figure(figure, fig, config=cfg)
