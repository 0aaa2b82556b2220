"""The learning-rate sensitivity table from the tidy ``lr`` table; called by
``workflows/scripts/lr_sensitivity.py``."""

from __future__ import annotations

from pathlib import Path

from yocou.results.names import label
from yocou.results.render.common import stem_of, write_table
from yocou.results.summarize.lr import lr_table
from yocou.results.tidy import read_tidy

__all__ = ["render"]


def render(tidy: str | Path, *, out: str | Path, scale: str = "") -> None:
    """Write ``out`` (csv/md/json): held-out loss per model and peak learning rate, the best rate marked."""
    df = lr_table(read_tidy(tidy))
    df["model"] = df["model"].map(label)
    notes = ["The paper trains every variant with one recipe; the tables and figures here use train.lr for every "
             "run. These extra runs (seeds: the column) say whether a comparison holds at each model's own best "
             "rate: `best` is the rate with the lowest loss averaged over both splits, one rate per model.",
             "Held-out loss in nats/token on the whole capped held-out split (yocou ppl), the mean over the rate's "
             "seeds.", f"{scale} scale, CPU."]
    write_table(df, stem_of(out), title="Learning-rate sensitivity of the core models (held-out loss)",
                notes=notes, config={"tidy": str(tidy), "scale": scale})
