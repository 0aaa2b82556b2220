"""Figure 5: :func:`yocou.results.render.scaling.fig5_render` under the figure's name (``workflows/scripts/fig5.py``)."""

from yocou.results.render.scaling import fig5_render as render

__all__ = ["render"]
