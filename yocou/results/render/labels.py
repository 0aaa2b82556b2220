"""What a figure draws, in words: one place for the axis labels of the loss figures and the phrases their report
captions print, so a caption cannot name another metric than the axis it describes.

The renderers (:mod:`yocou.results.render.fig2`, :mod:`yocou.results.render.scaling`) label their axes with these strings; the
workflow passes :func:`drawn` to each figure's job as ``params.drawn`` (its rule and its report pages), and the
captions ``workflows/report/<item>.rst`` print ``{{ snakemake.params.drawn }}``. Which loss a figure draws depends
on whether the runs logged a held-out loss (``train.eval_every > 0``; :func:`heldout_logged`), which the renderers
see as held-out rows in their tidy table.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["HELDOUT_LOSS", "HELDOUT_SPLITS", "SEED_BAND", "TRAIN_LOSS", "TRAIN_LOSS_SMOOTHED", "drawn",
           "heldout_logged", "loss_axis"]

HELDOUT_LOSS = "held-out loss (nats/token, book+code mean)"
HELDOUT_SPLITS = "held-out loss (nats/token)"  # with a line each for the book+code mean, book and code
TRAIN_LOSS = "training loss (nats/token)"
TRAIN_LOSS_SMOOTHED = "training loss (nats/token, EMA-smoothed)"
SEED_BAND = "mean across seeds, band min-max across seeds"


def heldout_logged(config: Mapping[str, Any]) -> bool:
    """Whether the runs of a pipeline config log a held-out loss during training (``train.eval_every > 0``)."""
    return int((config.get("train") or {}).get("eval_every") or 0) > 0


def loss_axis(held: bool, smoothed: bool = False) -> str:
    """The y label of a loss-against-training curve: held-out, else the training loss (smoothed or not)."""
    return HELDOUT_LOSS if held else TRAIN_LOSS_SMOOTHED if smoothed else TRAIN_LOSS


def drawn(item: str, config_or_held: Mapping[str, Any] | bool) -> str:
    """What the figure of report item ``item`` draws (``""`` for an item without loss curves), given the pipeline
    config or directly whether held-out curves are drawn.

    Raises:
        KeyError: the config has no ``train`` section where one is needed (never for a resolved config).
    """
    held = config_or_held if isinstance(config_or_held, bool) else heldout_logged(config_or_held)
    if item == "fig2":
        return f"{loss_axis(True)}, {SEED_BAND}" if held else f"{loss_axis(False, smoothed=True)}, first seed"
    if item == "fig6":
        return (f"left: {loss_axis(held, smoothed=True)} against training tokens"
                + (f", {SEED_BAND}" if held else ", first seed")
                + f"; right: the final {HELDOUT_SPLITS} against T, book+code mean (bars: min-max across seeds), book "
                "and code")
    if item == "fig5":
        return f"{HELDOUT_LOSS} of the final models, mean across seeds (bars: min-max across seeds)"
    return ""
