"""Does the tidy layer + declared audit give the verdicts the old file-parsing audit gave?

Runs the new summarize steps (yocou.results.summarize) on the raw tiny outputs committed under results/tiny/ by the old
pipeline (downstream/, niah/, ppl/, longppl/, profile.json, kv_measure.json), then the declared comparisons
(eval/comparisons.yaml), and compares each verdict and qualifier with results/tiny/audit/verdicts.csv written by the
old code (commit d96cbe5). The training-curve studies (runs, fig2, fig5, fig6) need the runs' metrics.jsonl and
summary.json, which are not committed: those 4 verdicts are not compared. The tidy `runs` table is stood in by the
one row the audit needs from it (the training length, 512 tokens at tiny).

    python benchmarks/tidy_equivalence_tiny.py [--out benchmarks/results/tidy_equivalence_tiny.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import tempfile
from pathlib import Path

import pandas as pd

from yocou.results.audit.claims import load_sources
from yocou.results.audit.verdicts import NOT_RUN, reproduce
from yocou.results.summarize import downstream as D
from yocou.results.summarize import efficiency as E
from yocou.results.summarize import niah as N
from yocou.results.summarize import training as T
from yocou.results.tidy import study_roles, write_tidy
from yocou.utils.io import atomic_write_json, provenance
from yocou.workflow.wfconfig import read_scale_file, resolve_config

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/tidy_equivalence_tiny.json"))
    a = ap.parse_args()
    cfg = resolve_config(read_scale_file(ROOT / "workflows/config/tiny.yaml"))
    res, core = ROOT / "results/tiny", study_roles(cfg, "core")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp) / "tidy"
        paths = sorted(glob.glob(str(res / "downstream/*/tidy.csv")))
        for s in ("table2", "table3", "table5"):
            write_tidy(D.summarize_table(s, paths, cfg), t / s)
        write_tidy(D.summarize_fig3(paths, cfg), t / "fig3")
        eff = E.summarize_efficiency(res / "profile.json", core)
        write_tidy(eff, t / "efficiency")
        write_tidy(E.summarize_efficiency_derived(eff, cfg["eval"]["profile"]["fit"]), t / "efficiency_derived")
        write_tidy(E.summarize_kv(res / "kv_measure.json", core), t / "kv")
        write_tidy(N.summarize_table4({r: res / f"niah/{r}.json" for r in core}, core, {}), t / "table4")
        runs = {r: Path(tmp) / "models" / r for r in core}  # no run files: seeds fall back to -1
        write_tidy(T.summarize_heldout_ppl(runs, ppl_root=res / "ppl"), t / "heldout_ppl")
        write_tidy(T.summarize_fig4(runs, longppl_root=res / "longppl"), t / "fig4")
        write_tidy([dict(study="runs", run=r, role=r, metric="seq_len", value=cfg["train"]["seq_len"],
                         unit="tokens") for r in core], t / "runs")
        new = reproduce(load_sources(), Path(tmp), "tiny")
    old = pd.read_csv(res / "audit/verdicts.csv", keep_default_na=False).set_index("id")
    rows = []
    for v in new:
        o = old.loc[v.id]
        if v.qualifier == NOT_RUN and o["qualifier"] != NOT_RUN:
            continue  # a study this check cannot summarize (training curves)
        rows.append({"id": v.id, "old_verdict": o["verdict"], "new_verdict": v.verdict, "old_qualifier": o["qualifier"],
                     "new_qualifier": v.qualifier, "same_verdict": o["verdict"] == v.verdict,
                     "same_qualifier": o["qualifier"] == v.qualifier})
    summary = {"compared": len(rows), "of": len(new), "same_verdict": sum(r["same_verdict"] for r in rows),
               "same_qualifier": sum(r["same_qualifier"] for r in rows),
               "differences": [r for r in rows if not (r["same_verdict"] and r["same_qualifier"])]}
    atomic_write_json(a.out, {**summary, "rows": rows, "provenance": provenance({"results": str(res)}, None)})
    print(json.dumps({k: summary[k] for k in ("compared", "of", "same_verdict", "same_qualifier")}))
    for d in summary["differences"]:
        print(f"{d['id']}: {d['old_verdict']} / {d['old_qualifier']} -> {d['new_verdict']} / {d['new_qualifier']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
